"""A read's ΔV of the not-yet-folded deltas: what a read of a view on a matview connection
merges with its stored rows (`matview_ext.vtable`), computed without writing anything but the
temp ΔV tables of the views it reads. The delta terms are the fold's (`matview.fold`); where
they cannot answer — a large change, a row image whose expression raises — the read runs the
SELECT instead, where that is exact.
"""

from __future__ import annotations

import functools
from itertools import pairwise

import apsw
from sqlglot.tokens import TokenType

from matview import fallback, names, upstream
from matview.db import ENVIRONMENT_ERRORS
from matview.errors import Error
from matview.fold import Ranges, delta_inputs, pending_ranges, view_delta
from matview.operators.accumulators import ScanOrderDependent
from matview.operators.recompute import should_recompute
from matview.registry import Registry, View
from matview.sql.sqltext import tokenize
from matview.storage import readable
from matview.storage.catalog import ViewEntry
from matview.storage.state import StateStore
from matview.zset import ZSet

_SUMS = {"sum", "total", "avg"}


def _calls_a_sum(entry: ViewEntry) -> bool:
    """Whether the view's SELECT, or a plain view it reads, calls sum/total/avg anywhere (a
    subquery too; however the name is quoted: `"total"(x)`, `[sum](x)`)."""
    return _texts_call_a_sum((entry.sql, *(body for _name, body in entry.plan.plain_views)))


@functools.lru_cache(maxsize=256)  # (asked at every read of a pending change: tokenized once)
def _texts_call_a_sum(texts: tuple[str, ...]) -> bool:
    for sql in texts:
        try:
            tokens = tokenize(sql)
        except Error:
            return True
        if any(t.text.lower() in _SUMS and after.kind == TokenType.L_PAREN for t, after in pairwise(tokens)):
            return True
    return False


def pending_view_delta(conn: apsw.Connection, registry: Registry, view: View) -> ZSet[bytes]:
    """ΔV of the not-yet-folded deltas, computed without writing anything but the temp ΔV
    tables of the views it reads (readers).

    SQLite may read a view once per row of an outer loop (a correlated subquery, the inner
    side of a join): the last result is kept while nothing it depends on can have changed —
    the pending ranges of the view and the views it reads, this connection's change count
    (writes, a ROLLBACK TO followed by writes; the temp ΔV tables written here count too, so
    the count is taken after) and the file's data version (other connections' commits)."""
    order = registry.upstream_order(view)
    ranges = [pending_ranges(conn, current) for current in order]
    key = tuple(tuple(r) for r in ranges)
    cached = registry.pending_deltas.get(names.fold(view.name))
    if cached is not None and cached[0] == (key, conn.total_changes(), conn.data_version()):
        return cached[1]
    own = sum(hi - lo for _table, lo, hi in ranges[order.index(view)])
    # (not where SQLite's SELECT answers otherwise than the engine: REAL sums, which it rounds
    # in scan order, and a view refusing what only scan order decides)
    as_the_fold = all(
        (current is view or names.is_node(current.name))
        and not current.entry.plan.recompute_never
        and not _calls_a_sum(current.entry)
        for current in order
    )

    def select_reads_main() -> bool:  # (asked only when it matters: a query per table)
        return not readable.foreign_temp_objects(conn, view.entry.base_tables)  # (else it reads a TEMP t)

    if as_the_fold and should_recompute(conn, view, own) and select_reads_main():
        # (as a fold would: so large a change costs less as the SELECT's rows − the stored ones
        # than through the delta terms of the view and its nodes)
        delta = fallback.select_delta(conn, view)
    else:
        try:
            delta = _pending_delta_terms(conn, registry, view, order, ranges)
        except ENVIRONMENT_ERRORS:
            raise
        except ScanOrderDependent:  # (a tie: the fold stalls or heals, the read says so)
            raise
        except (apsw.Error, UnicodeDecodeError):
            if not (as_the_fold and select_reads_main()):
                raise
            # An expression raised on a row image a later change of the pending range took
            # back (malformed JSON fixed, an overflowing row deleted): the fold recomputes then
            # (`_recomputed_after`); a read, which writes nothing, reads the SELECT's rows −
            # the stored ones, which raises only where the SELECT itself does.
            delta = fallback.select_delta(conn, view)
    registry.pending_deltas[names.fold(view.name)] = ((key, conn.total_changes(), conn.data_version()), delta)
    return delta


def _pending_delta_terms(
    conn: apsw.Connection, registry: Registry, view: View, order: list[View], ranges: list[list[tuple[str, int, int]]]
) -> ZSet[bytes]:
    """`pending_view_delta` by the delta terms of `view` and the views it reads (`order`)."""
    changes: dict[str, int] = {}
    delta: ZSet[bytes] = ZSet()
    for current, current_ranges in zip(order, ranges):
        _ranges, inputs = delta_inputs(conn, current, changes, current_ranges)
        store = StateStore(conn, current.name, writable=False)
        try:
            delta = _merged_delta(conn, current, inputs, store) if inputs else ZSet()
        except ScanOrderDependent as exc:
            if not _node_tie_read_whole(current, view, exc.marker):
                raise
            return fallback.select_delta(conn, view)
        if _node_tie_read_whole(current, view, None) and fallback.marker_in_delta(current, delta) is not None:
            # (its owner is recomputed whole at the next fold: `owner_heal`)
            return fallback.select_delta(conn, view)
        if current is not view:
            upstream.write_delta(conn, current.name, len(current.entry.plan.columns), delta)
            registry.reader_delta_writes += 1
            changes[names.fold(current.name)] = len(delta)
    return delta


def _merged_delta(conn: apsw.Connection, view: View, inputs: Ranges, store: StateStore) -> ZSet[bytes]:
    """The ΔV a read merges: the engine's, or where it shows a marker a heal answers, the
    SELECT's rows − the stored ones (`fallback.read_as_select`: a read that cannot fold and
    heal still reads as the SELECT)."""
    try:
        delta = view_delta(conn, view, inputs, store)
    except ScanOrderDependent as exc:
        instead = fallback.read_as_select(conn, view, exc)
        if instead is None:
            raise
        return instead
    instead = fallback.read_as_select(conn, view, delta)
    return delta if instead is None else instead


def _node_tie_read_whole(current: View, view: View, marker: bytes | None) -> bool:
    """Whether a read of `view`, whose internal node (or one a view it reads has) `current`
    met `marker` (None: whatever marker it meets), reads its SELECT instead
    (`fallback.select_delta`)."""
    return (
        (marker is None or marker in fallback.HEALED)
        and current is not view
        and names.is_node(current.name)
        and fallback.may_heal_owner(view)
    )
