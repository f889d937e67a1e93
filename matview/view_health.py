"""Whether a view can be read and folded now: the checks a registry makes of each view at
every change of the file's schema (its own tables, matview's indexes, its catalog row, its
base tables and their change capture, the plain views it reads)."""

from __future__ import annotations

import apsw

from matview import names
from matview.errors import UnsupportedQuery
from matview.names import fold, kept_rows_table, ordered_state_table, quote, state_table, view_table
from matview.plan import Plan
from matview.storage import catalog
from matview.storage.capture import (
    capture_installed,
    capture_is_stale,
    missing_capture_tables,
    missing_tables,
    recollated_keys,
    unprobed_key,
)
from matview.storage.catalog import ViewEntry
from matview.storage.scan_order import concat_order_problem
from matview.storage.schema import lost_rowid_guard, read_table, view_sql
from matview.storage.viewstore import ViewTable


def plain_view_change(conn: apsw.Connection, name: str, plan: Plan) -> str | None:
    """Why view `name` cannot go on, when a plain view its SELECT reads (inlined, or run as
    written) was dropped or redefined since CREATE: its tables and their change capture are
    those of the old definition, so neither a read nor a REFRESH can follow the new one."""
    for view_name, text in plan.plain_views:
        now = view_sql(conn, view_name)
        if now != text:
            change = "dropped" if now is None else "redefined"
            return (
                f"materialized view {name}: the view {view_name} it reads was {change}; "
                "DROP the materialized view and CREATE it again"
            )
    return None


def view_problem(conn: apsw.Connection, entry: ViewEntry, lost_capture: dict[str, str]) -> str | None:
    """Why the view `entry` cannot be read or folded now (None: it can): a REFRESH it waits for,
    its tables or matview's index gone, its catalog row at odds with its table, a base table
    dropped, altered or given a key its capture does not follow. A base table whose change log is
    gone is added to `lost_capture` (a write of it re-creates the log: `rebuild.repair_capture`)."""
    if entry.plan.needs_refresh:
        return entry.plan.needs_refresh
    tables = [view_table(entry.name), state_table(entry.name), ordered_state_table(entry.name)]
    if entry.plan.root_recompute:
        tables.append(kept_rows_table(entry.name))
    gone = missing_tables(conn, tables)
    lost = lost_rowid_guard(conn, entry.plan.indexes)
    if lost:
        return (
            f"materialized view {entry.name}: matview's index {lost} is gone, which kept the rowids of "
            f"table {names.guarded_table(lost)} (a table without a PRIMARY KEY, whose rows the "
            f"view knows by rowid) across VACUUM; REFRESH MATERIALIZED VIEW {entry.name} rebuilds the view"
        )
    if gone == [kept_rows_table(entry.name)] and catalog.file_version(conn) < 3:
        return (
            f"materialized view {entry.name}: the file was written by an older matview and this connection "
            "cannot upgrade it (read-only, or busy): open it once with a writable matview connection"
        )
    if gone:
        return (
            f"materialized view {entry.name}: its table(s) {', '.join(gone)} are missing (a damaged file); "
            "REFRESH MATERIALIZED VIEW re-creates them"
        )
    if not ViewTable(entry.name, entry.plan.columns).stored_as_made(conn, entry.plan.columns):
        return (
            f"materialized view {entry.name}: its catalog row does not match its table {tables[0]} "
            "(a damaged file); REFRESH MATERIALIZED VIEW rebuilds it"
        )
    damaged = conn.execute(
        f"SELECT base_table FROM main.{quote(names.PROGRESS)} WHERE view = ? AND typeof(seq) <> 'integer'",
        (entry.name,),
    ).fetchone()
    if damaged is not None:
        return (
            f"materialized view {entry.name}: its progress mark for table {damaged[0]} is not a number (a damaged "
            "file); REFRESH MATERIALIZED VIEW rebuilds it"
        )
    problem = concat_order_problem(conn, entry.plan, entry.sql)
    if problem is not None:
        return f"materialized view {entry.name}: {problem}"
    changed = plain_view_change(conn, entry.name, entry.plan)
    if changed is not None:
        return changed
    for table in entry.plan.base_tables:  # (those of an upstream view: validated with it)
        try:
            info = read_table(conn, table)
        except UnsupportedQuery as exc:  # (there, but no longer readable: an index on an expression)
            return (
                f"materialized view {entry.name}: its base table {table} changed: {exc}; DROP the view, or "
                f"undo that change and REFRESH MATERIALIZED VIEW {quote(entry.name)}"
            )
        except Exception:
            return f"materialized view {entry.name}: its base table {table} was dropped; DROP the view"
        if tuple(tuple(c) for c in info.signature) != entry.plan.signature(table):
            return (
                f"materialized view {entry.name}: its base table {table} was altered; "
                "REFRESH MATERIALIZED VIEW or DROP it"
            )
        if not capture_installed(conn, table):
            return (
                f"materialized view {entry.name}: its base table {table} was dropped and created again "
                "(its change capture is gone); REFRESH MATERIALIZED VIEW or DROP it"
            )
        unprobed = unprobed_key(conn, info)
        if unprobed is not None:
            return (
                f"materialized view {entry.name}: another connection made a UNIQUE key ({', '.join(unprobed)}) "
                f"on its base table {table} after matview's change capture, which does not see a row INSERT "
                "OR REPLACE deletes through it (one may have been missed); REFRESH MATERIALIZED VIEW "
                f"{quote(entry.name)} rebuilds the capture and the views of the table"
            )
        if recollated_keys(info) and capture_is_stale(conn, info):
            return (
                f"materialized view {entry.name}: the change capture of its base table {table} was made by an "
                "older matview, which compared a unique key's columns as the columns collate, not as the key "
                "does (INSERT OR REPLACE could be missed); REFRESH MATERIALIZED VIEW rebuilds it"
            )
        gone = missing_capture_tables(conn, table)
        if gone:
            lost_capture[fold(table)] = table
            return (
                f"materialized view {entry.name}: the change log(s) {', '.join(gone)} of its base table {table} "
                "are missing (a damaged file: changes not yet folded are lost); REFRESH MATERIALIZED VIEW "
                "re-creates them and rebuilds every view of the table"
            )
    for table in entry.base_tables:  # (those read through upstream views too: the catalog's own list)
        if table not in entry.plan.base_tables and not capture_installed(conn, table):
            return (
                f"materialized view {entry.name}: the base table {table} it reads through another view or a "
                "subquery has no change capture (dropped and created again, or renamed, by another "
                "connection); REFRESH MATERIALIZED VIEW or DROP it"
            )
    return None
