"""Refresh as a delta (RELATIONAL.md §2): ΔV of a fold whose changes are a large share of the
view's input, found by recomputing the view instead of running its delta terms.

Incremental maintenance costs work proportional to the change, and that is what a small
change wants. A bulk load — a view created over empty tables, then every table filled in one
transaction — makes the "change" the whole input: each delta term then joins the changes with
the old states of the other changed tables, several times the work of evaluating the SELECT
once. So when the pending changes are at least half the rows of the view's tables (and not
few), the fold rebuilds the view's operator state from the tables as they stand, exactly as
CREATE does (`Circuit.populate`), and ΔV = V_new − V_stored: the same ΔV the delta terms
would give (DBSP: ΔV = Q(I(A)) − Q(I(A) − ΔA), with both terms evaluated directly), so the
view's storage, the views over it and every reader see what an incremental fold gives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import apsw

from matview import names
from matview.db import scalar
from matview.names import fold, quote
from matview.storage.schema import ROWID_NAMES
from matview.storage.state import StateStore, clear_state_tables
from matview.storage.viewstore import ROW_KEY_FUNCTION
from matview.zset import ZSet

if TYPE_CHECKING:
    from matview.registry import View

#: fewer pending delta rows than this always fold incrementally (a recompute costs the whole input)
RECOMPUTE_MIN_ROWS = 2000


def _table_rows(conn: apsw.Connection, table: str) -> int:
    """About how many rows a base table has: its largest rowid (one index probe, and never
    less than the count while rowids are positive) under a name no column takes, or its
    count (WITHOUT ROWID, or every rowid name a column)."""
    taken = {fold(str(row[1])) for row in conn.execute(f"PRAGMA main.table_xinfo({quote(table)})")}
    free = [name for name in ROWID_NAMES if name not in taken]
    found: Any = None
    if free:
        try:
            found = scalar(conn, f"SELECT max({free[0]}) FROM main.{quote(table)}")
        except apsw.SQLError:  # WITHOUT ROWID: counted below
            pass
    if not isinstance(found, int):
        found = scalar(conn, f"SELECT count(*) FROM main.{quote(table)}")
    return max(int(found or 0), 0)


def should_recompute(conn: apsw.Connection, view: View, pending: int) -> bool:
    """Whether `pending` changed rows (delta log rows of the view's base tables) are a large
    enough share of its input that evaluating the view once is cheaper than its delta terms."""
    if pending < RECOMPUTE_MIN_ROWS:
        return False
    try:
        size = sum(_table_rows(conn, table) for table in view.entry.base_tables)
    except apsw.Error:  # (a table gone: the fold reports it) — fold incrementally
        return False
    return 2 * pending >= size


def stored_rows(conn: apsw.Connection, view: View) -> ZSet[bytes]:
    """The view's stored Z-set: each row's key and weight."""
    stored: ZSet[bytes] = ZSet()
    key, weight = quote(names.KEY), quote(names.WEIGHT)
    for row_key, count in conn.execute(f"SELECT {key}, {weight} FROM {view.table.table}"):
        stored.add(bytes(row_key), count)
    return stored


def recomputed_delta(conn: apsw.Connection, view: View, store: StateStore) -> ZSet[bytes]:
    """ΔV = V_new − V_stored, V_new evaluated from the base tables as they stand now; the
    view's operator state is rebuilt into `store` (which must hold nothing buffered) on the way.
    Inside the fold's savepoint: the state tables are emptied here."""
    clear_state_tables(conn, view.name)
    fresh = view.circuit.populate(conn, store)
    if fresh is None:  # a view SQLite computes straight into its table at CREATE: its rows, counted
        width = len(view.entry.plan.columns)
        values = ", ".join(f"c{i}" for i in range(width))
        fresh = ZSet()
        rows = conn.execute(
            f"SELECT {ROW_KEY_FUNCTION}({values}), count(*) FROM ({view.circuit.base_rows_sql}) GROUP BY 1"
        )
        for row_key, count in rows:
            fresh.add(bytes(row_key), count)
    delta = ZSet(fresh.items())
    for row_key, weight in stored_rows(conn, view).items():
        delta.add(row_key, -weight)
    return delta
