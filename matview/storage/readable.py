"""How a view is read: a plain SQL view in the file, shadowed by a TEMP virtual table.

The file holds ``main.<v>``, an ordinary SQL view over the stored Z-set
``__dbsp_view_<v>`` that repeats each row `weight` times. Any client reads it without
loading anything (stock ``sqlite3``, Datasette, sqlite-utils): it is exact whenever no
change is pending, and "as of the last fold" otherwise.

A matview connection shadows it with ``temp.<v>``, a virtual table of module
``matview``: unqualified names resolve in ``temp`` first, so ``SELECT … FROM v`` on a
matview connection goes through the exact read path that merges pending changes. Temp
objects are per connection, so every connection makes its own shadows, including for
views other connections create later (see `Registry.sync_shadows`).

The weight expansion uses only SQL every SQLite since 3.8.3 knows (a recursive common
table expression), never ``generate_series``. Rows of weight 1, nearly all of them, come
from one plain scan; heavier rows are found through a partial index on the weight (empty
while every weight is 1), so reading the view costs about what scanning the table does.
"""

from __future__ import annotations

from collections.abc import Sequence

import apsw

from matview import names
from matview.keys import BUILTIN_COLLATIONS
from matview.names import quote
from matview.operators.accumulators import result_error_markers_sql
from matview.plan import OutputColumn, Plan


def _column(column: OutputColumn, can_overflow: bool) -> str:
    ref = f"{quote('__dbsp_s')}.{quote(column.name)}"
    if can_overflow:
        # A result that is an error (an integer SUM out of range, an order-dependent sum) is
        # stored as a marker blob; a stock reader gets SQLite's own "integer overflow" error
        # from abs(-2**63) instead of a wrong value. The argument
        # depends on the row, so no SQLite version evaluates it outside the CASE.
        error = f"abs(-9223372036854775807 - 1 + ({ref} IS NULL))"
        ref = f"CASE WHEN {ref} IN ({result_error_markers_sql()}) THEN {error} ELSE {ref} END"
    if column.collation.upper() in BUILTIN_COLLATIONS and column.collation.upper() != "BINARY":
        ref = f"{ref} COLLATE {column.collation.upper()}"
    return f"{ref} AS {quote(column.name)}"


def plain_view_sql(view: str, plan: Plan) -> str:
    """CREATE VIEW main.<view>: the stored rows, each repeated `weight` times, named and
    collated as the view's columns."""
    table = quote(names.view_table(view))
    row_id, weight = quote(names.ROW_ID), quote(names.WEIGHT)
    source, repeat, left = quote("__dbsp_s"), quote("__dbsp_r"), quote("__dbsp_left")
    numbers = quote("__dbsp_n")
    select = ", ".join(_column(c, plan.kind == "aggregate" and not c.is_column) for c in plan.columns)
    heavy = (
        f"WITH RECURSIVE {numbers}({row_id}, {left}) AS ("
        f"SELECT {row_id}, {weight} FROM {table} WHERE {weight} > 1 "
        f"UNION ALL SELECT {row_id}, {left} - 1 FROM {numbers} WHERE {left} > 1) "
        f"SELECT {row_id} FROM {numbers}"
    )
    return (
        f"CREATE VIEW main.{quote(view)} AS "
        f"SELECT {select} FROM {table} AS {source} WHERE {weight} = 1 "
        f"UNION ALL SELECT {select} FROM {table} AS {source} "
        f"JOIN ({heavy}) AS {repeat} ON {source}.{row_id} = {repeat}.{row_id}"
    )


def create_heavy_index(conn: apsw.Connection, view: str) -> None:
    """The partial index that finds rows of weight > 1 without a second full scan."""
    conn.execute(
        f"CREATE INDEX IF NOT EXISTS main.{quote(names.heavy_index(view))} "
        f"ON {quote(names.view_table(view))} ({quote(names.WEIGHT)}) WHERE {quote(names.WEIGHT)} > 1"
    )


def main_object(conn: apsw.Connection, name: str) -> tuple[str, str] | None:
    """(type, sql) of the object called `name` in main, if any."""
    row = conn.execute("SELECT type, sql FROM main.sqlite_master WHERE name = ? COLLATE NOCASE", (name,)).fetchone()
    return None if row is None else (str(row[0]), str(row[1] or ""))


def is_matview_vtable(sql: str) -> bool:
    """True for the CREATE statement of a virtual table of module matview."""
    words = sql.split()
    return (
        len(words) >= 2
        and [w.upper() for w in words[:2]] == ["CREATE", "VIRTUAL"]
        and (words[-1].strip("\"'`[]").lower() == "matview" and words[-2].upper() == "USING")
    )


def create_plain_view(conn: apsw.Connection, view: str, plan: Plan) -> None:
    """Create (or re-create) main.<view>; replaces a catalog format 1 virtual table."""
    drop_plain_view(conn, view)
    conn.execute(plain_view_sql(view, plan))


def drop_plain_view(conn: apsw.Connection, view: str) -> None:
    """Drop main.<view>: the plain view, or the virtual table catalog format 1 kept there
    (the module is registered on a matview connection, so SQLite can destroy it)."""
    found = main_object(conn, view)
    if found is None:
        return
    kind, sql = found
    if kind == "view":
        conn.execute(f"DROP VIEW main.{quote(view)}")
    elif kind == "table" and is_matview_vtable(sql):
        conn.execute(f"DROP TABLE main.{quote(view)}")


# -- temp shadows ------------------------------------------------------------------------


def shadows(conn: apsw.Connection) -> dict[str, str]:
    """This connection's temp virtual tables of module matview, by lower-cased name."""
    found: dict[str, str] = {}
    for name, sql in conn.execute("SELECT name, sql FROM temp.sqlite_master WHERE type = 'table'"):
        if is_matview_vtable(str(sql or "")):
            found[str(name).lower()] = str(name)
    return found


def create_shadow(conn: apsw.Connection, view: str) -> None:
    conn.execute(f"CREATE VIRTUAL TABLE temp.{quote(view)} USING matview")


def drop_shadow(conn: apsw.Connection, view: str) -> None:
    if view.lower() in shadows(conn):
        conn.execute(f"DROP TABLE temp.{quote(view)}")


def reconcile(conn: apsw.Connection, views: Sequence[str]) -> bool:
    """Make this connection's temp shadows exactly `views`. False when some could not be
    made right now (a cursor still reads a shadow being dropped): try again later. A temp
    object of the user's own that already has a view's name is left alone; it hides the view
    on this connection as any temp object hides a main one."""
    complete = True
    have = shadows(conn)
    wanted = {v.lower(): v for v in views}
    for key, name in have.items():
        if key not in wanted:
            try:
                conn.execute(f"DROP TABLE temp.{quote(name)}")
            except (apsw.LockedError, apsw.BusyError):
                complete = False
    taken = {str(r[0]).lower() for r in conn.execute("SELECT name FROM temp.sqlite_master")}
    for key, name in wanted.items():
        if key not in taken:
            try:
                create_shadow(conn, name)
            except (apsw.LockedError, apsw.BusyError):
                complete = False
    return complete
