"""Creating, dropping and refreshing materialized views.

Each runs inside a savepoint: on any error nothing of the view is left behind and
the database is as it was. One module, longer than most, because its parts call each other:
creating a view creates its internal nodes (`_compile_incrementally` → `create_view`) and
rebuilds the views sharing its tables (`rebuild_sharing` → `_rebuild` → `_compile_with_nodes`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace

import apsw

from matview import fallback, names, upstream
from matview.circuit import Circuit
from matview.db import ENVIRONMENT_ERRORS, describe, savepoint, scalar
from matview.errors import Error, UnsupportedQuery
from matview.fold import fold_pending_deltas
from matview.names import NODE_PREFIX, fold, is_node, quote
from matview.operators.partition import every_root_table
from matview.operators.whole import replanned_otherwise
from matview.plan import OutputColumn, Plan
from matview.registry import Registry, View
from matview.sql.clock import refuse_clock_handed_on
from matview.sql.frontend import Compiled, compile_select
from matview.sql.nested_joins import unnest_leading_joins
from matview.sql.nodes import extract_nodes
from matview.sql.validate import drop_main_qualifiers, refuse_index_hints, spell_distinct_from
from matview.sql.whole import compile_whole, untracked_reads, whole_construct, whole_construct_inside, whole_tree
from matview.storage import catalog, readable
from matview.storage.capture import (
    capture_installed,
    capture_is_stale,
    install_capture,
    missing_capture_tables,
    remove_capture,
)
from matview.storage.catalog import ViewEntry
from matview.storage.ddl_guard import own_ddl
from matview.storage.indexes import drop_unused as drop_unused_indexes
from matview.storage.indexes import refuse_group_concat_through_own_index, with_indexes
from matview.storage.scan_order import variant_order_problem
from matview.storage.schema import affinity, read_table
from matview.storage.state import StateStore, clear_state_tables, create_state_tables
from matview.storage.viewstore import ViewTable
from matview.view_health import plain_view_change

MAINTENANCE_MODES = ("immediate", "deferred")

#: fills a new view's table and state: `_populate` (the whole base table as one delta), or
#: another source of the same snapshot (the Spark backfill writes merged partial states)
Populate = Callable[[apsw.Connection, View], None]


def _existing_object(conn: apsw.Connection, name: str) -> str | None:
    """The type of a user object called `name` in main or temp. A matview temp shadow is
    not one: a shadow whose view is gone (dropped by another connection, not yet noticed
    here) is matview's to replace."""
    for kind, sql in conn.execute(
        "SELECT type, sql FROM main.sqlite_master WHERE name = ? COLLATE NOCASE "
        "UNION ALL SELECT type, sql FROM temp.sqlite_master WHERE name = ? COLLATE NOCASE",
        (name, name),
    ):
        if not readable.is_shadow(str(sql or "")):
            return str(kind)
    return None


def _check_name(name: str) -> None:
    if not name:
        raise Error("a materialized view needs a name")
    if names.is_internal(name):
        raise Error(f"view name {name}: names starting with {names.PREFIX} are reserved for matview")
    if name.lower().startswith("sqlite_"):
        raise Error(f"view name {name}: names starting with sqlite_ are reserved for SQLite")


class _CheaperWhole(Exception):
    """The incremental plan would recompute every row at most writes: recomputed whole instead."""


class _RefusedOnceCompiled(UnsupportedQuery):
    """A refusal found after the SELECT compiled (`create_view` may recompute it whole instead)."""


def create_view(
    conn: apsw.Connection,
    registry: Registry,
    name: str,
    sql: str,
    maintenance: str = "immediate",
    if_not_exists: bool = False,
    auto_indexes: bool = True,
    internal: bool = False,
    populate: Populate | None = None,
    recompute: str = "auto",
    whole_reason: str | None = None,
) -> None:
    """CREATE MATERIALIZED VIEW; `internal`: a node of another view (see `matview.sql.nodes`);
    `recompute`: "auto" (a view no delta rule maintains is recomputed whole at every change:
    `sql.whole`) or "never" (refused instead); `whole_reason`: recomputed whole, for this reason."""
    if not internal:
        _check_name(name)
        if NODE_PREFIX in sql.lower():
            raise UnsupportedQuery(f"{NODE_PREFIX}…: matview's internal views cannot be read by a view")
    if recompute not in ("auto", "never"):
        raise Error(f"recompute must be 'auto' or 'never', not {recompute!r}")
    if maintenance not in MAINTENANCE_MODES:
        raise Error(f"maintenance must be one of {', '.join(MAINTENANCE_MODES)}, not {maintenance!r}")
    if registry.get(name) is not None:
        if if_not_exists:
            _check_syntax(conn, sql)  # (as SQLite's CREATE VIEW IF NOT EXISTS does)
            return
        raise Error(f"materialized view {name} already exists")
    kind = _existing_object(conn, name)
    if kind is not None:
        raise Error(f"cannot create materialized view {name}: a {kind} of that name exists")
    # A view of this name created in a transaction that rolled back may have left its
    # per-group table in the evaluator (keyed by name): a new view starts from nothing.
    registry.evaluator.forget(name)
    # (tables of a view whose catalog row another client deleted: no view owns them)
    _drop_view_tables(conn, name)
    whole = recompute == "auto" and not internal
    try:
        with savepoint(conn):
            catalog.ensure_catalog(conn)
            compiled = _compile_with_nodes(
                conn, registry, name, sql, maintenance, auto_indexes, whole=whole, whole_reason=whole_reason
            )
            sharing: dict[str, View] = {}  # views whose capture is rebuilt here (its table changed)
            for table in compiled.plan.base_tables:
                info = read_table(conn, table)
                others = registry.views_on(table)
                if others and (not capture_installed(conn, table) or capture_is_stale(conn, info)):
                    # another connection altered the table (the log mirrors its old columns), re-created
                    # it, or renamed it away and made another: the views over it are rebuilt with the log
                    for other in others:
                        sharing.setdefault(fold(other.name), other)
                    remove_capture(conn, table)
                install_capture(conn, info)
            # the views it reads, folded: their storage is what the snapshot below reads
            upstreams = [registry.get(u) for u in compiled.plan.upstream_views]
            _fold_upstreams(conn, registry, [u for u in upstreams if u is not None])
            for up in upstreams:
                if up is not None:
                    upstream.ensure_delta_table(conn, up.name, up.entry.plan.columns)
            plan = replace(with_indexes(conn, compiled), recompute_never=recompute == "never")
            try:
                refuse_group_concat_through_own_index(conn, plan, sql)
            except UnsupportedQuery as refusal:
                raise _RefusedOnceCompiled(str(refusal)) from None
            reserved = names.taken_by_matview((c.name for c in plan.columns), (names.ROW_ID, names.KEY, names.WEIGHT))
            if reserved is not None:
                raise Error(
                    f"materialized view {name}: column {reserved} has a name matview keeps for a column of "
                    "its own; name it otherwise"
                )
            view_table = ViewTable(name, plan.columns)
            view_table.create(conn)
            create_state_tables(conn, name)
            # progress is kept per base table, those read through upstream views too (see `fold`)
            base_tables = list(
                dict.fromkeys([*plan.base_tables, *(t for u in upstreams if u for t in u.entry.base_tables)])
            )
            entry = ViewEntry(name, sql.strip().rstrip(";").strip(), plan, maintenance, base_tables)
            catalog.save_view(conn, entry)
            view = View(entry, Circuit(name, plan, registry.evaluator), view_table)
            if view.circuit.first_rows:
                problem = variant_order_problem(conn, plan, entry.sql)
                if problem is not None:
                    raise _RefusedOnceCompiled(problem)
            try:
                # (compiled whole again on a marker: its internal nodes go with this savepoint)
                marker = fallback.populate_checked(conn, view, populate or _populate, whole, compiled_again=True)
            except UnicodeDecodeError as exc:  # (SQLite keeps any bytes as TEXT; Python reads UTF-8 only)
                raise Error(
                    f"materialized view {name}: a text value its SELECT reads is not valid UTF-8 ({exc.reason}); "
                    "fix or remove that row, then CREATE the view"
                ) from None
            if marker is not None:  # a result only SQLite's scan order decides: recomputed whole instead
                raise _RefusedOnceCompiled(fallback.HEALED[marker])
            registry.invalidate()
            readable.create_plain_view(conn, name, plan)
            readable.drop_shadow(conn, name)
            readable.create_shadow(conn, name, plan, None)  # (the next statement makes it a shadow view)
            rebuild_sharing(conn, registry, [], sharing)
            if plan.indexes:
                recompute_replanned(conn, registry, plan.base_tables)
    except _RefusedOnceCompiled as refusal:
        # a refusal only the compiled plan could find (SQLite's scan order through an index): by
        # default recomputed whole instead, as a refusal of the front end is
        if not (whole and fallback.FALL_BACK_TO_WHOLE) or whole_reason is not None:
            raise UnsupportedQuery(str(refusal)) from None
        registry.invalidate()
        create_view(
            conn,
            registry,
            name,
            sql,
            maintenance,
            if_not_exists,
            auto_indexes,
            internal,
            None,  # (a caller's `populate` fills the incremental plan's state: SQLite runs this one)
            recompute,
            whole_reason=str(refusal),
        )
        return
    registry.invalidate()


def _compile_with_nodes(
    conn: apsw.Connection,
    registry: Registry,
    name: str,
    sql: str,
    maintenance: str,
    auto_indexes: bool,
    create_nodes: bool = True,
    whole: bool = True,
    whole_reason: str | None = None,
    cheaper_whole: bool = True,
) -> Compiled:
    """Compile a view's SELECT, which reads its internal nodes (`matview.sql.nodes`): created first,
    or (`create_nodes` false, a rebuild) already there. `whole`: where no delta rule applies (a top
    N, a window) or the incremental engine refuses, the view is recomputed whole (`sql.whole`), and
    (`cheaper_whole`, not in a rebuild: a view stays as it was made) where every change of a table
    it reads would recompute every row (`partition.every_root_table`);
    `whole_reason`: recomputed whole in any case, for this reason (where SQLite cannot run it again
    exactly, refused with it)."""
    refuse_index_hints(sql)
    refuse_clock_handed_on(conn, sql)  # (here once: every path below, whole recompute too, stands on it)
    sql = unnest_leading_joins(spell_distinct_from(sql))
    if whole_reason is not None:
        try:
            plan, source = compile_whole(conn, sql, whole_reason)
        except Error:
            raise UnsupportedQuery(whole_reason) from None
        return Compiled(plan, whole_tree(), source)
    what = whole_construct(sql) if whole else None
    if what is None:
        try:
            with savepoint(conn):
                compiled = _compile_incrementally(conn, registry, name, sql, maintenance, auto_indexes, create_nodes)
                costly = (
                    every_root_table(conn, compiled.plan)
                    if whole and cheaper_whole and fallback.FALL_BACK_TO_WHOLE
                    else None
                )
                if costly is None:
                    return compiled
                raise _CheaperWhole(
                    f"a subquery that does not depend on the outer row reads {costly}, which the view reads "
                    f"too (or one in an ON condition, or nested in another, whose reach matview does not "
                    f"trace): every change of {costly} reaches every row, so running the SELECT once is cheaper"
                )
        except _CheaperWhole as choice:
            registry.invalidate()  # (its nodes are gone with the savepoint)
            try:
                plan, source = compile_whole(conn, sql, str(choice))
            except Error:  # (SQLite cannot run it again exactly: maintained row by row after all)
                return _compile_with_nodes(
                    conn, registry, name, sql, maintenance, auto_indexes, create_nodes, whole=False
                )
            return Compiled(plan, whole_tree(), source)
        except UnsupportedQuery as refusal:
            # a LIMIT or a window inside a plain view or a derived table; or (by default) anything the
            # incremental engine refuses: recomputed whole instead, where SQLite can run the SELECT
            # again exactly; else the refusal stands, naming what the user wrote
            inside = whole_construct_inside(conn, sql) if whole else None
            if inside is None and not (whole and fallback.FALL_BACK_TO_WHOLE):
                raise
            registry.invalidate()  # (nodes the attempt made are gone with its savepoint)
            try:
                plan, source = compile_whole(conn, sql, inside or str(refusal))
            except Error:
                raise refusal from None
            return Compiled(plan, whole_tree(), source)
    plan, source = compile_whole(conn, sql, what)  # (the statement runs as written, no node)
    return Compiled(plan, whole_tree(), source)


def _compile_incrementally(
    conn: apsw.Connection,
    registry: Registry,
    name: str,
    sql: str,
    maintenance: str,
    auto_indexes: bool,
    create_nodes: bool,
) -> Compiled:
    planned, nodes = extract_nodes(conn, drop_main_qualifiers(sql), name)
    for node in nodes if create_nodes else []:
        create_view(conn, registry, node.name, node.sql, maintenance, auto_indexes=auto_indexes, internal=True)
        if not node.keyed:
            _refuse_inexact_node(registry, node.name, node.words)
        made = registry.get(node.name)
        marker = fallback.marker_in_table(conn, made) if made is not None else None
        if marker is not None:  # (a tie its owner would read: the owner is recomputed whole instead)
            raise _RefusedOnceCompiled(fallback.HEALED[marker])
    compiled = compile_select(conn, planned, auto_indexes)
    node_views = [registry.get(node.name) for node in nodes]
    tables = {fold(t) for t in [*compiled.plan.base_tables, *(t for n in node_views if n for t in n.entry.base_tables)]}
    read = [*compiled.plan.upstream_views, *(v for n in node_views if n for v in n.entry.plan.upstream_views)]
    missed = untracked_reads(conn, sql, tables, {fold(v) for v in read})
    if missed is not None:
        raise UnsupportedQuery(missed)
    # (a node over a plain view's body: the view breaks when that plain view is redefined)
    views = tuple(dict([*compiled.plan.plain_views, *(v for n in nodes for v in n.views)]).items())
    plan = replace(compiled.plan, internal_nodes=tuple(n.name for n in nodes), plain_views=views)
    return replace(compiled, plan=plan)


def _refuse_inexact_node(registry: Registry, name: str, words: str = "") -> None:
    """A node whose groups or DISTINCT rows have several variants ('a'/'A' under NOCASE, 3/3.0
    untyped) shows one of them, which SQLite picks by scan order: harmless on display, but read
    by a join or an IN it would decide which rows match."""
    node = registry.get(name)
    assert node is not None
    plan = node.entry.plan
    if (plan.kind == "aggregate" and plan.has_group_by and not plan.exact_groups) or (
        plan.distinct and not plan.exact_distinct
    ):
        if words:
            raise UnsupportedQuery(
                f"{words}: the values of a group can be equal but different (1 and 1.0, 'a' and 'A' under NOCASE) "
                "and which one SQLite shows follows its scan order; not supported (group by typed BINARY columns)"
            )
        raise UnsupportedQuery(
            f"a grouped or DISTINCT subquery, CTE or view ({node.entry.sql}) whose values can be equal but "
            "different (NOCASE, untyped columns) cannot be read by a join or IN: which variant SQLite keeps "
            "follows its scan order; use typed BINARY columns there"
        )


def _fold_upstreams(conn: apsw.Connection, registry: Registry, upstreams: list[View]) -> None:
    for view in upstreams:
        view.check()
        if view.stalled:
            raise Error(view.stalled)
    fold_pending_deltas(conn, registry, upstreams)
    for view in upstreams:
        if view.stalled:
            raise Error(view.stalled)


def set_snapshot_progress(conn: apsw.Connection, view: View) -> None:
    """A snapshot's progress marks: the end of each base table's delta log."""
    for table in view.entry.base_tables:
        hi = scalar(conn, f"SELECT max({quote(names.SEQ)}) FROM {quote(names.delta_table(table))}")
        catalog.set_progress(conn, view.name, table, hi or 0)


def _populate(conn: apsw.Connection, view: View) -> None:
    """Initial snapshot: the whole base table as one delta from the empty state, with the
    progress mark at the delta log's current end (those deltas are in the snapshot)."""
    set_snapshot_progress(conn, view)
    store = StateStore(conn, view.name, writable=True)
    delta = view.circuit.populate(conn, store)
    if delta is None:
        view.table.insert_select(conn, view.circuit.base_rows_sql)
    else:
        view.table.insert_initial(conn, delta)
    store.flush()


def drop_view(conn: apsw.Connection, registry: Registry, name: str, if_exists: bool = False) -> None:
    view = registry.get(name)
    if view is None:
        kind = _existing_object(conn, name)
        if kind is not None:
            raise Error(f"{name} is a {kind}, not a materialized view")
        if if_exists:
            return
        raise Error(f"no such materialized view: {name}")
    dependents = registry.dependents_of(view)
    if dependents:
        raise Error(
            f"materialized view {view.name} is read by materialized view(s) "
            f"{', '.join(v.name for v in dependents)}: DROP MATERIALIZED VIEW them first"
        )
    with savepoint(conn):
        registry.evaluator.forget(view.name)
        readable.drop_shadow(conn, view.name)
        conn.execute(f"DROP TABLE IF EXISTS temp.{quote(names.view_delta_table(view.name))}")
        readable.drop_plain_view(conn, view.name)
        _drop_view_tables(conn, view.name)
        catalog.delete_view(conn, view.name)
        registry.invalidate()
        still_used = {i for other in registry.sync().values() for i in other.entry.plan.indexes}
        drop_unused_indexes(conn, view.entry.plan.indexes, still_used)
        if set(view.entry.plan.indexes) - still_used:
            recompute_replanned(conn, registry, view.entry.base_tables)
        for table in view.entry.base_tables:
            if not registry.views_on(table):
                remove_capture(conn, table)
        for node in view.entry.plan.internal_nodes:
            drop_view(conn, registry, node, if_exists=True)
    registry.invalidate()


def recompute_replanned(conn: apsw.Connection, registry: Registry, tables: Sequence[str]) -> None:
    """matview's own join-key indexes, made or dropped for another view, can change how SQLite
    plans a view recomputed whole over the same tables, and so which tied rows its SELECT keeps
    (`whole.replanned_otherwise`): such a view is recomputed here, in the same transaction,
    rather than left to read as broken until a REFRESH the user never asked for; the views
    over it are rebuilt with it (they read storage that changed without a ΔV)."""
    rebuilt: dict[str, View] = {}
    for table in dict.fromkeys(tables):
        for view in registry.views_on(table):
            if fold(view.name) in rebuilt or not view.entry.plan.whole:
                continue
            if replanned_otherwise(conn, view.name, view.entry.plan):
                _rebuild(conn, registry, view)
                rebuilt[fold(view.name)] = view
    if rebuilt:
        registry.invalidate()
        rebuild_sharing(conn, registry, list(rebuilt.values()), {})
        registry.invalidate()


def repair_capture(conn: apsw.Connection, registry: Registry) -> None:
    """Re-create the lost delta logs and preimage tables of `registry.lost_capture` (a damaged
    file: SQLite fails every write of such a table, since its triggers name them), so that a
    base write is never blocked by a view. The views of those tables lost their pending deltas:
    each is marked as needing REFRESH, in the same transaction."""
    lost = dict(registry.lost_capture)
    views = {fold(v.name): v for table in lost.values() for v in registry.views_on(table)}
    with savepoint(conn):
        for table in lost.values():
            install_capture(conn, read_table(conn, table))
        for view in views.values():
            if not view.entry.plan.needs_refresh:
                reason = (
                    f"materialized view {view.name}: the change log of a base table it reads was lost "
                    f"(a damaged file; re-created for a write); REFRESH MATERIALIZED VIEW {quote(view.name)}"
                )
                catalog.update_plan(conn, view.name, replace(view.entry.plan, needs_refresh=reason))
    registry.invalidate()


def refresh_view(conn: apsw.Connection, registry: Registry, name: str) -> None:
    """Recompute the view from scratch. When its base table was altered, or dropped and
    created again, change capture is rebuilt, and every view sharing that table is rebuilt
    with it (their progress in the old delta log means nothing any more). Views recover
    independently: one that cannot be rebuilt (its columns would change, its SELECT no
    longer compiles) stays refused on read, naming what it needs, and blocks no other."""
    view = registry.get(name)
    if view is None:
        raise Error(f"no such materialized view: {name}")
    for own in [*registry.own_nodes(view), view]:
        changed = plain_view_change(conn, name, own.entry.plan)
        if changed is not None:  # (rebuilt, it would read the new definition's tables, uncaptured)
            raise Error(changed)
    with savepoint(conn):
        others: dict[str, View] = {}
        # the tables it reads, those its internal nodes read too (a table read only through a
        # node is in the node's plan, not in the view's)
        reads = [(table, v) for v in [*registry.own_nodes(view), view] for table in v.entry.plan.base_tables]
        for table, reader in reads:
            info = read_table(conn, table)
            stale = tuple(tuple(c) for c in info.signature) != reader.entry.plan.signature(table)
            # (a damaged file may have lost the delta log or preimage table: their deltas with it)
            # (or made before a key's own collation was kept: `capture.capture_is_stale`)
            rebuilt = stale or not capture_installed(conn, table) or missing_capture_tables(conn, table)
            if rebuilt or capture_is_stale(conn, info):
                for other in registry.views_on(table):
                    others.setdefault(fold(other.name), other)
                remove_capture(conn, table)
                install_capture(conn, info)
        # its internal nodes first (they are its own state)
        for node in registry.own_nodes(view):
            _rebuild(conn, registry, node)
            others.pop(fold(node.name), None)
        _rebuild(conn, registry, view)
        others.pop(fold(view.name), None)
        rebuild_sharing(conn, registry, [view], others)
    registry.invalidate()


def rebuild_sharing(conn: apsw.Connection, registry: Registry, rebuilt: list[View], others: dict[str, View]) -> None:
    """Rebuild `others`, views whose base table's capture was rebuilt (their progress in the old
    delta log means nothing any more), and the views over them and over `rebuilt` (they read
    storage that changed without a ΔV), upstream first. One that cannot be rebuilt (its columns
    would change, its SELECT no longer compiles) is refused on read until its own REFRESH."""
    downstream = registry.downstream_order([*rebuilt, *others.values()])
    order = registry.upstream_first([*others.values(), *(v for v in downstream if fold(v.name) not in others)])
    for other in order:
        try:
            with savepoint(conn):
                _rebuild(conn, registry, other)
        except ENVIRONMENT_ERRORS:
            raise
        except (Error, apsw.Error) as exc:
            reason = str(exc) if isinstance(exc, Error) else f"materialized view {other.name}: {describe(exc)}"
            catalog.update_plan(conn, other.name, replace(other.entry.plan, needs_refresh=reason))


def _shown(columns: tuple[OutputColumn, ...]) -> list[tuple[str, str, str]]:
    """What readers of a view's columns see: names, affinities, collations. Names are folded: a
    view made before names followed SQLite's spelling (`ACCT` for `L.ACCT` over `acct`) keeps its
    names when rebuilt."""
    return [(fold(c.name), affinity(c.decltype), c.collation) for c in columns]


def _renamed_apart(old: tuple[OutputColumn, ...], new: tuple[OutputColumn, ...]) -> bool:
    """Whether `new` differs from `old` only in the names of columns that share a name (`id`,
    `id:1`, as SQLite's CREATE VIEW names them; a view made before matview did so keeps its names)."""
    if [shown[1:] for shown in _shown(old)] != [shown[1:] for shown in _shown(new)]:
        return False
    stems = [fold(re.sub(r":\d+$", "", c.name)) for c in new]
    return all(fold(a.name) == fold(b.name) or stems.count(stem) > 1 for a, b, stem in zip(old, new, stems))


def rebuild_view(conn: apsw.Connection, registry: Registry, name: str, populate: Populate | None = None) -> None:
    """Empty a view's table and state and fill them again (`populate`, or `_populate`), its
    capture left as it is: for a caller that reloaded a base table itself."""
    view = registry.get(name)
    if view is None:
        raise Error(f"no such materialized view: {name}")
    with savepoint(conn):
        _rebuild(conn, registry, view, populate)
    registry.invalidate()


def _rebuild(conn: apsw.Connection, registry: Registry, view: View, populate: Populate | None = None) -> None:
    # its internal nodes exist: their names are what the view's SELECT reads
    entry = view.entry
    plan = with_indexes(
        conn,
        _compile_with_nodes(
            conn,
            registry,
            view.name,
            entry.sql,
            entry.maintenance,
            entry.plan.auto_indexes,
            create_nodes=False,
            # (recomputed whole, or incremental, as it was made; never whole under recompute = 'never')
            whole=not entry.plan.recompute_never,
            whole_reason=(entry.plan.whole_reason or "recomputed whole") if entry.plan.whole else None,
            cheaper_whole=False,
        ),
    )
    # indexes it made before exist (no term scans now): still its own, dropped with it
    plan = replace(
        plan,
        indexes=tuple(dict.fromkeys((*view.entry.plan.indexes, *plan.indexes))),
        recompute_never=view.entry.plan.recompute_never,
    )
    old = view.entry.plan.columns
    # (whole recompute's account of a `COLLATE` in the select list is less precise than the
    # incremental engine's, which a view switched to whole recompute keeps: names and types count)
    loose = plan.whole and [c[:2] for c in _shown(plan.columns)] == [c[:2] for c in _shown(old)]
    if _shown(plan.columns) == _shown(old) or _renamed_apart(old, plan.columns) or loose:
        # the view table stays: its columns keep the types they were created with
        plan = replace(plan, columns=view.entry.plan.columns)
    elif not is_node(view.name):
        before = ", ".join(f"{c.name} {c.decltype}".strip() for c in view.entry.plan.columns)
        after = ", ".join(f"{c.name} {c.decltype}".strip() for c in plan.columns)
        raise Error(
            f"materialized view {view.name}: its columns would change after its base table was altered "
            f"(from {before} to {after}); DROP and CREATE it again"
        )
    # (an internal node's columns may change — a `SELECT DISTINCT *` over the altered table —: no
    # user reads them but its view, rebuilt after it: its table is made again with them)
    table = view.table if plan.columns == view.entry.plan.columns else ViewTable(view.name, plan.columns)
    # the plain view stock clients read: re-made, in case a client that bypasses matview dropped it
    readable.create_plain_view(conn, view.name, plan)
    # a damaged file may have lost them: REFRESH rebuilds the view from its SELECT either way
    create_state_tables(conn, view.name, if_missing=True)
    _view_table_as_made(conn, table, plan)
    conn.execute(f"DELETE FROM {table.table}")
    clear_state_tables(conn, view.name)
    catalog.update_plan(conn, view.name, plan)
    registry.evaluator.forget(view.name)
    entry = ViewEntry(view.name, view.entry.sql, plan, view.entry.maintenance, view.entry.base_tables)
    rebuilt = View(entry, Circuit(view.name, plan, registry.evaluator), table)
    marker = fallback.populate_checked(conn, rebuilt, populate or _populate, True)
    if marker is not None:  # a result only SQLite's scan order decides: recomputed whole from now on
        fallback.heal(conn, rebuilt, marker)


def _drop_view_tables(conn: apsw.Connection, name: str) -> None:
    """Drop the tables matview keeps for view `name` (its rows, its state, its kept rows)."""
    for table_name in (
        names.view_table(name),
        names.state_table(name),
        names.ordered_state_table(name),
        names.kept_rows_table(name),
    ):
        with own_ddl(conn):
            conn.execute(f"DROP TABLE IF EXISTS main.{quote(table_name)}")


def _view_table_as_made(conn: apsw.Connection, table: ViewTable, plan: Plan) -> None:
    """The view's table with the columns of `plan`: made again when another client dropped,
    renamed or altered it (a damaged file), or a node's columns changed (its rows are
    recomputed next)."""
    made = table.stored_as_made(conn, plan.columns)
    if made:
        return
    with own_ddl(conn):
        if made is not None:
            conn.execute(f"DROP TABLE main.{table.table}")
        for index in (names.view_key_index(table.view), names.heavy_index(table.view)):  # (gone with a renamed table)
            conn.execute(f"DROP INDEX IF EXISTS main.{quote(index)}")
    table.create(conn)


def _check_syntax(conn: apsw.Connection, sql: str) -> None:
    """Raise `Error` for a SELECT SQLite cannot parse; names are not looked up (preparing a
    CREATE VIEW parses its SELECT only; EXPLAIN runs nothing)."""
    try:
        conn.execute(f"EXPLAIN CREATE TEMP VIEW {quote(names.PREFIX + 'syntax')} AS {sql}", can_cache=False).fetchall()
    except apsw.SQLError as exc:
        raise Error(f"invalid view definition: {exc}") from None
