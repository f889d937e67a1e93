"""DROP and ALTER of the tables materialized views read: which statements matview refuses.

A base table's change capture and every view over it depend on its columns, so dropping or
altering it under a view would leave the view unmaintainable. `ALTER TABLE … ADD COLUMN`
is allowed (the API rebuilds the capture and the views in the same transaction); any other
DROP/ALTER of a base table is refused, naming the views to drop first.
"""

from __future__ import annotations

import apsw

from matview.errors import Error
from matview.names import fold, is_internal, is_node
from matview.registry import Registry, View
from matview.storage.ddl_guard import aliases_main
from matview_ext import statements


def target(conn: apsw.Connection, registry: Registry, sql: str) -> str | None:
    """The main-schema table a DROP/ALTER names (None: none, or the user's temp table,
    which an unqualified name means first, as SQLite resolves it)."""
    return _main_target(conn, registry, statements.table_ddl_target(sql))


def _main_target(conn: apsw.Connection, registry: Registry, named: tuple[str | None, str] | None) -> str | None:
    """`target` of a statement's (schema, name)."""
    if named is None:
        return None
    schema, name = named
    if (registry.get(name) is not None or fold(name) in registry.damaged) and schema in (None, "main", "temp"):
        return name  # (a materialized view's temp shadow is matview's too)
    if schema is not None:
        # (temp's, or an attached database's — but for main's own file attached again)
        return name if schema == "main" or aliases_main(conn, schema) else None
    temp = conn.execute(
        "SELECT 1 FROM temp.sqlite_master WHERE type IN ('table', 'view') AND name = ? COLLATE NOCASE", (name,)
    ).fetchone()
    return None if temp else name


def dependents(conn: apsw.Connection, registry: Registry, sql: str) -> list[View]:
    """The views (internal nodes included) over the table a DROP/ALTER names."""
    name = target(conn, registry, sql)
    return [] if name is None else registry.views_on(name)


def refuse(conn: apsw.Connection, registry: Registry, sql: str) -> None:
    """Raise `Error` for a DROP/ALTER of a materialized view's own objects or of a table
    views read, naming them."""
    named = statements.table_ddl_target(sql)
    dropped = statements.dropped_index_or_trigger(sql) or (named[1] if named and named[0] in (None, "main") else None)
    kind = (
        conn.execute("SELECT type FROM main.sqlite_master WHERE name = ? COLLATE NOCASE", (dropped,)).fetchone()
        if dropped is not None and is_internal(dropped)
        else None
    )
    if kind is not None and kind[0] in ("table", "index", "trigger"):  # (a user's view of such a name is theirs)
        raise Error(_own(dropped))  # type: ignore[arg-type]
    name = _main_target(conn, registry, named)
    reason = None if name is None else _standing_on(registry.sync(), registry, name)
    if reason is not None:
        raise Error(reason)


def refusal(registry: Registry, action: int, name: str) -> str | None:
    """Why the DDL guard (`storage.ddl_guard`) refuses an action on main's object `name`
    (None: it does not). It may not run SQL, so it reads the views the registry holds."""
    if is_internal(name) and action != apsw.SQLITE_DROP_VIEW:  # (a user's view of such a name is theirs)
        return _own(name)
    return _standing_on(registry.views, registry, name)


def _own(name: str) -> str:
    # (a view's key index, a capture trigger: writes of its tables would fail, or go unseen)
    return f"{name} is matview's own: DROP MATERIALIZED VIEW the views that use it"


def _standing_on(views: dict[str, View], registry: Registry, name: str) -> str | None:
    """Why `name` (a table or view in main) may not be dropped or altered: a materialized
    view (`views`, or one whose catalog entry is damaged), or a table views read (None: neither)."""
    lowered = fold(name)
    if lowered in views or lowered in registry.damaged:
        # its plain view in main and its temp shadow are matview's to drop, together
        return f"{name} is a materialized view: use DROP MATERIALIZED VIEW"
    readers = [v.name for v in views.values() if lowered in (fold(t) for t in v.entry.base_tables)]
    readers += [d.name for d in registry.damaged.values() if lowered in (fold(t) for t in d.base_tables)]
    if not readers:
        return None
    # (a view's internal nodes go with it: the user named only the views)
    shown = [name for name in readers if not is_node(name)] or readers
    return (
        f"table {name} is used by materialized view(s) {', '.join(shown)}: "
        "DROP MATERIALIZED VIEW them first (ALTER TABLE … ADD COLUMN is maintained)"
    )
