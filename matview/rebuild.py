"""REFRESH and the rebuilds it shares: a view recomputed from scratch, and with it the views
whose base table's change capture was rebuilt (their progress in the old delta log means
nothing any more) or whose storage changed without a ΔV (the views over a rebuilt one).

Each runs inside a savepoint; a view that cannot be rebuilt (its columns would change, its
SELECT no longer compiles) is refused on read until its own REFRESH and blocks no other.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

import apsw

from matview import fallback, names
from matview.circuit import Circuit
from matview.compile_view import compile_with_nodes
from matview.db import ENVIRONMENT_ERRORS, describe, savepoint
from matview.errors import Error
from matview.names import fold, is_node, quote
from matview.operators.whole import replanned_otherwise
from matview.plan import OutputColumn, Plan
from matview.registry import Registry, View
from matview.snapshot import Populate, populate_snapshot
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
from matview.storage.indexes import with_indexes
from matview.storage.schema import affinity, read_table
from matview.storage.state import clear_state_tables, create_state_tables
from matview.storage.viewstore import ViewTable
from matview.view_health import plain_view_change


def recompute_replanned(conn: apsw.Connection, registry: Registry, tables: Sequence[str]) -> None:
    """matview's own join-key indexes, made or dropped for another view, can change how SQLite
    plans a view recomputed whole over the same tables, and so which tied rows its SELECT keeps
    (`whole.replanned_otherwise`), or a subquery value an incremental view reaches rows by (the
    first of tied 5 and 5.0, a REAL sum's rounding): such a view is recomputed here, in the same transaction,
    rather than left to read as broken until a REFRESH the user never asked for; the views
    over it are rebuilt with it (they read storage that changed without a ΔV)."""
    rebuilt: dict[str, View] = {}
    for table in dict.fromkeys(tables):
        for view in registry.views_on(table):
            plan = view.entry.plan
            if fold(view.name) in rebuilt or not (plan.whole or plan.value_reaches):
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
    """Empty a view's table and state and fill them again (`populate`, or `populate_snapshot`), its
    capture left as it is: for a caller that reloaded a base table itself."""
    view = registry.get(name)
    if view is None:
        raise Error(f"no such materialized view: {name}")
    with savepoint(conn):
        _rebuild(conn, registry, view, populate)
    registry.invalidate()


def _rebuild(conn: apsw.Connection, registry: Registry, view: View, populate: Populate | None = None) -> None:
    changed = plain_view_change(conn, view.name, view.entry.plan)
    if changed is not None:  # (compiled again, it would read the new definition's tables, uncaptured)
        raise Error(changed)
    # its internal nodes exist: their names are what the view's SELECT reads
    entry = view.entry
    plan = with_indexes(
        conn,
        compile_with_nodes(
            conn,
            registry,
            view.name,
            entry.sql,
            entry.maintenance,
            entry.plan.auto_indexes,
            None,  # (its nodes are there)
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
    marker = fallback.populate_checked(conn, rebuilt, populate or populate_snapshot, True)
    if marker is not None:  # a result only SQLite's scan order decides: recomputed whole from now on
        fallback.heal(conn, rebuilt, marker)


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
