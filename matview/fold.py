"""The fold: pending deltas of the base tables, through each view's circuit, into its
persisted Z-set and state — and, for readers, the same computation without writing.

A view's pending input is the part of each base table's delta log past the view's
progress mark. Folding runs the circuit on it, adds ΔV to the view table, writes the
operator state, and advances the mark, all in the caller's write transaction, so a
rollback undoes the fold together with the writes it folded. Delta rows every view of
a table has consumed are removed (the newest one stays behind, so sequence numbers
never restart below a progress mark).
"""

from __future__ import annotations

import apsw

from matview import catalog, names
from matview.db import ENVIRONMENT_ERRORS, describe, savepoint
from matview.names import quote
from matview.registry import Registry, View
from matview.state import StateStore
from matview.zset import ZSet


def pending_ranges(conn: apsw.Connection, view: View) -> list[tuple[str, int, int]]:
    """(table, lo, hi) for each base table with deltas lo < seq <= hi not yet folded into `view`
    (one statement for all of its tables: this runs at every commit)."""
    tables = view.entry.base_tables
    parts = " UNION ALL ".join(
        f"SELECT {number}, (SELECT seq FROM {quote(names.PROGRESS)} WHERE view = ?1 AND base_table = ?{number + 2}), "
        f"(SELECT max({quote(names.SEQ)}) FROM {quote(names.delta_table(table))})"
        for number, table in enumerate(tables)
    )
    ranges = []
    for number, lo, hi in conn.execute(parts, (view.name, *tables)):
        lo = lo or 0
        if hi is not None and hi > lo:
            ranges.append((tables[number], lo, hi))
    return ranges


def pending_count(conn: apsw.Connection, view: View) -> int:
    return sum(hi - lo for _, lo, hi in pending_ranges(conn, view))


def _view_delta(
    conn: apsw.Connection, view: View, ranges: list[tuple[str, int, int]], store: StateStore
) -> ZSet[bytes]:
    """ΔV of all pending inputs jointly (table by table would count ΔA ⋈ ΔB twice)."""
    return view.circuit.delta(conn, {table: (lo, hi) for table, lo, hi in ranges}, store)


def pending_view_delta(conn: apsw.Connection, view: View) -> ZSet[bytes]:
    """ΔV of the not-yet-folded deltas, computed without writing anything (readers)."""
    ranges = pending_ranges(conn, view)
    if not ranges:
        return ZSet()
    return _view_delta(conn, view, ranges, StateStore(conn, view.name, writable=False))


def fold_view(conn: apsw.Connection, view: View) -> list[tuple[str, int, int]]:
    """Fold `view`'s pending deltas inside a write transaction; the ranges it folded.

    A view must never make a valid base write fail: when computing ΔV raises (a user
    function this connection lacks, a bug), nothing of the view is written, the view is
    marked stalled — its deltas stay pending, and reading it reports why — and no range is
    folded. A small ΔV is computed without writing (state is buffered), so only the
    set-at-a-time path, which updates ordered state as it goes, needs a savepoint."""
    ranges = pending_ranges(conn, view)
    if not ranges:
        return ranges
    store = StateStore(conn, view.name, writable=True)
    set_at_a_time = view.circuit.writes_while_computing(sum(hi - lo for _, lo, hi in ranges))
    try:
        if set_at_a_time:
            with savepoint(conn):
                delta = _view_delta(conn, view, ranges, store)
                view.table.apply(conn, delta)
        else:
            delta = _view_delta(conn, view, ranges, store)  # reads only
    except ENVIRONMENT_ERRORS:
        raise
    except Exception as exc:
        view.stalled = f"materialized view {view.name} cannot be folded: {describe(exc)}"
        return []
    if not set_at_a_time:
        # outside the guard: an error while writing (a view found inconsistent) must not leave a
        # half-applied ΔV behind a rolled-forward transaction; it reaches the caller
        view.table.apply(conn, delta)
    store.flush()
    for table, _lo, hi in ranges:
        catalog.set_progress(conn, view.name, table, hi)
    return ranges


#: consumed delta rows a table may keep before they are deleted; deleting in batches
#: saves a statement per commit (the log is read by sequence range, so they cost only space)
GARBAGE_BATCH = 256


def collect_garbage(conn: apsw.Connection, registry: Registry, tables: dict[str, int]) -> None:
    """Remove delta rows every view of each table has consumed (all but the newest), once a
    table's log has grown by GARBAGE_BATCH rows since the last collection."""
    for table, hi in tables.items():
        if hi - registry.collected.get(table, 0) < GARBAGE_BATCH:
            continue
        views = [v for v in registry.views.values() if table in v.entry.base_tables and not v.broken]
        if not views:
            continue
        low = min(catalog.get_progress(conn, v.name, table) for v in views)
        conn.execute(f"DELETE FROM {quote(names.delta_table(table))} WHERE {quote(names.SEQ)} < ?", (low,))
        registry.collected[table] = low


def fold_pending_deltas(conn: apsw.Connection, registry: Registry, views: list[View]) -> None:
    """Fold several views and clean up their delta logs; inside a write transaction."""
    touched: dict[str, int] = {}
    for view in views:
        if view.broken or view.stalled:
            continue
        for table, _lo, hi in fold_view(conn, view):
            touched[table] = max(hi, touched.get(table, 0))
    collect_garbage(conn, registry, touched)
