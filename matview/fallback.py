"""Where the incremental engine cannot answer, SQLite re-running the SELECT can: whole recompute.

At CREATE, a SELECT the incremental engine refuses is recomputed whole instead (`lifecycle`,
`sql.whole`). This module holds that switch, and the same fallback for results the engine finds
only later, in the data: a MIN/MAX tied between 1 and 1.0, a GROUP BY or DISTINCT class with
several spellings SQLite calls equal ('a' and 'A' under NOCASE), a running sum that leaves the
number range in some row orders only. Which answer SQLite gives then follows the order its scan
meets rows, which the incremental engine does not know, so it stores a marker that reading raises
(`operators.accumulators.RESULT_ERRORS`) instead of guessing. SQLite re-running the SELECT
answers, and a view recomputed whole is exactly that re-run: so a view whose CREATE, fold or
REFRESH produces such a marker is switched to whole recompute in the same transaction
(`heal`), its ΔV the difference between the SELECT's rows and the stored ones (DBSP: ΔV =
Q(I(A)) − V, as refresh as a delta computes it). `WITH (recompute = 'never')` keeps the marker.
An integer overflow is not healed: SQLite's SELECT raises too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import apsw

from matview import names
from matview.circuit import Circuit
from matview.errors import Error
from matview.keys import row_of
from matview.names import quote
from matview.operators.accumulators import (
    ORDER_DEPENDENT,
    TIED,
    VARIANT_DEPENDENT,
    ScanOrderDependent,
    result_error_markers_sql,
)
from matview.operators.recompute import recomputed_delta, stored_rows
from matview.operators.whole import whole_rows
from matview.plan import Plan
from matview.sql.validate import one_statement
from matview.sql.whole import compile_whole
from matview.storage import catalog, readable
from matview.storage.catalog import ViewEntry
from matview.storage.scan_order import order_problem
from matview.storage.state import StateStore
from matview.zset import ZSet

if TYPE_CHECKING:
    from matview.registry import View

#: a SELECT the incremental engine refuses is recomputed whole instead, where SQLite can run it
#: again exactly (`sql.whole`); `WITH (recompute = 'never')` refuses instead. The test suite turns
#: this off to test the incremental engine's own refusals (`tests/conftest.py`).
FALL_BACK_TO_WHOLE = True

#: the markers a whole recompute answers, and why (the view's `explain()` shows it)
HEALED = {
    TIED: "MIN/MAX tied between equal values of different types (1 and 1.0) or signs (-0.0 and 0.0): SQLite "
    "returns the one its scan "
    "meets first",
    VARIANT_DEPENDENT: "a GROUP BY or DISTINCT value has several spellings SQLite calls equal ('a' and 'A' under "
    "NOCASE, 1 and 1.0 untyped): SQLite shows the one its scan meets first",
    ORDER_DEPENDENT: "a running sum leaves the number range in some row orders only: SQLite's SUM/TOTAL/AVG "
    "follows its scan order",
}
_PREFIX = b"\x00matview: "  # what every marker starts with (a quick filter before decoding a row)


def can_heal(view: View) -> bool:
    """Whether `view` would be switched to whole recompute in place by a marker: as
    `may_heal_owner`, and reading no internal node."""
    return may_heal_owner(view) and not view.entry.plan.internal_nodes


def may_heal_owner(view: View) -> bool:
    """Whether `view` may be recomputed whole where a marker a whole recompute answers is met
    (its internal nodes dropped, `owner_heal`): an incremental view of the user's (not an
    internal node), made without `recompute = 'never'`, while the fallback is on."""
    plan = view.entry.plan
    return FALL_BACK_TO_WHOLE and not plan.whole and not plan.recompute_never and not names.is_node(view.name)


def repairable_order_problem(conn: apsw.Connection, view: View) -> str | None:
    """Why SQLite no longer reads `view`'s table in the order matview keeps for it (an index,
    statistics: `scan_order.order_problem`), where switching it to whole recompute repairs that
    (`replan`); None otherwise."""
    if not can_heal(view) or view.entry.plan.needs_refresh:
        return None
    return order_problem(conn, view.entry.plan, view.entry.sql, view.circuit.first_rows)


def _marks(view: View) -> bool:
    """Whether the view's operators can store a marker: an aggregate's results, DISTINCT's
    and set operations' shown variants."""
    plan = view.entry.plan
    return plan.kind == "aggregate" or plan.distinct or bool(plan.set_operation)


def marker_in_delta(view: View, delta: ZSet[bytes]) -> bytes | None:
    """A marker a whole recompute answers, in a row the view's `delta` adds (None: none)."""
    if not _marks(view):
        return None
    for key, weight in delta.items():
        if weight > 0 and _PREFIX in key:
            found = next((v for v in row_of(key) if type(v) is bytes and v in HEALED), None)
            if found is not None:
                return found
    return None


def marker_in_table(conn: apsw.Connection, view: View) -> bytes | None:
    """A marker a whole recompute answers, in the view's stored rows (None: none)."""
    if not _marks(view):
        return None
    markers = result_error_markers_sql()
    where = " OR ".join(f"{quote(c.name)} IN ({markers})" for c in view.table.columns)
    for row in conn.execute(f"SELECT {view.table.select_columns} FROM {view.table.table} WHERE {where} LIMIT 1"):
        return next((v for v in row if type(v) is bytes and v in HEALED), None)
    return None


def whole_plan(conn: apsw.Connection, view: View, reason: str) -> Plan | None:
    """`view`'s plan recomputed whole, for `reason`, keeping the columns (names, types,
    collations) its table has: the same SELECT over the same schema gives the same columns
    (whole recompute's own account of a `COLLATE` in the select list is less precise); None
    where its SELECT cannot be recomputed whole."""
    old = view.entry.plan
    try:
        plan, _source = compile_whole(conn, view.entry.sql, reason)
    except (Error, apsw.Error):
        return None
    if len(plan.columns) != len(old.columns):
        return None
    return replace(plan, columns=old.columns, indexes=old.indexes)  # (its indexes stay its own)


def switch_to_whole(conn: apsw.Connection, view: View, reason: str) -> bool:
    """Make `view` one recomputed whole, for `reason`: its plan in the catalog and in `view`
    itself (so the fold running it goes on with the new circuit), its stored rows left for the
    caller to diff. False where it cannot be (it stays as it is)."""
    plan = whole_plan(conn, view, reason)
    if plan is None:
        return False
    readable.create_plain_view(conn, view.name, plan)
    catalog.update_plan(conn, view.name, plan)
    evaluator = view.circuit.evaluator
    evaluator.forget(view.name)
    view.entry = ViewEntry(view.name, view.entry.sql, plan, view.entry.maintenance, view.entry.base_tables)
    view.circuit = Circuit(view.name, plan, evaluator)
    return True


def populate_checked(
    conn: apsw.Connection,
    view: View,
    populate: Callable[[apsw.Connection, View], None],
    may_heal: bool,
    compiled_again: bool = False,
) -> bytes | None:
    """Run a CREATE's or REFRESH's `populate` of `view`; the marker whole recompute would
    answer, where the view may be healed (`may_heal` and `can_heal`, or `compiled_again`: the
    caller compiles it whole from scratch, internal nodes aside) and its SELECT can be recomputed
    whole; None otherwise (markers stay: reading them says why)."""
    may_heal = may_heal and (can_heal(view) or (compiled_again and may_heal_owner(view)))
    try:
        populate(conn, view)
    except ScanOrderDependent as exc:  # (a subquery's order-free twin met a tie)
        if may_heal and exc.marker in HEALED and whole_plan(conn, view, HEALED[exc.marker]) is not None:
            return exc.marker
        raise
    marker = marker_in_table(conn, view) if may_heal else None
    if marker is None or whole_plan(conn, view, HEALED[marker]) is None:
        return None
    return marker


def heal(conn: apsw.Connection, view: View, marker: bytes) -> ZSet[bytes] | None:
    """Switch `view` (whose stored rows hold `marker`) to whole recompute and bring its rows
    to its SELECT's: the ΔV applied, or None where it cannot be switched."""
    return make_whole(conn, view, HEALED[marker]) if marker in HEALED else None


def make_whole(conn: apsw.Connection, view: View, reason: str) -> ZSet[bytes] | None:
    """Switch `view` to whole recompute, for `reason`, and bring its rows to its SELECT's (ΔV =
    Q(I(A)) − V): the ΔV applied, or None where it cannot be switched."""
    if not switch_to_whole(conn, view, reason):
        return None
    store = StateStore(conn, view.name, writable=True)
    delta = recomputed_delta(conn, view, store)
    view.table.apply(conn, delta)
    store.flush()
    return delta


def read_as_select(conn: apsw.Connection, view: View, pending: ZSet[bytes] | ScanOrderDependent) -> ZSet[bytes] | None:
    """The pending ΔV a read of `view` merges, where the one the engine computed (`pending`,
    or the tie it met) shows a marker a heal answers: `select_delta`, so the read is its
    SELECT's also where it cannot fold and heal (in a transaction, on a read-only connection,
    while another process writes). None where the engine's ΔV stands (no such marker, or the
    view may not heal)."""
    if not may_heal_owner(view):  # (one with internal nodes too: a read needs no plan of its own)
        return None
    if isinstance(pending, ScanOrderDependent):
        marker: bytes | None = pending.marker if pending.marker in HEALED else None
    else:
        marker = marker_in_delta(view, pending)
    return None if marker is None else select_delta(conn, view)


def select_delta(conn: apsw.Connection, view: View) -> ZSet[bytes]:
    """The SELECT's rows now − the stored ones (ΔV = Q(I(A)) − V), without writing."""
    # (the SELECT as it stands, not `whole_plan`'s: compiling one writes TEMP tables, which a
    # read-only connection cannot; a SELECT no heal could recompute is still its own answer)
    select, _tokens = one_statement(view.entry.sql)
    delta = whole_rows(conn, replace(view.entry.plan, whole=select))
    for row_key, weight in stored_rows(conn, view).items():
        delta.add(row_key, -weight)
    return delta
