"""The views of one connection's database, compiled and ready to run.

The catalog in the file is the source of truth; the registry caches what it says
(plans, circuits, view tables) and reloads whenever the file's schema changes
(another connection created or dropped a view, a base table was altered) or this
connection rolled back. It also keeps this connection's temp shadows (see
`matview.storage.readable`) in step with the catalog, at statement boundaries only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import apsw

from matview import fallback, upstream
from matview.circuit import Circuit
from matview.db import scalar
from matview.errors import SchemaChanged
from matview.evaluator import Evaluator
from matview.names import fold, is_node
from matview.operators.whole import replanned_otherwise
from matview.plan import OutputColumn
from matview.storage import catalog, readable
from matview.storage.catalog import ViewEntry
from matview.storage.scan_order import variant_order_problem
from matview.storage.viewstore import ViewTable
from matview.view_health import view_problem
from matview.zset import ZSet


@dataclass
class View:
    entry: ViewEntry
    circuit: Circuit
    table: ViewTable
    broken: str | None = None  # why the view can no longer be maintained (its schema)
    stalled: str | None = None  # why this connection cannot fold it now; its deltas stay pending
    #: a fold that raised: the pending ranges it failed on (new changes make the next fold retry)
    stalled_on: tuple[tuple[str, int, int], ...] | None = None
    #: a result only SQLite's scan order decides (`fallback.HEALED`) that a fold met: in this
    #: internal node, or (on the user's view) in one of its nodes, so that the view is to be
    #: recomputed whole (`owner_heal.recompute_whole_instead`)
    tied: bytes | None = None

    @property
    def name(self) -> str:
        return self.entry.name

    def check(self) -> None:
        if self.broken:
            raise SchemaChanged(self.broken)


class Registry:
    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn
        self.evaluator = Evaluator()
        self.views: dict[str, View] = {}
        #: views whose catalog entry is damaged: read as errors until REFRESH or DROP
        self.damaged: dict[str, catalog.DamagedEntry] = {}
        self._schema_version: int | None = None
        self.collected: dict[str, int] = {}  # per base table: delta seq of the last garbage collection
        self._shadowed: tuple[int, int] | None = None  # (main, temp) schema versions the shadows match
        self._replans_waiting = False  # a plan check of a view over views waits for the shadows
        self._functions: frozenset[str] | None = None
        self._dependents: dict[str, list[View]] | None = None  # per view (folded name): the views reading it
        #: some view is broken by how SQLite now reads its tables (another client's CREATE INDEX or
        #: ANALYZE), which a write transaction can repair (`replan.keep_views_readable`)
        self.replan_due = False
        self._linked: bool | None = None  # whether some view of the file reads another
        self._groups: dict[tuple[str, ...], list[list[str]]] = {}  # `fold_groups` of a list of views, by name
        #: per view: the last pending ΔV a reader computed, and what it depended on (see `fold`)
        self.pending_deltas: dict[str, tuple[Any, ZSet[bytes]]] = {}
        #: how many times a reader's computation wrote the temp ΔV tables (`pending_read.pending_view_delta`):
        #: a fold of views over views that sees it change puts its own ΔVs back
        self.reader_delta_writes = 0
        #: base tables whose delta log or preimage table is gone while their triggers stay (a
        #: damaged file): SQLite fails every write of them until `rebuild.repair_capture`
        self.lost_capture: dict[str, str] = {}

    def functions_changed(self) -> None:
        """A SQL function was registered: views that waited for it may fold again."""
        self._functions = None
        self.invalidate()

    def _missing_functions(self, entry: ViewEntry) -> str | None:
        if not entry.plan.functions:
            return None
        if self._functions is None:
            rows = self.conn.execute("SELECT name FROM pragma_function_list")
            self._functions = frozenset(str(name).lower() for (name,) in rows)
        missing = [f for f in entry.plan.functions if f not in self._functions]
        if not missing:
            return None
        calls = ", ".join(f"{f}()" for f in missing)
        return (
            f"materialized view {entry.name} uses {calls}, which this connection has not registered: "
            "call create_scalar_function(name, function, deterministic=True) on it first"
        )

    def invalidate(self) -> None:
        self._schema_version = None
        self._shadowed = None
        self.pending_deltas = {}

    @property
    def schema_version(self) -> int | None:
        """main's schema version the views were loaded at (None: unknown, `sync` reloads)."""
        return self._schema_version

    def sync(self) -> dict[str, View]:
        """Reload the catalog if the schema changed since the last look."""
        # The table-valued form checks main's schema cookie as a statement on main does, so
        # SQLite re-reads a schema another connection changed here, at the top level. Inside
        # a virtual-table callback (a read of a temp shadow, which touches only temp) it
        # could not: every statement on main would fail with SQLITE_SCHEMA.
        version = scalar(self.conn, "SELECT schema_version FROM main.pragma_schema_version")
        if version != self._schema_version:
            self._schema_version = None
            self._load(version)
        return self.views

    def sync_shadows(self) -> dict[str, View]:
        """`sync`, then create the temp shadow of every view that lacks one and drop those of
        views that are gone. DDL run from inside a virtual-table callback would change the
        schema under the statement being prepared, so this runs only before the connection
        prepares a statement, never from the module. Temp DDL
        changes only temp's schema version, so the shadows are checked again only when
        either version moved (another connection's CREATE/DROP, a rollback that took
        shadows with it), never in a loop."""
        views = self.sync()
        if self._shadowed is not None and self._shadowed[0] == self._schema_version:
            # Temp is this connection's alone: its shadows change only through matview (which
            # changes main's version too) or a rollback (which invalidates): no check needed.
            return views
        # (the table-valued pragma reads main's version whatever its qualifier: temp's needs PRAGMA)
        versions = (self._schema_version or 0, int(scalar(self.conn, "PRAGMA temp.schema_version")))
        if versions != self._shadowed:
            complete = readable.reconcile(
                self.conn,
                [(v.name, v.entry.plan, self.reading(v)) for v in views.values()],
                [(d.name, d.reason) for d in self.damaged.values()],
            )
            for view in views.values():
                if self.dependents_of(view):  # where a reader of its dependents puts its ΔV
                    upstream.ensure_delta_table(self.conn, view.name, view.entry.plan.columns, check_width=True)
            after = int(scalar(self.conn, "PRAGMA temp.schema_version"))
            self._shadowed = (versions[0], after) if complete else None
            if complete and self._replans_waiting:
                self._replans_waiting = False
                self._check_views_read(views)
        return views

    def shadows_current(self) -> bool:
        """Whether this connection's TEMP shadows are those of the views loaded (as of the last
        look at the schema: no look here)."""
        return self._shadowed is not None and self._shadowed[0] == self._schema_version

    def _load(self, version: int) -> None:
        entries, self.damaged = catalog.load_catalog(self.conn)
        views: dict[str, View] = {}
        self.lost_capture = {}
        self.replan_due = False
        for key, entry in entries.items():
            old = self.views.get(key)
            if old is not None and old.entry.sql == entry.sql and old.entry.plan == entry.plan:
                old.entry = entry
                old.broken = None
                old.tied = None  # (a heal it asked for is done, or was rolled back)
                view = old
            else:
                self.evaluator.forget(entry.name)
                view = View(
                    entry, Circuit(entry.name, entry.plan, self.evaluator), ViewTable(entry.name, entry.plan.columns)
                )
            view.broken = view_problem(self.conn, entry, self.lost_capture)
            damaged_upstream = next((u for u in entry.plan.upstream_views if fold(u) in self.damaged), None)
            if damaged_upstream is not None:
                # (an internal node is the view's own: its REFRESH makes both again)
                repaired = entry.name if is_node(damaged_upstream) else damaged_upstream
                view.broken = (
                    f"materialized view {entry.name} reads {damaged_upstream}, whose catalog entry is damaged: "
                    f"REFRESH MATERIALIZED VIEW {repaired}"
                )
            view.stalled = self._missing_functions(entry)
            view.table.read_constraints(self.conn)
            if not view.broken and view.circuit.first_rows:
                problem = variant_order_problem(self.conn, entry.plan, entry.sql)
                view.broken = None if problem is None else f"materialized view {entry.name}: {problem}"
            if view.broken and fallback.repairable_order_problem(self.conn, view) is not None:
                self.replan_due = True
            views[key] = view
        self.views = views
        self._dependents = None
        self._linked = None
        self._groups = {}
        self.pending_deltas = {}
        # (loaded: a view recomputed whole that reads a materialized view runs its SELECT below, whose
        # read of that view asks this registry again)
        self._schema_version = version
        try:
            self._check_views_read(views)
        except BaseException:
            self._schema_version = None
            raise

    def _check_views_read(self, views: dict[str, View]) -> None:
        """Upstream first: a view recomputed whole that SQLite now plans otherwise, and a view
        over a view that cannot be maintained, are broken."""
        for view in self.fold_order(list(views.values())):
            # a view over a view that cannot be maintained cannot be either
            for read in self.upstreams_of(view):
                if read is None or read.entry.plan.columns != self._upstream_columns(view, read.name):
                    view.broken = view.broken or (
                        f"materialized view {view.name}: a materialized view it reads was dropped or created "
                        "again with other columns; DROP it and CREATE it again"
                    )
                elif read.broken or read.stalled:
                    view.broken = view.broken or self._as_own(view, read, read.broken)
                    view.stalled = view.stalled or self._as_own(view, read, read.stalled)
            if view.entry.plan.whole and view.entry.plan.upstreams and not self.shadows_current():
                # (its SELECT reads views through this connection's TEMP shadows, which `sync_shadows`
                # has yet to make: a TEMP object of the user's could stand in their place)
                self._replans_waiting = True
                continue
            plan = view.entry.plan
            if (
                not view.broken
                and not view.stalled
                and (plan.whole or plan.value_reaches)
                and self._replanned(view.entry)
            ):
                self.replan_due = True
                view.broken = (
                    f"materialized view {view.name}: SQLite now plans its SELECT otherwise (an index was created "
                    "or dropped, or ANALYZE ran), and so decides its ties (or a subquery's value) otherwise: "
                    f"REFRESH MATERIALIZED VIEW {view.name}"
                )

    def _replanned(self, entry: ViewEntry) -> bool:
        """A view recomputed whole whose SELECT SQLite now plans otherwise, with other rows (or an
        incremental one whose subquery value did move so), and nothing pending: its stored rows
        are what a read shows (with changes pending, a read computes them under the new plan)."""
        pairs = [(entry.name, table) for table in entry.base_tables]
        try:
            if scalar(self.conn, f"SELECT {readable.pending_sql(pairs)}"):
                return False
        except apsw.Error:
            return False  # (a capture gone: the view's own checks say so)
        return replanned_otherwise(self.conn, entry.name, entry.plan)

    @staticmethod
    def _as_own(view: View, read: View, reason: str | None) -> str | None:
        """An internal node's trouble is its view's: said in the name the user knows."""
        if reason is None or not is_node(read.name):
            return reason
        return reason.replace(f"materialized view {read.name}", f"materialized view {view.name}")

    @staticmethod
    def _upstream_columns(view: View, name: str) -> tuple[OutputColumn, ...]:
        return next(u.columns for u in view.entry.plan.upstreams if fold(u.name) == fold(name))

    # -- views over views ---------------------------------------------------------------
    def upstreams_of(self, view: View) -> list[View | None]:
        """The materialized views `view` reads (None for one that is gone)."""
        return [self.views.get(fold(name)) for name in view.entry.plan.upstream_views]

    def dependents_of(self, view: View) -> list[View]:
        """The materialized views that read `view`."""
        if self._dependents is None:  # (the graph changes only when the catalog is reloaded)
            self._dependents = {}
            for other in self.views.values():
                for name in other.entry.plan.upstream_views:
                    self._dependents.setdefault(fold(name), []).append(other)
        return self._dependents.get(fold(view.name), [])

    def fold_groups(self, views: list[View]) -> list[list[View]]:
        """`views` with every view connected to them through views over views, in groups that
        fold together (a downstream view's input is its upstream's ΔV of the same fold), each
        upstream first."""
        if self._linked is None:
            self._linked = any(v.entry.plan.upstream_views for v in self.views.values())
        if not self._linked and all(self.views.get(fold(v.name)) is v for v in views):
            return [[view] for view in views]  # no view of the file reads another: each alone
        if not any(v.entry.plan.upstream_views or self.dependents_of(v) for v in views):
            return [[view] for view in views]  # no view over a view among them: each alone
        wanted = tuple(fold(v.name) for v in views)
        known = self._groups.get(wanted)
        if known is None:
            known = self._groups[wanted] = [[fold(v.name) for v in group] for group in self._fold_groups(views)]
        return [[self.views[name] for name in group] for group in known]

    def _fold_groups(self, views: list[View]) -> list[list[View]]:
        groups: list[list[View]] = []
        seen: set[str] = set()
        for start in views:
            if fold(start.name) in seen:
                continue
            group: dict[str, View] = {}
            todo = [start]
            while todo:
                view = todo.pop()
                if fold(view.name) in group:
                    continue
                group[fold(view.name)] = view
                todo += [u for u in self.upstreams_of(view) if u is not None]
                todo += self.dependents_of(view)
            seen.update(group)
            groups.append(self.upstream_first(list(group.values())))
        return groups

    def fold_order(self, views: list[View]) -> list[View]:
        return [view for group in self.fold_groups(views) for view in group]

    def downstream_order(self, views: list[View]) -> list[View]:
        """The views that read `views`, directly or not, upstream first."""
        found: dict[str, View] = {}
        todo = [d for v in views for d in self.dependents_of(v)]
        while todo:
            current = todo.pop()
            if fold(current.name) not in found:
                found[fold(current.name)] = current
                todo += self.dependents_of(current)
        return self.upstream_first(list(found.values()))

    def own_nodes(self, view: View) -> list[View]:
        """The internal nodes of a view, theirs too, upstream first."""
        found: list[View] = []
        for name in view.entry.plan.internal_nodes:
            node = self.get(name)
            if node is not None:
                found += [*self.own_nodes(node), node]
        return found

    def owner_of(self, node: View) -> View | None:
        """The user's view an internal node is part of (through the nodes that own it)."""
        current: View | None = node
        while current is not None and is_node(current.name):
            name = fold(current.name)
            current = next((v for v in self.views.values() if name in map(fold, v.entry.plan.internal_nodes)), None)
        return current

    def upstream_order(self, view: View) -> list[View]:
        """The views `view` reads, directly or not, upstream first; then `view`."""
        found: dict[str, View] = {}
        todo = [view]
        while todo:
            current = todo.pop()
            if fold(current.name) not in found:
                found[fold(current.name)] = current
                todo += [u for u in self.upstreams_of(current) if u is not None]
        return self.upstream_first(list(found.values()))

    def progress_pairs(self, view: View) -> list[tuple[str, str]] | None:
        """The (view, base table) pairs a read of `view` merges pending deltas of (those of the
        views it reads too, as `pending_read.pending_view_delta`), or None when it cannot be read as it
        is stored (broken, or reading a view that is gone)."""
        order = self.upstream_order(view)
        if any(v.broken for v in order) or any(u is None for v in order for u in self.upstreams_of(v)):
            return None
        return [(v.name, table) for v in order for table in v.entry.base_tables]

    def reading(self, view: View) -> readable.Reading | None:
        """What `view`'s shadow view is made for (`readable.Reading`), or None when it cannot
        be read as it is stored."""
        pairs = self.progress_pairs(view)
        return None if pairs is None or self._schema_version is None else (pairs, self._schema_version)

    def upstream_first(self, views: list[View]) -> list[View]:
        """`views` ordered so that each comes after the views it reads."""
        among = {fold(v.name) for v in views}
        placed: dict[str, View] = {}
        visiting: set[str] = set()

        def place(view: View) -> None:
            key = fold(view.name)
            if key in placed or key in visiting:  # (a cycle only a damaged catalog could hold)
                return
            visiting.add(key)
            for read in self.upstreams_of(view):
                if read is not None and fold(read.name) in among:
                    place(read)
            placed[key] = view

        for view in views:
            place(view)
        return list(placed.values())

    def get(self, name: str) -> View | None:
        return self.sync().get(fold(name))

    def views_on(self, table: str) -> list[View]:
        lowered = fold(table)
        return [v for v in self.sync().values() if lowered in (fold(t) for t in v.entry.base_tables)]
