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
from typing import NoReturn

import apsw
from sqlglot.tokens import TokenType

from matview import names
from matview.errors import CatalogError
from matview.keys import BUILTIN_COLLATIONS
from matview.names import fold, quote
from matview.operators.accumulators import VARIANT_DEPENDENT, result_error_markers_sql
from matview.plan import OutputColumn, Plan
from matview.sql.sqltext import depth_walk, splice, tokenize
from matview.storage.capture import missing_tables
from matview.storage.ddl_guard import own_ddl
from matview.storage.schema import affinity


def _no_affinity(column: OutputColumn, ref: str) -> str:
    """The stored column `ref` with the affinity the SELECT's column has. An expression (not a
    column, not a CAST) has none, which the stored column (BLOB affinity) would give it:
    compared with a TEXT column, 2 must equal '2' as in the SELECT; a unary + takes the
    affinity away and changes no value. A CAST's column is stored untyped (`storage_type`)
    and has its type's affinity: casting a cast value again changes nothing."""
    if column.is_cast and not column.is_column and column.decltype:
        return f"CAST({ref} AS {affinity(column.decltype)})"  # (a CAST converts by its type's affinity)
    # (a column SQLite types BLOB — a set operation whose arms conflict — has BLOB affinity, as
    # the untyped stored column has)
    return ref if column.is_column or column.is_cast or column.decltype.upper() == "BLOB" else f"+{ref}"


def index_columns(rest: str, plan: Plan) -> str:
    """A user's `CREATE INDEX … ON v (columns…) [WHERE …]` text for the view table: a column
    that views read as `+column` (`_no_affinity`) is indexed as that expression, which SQLite
    matches in a lookup through the view (an index on the bare column would serve none)."""
    plain = {fold(c.name) for c in plan.columns if c.is_column or c.is_cast}
    tokens = tokenize(rest)
    depths = depth_walk(tokens)
    replacements = []
    for index, (token, depth) in enumerate(zip(tokens, depths)):
        starts_term = index > 0 and tokens[index - 1].kind in (TokenType.L_PAREN, TokenType.COMMA)
        if depth == 1 and starts_term and token.is_name and fold(token.text) not in plain:
            following = tokens[index + 1].kind if index + 1 < len(tokens) else None
            if following in (TokenType.COMMA, TokenType.R_PAREN, TokenType.COLLATE, TokenType.ASC, TokenType.DESC):
                replacements.append((token.start, token.end, f"(+{quote(token.text)})"))
    return splice(rest, replacements)


def _column(column: OutputColumn, can_overflow: bool) -> str:
    ref = f"{quote('__dbsp_s')}.{quote(column.name)}"
    if can_overflow:
        # A result that is an error (an integer SUM out of range, an order-dependent sum) is
        # stored as a marker blob; a stock reader gets SQLite's own "integer overflow" error
        # from abs(-2**63) instead of a wrong value. The argument
        # depends on the row, so no SQLite version evaluates it outside the CASE.
        error = f"abs(-9223372036854775807 - 1 + ({ref} IS NULL))"
        ref = f"CASE WHEN {ref} IN ({result_error_markers_sql()}) THEN {error} ELSE {ref} END"
    ref = _no_affinity(column, ref)  # (outside the CASE, which has no affinity: a CAST's stays)
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
    weight_one, heavy_rows = "", ""  # (what each arm's WHERE adds)
    if variant_prone(plan):
        # a row whose spelling SQLite would pick by scan order holds the VARIANT_DEPENDENT marker
        # in every column: a stock reader gets SQLite's "integer overflow" instead of the blob
        first = f"{source}.{quote(plan.columns[0].name)}"
        overflow = "-9223372036854775807 - 1"
        check = f"abs(CASE WHEN {first} IS X'{VARIANT_DEPENDENT.hex()}' THEN {overflow} ELSE 0 END) >= 0"
        weight_one, heavy_rows = f" AND {check}", f" WHERE {check}"
    heavy = (
        f"WITH RECURSIVE {numbers}({row_id}, {left}) AS ("
        f"SELECT {row_id}, {weight} FROM {table} WHERE {weight} > 1 "
        f"UNION ALL SELECT {row_id}, {left} - 1 FROM {numbers} WHERE {left} > 1) "
        f"SELECT {row_id} FROM {numbers}"
    )
    return (
        f"CREATE VIEW main.{quote(view)} AS "
        f"SELECT {select} FROM {table} AS {source} WHERE {weight} = 1{weight_one} "
        f"UNION ALL SELECT {select} FROM {table} AS {source} "
        f"JOIN ({heavy}) AS {repeat} ON {source}.{row_id} = {repeat}.{row_id}{heavy_rows}"
    )


def variant_prone(plan: Plan) -> bool:
    """Whether a view's rows may hold `VARIANT_DEPENDENT` (a GROUP BY or DISTINCT class whose
    shown spelling SQLite picks by a scan order matview does not know) in every column."""
    return (plan.distinct and not plan.exact_distinct) or (plan.kind == "aggregate" and not plan.exact_groups)


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
    with own_ddl(conn):
        if kind == "view":
            conn.execute(f"DROP VIEW main.{quote(view)}")
        elif kind == "table" and is_matview_vtable(sql):
            conn.execute(f"DROP TABLE main.{quote(view)}")


# -- temp shadows ------------------------------------------------------------------------

#: SQL function raising a view's stored result error (see `shadow_view_sql`)
RESULT_ERROR_FUNCTION = "__dbsp_result_error"
#: the pending-rows table's column telling a row to show from a key that only hides a stored row
KEEP = "__dbsp_keep"
#: its hidden column SQLite passes whether anything is pending for the view (`pending_sql`)
ANY_PENDING = "__dbsp_any_pending"
#: … and whether some stored row has a weight > 1 (those rows come through it too)
ANY_HEAVY = "__dbsp_any_heavy"
#: … and the schema version of main (the registry need not ask for it again)
SCHEMA_VERSION = "__dbsp_schema_version"
#: where a shadow view's SELECT begins (SQLite keeps comments in the text it stores)
_BODY_MARK = "/* matview shadow */ "
_PENDING_PREFIX = names.pending_rows("")
_ALL_ROWS_PREFIX = names.all_rows("")


def direct_read(plan: Plan) -> bool:
    """Whether a temp view over the stored table reads exactly as the view: every column
    compares as the view's does there (its declared type is the stored column's, so the
    affinity is the same, and it is BINARY)."""
    internal = {names.KEY.lower(), KEEP, ANY_PENDING, ANY_HEAVY, SCHEMA_VERSION}  # (the pending table's own)
    if variant_prone(plan):
        return False  # (a row may be the VARIANT_DEPENDENT marker, which the virtual table raises)
    if plan.kind == "aggregate" and plan.aggs and all(source == "group" for source, _ in plan.outputs):
        # its aggregates are read by HAVING only: a group's error is stored in its GROUP BY
        # columns (`Aggregate.emit`), which the virtual table checks and a plain read would not
        return False
    return all(
        c.storage_type == c.decltype and c.collation.upper() == "BINARY" and c.name.lower() not in internal
        for c in plan.columns
    )


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _shadow_column(view: str, column: OutputColumn, can_overflow: bool) -> str:
    ref = _no_affinity(column, f"{quote('__dbsp_s')}.{quote(column.name)}")
    if can_overflow:
        # a stored result error raises matview's own message, only when the column is read
        # (the CASE has no affinity: `direct_read` admits it only where the column has none)
        ref = (
            f"CASE WHEN {ref} IN ({result_error_markers_sql()}) "
            f"THEN {RESULT_ERROR_FUNCTION}({_literal(view)}, {ref}) ELSE {ref} END"
        )
    return f"{ref} AS {quote(column.name)}"


#: (view, base table) pairs whose pending delta rows a view's read merges (`pending_read.pending_view_delta`
#: reads those of the view and of every view it reads)
ProgressPairs = Sequence[tuple[str, str]]


def pending_sql(pairs: ProgressPairs) -> str:
    """SQL true when some pair has delta rows past its progress mark (as `fold.pending_ranges`)."""
    seq = quote(names.SEQ)
    tests = [
        f"coalesce((SELECT max({seq}) FROM main.{quote(names.delta_table(table))}), 0) > coalesce((SELECT seq FROM "
        f"main.{quote(names.PROGRESS)} WHERE view = {_literal(view)} AND base_table = {_literal(table)}), 0)"
        for view, table in pairs
    ]
    return "(" + (" OR ".join(tests) or "0") + ")"


#: what a shadow view is made for: the view's `ProgressPairs` and main's schema version (the
#: virtual table is asked to check the view only once main's schema has changed since)
Reading = tuple[ProgressPairs, int]


def shadow_view_sql(view: str, plan: Plan, reading: Reading) -> str:
    """CREATE VIEW temp.<view>, the exact read of a view whose columns `direct_read` admits.
    First what the virtual table temp.<names.pending_rows(view)> gives
    (`matview_ext.vtable.PendingTable`: the rows of the keys pending changes touch, merged,
    and the stored rows of weight > 1; it checks that the view can be read, before any row,
    and reads nothing more when SQLite tells it nothing is pending and no weight is > 1);
    then the stored rows of weight 1 whose key no pending change touches, read by SQLite
    itself: its indexes serve constraints, and the keys are looked up only when something
    is pending."""
    table = f"main.{quote(names.view_table(view))}"
    pending = f"temp.{quote(names.pending_rows(view))}"
    weight, key = quote(names.WEIGHT), quote(names.KEY)
    source = quote("__dbsp_s")
    select = ", ".join(_shadow_column(view, c, plan.kind == "aggregate" and not c.is_column) for c in plan.columns)
    pairs, schema_version = reading
    any_pending = pending_sql(pairs)
    schema = "(SELECT schema_version FROM main.pragma_schema_version)"
    any_heavy = f"EXISTS (SELECT 1 FROM {table} WHERE {weight} > 1)"
    rows = quote("__dbsp_p")
    merged = ", ".join(f"{_no_affinity(c, f'{rows}.{quote(c.name)}')} AS {quote(c.name)}" for c in plan.columns)
    return (
        f"CREATE VIEW temp.{quote(view)} AS {_BODY_MARK}"
        f"SELECT {merged} FROM (SELECT 1 AS {quote('__dbsp_one')} WHERE {any_pending} OR {any_heavy} "
        f"OR {schema} <> {int(schema_version)} LIMIT 1) AS {quote('__dbsp_g')} CROSS JOIN {pending} AS {rows} "
        f"WHERE {rows}.{quote(KEEP)} AND {rows}.{quote(ANY_PENDING)} = {any_pending} "
        f"AND {rows}.{quote(ANY_HEAVY)} = {any_heavy} AND {rows}.{quote(SCHEMA_VERSION)} = {schema} "
        f"UNION ALL SELECT {select} FROM {table} AS {source} WHERE {weight} = 1 "
        f"AND (NOT {any_pending} OR {source}.{key} NOT IN (SELECT {key} FROM {pending}))"
    )


def is_shadow(sql: str) -> bool:
    """True for the CREATE statement of a temp object matview makes: a virtual table of
    module matview (a shadow, or the pending rows of one) or a shadow view."""
    return is_matview_vtable(sql) or (
        sql[:11].upper() == "CREATE VIEW"
        and (
            f"temp.{quote(_PENDING_PREFIX)[:-1]}" in sql
            or f"temp.{quote(_ALL_ROWS_PREFIX)[:-1]}" in sql
            or f"{_BODY_MARK}{_DAMAGED_MARK}" in sql
        )
    )


#: the SQL function a damaged view's shadow calls: it raises the reason (`damaged_shadow_sql`)
DAMAGED_FUNCTION = "__dbsp_damaged"
_DAMAGED_MARK = "/* damaged */ "


def damaged(reason: str) -> NoReturn:
    """SQL function: a read of a view whose catalog entry is damaged raises why."""
    raise CatalogError(f"{reason}; REFRESH MATERIALIZED VIEW it (or DROP it)")


def damaged_shadow_sql(conn: apsw.Connection, view: str, reason: str) -> str:
    """The temp shadow of a view whose catalog entry is damaged: its stored table's columns
    (so that a statement naming them prepares), and a WHERE SQLite evaluates once before any
    row, which raises — the stored rows are as of some fold, never to be read as current."""
    table = names.view_table(view)
    source = "(SELECT NULL)" if missing_tables(conn, [table]) else f"main.{quote(table)}"
    literal = "'" + reason.replace("'", "''") + "'"
    return (
        f"CREATE VIEW temp.{quote(view)} AS {_BODY_MARK}{_DAMAGED_MARK}SELECT * FROM {source} "
        f"WHERE {DAMAGED_FUNCTION}({literal})"
    )


def foreign_temp_objects(conn: apsw.Connection, views: Sequence[str]) -> list[str]:
    """The names among `views` whose TEMP object is not matview's shadow: a user's TEMP table or
    view of that name, which a statement reading the view would read instead."""
    found = []
    for view in views:
        row = conn.execute(
            "SELECT sql FROM temp.sqlite_master WHERE name = ? COLLATE NOCASE AND type IN ('table', 'view')", (view,)
        ).fetchone()
        if row is not None and not is_shadow(str(row[0] or "")):
            found.append(view)
    return found


def _view_of(name: str) -> str:
    """The view a temp shadow object named `name` belongs to."""
    for prefix in (_PENDING_PREFIX, _ALL_ROWS_PREFIX):
        if fold(name).startswith(fold(prefix)):
            return name[len(prefix) :]
    return name


def _no_affinity_columns(plan: Plan) -> bool:
    """Whether a column of the view has no affinity in SQLite (an expression: `count(*)`, `a + 1`),
    which a virtual table's column cannot have — one declared without a type has BLOB affinity,
    which compares `1` and a TEXT column's `'1'` as different where SQLite converts."""
    return any(c.no_affinity for c in plan.columns)


def all_rows_view_sql(view: str, plan: Plan) -> str:
    """CREATE VIEW temp.<view> over the virtual table of all its rows, each expression column
    read as `+column` (no affinity, as in the SELECT)."""
    columns = ", ".join(f"{'+' if c.no_affinity else ''}{quote(c.name)} AS {quote(c.name)}" for c in plan.columns)
    return f"CREATE VIEW temp.{quote(view)} AS {_BODY_MARK}SELECT {columns} FROM temp.{quote(names.all_rows(view))}"


def _up_to_date(view: str, plan: Plan, reading: Reading | None, objects: dict[str, tuple[str, str]]) -> bool:
    """Whether `objects` are the shadow `create_shadow` would make now. (SQLite connects the
    virtual tables again, with the view's columns of the moment, when the schema changes; a
    shadow view's text must be compared: the view may have been created again with other
    columns by another connection.)"""
    have = {(fold(name), kind) for name, (kind, _sql) in objects.items()}
    if reading is None and _no_affinity_columns(plan):
        if have != {(fold(view), "view"), (fold(names.all_rows(view)), "table")}:
            return False
        text = next(sql for kind, sql in objects.values() if kind == "view")
        return text.endswith(all_rows_view_sql(view, plan).split(f" {_BODY_MARK}", 1)[1])
    if reading is None:
        return have == {(fold(view), "table")}
    if have != {(fold(view), "view"), (fold(names.pending_rows(view)), "table")}:
        return False
    text = next(sql for kind, sql in objects.values() if kind == "view")
    return text.endswith(shadow_view_sql(view, plan, reading).split(f" {_BODY_MARK}", 1)[1])


def shadows(conn: apsw.Connection) -> dict[str, dict[str, tuple[str, str]]]:
    """This connection's temp shadow objects, by the lower-cased name of their view:
    {name: (type, sql)}."""
    found: dict[str, dict[str, tuple[str, str]]] = {}
    for kind, name, sql in conn.execute(
        "SELECT type, name, sql FROM temp.sqlite_master WHERE type IN ('table', 'view')"
    ):
        if is_shadow(str(sql or "")):
            found.setdefault(fold(_view_of(str(name))), {})[str(name)] = (str(kind), str(sql))
    return found


def create_shadow(conn: apsw.Connection, view: str, plan: Plan, reading: Reading | None) -> None:
    """The temp shadow of `view`: a shadow view over its stored table made for `reading`,
    or, with None (columns `direct_read` refuses, or a view that cannot be read as it is
    stored), a virtual table that reads it all."""
    if reading is not None and direct_read(plan):
        conn.execute(f"CREATE VIRTUAL TABLE temp.{quote(names.pending_rows(view))} USING matview")
        conn.execute(shadow_view_sql(view, plan, reading))
    elif _no_affinity_columns(plan):
        conn.execute(f"CREATE VIRTUAL TABLE temp.{quote(names.all_rows(view))} USING matview")
        conn.execute(all_rows_view_sql(view, plan))
    else:
        conn.execute(f"CREATE VIRTUAL TABLE temp.{quote(view)} USING matview")


def _drop(conn: apsw.Connection, objects: dict[str, tuple[str, str]]) -> None:
    for name, (kind, _sql) in sorted(objects.items(), key=lambda item: item[1][0] != "view"):  # the view first
        conn.execute(f"DROP {'VIEW' if kind == 'view' else 'TABLE'} temp.{quote(name)}")


def drop_shadow(conn: apsw.Connection, view: str) -> None:
    _drop(conn, shadows(conn).get(fold(view), {}))


def reconcile(
    conn: apsw.Connection, views: Sequence[tuple[str, Plan, Reading | None]], damaged_views: Sequence[tuple[str, str]]
) -> bool:
    """Make this connection's temp shadows exactly those of `views`, and of the views whose
    catalog entry is damaged (`damaged_views`: name, reason). False when some
    could not be made right now (a cursor still reads a shadow being dropped): try again
    later. A temp object of the user's own that already has a view's name is left alone; it
    hides the view on this connection as any temp object hides a main one."""
    complete = True
    wanted = {fold(name): (name, plan, reading if direct_read(plan) else None) for name, plan, reading in views}
    damaged_keys = {fold(name) for name, _reason in damaged_views}
    for key, objects in shadows(conn).items():
        kinds = [kind for kind, _sql in objects.values()]
        if key in damaged_keys and kinds == ["view"] and _DAMAGED_MARK in next(iter(objects.values()))[1]:
            continue  # (a damaged view's shadow stays)
        if key not in wanted or not _up_to_date(key, wanted[key][1], wanted[key][2], objects):
            try:
                _drop(conn, objects)
            except (apsw.LockedError, apsw.BusyError, apsw.ReadOnlyError):  # (query_only: later)
                complete = False
    taken = {fold(str(r[0])) for r in conn.execute("SELECT name FROM temp.sqlite_master")}
    for key, (name, plan, reading) in wanted.items():
        if key not in taken and names.pending_rows(key) not in taken and names.all_rows(key) not in taken:
            try:
                create_shadow(conn, name, plan, reading)
            except (apsw.LockedError, apsw.BusyError, apsw.ReadOnlyError):  # (query_only: later)
                complete = False
    for name, reason in damaged_views:
        if fold(name) not in taken:
            try:
                conn.execute(damaged_shadow_sql(conn, name, reason))
            except (apsw.LockedError, apsw.BusyError, apsw.ReadOnlyError):  # (query_only: later)
                complete = False
    return complete
