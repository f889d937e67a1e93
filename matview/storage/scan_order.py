"""The order SQLite meets a group's rows in — GROUP_CONCAT's order, which of a class's
variants it shows, and which row bare columns beside MIN/MAX come from — and whether matview
keeps it.

SQLite's `group_concat` joins a group's values in the order its plan visits the rows. matview
keeps each group's values by rowid (`accumulators`: GROUP_CONCAT needs an INTEGER PRIMARY KEY),
which is SQLite's order when it scans the table forwards (or an index on just the GROUP BY
columns, whose entries for one group follow the rowid). An index with other columns — a user's
`CREATE INDEX ON tracks(album, name)`, made before the view or after — makes SQLite visit a
group's rows in that index's order, and an `ORDER BY … DESC` may make it scan backwards: neither
is kept, so such a view is refused at CREATE, and a view whose file gained such an index later
reads as broken, naming it (never a wrong order). Bare columns (`operators.bare_columns`) follow
the same rule, except that an index may also end with the MIN/MAX argument (its ties still
follow the rowid) — but not without GROUP BY, where SQLite seeks the extreme in such an index.
"""

from __future__ import annotations

import functools
import re

import apsw

from matview.errors import Error
from matview.names import PREFIX, fold, quote
from matview.plan import AggSpec, Plan
from matview.sql.sqltext import Token, split_alias, split_clauses, split_top_level, tokenize
from matview.sql.validate import one_statement
from matview.storage.schema import TableInfo, read_table

_INDEX_USED = re.compile(r"USING (?:COVERING )?INDEX ")


def indexes_used(conn: apsw.Connection, details: list[str]) -> list[str]:
    """The indexes of main that EXPLAIN QUERY PLAN lines `details` say a scan uses: each the
    longest index name written after `USING [COVERING] INDEX` (a name may hold spaces)."""
    named = [str(row[0]) for row in conn.execute("SELECT name FROM main.sqlite_master WHERE type = 'index'")]
    used: list[str] = []
    for detail in details:
        for match in _INDEX_USED.finditer(detail):
            rest = detail[match.end() :]
            name = max((n for n in named if rest == n or rest.startswith(n + " ")), key=len, default=None)
            if name is not None and name not in used:
                used.append(name)
    return used


#: the opcodes of a backward scan (an ORDER BY … DESC read from an index or the table)
_BACKWARD_OPCODES = {"Prev", "Last", "SeekLT", "SeekLE"}


def concat_order_problem(conn: apsw.Connection, plan: Plan, sql: str) -> str | None:
    """Why SQLite's GROUP_CONCAT order for the view `sql`, or the row its bare columns come
    from, is not the rowid order matview keeps (how it reads the aggregated table), or None."""
    concatenates = _concatenates_in_scan_order(plan)
    by_rowid = plan.extreme_row and not plan.extreme_unique  # (a unique extreme row: any order meets it)
    collated = _collated_extremes(plan)
    by_rowid = by_rowid or bool(collated)
    if not (concatenates or by_rowid) or not plan.sources or plan.upstreams:
        return None  # (over a materialized view: EXPLAIN would read the view's module again)
    try:
        table = read_table(conn, plan.sources[0])
    except Error:
        return None  # (the table is gone: the view's own checks say so)
    try:
        grouped = _group_columns(sql, {fold(c.name) for c in table.columns})
    except Error:
        grouped = set()
    if concatenates:
        how = _reordering_scan(conn, plan, table, sql, grouped)
        if how is not None:
            return (
                f"GROUP_CONCAT: SQLite reads {plan.sources[0]} {how}, so it concatenates each group's values "
                "in that order; matview keeps them in rowid order (the table's own). Change that, or aggregate "
                "without GROUP_CONCAT"
            )
    if by_rowid:
        extreme = next((a for a in plan.aggs if a.func in ("min", "max")), None)
        bare = [a.sql for a in plan.aggs if a.func == "bare"]
        if collated:
            extreme = collated[0]
            what = "the spelling of"  # (its extreme class's first in that order)
        elif bare:
            what = f"column {_as_written(bare[0])}"
        elif plan.has_group_by:
            what = "the spelling of a GROUP BY value"
        else:
            what = "the spelling"  # (of a MIN/MAX under NOCASE/RTRIM)
        arguments = {_argument_column(a.sql) for a in collated} or {
            _argument_column(extreme.sql) if extreme is not None else None
        }
        found = {a for a in arguments if a is not None}
        allowed = grouped | found if plan.has_group_by else set()
        how = _reordering_scan(conn, plan, table, sql, allowed)
        if how is not None:
            beside = "of an aggregate" if extreme is None else _as_written(extreme.sql)
            beside = beside if collated or extreme is None else f"beside {beside}"
            row = "first extreme row" if extreme is not None else "first row of each group"
            return (
                f"{what} {beside}: SQLite reads {plan.sources[0]} {how}, and takes it from the {row} it meets in "
                "that order; matview keeps the table's own (rowid) order. Change that"
            )
    return None


def follows_scan_order(plan: Plan) -> bool:
    """Whether what a view shows depends on the order SQLite meets a group's rows in (which
    matview's own indexes must not change: `indexes.create_index`)."""
    by_rowid = (plan.extreme_row and not plan.extreme_unique) or bool(_collated_extremes(plan))
    return _concatenates_in_scan_order(plan) or by_rowid or shows_first_rows(plan)


def _collated_extremes(plan: Plan) -> list[AggSpec]:
    """MIN/MAX calls under NOCASE/RTRIM that keep their own rows by (class, rowid) — beside
    another MIN/MAX (`Accumulator.collated`; a lone one keeps the extreme row, `extreme_row`)."""
    if plan.extreme_row:
        return []
    return [a for a in plan.aggs if a.func in ("min", "max") and not a.distinct and a.collation != "BINARY"]


def _concatenates_in_scan_order(plan: Plan) -> bool:
    """A GROUP_CONCAT over one table (kept in rowid order); over a join, its ORDER BY decides
    the text, whatever the order (`AggregateCalls._order_decides_text`)."""
    return any(a.func == "group_concat" for a in plan.aggs) and plan.rowid_column is not None


def shows_first_rows(plan: Plan) -> bool:
    """Whether a view over one rowid table shows each GROUP BY or DISTINCT class's first row's
    spelling (`Circuit._first_row`): grouped by values that can have several, or DISTINCT rows
    (beside one MIN/MAX, the extreme row's instead: `Plan.extreme_row`)."""
    grouped = plan.kind == "aggregate" and plan.has_group_by and not plan.exact_groups and not plan.extreme_row
    distinct = plan.kind == "rows" and plan.distinct and not plan.exact_distinct
    one_table = len(plan.sources) == 1 and not (plan.upstreams or plan.root_recompute or plan.arms)
    return (grouped or distinct) and one_table


def variant_order_problem(conn: apsw.Connection, plan: Plan, sql: str) -> str | None:
    """Why SQLite does not meet the rows of one GROUP BY or DISTINCT class of the view `sql`
    (over one rowid table) in rowid order — the order in which matview finds the variant SQLite
    shows ('a' or 'A' under NOCASE: its least rowid's, `Circuit._first_row`) — or None (a table
    scan, or an index on some of the class's columns). An index with other columns
    (`(email, last_name)`) orders a class by those: refused at CREATE, and a view whose table
    gains one later is broken until it is dropped (its stored classes chose by rowid). For a
    view that shows first rows (`shows_first_rows`)."""
    try:
        table = read_table(conn, plan.sources[0])
    except Error:
        return None  # (the table is gone: the view's own checks say so)
    try:
        columns = (
            _group_columns(sql, {fold(c.name) for c in table.columns})
            if plan.kind == "aggregate"
            else _select_columns(sql)
        )
    except Error:  # (not one plain SELECT: `WITH …`, a set operation) — no index is known to keep it
        columns = set()
    how = _reordering_scan(conn, plan, table, sql, columns)
    if how is None:
        return None
    return (
        f"GROUP BY/DISTINCT over values with several spellings (NOCASE, untyped): SQLite reads {plan.sources[0]} "
        f"{how}, whose order decides which spelling of a group SQLite shows; matview keeps the table's "
        "own (rowid) order. Change that, or group by a typed BINARY column (or "
        "lower()/CAST of it)"
    )


def order_problem(conn: apsw.Connection, plan: Plan, sql: str, first_rows: bool) -> str | None:
    """Why SQLite does not read the view's table in the order matview keeps for it, as planned
    now — that of a class's variants (`variant_order_problem`, for a view that shows first rows)
    or of GROUP_CONCAT and bare columns (`concat_order_problem`) — or None."""
    problem = variant_order_problem(conn, plan, sql) if first_rows else None
    return problem if problem is not None else concat_order_problem(conn, plan, sql)


def _as_written(text: str) -> str:
    """A column or call as the user wrote it, for messages: without the qualifiers the inline
    pass gives a FROM-subquery's or view's columns (`"pv.t"."name"` is `name`)."""
    return re.sub(r'"([A-Za-z_][A-Za-z0-9_]*)"', r"\1", re.sub(r'"[^"]*\.[^"]*"\.', "", text))


def _reordering_scan(conn: apsw.Connection, plan: Plan, table: TableInfo, sql: str, grouped: set[str]) -> str | None:
    """How SQLite reads `table` for `sql` when it meets one class's rows out of rowid order
    (as messages say it): through a derived table with its own ORDER BY (SQLite does not
    flatten one into an aggregate), "backwards", in several passes, or "through" the index —
    one with columns beyond `grouped`, or one of them under another collation than the
    column's; None for none of these."""
    if plan.inner_order:
        return f"through {plan.inner_order} in the order of its ORDER BY (drop it)"
    if _reads_backwards(conn, table, sql):
        return "backwards (for its ORDER BY: drop it, or the index that serves it)"
    details = query_plan(conn, sql)
    if any(detail.startswith("MULTI-INDEX OR") for detail in details):
        # (`id > 5 OR id < 4` meets 8 before 1)
        return "in several passes, one per OR term (MULTI-INDEX OR: write the condition another way)"
    for detail in details:
        for index in indexes_used(conn, [detail]):
            owner = conn.execute(
                "SELECT tbl_name FROM main.sqlite_master WHERE type = 'index' AND name = ?", (index,)
            ).fetchone()
            if owner is None or fold(str(owner[0])) != fold(table.name):
                continue
            keyed = [row for row in conn.execute(f"PRAGMA main.index_xinfo({quote(index)})") if row[5]]
            columns = [str(row[2]) if row[2] is not None else "<expression>" for row in keyed]
            # (an index under another collation than its column's orders one class's rows by spelling)
            recollated = any(row[2] is None or str(row[4]).upper() != _collation(table, str(row[2])) for row in keyed)
            if not columns or not {fold(c) for c in columns} <= grouped or recollated:
                mine = index.lower().startswith(f"{PREFIX}ix_")
                if mine:
                    return f"through an index matview made for another view ({', '.join(columns)})"
                return f"through index {index} ({', '.join(columns)}: drop it)"
    return None


def _reads_backwards(conn: apsw.Connection, table: TableInfo, sql: str) -> bool:
    """Whether SQLite's program for the view's SELECT steps `table` (or one of its indexes)
    backwards: an `ORDER BY … DESC` served by an index, or MAX() sought from an index's end.
    EXPLAIN QUERY PLAN does not tell; the opcodes do, on the cursors opened on the table's root
    pages (a subquery's MAX() over another table steps its own). Explained as one checked
    statement, as `query_plan` does."""
    roots = {
        int(row[0])
        for row in conn.execute(
            "SELECT rootpage FROM main.sqlite_master WHERE tbl_name = ? COLLATE NOCASE AND rootpage > 0", (table.name,)
        )
    }
    try:
        select = _first_statement(sql)
        program = [row[1:5] for row in conn.cursor().execute(f"EXPLAIN {select}", can_cache=False)]
    except (Error, apsw.Error):
        return False
    # (OpenRead's p2 is the root page, p3 the database: 0 is main)
    cursors = {p1 for opcode, p1, p2, p3 in program if opcode in ("OpenRead", "ReopenIdx") and p2 in roots and p3 == 0}
    return any(opcode in _BACKWARD_OPCODES and p1 in cursors for opcode, p1, _p2, _p3 in program)


def _collation(table: TableInfo, column: str) -> str:
    """A column's declared collation (BINARY where it declares none)."""
    found = table.column(column)
    return found.collation.upper() if found is not None else "BINARY"


def query_plan(conn: apsw.Connection, sql: str) -> list[str]:
    """The lines of SQLite's query plan for a view's SELECT `sql` (from the catalog: a damaged
    or hostile file may hold several statements there, and apsw would run every one after the
    first — so only one statement is ever explained); [] when it does not prepare."""
    try:
        select = _first_statement(sql)
        # prepared anew: a cached EXPLAIN reads no table, so SQLite never finds it stale after
        # another connection's CREATE INDEX, and would answer with the plan it first made
        return [str(row[3]) for row in conn.cursor().execute(f"EXPLAIN QUERY PLAN {select}", can_cache=False)]
    except (Error, apsw.Error):
        return []


@functools.lru_cache(maxsize=256)
def _first_statement(sql: str) -> str:
    """`one_statement`'s SELECT of `sql` (asked at every fold of a view with subquery values)."""
    return one_statement(sql)[0]


def plan_fingerprint(conn: apsw.Connection, select: str) -> str:
    """SQLite's plan for `select` now: its EXPLAIN QUERY PLAN lines (prepared anew, never from a
    cache), the definition of each index they name (one dropped and made again under the same
    name with other columns or order reads the rows in another order), and the connection's
    `reverse_unordered_selects` (which reverses the order of a plan's scans)."""
    lines = query_plan(conn, select)
    indexes = sorted(indexes_used(conn, lines))
    definitions = [
        str(row[0])
        for name in indexes
        for row in conn.execute("SELECT coalesce(sql, tbl_name) FROM main.sqlite_master WHERE name = ?", (name,))
    ]
    reversed_scans = conn.execute("PRAGMA reverse_unordered_selects").fetchone()
    if reversed_scans and reversed_scans[0]:
        definitions.append("reverse_unordered_selects")
    return "\n".join([*lines, *definitions])


def _items(sql: str) -> list[tuple[tuple[Token, ...], str | None]]:
    """A SELECT's items: each one's expression tokens and alias (`e AS x`, `e x`)."""
    tokens = tokenize(sql)
    clauses = split_clauses(sql, tokens)
    found: list[tuple[tuple[Token, ...], str | None]] = []
    for item in split_top_level(sql, clauses.select.tokens):
        expression, alias = split_alias(item.tokens)
        found.append((expression, fold(alias.text) if alias is not None else None))
    return found


def _argument_column(call: str) -> str | None:
    """The column an aggregate call written `call` (`max(t.price)`) takes, when its argument is
    a plain column name."""
    tokens = tokenize(call)
    return _plain_name(tuple(tokens[2:-1])) if len(tokens) > 3 else None


def _plain_name(toks: tuple[Token, ...]) -> str | None:
    if len(toks) == 1 or (len(toks) == 3 and toks[1].text == "."):
        return fold(toks[-1].text)
    return None


def _select_columns(sql: str) -> set[str]:
    """The plain column names a SELECT's items are (`e`, `t.e`, `e AS x`)."""
    return {name for toks, _alias in _items(sql) if (name := _plain_name(toks)) is not None}


def _group_columns(sql: str, table_columns: set[str]) -> set[str]:
    """The plain column names the SELECT's GROUP BY terms are (`g`, `t.g`; an ordinal or a
    select-list alias that is no column of the table: the item's column)."""
    tokens = tokenize(sql)
    clauses = split_clauses(sql, tokens)
    items = _items(sql)
    found = set()
    for term in split_top_level(sql, clauses.group.tokens) if clauses.group else []:
        toks = term.tokens
        if len(toks) == 1 and toks[0].text.isdigit() and 1 <= int(toks[0].text) <= len(items):
            toks = items[int(toks[0].text) - 1][0]
        elif len(toks) == 1 and fold(toks[0].text) not in table_columns:
            aliased = [expression for expression, alias in items if alias == fold(toks[0].text)]
            toks = aliased[0] if len(aliased) == 1 and _plain_name(aliased[0]) is not None else toks
        name = _plain_name(toks)
        if name is not None:
            found.add(name)
    return found
