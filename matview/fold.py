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

from typing import Any

import apsw

from matview import catalog, names
from matview.db import scalar
from matview.names import quote
from matview.registry import Registry, View
from matview.state import StateStore
from matview.zset import ZSet


def pending_ranges(conn: apsw.Connection, view: View) -> list[tuple[str, int, int]]:
    """(table, lo, hi) for each base table with deltas lo < seq <= hi not yet folded into `view`."""
    ranges = []
    for table in view.entry.base_tables:
        lo = catalog.get_progress(conn, view.name, table)
        hi = scalar(conn, f"SELECT max({quote(names.SEQ)}) FROM {quote(names.delta_table(table))}")
        if hi is not None and hi > lo:
            ranges.append((table, lo, hi))
    return ranges


def pending_count(conn: apsw.Connection, view: View) -> int:
    return sum(hi - lo for _, lo, hi in pending_ranges(conn, view))


def _view_delta(
    conn: apsw.Connection, view: View, ranges: list[tuple[str, int, int]], store: StateStore
) -> ZSet[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    for _table, lo, hi in ranges:
        rows.extend(view.circuit.stage1_delta(conn, lo, hi))
    return view.circuit.step(rows, store)


def pending_view_delta(conn: apsw.Connection, view: View) -> ZSet[tuple[Any, ...]]:
    """ΔV of the not-yet-folded deltas, computed without writing anything (readers)."""
    ranges = pending_ranges(conn, view)
    if not ranges:
        return ZSet()
    return _view_delta(conn, view, ranges, StateStore(conn, view.name, writable=False))


def fold_view(conn: apsw.Connection, view: View) -> bool:
    """Fold `view`'s pending deltas; call inside a write transaction. True if it did work."""
    ranges = pending_ranges(conn, view)
    if not ranges:
        return False
    store = StateStore(conn, view.name, writable=True)
    delta = _view_delta(conn, view, ranges, store)
    view.table.apply(conn, delta)
    store.flush()
    for table, _lo, hi in ranges:
        catalog.set_progress(conn, view.name, table, hi)
    return True


def collect_garbage(conn: apsw.Connection, registry: Registry, tables: set[str]) -> None:
    """Remove delta rows every view of each table has consumed (all but the newest)."""
    for table in tables:
        views = registry.views_on(table)
        if not views:
            continue
        low = min(catalog.get_progress(conn, v.name, table) for v in views)
        conn.execute(f"DELETE FROM {quote(names.delta_table(table))} WHERE {quote(names.SEQ)} < ?", (low,))


def fold_pending_deltas(conn: apsw.Connection, registry: Registry, views: list[View]) -> None:
    """Fold several views and clean up their delta logs; inside a write transaction."""
    touched: set[str] = set()
    for view in views:
        if view.broken:
            continue
        if fold_view(conn, view):
            touched.update(view.entry.base_tables)
    collect_garbage(conn, registry, touched)
