"""The fold: pending deltas of the base tables, through each view's circuit, into its
persisted Z-set and state (a read's same computation without writing: `pending_read`).

A view's pending input is the part of each base table's delta log past the view's
progress mark. Folding runs the circuit on it, adds ΔV to the view table, writes the
operator state, and advances the mark, all in the caller's write transaction, so a
rollback undoes the fold together with the writes it folded. Delta rows every view of
a table has consumed are removed (the newest one stays behind, so sequence numbers
never restart below a progress mark).

Views over views fold in groups (`Registry.fold_groups`): each view reads the ΔV its
upstream views got in the same fold, upstream first (see `matview.upstream`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import apsw

from matview import fallback, names, upstream
from matview.db import ENVIRONMENT_ERRORS, describe, savepoint
from matview.errors import Error
from matview.names import quote
from matview.operators.accumulators import ScanOrderDependent
from matview.operators.recompute import recomputed_delta, should_recompute
from matview.registry import Registry, View
from matview.storage import catalog
from matview.storage.state import StateStore
from matview.storage.viewstore import Inconsistent
from matview.zset import ZSet


@functools.lru_cache(maxsize=256)
def _pending_sql(tables: tuple[str, ...]) -> str:
    """The statement of `pending_ranges` for a view reading `tables` (built once: it runs at
    every commit, and the same text lets apsw reuse its prepared statement)."""
    return " UNION ALL ".join(
        f"SELECT {number}, (SELECT seq FROM {quote(names.PROGRESS)} WHERE view = ?1 AND base_table = ?{number + 2}), "
        f"(SELECT max({quote(names.SEQ)}) FROM {quote(names.delta_table(table))})"
        for number, table in enumerate(tables)
    )


def pending_ranges(conn: apsw.Connection, view: View) -> list[tuple[str, int, int]]:
    """(table, lo, hi) for each base table with deltas lo < seq <= hi not yet folded into `view`
    (one statement for all of its tables: this runs at every commit)."""
    tables = view.entry.base_tables
    ranges = []
    for number, lo, hi in conn.execute(_pending_sql(tuple(tables)), (view.name, *tables)):
        lo = lo or 0
        if hi is not None and hi > lo:
            ranges.append((tables[number], lo, hi))
    return ranges


#: a view's inputs as `Circuit.delta` takes them (see `delta_inputs`)
Ranges = dict[str, tuple[int, int]]


def pending_count(conn: apsw.Connection, view: View) -> int:
    return sum(hi - lo for _, lo, hi in pending_ranges(conn, view))


def view_delta(conn: apsw.Connection, view: View, ranges: Ranges, store: StateStore) -> ZSet[bytes]:
    """ΔV of all pending inputs jointly (table by table would count ΔA ⋈ ΔB twice)."""
    return view.circuit.delta(conn, ranges, store)


def delta_inputs(
    conn: apsw.Connection,
    view: View,
    upstream_changes: dict[str, int],
    ranges: list[tuple[str, int, int]] | None = None,
) -> tuple[list[tuple[str, int, int]], Ranges]:
    """A view's pending base-table ranges, and all its inputs as `Circuit.delta` takes them:
    those ranges and, per upstream view whose ΔV of this fold is not empty, (0, its size)."""
    ranges = pending_ranges(conn, view) if ranges is None else ranges
    inputs: Ranges = {table: (lo, hi) for table, lo, hi in ranges}
    for name in view.entry.plan.upstream_views:
        size = upstream_changes.get(names.fold(name), 0)
        if size:
            inputs[name] = (0, size)
    return ranges, inputs


def _heals_through_owner(view: View) -> bool:
    """Whether a marker `view`'s fold meets is healed by `owner_heal` (the user's view recomputed
    whole, its nodes dropped), not in place (`fallback.can_heal`): an internal node, or a view
    with internal nodes."""
    return names.is_node(view.name) or bool(view.entry.plan.internal_nodes)


def fold_view(
    conn: apsw.Connection, view: View, upstream_changes: dict[str, int] | None = None
) -> tuple[list[tuple[str, int, int]], ZSet[bytes]] | None:
    """Fold `view`'s pending deltas inside a write transaction: the ranges it folded and its
    ΔV, or None when it stalled. `upstream_changes`: the sizes of the ΔVs the views it reads
    got in this fold (their storage holds them already, their temp ΔV tables too).

    A view must never make a valid base write fail: when computing ΔV raises (a user
    function this connection lacks, a bug), nothing of the view is written, the view is
    marked stalled — its deltas stay pending, and reading it reports why — and no range is
    folded. A small ΔV is computed without writing (state is buffered), so only the
    set-at-a-time path, which updates ordered state as it goes, needs a savepoint."""
    ranges, inputs = delta_inputs(conn, view, upstream_changes or {})
    if not inputs:
        return ranges, ZSet()
    store = StateStore(conn, view.name, writable=True)
    recompute = should_recompute(conn, view, sum(hi - lo for _table, lo, hi in ranges))
    set_at_a_time = (
        recompute
        or view.table.constrained  # (a user's UNIQUE index may refuse ΔV: applied under the savepoint)
        or view.circuit.writes_while_computing(sum(hi - lo for lo, hi in inputs.values()))
    )
    try:
        if set_at_a_time:
            with savepoint(conn):
                delta = recomputed_delta(conn, view, store) if recompute else view_delta(conn, view, inputs, store)
                _heal_instead(conn, view, delta)
                view.table.apply(conn, delta)
        else:
            delta = view_delta(conn, view, inputs, store)  # reads only
            _heal_instead(conn, view, delta)
    except ENVIRONMENT_ERRORS:
        raise
    except _HealInstead as instead:  # (nothing of the incremental ΔV was written)
        healed = _healed(conn, view, instead.marker)
        if isinstance(healed, str):
            view.stalled = (
                f"materialized view {view.name} cannot be folded: {fallback.HEALED[instead.marker]}, "
                f"and its SELECT raises: {healed}"
            )
            view.stalled_on = tuple(ranges)
            return None
        delta, store, set_at_a_time = healed, StateStore(conn, view.name, writable=True), True
    except Exception as exc:
        refolded = None if recompute else _recomputed_after(conn, view, exc)
        if refolded is None and isinstance(exc, ScanOrderDependent) and fallback.can_heal(view):
            healed = _healed(conn, view, exc.marker)
            refolded = None if isinstance(healed, str) else (healed, StateStore(conn, view.name, writable=True))
        if refolded is None and isinstance(exc, ScanOrderDependent) and _heals_through_owner(view):
            view.tied = exc.marker if exc.marker in fallback.HEALED else None  # (`owner_heal`)
        if refolded is None:
            view.stalled = f"materialized view {view.name} cannot be folded: {describe(exc)}"
            view.stalled_on = tuple(ranges)
            return None
        delta, store, set_at_a_time = *refolded, True
    if not set_at_a_time:
        # outside the guard: an error while writing must not leave a half-applied ΔV behind a
        # rolled-forward transaction; it reaches the caller — but a view found inconsistent (the
        # table is left as it was) stalls, and the base write commits
        try:
            view.table.apply(conn, delta)
        except Inconsistent as exc:
            view.stalled, view.stalled_on = str(exc), tuple(ranges)
            return None
    store.flush()
    for table, _lo, hi in ranges:
        catalog.set_progress(conn, view.name, table, hi)
    return ranges, delta


class _HealInstead(Exception):
    def __init__(self, marker: bytes) -> None:
        super().__init__(marker)
        self.marker = marker


def _heal_instead(conn: apsw.Connection, view: View, delta: ZSet[bytes]) -> None:
    """Raise `_HealInstead` where the incremental ΔV holds a result only SQLite's scan order
    decides and the view can be recomputed whole: that ΔV is then not applied (its markers
    could even collide in a user's UNIQUE index on the view), the heal's is."""
    marker = fallback.marker_in_delta(view, delta) if fallback.can_heal(view) else None
    if marker is not None and fallback.whole_plan(conn, view, fallback.HEALED[marker]) is not None:
        raise _HealInstead(marker)


def _healed(conn: apsw.Connection, view: View, marker: bytes) -> ZSet[bytes] | str:
    """The ΔV that switches a view whose fold met `marker` (a result only SQLite's scan order
    decides) to whole recompute (`fallback.heal`); or why it cannot be switched, or what its
    SELECT raises (the view then stalls, and reading it says why)."""
    entry, circuit = view.entry, view.circuit
    try:
        with savepoint(conn):
            healed = fallback.heal(conn, view, marker)
    except ENVIRONMENT_ERRORS:
        raise
    except Exception as exc:
        # the savepoint took the switch back in the file: so must `view` (a later fold would
        # recompute it whole, and the next catalog load find it incremental, its state stale)
        view.entry, view.circuit = entry, circuit
        return describe(exc)
    return "it cannot be recomputed whole" if healed is None else healed


def _recomputed_after(conn: apsw.Connection, view: View, exc: Exception) -> tuple[ZSet[bytes], StateStore] | None:
    """ΔV by recomputing the view (refresh as a delta) after its delta terms raised an SQLite
    error: an expression that raises (malformed JSON, integer overflow) on a row that a later
    change of the same pending range removed makes SQLite's SELECT of now succeed, so the view
    must fold; recomputed from the tables as they stand, it does (applied, with its state).
    None when that raises too (the SELECT itself would): the view stalls. Text that is not UTF-8
    (`CAST(x'ff' AS TEXT)`, which Python cannot decode) is such a row too."""
    if not isinstance(exc, (apsw.Error, UnicodeDecodeError)):
        return None
    store = StateStore(conn, view.name, writable=True)
    try:
        with savepoint(conn):
            delta = recomputed_delta(conn, view, store)
            view.table.apply(conn, delta)
    except ENVIRONMENT_ERRORS:
        raise
    except Exception:
        return None
    return delta, store


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


#: told each view's ΔV inside the fold's transaction (the change feed, `matview.feed`)
DeltaListener = Callable[[View, ZSet[bytes]], None]


def fold_pending_deltas(
    conn: apsw.Connection, registry: Registry, views: list[View], listener: DeltaListener | None = None
) -> None:
    """Fold several views and clean up their delta logs; inside a write transaction."""
    touched: dict[str, int] = {}
    for group in registry.fold_groups(views):
        if len(group) == 1:
            _fold_alone(conn, group[0], touched, listener)
        else:
            _fold_together(conn, registry, group, touched, listener)
    collect_garbage(conn, registry, touched)


def _fold_alone(conn: apsw.Connection, view: View, touched: dict[str, int], listener: DeltaListener | None) -> None:
    _retry_after_new_changes(conn, [view])
    if view.broken or view.stalled:
        return
    folded = fold_view(conn, view)
    if folded and listener is not None:
        listener(view, folded[1])
    for table, _lo, hi in folded[0] if folded else []:
        touched[table] = max(hi, touched.get(table, 0))


def _retry_after_new_changes(conn: apsw.Connection, group: list[View]) -> None:
    """Views stalled by a fold that raised are folded again once changes came since: the row
    an expression raised on may be gone (SQLite's SELECT of now would then succeed)."""
    if any(v.stalled_on is not None and v.stalled_on != tuple(pending_ranges(conn, v)) for v in group):
        for view in group:
            if view.stalled_on is not None:
                view.stalled, view.stalled_on = None, None


class _GroupStalled(Exception):
    pass


def _fold_together(
    conn: apsw.Connection,
    registry: Registry,
    group: list[View],
    touched: dict[str, int],
    listener: DeltaListener | None,
) -> None:
    """Fold views over views with the views they read, upstream first: each applies its ΔV
    before its downstream views compute theirs from it. All or none: a view that cannot be
    folded leaves every view of the group pending (its upstream's ΔV would be lost). A broken
    view (its schema changed: REFRESH rebuilds it from scratch) is left out, and so are the
    views over it (the registry breaks them too)."""
    group = [view for view in group if not view.broken]
    _retry_after_new_changes(conn, group)
    stalled = next((view.stalled for view in group if view.stalled), None)
    if stalled is not None:
        _stall(group, stalled)
        return
    changes: dict[str, int] = {}  # per view folded here: the size of its ΔV
    ranges_of: list[list[tuple[str, int, int]]] = []
    written: dict[str, tuple[View, ZSet[bytes]]] = {}  # the ΔVs this fold put in temp ΔV tables
    reader_writes = registry.reader_delta_writes
    try:
        with savepoint(conn):
            for view in group:
                if registry.reader_delta_writes != reader_writes:
                    # a view recomputed whole read a view's shadow here, whose computation wrote
                    # the ΔV tables of the views that one reads (as of now: empty, those folded):
                    # the views still to fold read this fold's ΔVs there
                    for done, delta in written.values():
                        upstream.write_delta(conn, done.name, len(done.entry.plan.columns), delta)
                    reader_writes = registry.reader_delta_writes
                folded = fold_view(conn, view, changes)
                if folded is None:
                    raise _GroupStalled(view.stalled)
                ranges, delta = folded
                if _heals_through_owner(view):
                    view.tied = fallback.marker_in_delta(view, delta)
                    if view.tied is not None:  # (`owner_heal`)
                        raise _GroupStalled(f"cannot be folded: {fallback.HEALED[view.tied]}")
                ranges_of.append(ranges)
                if listener is not None:
                    listener(view, delta)  # inside the savepoint: a stalled group records nothing
                if registry.dependents_of(view):
                    upstream.ensure_delta_table(conn, view.name, view.entry.plan.columns)
                    try:
                        upstream.write_delta(conn, view.name, len(view.entry.plan.columns), delta)
                    except Error as exc:  # a row of ΔV is an error its readers would raise
                        raise _GroupStalled(f"cannot be folded: {exc}") from None
                    changes[names.fold(view.name)] = len(delta)
                    written[names.fold(view.name)] = (view, delta)
    except _GroupStalled as stalled:
        for node in group:
            owner = registry.owner_of(node) if node.tied is not None else None
            if owner is not None and fallback.may_heal_owner(owner):
                owner.tied = node.tied
        _stall(group, str(stalled))
        for view in group:
            if view.stalled_on is None and view.stalled:
                view.stalled_on = tuple(pending_ranges(conn, view))
        return
    for ranges in ranges_of:
        for table, _lo, hi in ranges:
            touched[table] = max(hi, touched.get(table, 0))


def _stall(group: list[View], reason: str) -> None:
    for view in group:
        if not view.broken:
            view.stalled = view.stalled or (
                f"materialized view {view.name} is folded together with the views it reads or that read it: {reason}"
            )
