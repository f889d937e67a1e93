"""Creating and dropping materialized views (REFRESH: `matview.rebuild`).

Each runs inside a savepoint: on any error nothing of the view is left behind and the
database is as it was. Creating a view compiles its SELECT (`compile_view`, which makes its
internal nodes through `create_view`), takes its snapshot (`snapshot`) and rebuilds the views
sharing a base table whose change capture it had to rebuild (`rebuild.rebuild_sharing`).
"""

from __future__ import annotations

from dataclasses import replace

import apsw

from matview import fallback, names, upstream
from matview.circuit import Circuit
from matview.compile_view import RefusedOnceCompiled, compile_with_nodes
from matview.db import savepoint
from matview.errors import CatalogError, Error, UnsupportedQuery
from matview.fold import fold_pending_deltas
from matview.names import NODE_PREFIX, fold, quote
from matview.rebuild import rebuild_sharing, recompute_replanned
from matview.registry import Registry, View
from matview.snapshot import Populate, populate_snapshot
from matview.storage import catalog, readable
from matview.storage.capture import (
    capture_installed,
    capture_is_stale,
    captured_tables,
    install_capture,
    remove_capture,
)
from matview.storage.catalog import DamagedEntry, ViewEntry
from matview.storage.ddl_guard import own_ddl
from matview.storage.indexes import drop_unused as drop_unused_indexes
from matview.storage.indexes import refuse_group_concat_through_own_index, with_indexes
from matview.storage.scan_order import variant_order_problem
from matview.storage.schema import read_table
from matview.storage.state import create_state_tables
from matview.storage.viewstore import ViewTable

MAINTENANCE_MODES = ("immediate", "deferred")


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
            compiled = compile_with_nodes(
                conn,
                registry,
                name,
                sql,
                maintenance,
                auto_indexes,
                lambda node, node_sql: create_view(
                    conn, registry, node, node_sql, maintenance, auto_indexes=auto_indexes, internal=True
                ),
                whole=whole,
                whole_reason=whole_reason,
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
                raise RefusedOnceCompiled(str(refusal)) from None
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
                    raise RefusedOnceCompiled(problem)
            try:
                # (compiled whole again on a marker: its internal nodes go with this savepoint)
                marker = fallback.populate_checked(
                    conn, view, populate or populate_snapshot, whole, compiled_again=True
                )
            except UnicodeDecodeError as exc:  # (SQLite keeps any bytes as TEXT; Python reads UTF-8 only)
                raise Error(
                    f"materialized view {name}: a text value its SELECT reads is not valid UTF-8 ({exc.reason}); "
                    "fix or remove that row, then CREATE the view"
                ) from None
            if marker is not None:  # a result only SQLite's scan order decides: recomputed whole instead
                raise RefusedOnceCompiled(fallback.HEALED[marker])
            registry.invalidate()
            readable.create_plain_view(conn, name, plan)
            readable.drop_shadow(conn, name)
            readable.create_shadow(conn, name, plan, None)  # (the next statement makes it a shadow view)
            rebuild_sharing(conn, registry, [], sharing)
            if plan.indexes:
                recompute_replanned(conn, registry, plan.base_tables)
    except RefusedOnceCompiled as refusal:
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


def _fold_upstreams(conn: apsw.Connection, registry: Registry, upstreams: list[View]) -> None:
    for view in upstreams:
        view.check()
        if view.stalled:
            raise Error(view.stalled)
    fold_pending_deltas(conn, registry, upstreams)
    for view in upstreams:
        if view.stalled:
            raise Error(view.stalled)


def drop_view(
    conn: apsw.Connection, registry: Registry, name: str, if_exists: bool = False, remade: bool = False
) -> None:
    """DROP MATERIALIZED VIEW (`remade`: for a REFRESH that makes it again, views reading it kept)."""
    view = registry.get(name)
    damaged = registry.damaged.get(fold(name))
    if view is None and damaged is not None:
        drop_damaged_view(conn, registry, damaged, remade)
        return
    if view is None:
        kind = _existing_object(conn, name)
        if kind is not None:
            raise Error(f"{name} is a {kind}, not a materialized view")
        if if_exists:
            return
        raise Error(f"no such materialized view: {name}")
    dependents = registry.dependents_of(view)
    if dependents and not remade:
        raise Error(
            f"materialized view {view.name} is read by materialized view(s) "
            f"{', '.join(v.name for v in dependents)}: DROP MATERIALIZED VIEW them first"
        )
    with savepoint(conn):
        _drop_view_objects(conn, registry, view.name)
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


def drop_damaged_view(conn: apsw.Connection, registry: Registry, damaged: DamagedEntry, remade: bool = False) -> None:
    """DROP of a view whose catalog entry is damaged (`catalog.DamagedEntry`): its objects, found
    by name; its internal nodes no other view lists; and the change capture of the tables no
    view reads now (its own are unknown). Refused while views read it, but for its REFRESH (`remade`)."""
    readers = [v.name for v in registry.sync().values() if fold(damaged.name) in map(fold, v.entry.plan.upstream_views)]
    if readers and not remade:
        raise Error(
            f"materialized view {damaged.name} is read by materialized view(s) {', '.join(readers)}: "
            "DROP MATERIALIZED VIEW them first (or REFRESH it)"
        )
    with savepoint(conn):
        _drop_view_objects(conn, registry, damaged.name)
        own = fold(f"{NODE_PREFIX}{damaged.name}_")
        while True:  # (a node may read another: the reader first)
            views = registry.sync()
            listed = {fold(n) for v in views.values() for n in v.entry.plan.internal_nodes}
            orphans = [v for key, v in views.items() if key.startswith(own) and key not in listed]
            unread = [v for v in orphans if not registry.dependents_of(v)]
            if not unread:
                break
            drop_view(conn, registry, unread[0].name)
        read = {fold(t) for v in registry.sync().values() for t in v.entry.base_tables}
        for table in captured_tables(conn):
            if fold(table) not in read:
                remove_capture(conn, table)
    registry.invalidate()


def refresh_damaged_view(conn: apsw.Connection, registry: Registry, damaged: DamagedEntry) -> None:
    """REFRESH of a view whose catalog entry is damaged: made again from its SELECT (with the
    default options: those its plan kept are lost)."""
    if damaged.sql is None:
        raise CatalogError(f"{damaged.reason}; its SELECT is lost too: DROP MATERIALIZED VIEW {quote(damaged.name)}")
    maintenance = damaged.maintenance if damaged.maintenance in MAINTENANCE_MODES else "immediate"
    _remake(conn, registry, damaged.name, damaged.sql, maintenance, "auto", True)


def remake_view(conn: apsw.Connection, registry: Registry, view: View) -> None:
    """REFRESH of a view one of whose internal nodes' catalog entry is damaged (a rebuild reads
    its nodes as they are): dropped, nodes and all, and made again from its SELECT."""
    plan = view.entry.plan
    recompute = "never" if plan.recompute_never else "auto"
    _remake(conn, registry, view.name, view.entry.sql, view.entry.maintenance, recompute, plan.auto_indexes)


def _remake(
    conn: apsw.Connection, registry: Registry, name: str, sql: str, maintenance: str, recompute: str, auto_indexes: bool
) -> None:
    """DROP and CREATE in one savepoint; the views over it are rebuilt (they read storage
    that changed without a ΔV)."""
    with savepoint(conn):
        drop_view(conn, registry, name, remade=True)
        create_view(conn, registry, name, sql, maintenance, auto_indexes=auto_indexes, recompute=recompute)
        made = registry.get(name)
        if made is not None and registry.dependents_of(made):
            upstream.ensure_delta_table(conn, made.name, made.entry.plan.columns)
            rebuild_sharing(conn, registry, [made], {})
    registry.invalidate()


def _drop_view_objects(conn: apsw.Connection, registry: Registry, name: str) -> None:
    """Drop view `name`'s own objects, by name: its shadows, plain view, tables, catalog row."""
    registry.evaluator.forget(name)
    readable.drop_shadow(conn, name)
    conn.execute(f"DROP TABLE IF EXISTS temp.{quote(names.view_delta_table(name))}")
    readable.drop_plain_view(conn, name)
    _drop_view_tables(conn, name)
    catalog.delete_view(conn, name)
    registry.invalidate()


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


def _check_syntax(conn: apsw.Connection, sql: str) -> None:
    """Raise `Error` for a SELECT SQLite cannot parse; names are not looked up (preparing a
    CREATE VIEW parses its SELECT only; EXPLAIN runs nothing)."""
    try:
        conn.execute(f"EXPLAIN CREATE TEMP VIEW {quote(names.PREFIX + 'syntax')} AS {sql}", can_cache=False).fetchall()
    except apsw.SQLError as exc:
        raise Error(f"invalid view definition: {exc}") from None
