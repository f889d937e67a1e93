"""The Datasette plugin: materialized views in Datasette, matview's internals out of sight.

Registered by the ``datasette`` entry point (``pip install 'matview[datasette]'``), so
``datasette shop.db`` picks it up. It

* hides matview's internal tables (``__dbsp_*``) as Datasette hides FTS shadow tables (under
  "hidden tables"), denies the table page of internal nodes (hidden materialized views, which
  Datasette would list as views), and leaves matview's own indexes out of table definitions
  (Datasette shows no triggers);
* adds the page ``/-/matview`` (and ``/-/matview.json``): every materialized view of every
  database with its SELECT, maintenance mode, columns and pending changes, linked from the
  menu and each database's actions;
* shows a materialized view's page as its ``CREATE MATERIALIZED VIEW`` statement rather than
  the plain view over its stored rows. The rows themselves are Datasette's own view page: the
  file holds each view as a plain SQL view (`matview.storage.readable`), as of the last fold.

It reads the file with Datasette's own ``sqlite3`` connections and never imports the engine.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from datasette import hookimpl
from datasette.utils.asgi import Response

from matview_ext.datasette_plugin.catalog import (
    NODE_PREFIX,
    PREFIX,
    FileCatalog,
    MaterializedView,
    is_internal,
    read_catalog,
    table_definition,
)

PAGE = "/-/matview"


@hookimpl
def get_metadata(datasette: Any, key: str, database: str | None, table: str | None) -> dict[str, Any]:
    # Datasette hides every table whose name starts with the name of a hidden table (that
    # is how an FTS table hides its shadow tables), so one entry named after the prefix
    # hides all of matview's tables, including those created while the server runs.
    hidden = {"tables": {PREFIX: {"hidden": True}}}
    return {"databases": {name: hidden for name in datasette.databases}}


@hookimpl
def permission_allowed(datasette: Any, actor: Any, action: str, resource: Any) -> bool | None:
    # Internal nodes are plain SQL views in the file; Datasette has no hidden views, so their
    # pages are refused (their rows stay reachable through SQL, as every table's are).
    is_table = action == "view-table" and isinstance(resource, tuple) and len(resource) == 2
    if is_table and str(resource[1]).lower().startswith(NODE_PREFIX):
        return False
    return None


async def _catalog(datasette: Any, database: str) -> FileCatalog:
    db = datasette.get_database(database)
    catalog: FileCatalog = await db.execute_fn(read_catalog)
    return catalog


async def _visible_catalogs(datasette: Any, actor: Any) -> list[tuple[str, FileCatalog]]:
    """(database, catalog) of each database the actor may see that holds materialized views,
    with the views the actor may see."""
    found = []
    for name in list(datasette.databases):
        if name == "_internal":
            continue
        visible, _ = await datasette.check_visibility(actor, permissions=[("view-database", name), "view-instance"])
        if not visible:
            continue
        catalog = await _catalog(datasette, name)
        if not catalog.format_version:
            continue
        views = []
        for view in catalog.views:
            visible, _ = await datasette.check_visibility(
                actor, permissions=[("view-table", (name, view.name)), ("view-database", name), "view-instance"]
            )
            if visible:
                views.append(view)
        found.append((name, dataclasses.replace(catalog, views=views)))
    return found


def _view_json(view: MaterializedView) -> dict[str, Any]:
    return dataclasses.asdict(view)


async def matview_page(datasette: Any, request: Any) -> Response:
    """The page listing every materialized view (``/-/matview``), or its JSON (``.json``)."""
    catalogs = await _visible_catalogs(datasette, request.actor)
    if request.url_vars.get("format") == "json":
        return Response.json(
            {
                "databases": [
                    {
                        "database": name,
                        "format_version": catalog.format_version,
                        "readable": catalog.readable,
                        "views": [_view_json(v) for v in catalog.views],
                    }
                    for name, catalog in catalogs
                ]
            }
        )
    html = await datasette.render_template(
        "matview.html", {"catalogs": catalogs, "page": PAGE}, request=request, view_name="matview"
    )
    return Response.html(html)


@hookimpl
def register_routes(datasette: Any) -> list[tuple[str, Callable[..., Awaitable[Response]]]]:
    return [(r"^/-/matview(\.(?P<format>json))?$", matview_page)]


@hookimpl
def menu_links(datasette: Any, actor: Any, request: Any) -> Callable[[], Awaitable[list[dict[str, str]]]]:
    async def links() -> list[dict[str, str]]:
        if await _visible_catalogs(datasette, actor):
            return [{"href": datasette.urls.path(PAGE), "label": "Materialized views"}]
        return []

    return links


@hookimpl
def database_actions(
    datasette: Any, actor: Any, database: str, request: Any
) -> Callable[[], Awaitable[list[dict[str, str]]]]:
    async def links() -> list[dict[str, str]]:
        if (await _catalog(datasette, database)).format_version:
            href = datasette.urls.path(f"{PAGE}#{database}")
            return [{"href": href, "label": "Materialized views in this database"}]
        return []

    return links


def _definition(view: MaterializedView) -> str:
    pending = "unknown (a base table changed: REFRESH it with matview)" if view.pending is None else view.pending
    return (
        f"-- materialized view, maintained by matview ({view.maintenance}); rows as of the last fold;\n"
        f"-- changes pending: {pending}\n"
        f"CREATE MATERIALIZED VIEW {_quote_if_needed(view.name)}"
        + (" WITH (maintenance = 'deferred')" if view.maintenance == "deferred" else "")
        + f" AS\n{view.sql};"
    )


def _description(view: MaterializedView) -> str:
    if view.pending is None:
        state = "a base table was changed by another client: REFRESH the view with matview"
    elif view.pending:
        state = f"{view.pending:,} changes pending (matview flush folds them)"
    else:
        state = "nothing pending: exact"
    return f"Materialized view maintained by matview ({view.maintenance}): rows as of the last fold; {state}."


def _described(datasette: Any, database: str, table: str, view: MaterializedView) -> dict[str, Any]:
    """The page's metadata as Datasette builds it, with a description of the view when the
    user's metadata gives none."""
    metadata = dict(datasette.table_metadata(database, table))
    datasette.update_with_inherited_metadata(metadata)
    if not metadata.get("description") and not metadata.get("description_html"):
        metadata["description"] = _description(view)
    return metadata


def _quote_if_needed(name: str) -> str:
    return name if name.isidentifier() and name.isascii() else '"' + name.replace('"', '""') + '"'


@hookimpl
def extra_template_vars(
    template: str, database: str | None, table: str | None, datasette: Any
) -> Callable[[], Awaitable[dict[str, Any]]] | None:
    # On a table page, the definition shown becomes the materialized view's own statement
    # (for a view) or the table's without matview's indexes (for a base table).
    if template != "table.html" or database is None or table is None or is_internal(table):
        return None

    async def definitions() -> dict[str, Any]:
        catalog = await _catalog(datasette, database)
        if not catalog.format_version:
            return {}
        for view in catalog.views:
            if view.name.lower() == table.lower():
                return {"view_definition": _definition(view), "metadata": _described(datasette, database, table, view)}
        db = datasette.get_database(database)
        definition = await db.execute_fn(lambda conn: table_definition(conn, table))
        return {"table_definition": definition} if definition is not None else {}

    return definitions
