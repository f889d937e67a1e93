"""ΔV of a view recomputed whole (`sql.whole`): DBSP's defining identity ΔV = Q(I(A)) − V.

The base tables are the integrals I(A); running the view's own SELECT over them gives the new
rows, as a Z-set (each distinct row with its count), and subtracting the rows stored gives the
change — the same ΔV every fold of an incremental view gives, so the view's table, the views
over it and its readers are maintained alike. The SELECT is the user's statement as written:
its ties (which rows a LIMIT keeps, a window's order among peers) are resolved by SQLite exactly
as when the SELECT is re-run. Nothing is written here: a reader computes it too.

Those ties follow SQLite's query plan, which an index or ANALYZE may change without a change of
any row: the plan the stored rows were computed under is kept (`PLAN_OP`, at every fold), and a
view whose SELECT is planned otherwise *and* now gives other rows reads as broken until REFRESH
recomputes it (`replanned_otherwise`), as a view that follows a scan order does
(`storage.scan_order`) — never stale rows.
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Callable, Sequence

import apsw

from matview import names
from matview.db import scalar
from matview.errors import Error
from matview.keys import row_keys
from matview.names import fold, quote
from matview.operators import scalar_values
from matview.plan import Plan
from matview.storage.ddl_guard import authorizing_instead
from matview.storage.readable import foreign_temp_objects
from matview.storage.scan_order import plan_fingerprint
from matview.storage.state import StateStore
from matview.zset import ZSet

PLAN_OP = 1_000_004  # the query plan the stored rows were computed under (EXPLAIN QUERY PLAN)

#: what SQLite may do while it prepares a view's SELECT: read (a statement that writes, or runs
#: a PRAGMA, is refused by SQLite before it runs — a damaged catalog cannot make a fold write)
READ_ACTIONS = frozenset({apsw.SQLITE_SELECT, apsw.SQLITE_READ, apsw.SQLITE_FUNCTION, apsw.SQLITE_RECURSIVE})


def _only_reads(upstreams: Sequence[str]) -> Callable[..., int]:
    """The authorizer a fold prepares a view's SELECT under: it may read the main database, and
    the materialized views it reads (`upstreams`) through their TEMP shadows (what those read:
    the view's own pending rows, and main's schema version)."""
    temp = {fold(name) for view in upstreams for name in (view, names.pending_rows(view), names.all_rows(view))}

    def authorize(action: int, name: str | None, _column: str | None, database: str | None, *_via: str | None) -> int:
        if action == apsw.SQLITE_PRAGMA and fold(name or "") == "schema_version":
            return apsw.SQLITE_OK  # (read by a shadow view: which main schema its pending rows are for)
        if action not in READ_ACTIONS:
            return apsw.SQLITE_DENY
        if action == apsw.SQLITE_READ and database not in ("main", None) and fold(name or "") not in temp:
            return apsw.SQLITE_DENY  # (temp: a TEMP table named like a table it reads would hide that table)
        return apsw.SQLITE_OK

    return authorize


_TEMP_MESSAGE = (
    "its SELECT, as written, would read a TEMP table or view of this connection (one named like a table "
    "or materialized view it reads hides it) or do more than read the main database"
)


def whole_rows(conn: apsw.Connection, plan: Plan) -> ZSet[bytes]:
    """The rows of the view's SELECT (`plan.whole`) now, as a Z-set keyed by row identity. A
    materialized view it reads is read as any reader reads it (its TEMP shadow: the stored rows
    with its pending changes merged), so the rows are exact whether or not it has folded."""
    return ZSet.from_counts(_counted_rows(conn, plan))


def _counted_rows(conn: apsw.Connection, plan: Plan) -> Counter[bytes]:
    """Each row of the view's SELECT now, by its `row_key` (apsw's rows are tuples), counted
    (a `Counter`: at C speed — a Z-set's `add` per row doubled the cost of a fold)."""
    foreign = foreign_temp_objects(conn, plan.upstream_views)
    if foreign:
        raise apsw.SQLError(f"{_TEMP_MESSAGE} ({foreign[0]})")
    _check_only_reads(conn, plan)
    return Counter(row_keys(conn.execute(plan.whole, can_cache=False)))


#: per connection, the SELECTs `_check_only_reads` found reading only, with main's and temp's
#: schema versions then (what SQLite's verdict depends on)
_READING_ONLY: weakref.WeakKeyDictionary[apsw.Connection, set[tuple[str, int, int]]] = weakref.WeakKeyDictionary()


def _check_only_reads(conn: apsw.Connection, plan: Plan) -> None:
    """Raise unless SQLite, preparing the view's SELECT, does no more than read (`_only_reads`):
    asked while it prepares, not while it runs (a virtual table it reads runs matview's own
    statements, which write TEMP scratch tables); asked again only when main's or temp's schema
    changed. (Each check sets the connection's authorizer at its end, which has SQLite prepare
    every statement of the connection again: `ddl_guard.authorizing_instead`.)"""
    key = (plan.whole, int(scalar(conn, "PRAGMA main.schema_version")), int(scalar(conn, "PRAGMA temp.schema_version")))
    checked = _READING_ONLY.setdefault(conn, set())
    if key in checked:
        return
    try:
        with authorizing_instead(conn, _only_reads(plan.upstream_views)):
            conn.execute(f"EXPLAIN {plan.whole}", can_cache=False).close()
    except apsw.AuthError as exc:
        raise apsw.SQLError(f"{_TEMP_MESSAGE} ({exc})") from None
    if len(checked) > 256:  # (schema versions only grow: older keys are never asked again)
        checked.clear()
    checked.add(key)


def whole_delta(conn: apsw.Connection, view: str, plan: Plan) -> ZSet[bytes]:
    """ΔV = Q(I(A)) − V: the rows of the view's SELECT now, less those view `view` stores."""
    counts = _counted_rows(conn, plan)
    key, weight = quote(names.KEY), quote(names.WEIGHT)
    counts.subtract(dict(conn.execute(f"SELECT {key}, {weight} FROM {quote(names.view_table(view))}")))
    return ZSet.from_counts(counts)


def keep_query_plan(conn: apsw.Connection, store: StateStore, select: str) -> None:
    """Record the plan the rows being stored are computed under (every fold that writes them)."""
    store.put(PLAN_OP, b"", plan_fingerprint(conn, select))


def replanned_otherwise(conn: apsw.Connection, view: str, plan: Plan) -> bool:
    """Whether SQLite now plans view `view`'s `select` otherwise than when its stored rows were
    computed *and* the SELECT now gives other rows (which of tied rows a LIMIT keeps, a window's
    order among peers): a plan change whose rows are the same — an index that serves another
    view, a SELECT whose rows no order decides — leaves the view as it is (the next fold keeps
    the new plan). An incremental view asks the same of the subquery values it reaches rows by
    (`scalar_values.replanned_otherwise`)."""
    if not plan.whole:
        try:
            main = {f"source{i}": f"main.{quote(t)}" for i, t in enumerate(plan.sources)}
            return scalar_values.replanned_otherwise(conn, view, plan, main)
        except (apsw.Error, Error):
            return False  # (a table gone: the view's own checks say so)
    try:
        kept = StateStore(conn, view, writable=False).get(PLAN_OP, b"")
        if kept is None or kept == plan_fingerprint(conn, plan.whole):
            return False  # (none kept: its state is being rebuilt, or from before plans were kept)
        return bool(whole_delta(conn, view, plan))
    except (apsw.Error, Error):
        return False  # (a table gone, a view it reads unreadable: the view's own checks say so)
