"""Validation passes of the SQL front end: is this one SELECT SQLite accepts, and one the
engine can maintain exactly? Each pass raises `Error` (bad SQL, with SQLite's own message)
or `UnsupportedQuery` (naming the construct); `frontend.compile_select` runs them in order.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import apsw
import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

from matview.errors import Error, UnsupportedQuery
from matview.names import fold, quote
from matview.sql.clock import DATE_FUNCTIONS, refuse_clock_dependent_date
from matview.sql.from_clause import FromClause
from matview.sql.sqltext import (
    AGGREGATE_NAMES,
    Token,
    depth_walk,
    excerpt,
    explicit_collation,
    item_alias,
    parse_failure,
    parse_sqlite,
    splice,
    split_clauses,
    split_top_level,
    tokenize,
)
from matview.storage.schema import ROWID_NAMES

_SQLITE_DETERMINISTIC = 0x800
_NONDETERMINISTIC_KEYWORDS = {TokenType.CURRENT_DATE, TokenType.CURRENT_TIME, TokenType.CURRENT_TIMESTAMP}


def one_statement(sql: str) -> tuple[str, list[Token]]:
    tokens = tokenize(sql)
    while tokens and tokens[-1].kind == TokenType.SEMICOLON:
        tokens.pop()
    if not tokens:
        raise Error("empty view definition")
    if any(t.kind == TokenType.SEMICOLON for t in tokens):
        raise Error("a view is defined by exactly one SELECT statement")
    sql = sql[tokens[0].start : tokens[-1].end]
    shift = tokens[0].start
    if shift:
        tokens = [Token(t.kind, t.text, t.start - shift, t.end - shift) for t in tokens]
    return sql, tokens


def refuse_index_hints(sql: str) -> None:
    """`INDEXED BY i` / `NOT INDEXED` name how SQLite should read one table: the delta terms read
    other sources in its place, where the hint means nothing (SQLite would reject it there)."""
    tokens = tokenize(sql)
    words = [" ".join(t.text.upper().split()) for t in tokens if t.kind != TokenType.STRING]
    for first, second in zip(words, [*words[1:], ""]):
        hint = "INDEXED BY" if first == "INDEXED BY" else None
        if (first, second) == ("NOT", "INDEXED"):
            hint = "NOT INDEXED"
        if hint is not None:
            raise UnsupportedQuery(f"{hint} (an index hint) is not supported in a materialized view")


def refuse_in_table_names(tokens: list[Token]) -> None:
    """SQLite's `x IN t` — a table, view or CTE name after IN (or a table-valued function),
    shorthand for `x IN (SELECT * FROM t)` — reads `t` with no subquery in the text, where the
    passes that follow would not see it (hunt 42: a change of `t` never reached the view). With
    the fallback on, the view is recomputed whole: its SELECT as written."""
    for before, after in itertools.pairwise(tokens):
        if before.kind == TokenType.IN and after.is_name:
            raise UnsupportedQuery(
                f"`IN {after.text}`: a table name after IN (SQLite's shorthand for IN (SELECT * FROM "
                f"{after.text})) is not maintained; write the subquery"
            )


def refuse_collated_membership(sql: str) -> None:
    """`x IN (SELECT y COLLATE c FROM …)`: SQLite answers it one way when it scans the outer
    table and another when it looks `x` up in an index on it (the index compares under x's
    collation, the scan under c): which rows the view holds would follow SQLite's plan, and
    the rows a fold recomputes are planned otherwise than the SELECT re-run. A COLLATE anywhere
    in the subquery's select list gives it (`(y COLLATE c)`, `trim(y COLLATE c)`), as in a
    `VALUES` list. (With the fallback on, the view is recomputed whole: its SELECT as written,
    planned as SQLite plans it.)"""
    tokens = tokenize(sql)
    depths = depth_walk(tokens)
    for index in range(len(tokens) - 2):
        kinds = (tokens[index].kind, tokens[index + 1].kind, tokens[index + 2].kind)
        if kinds[:2] != (TokenType.IN, TokenType.L_PAREN) or kinds[2] not in (TokenType.SELECT, TokenType.VALUES):
            continue
        depth = depths[index + 2]
        listed = []
        for token, at in zip(tokens[index + 3 :], depths[index + 3 :]):
            if at < depth or (at == depth and token.kind == TokenType.FROM):
                break
            listed.append(token)
        if explicit_collation(listed) is not None:
            raise UnsupportedQuery(
                "x IN (SELECT y COLLATE … FROM …): SQLite's answer depends on whether an index on x "
                "is used (the index compares under x's collation); write the COLLATE on x"
            )


def spell_distinct_from(sql: str) -> str:
    """`a IS [NOT] DISTINCT FROM b` (SQLite 3.39) written as SQLite's own `a IS NOT b` (`a IS b`),
    which means the same: the passes read `FROM` as a clause. An unaliased select item keeps the
    name SQLite gives it (its text as written)."""
    tokens = tokenize(sql)
    edits: list[tuple[int, int, str]] = []
    for index, token in enumerate(tokens[:-2]):
        if token.kind != TokenType.IS:
            continue
        negated = tokens[index + 1].kind == TokenType.NOT
        rest = tokens[index + 1 + negated : index + 3 + negated]
        if [t.kind for t in rest] == [TokenType.DISTINCT, TokenType.FROM]:
            edits.append((token.start, rest[-1].end, "IS" if negated else "IS NOT"))
    if not edits:
        return sql
    spelled = splice(sql, edits)
    # where each edit landed in `spelled`, and how far later text moved
    landed, shift = [], 0
    for start, end, text in sorted(edits):
        landed.append((start + shift, start + shift + len(text)))
        shift += len(text) - (end - start)

    def original(position: int) -> int:
        moved = 0
        for (start, end, text), (_new_start, new_end) in zip(sorted(edits), landed, strict=True):
            if position >= new_end:
                moved += (end - start) - len(text)
        return position + moved

    new_tokens = tokenize(spelled)
    if not new_tokens or new_tokens[0].kind != TokenType.SELECT:
        return spelled
    names: list[tuple[int, int, str]] = []
    for item in split_top_level(spelled, split_clauses(spelled, new_tokens).select.tokens):
        if not item.tokens or item_alias(item) is not None:
            continue
        first, last = item.tokens[0].start, item.tokens[-1].end
        if any(first <= new_start < last for new_start, _new_end in landed):
            names.append((last, last, f" AS {quote(sql[original(first) : original(last)])}"))
    return splice(spelled, names)


def drop_main_qualifiers(sql: str) -> str:
    """`main.t.c` written as a column reference becomes `t.c` (the same column: a table of
    main read without an alias is named `t` too), so the passes that replace a table by its
    delta or state, keeping its name, keep the reference valid."""
    tokens = tokenize(sql)
    edits: list[tuple[int, int, str]] = []
    for index in range(len(tokens) - 4):
        first, dot, table, dot2, column = tokens[index : index + 5]
        if (
            first.text.lower() == "main"
            and first.kind != TokenType.STRING
            and dot.kind == dot2.kind == TokenType.DOT
            and table.is_name
            and column.is_name
            and not (index and tokens[index - 1].kind == TokenType.DOT)
        ):
            edits.append((first.start, table.start, ""))
    return splice(sql, edits)


def probe_columns(conn: apsw.Connection, sql: str) -> tuple[list[str], list[str]]:
    """Let SQLite validate the SELECT (its own error messages) and name its columns,
    through a temporary view. The SELECT is wrapped in a subquery, so text that tries to
    smuggle a second statement is a syntax error, never executed. The names are then the
    SELECT's own result columns, read from the statement prepared alone (checked to be one
    statement) and stopped before it runs: in a subquery SQLite names `L.ACCT` as written, where
    the SELECT names it as the table declares it (`acct`), and `a COLLATE NOCASE` as written."""
    probe = quote("__dbsp_probe")
    try:
        conn.execute(f"DROP VIEW IF EXISTS temp.{probe}")
        conn.execute(f"CREATE TEMP VIEW {probe} AS SELECT * FROM (\n{sql}\n)")
        info = conn.execute(f"PRAGMA temp.table_xinfo({probe})").fetchall()
        conn.execute(f"SELECT * FROM temp.{probe} LIMIT 0").fetchall()
        select, _tokens = one_statement(sql)
        named = _result_names(conn, select)
        if len(named) == len(info):
            # (two columns of one name are `id`, `id:1`, as in SQLite's own CREATE VIEW: a table
            # holds each name once)
            info = [(row[0], name, *row[2:]) for row, name in zip(info, _distinct_names(named))]
    except apsw.SQLError as exc:
        raise Error(f"invalid view definition: {_sqlite_message(exc)}") from None
    finally:
        try:
            conn.execute(f"DROP VIEW IF EXISTS temp.{probe}")
        except apsw.Error:
            pass
    return [str(row[1]) for row in info], [str(row[2] or "") for row in info]


def _distinct_names(names: list[str]) -> list[str]:
    """Result names made distinct as SQLite names a view's columns (`sqlite3ColumnsFromExprList`):
    a name taken before (in any case) gets `:1`, `:2`, … in place of any `:<digits>` it ends with."""
    taken: set[str] = set()
    distinct = []
    for name in names:
        candidate, count = name, 0
        while fold(candidate) in taken:
            base = candidate.rstrip("0123456789")
            base = base[:-1] if base.endswith(":") and len(base) > 1 else candidate
            count += 1
            candidate = f"{base}:{count}"
        taken.add(fold(candidate))
        distinct.append(candidate)
    return distinct


def _result_names(conn: apsw.Connection, select: str) -> list[str]:
    """The names SQLite gives a SELECT's result columns: the statement is prepared, its
    description read, and its execution stopped before the first step (an exec trace that
    declines)."""
    names: list[str] = []

    def describe_and_stop(cursor: apsw.Cursor, _sql: str, _bindings: Any) -> bool:
        names.extend(str(column[0]) for column in cursor.getdescription())
        return False

    cursor = conn.cursor()
    cursor.exec_trace = describe_and_stop
    try:
        cursor.execute(select, can_cache=False)
    except apsw.ExecTraceAbort:
        pass
    return names


def _sqlite_message(exc: BaseException) -> str:
    text = str(exc)
    return text.split(": ", 1)[1] if text.startswith("SQLError: ") else text


def parse_select(sql: str) -> Any:
    try:
        tree = parse_sqlite(sql)
    except sqlglot.errors.ParseError as exc:
        raise UnsupportedQuery(f"matview cannot analyze this SELECT: {parse_failure(exc)}") from None
    return tree


def refuse_unsupported(tree: Any) -> None:
    """Refuse every construct the engine cannot maintain yet (the FROM clause itself is
    checked by `from_clause.read_from_clause`)."""
    if isinstance(tree, exp.SetOperation):
        raise UnsupportedQuery(f"set operation {tree.key.upper()} (UNION/INTERSECT/EXCEPT) is not supported yet")
    if not isinstance(tree, exp.Select):
        raise UnsupportedQuery(f"{tree.key.upper()}: a materialized view must be defined by a SELECT")
    if tree.args.get("with_") or tree.args.get("with"):
        raise UnsupportedQuery("WITH (common table expressions) is not supported yet")
    for window in tree.find_all(exp.Window):
        raise UnsupportedQuery(f"window function {excerpt(window.sql(dialect='sqlite'))} is not supported yet")
    # subqueries (EXISTS, IN, scalar) are checked by `subqueries`: their tables become occurrences
    if tree.args.get("limit") or tree.args.get("offset"):
        raise UnsupportedQuery("LIMIT/OFFSET is not supported: a view's rows have no order")
    from_ = tree.args.get("from_") or tree.args.get("from")
    if from_ is None:
        raise UnsupportedQuery("a SELECT without FROM is not supported: a view needs a base table")
    for join in tree.args.get("joins") or []:
        side = (join.args.get("side") or "").upper()
        if (join.args.get("kind") or "").upper() == "FULL":
            side = "FULL"  # (the FROM clause pass decides which FULL JOINs are maintained)
        if (join.args.get("kind") or "").upper() == "OUTER" and side not in ("LEFT", "RIGHT", "FULL"):
            raise UnsupportedQuery("OUTER JOIN is not supported yet")
        if join.args.get("method") and join.args.get("method") != "NATURAL":
            raise UnsupportedQuery(f"{join.args['method']} JOIN is not supported")


@functools.cache
def builtin_functions() -> frozenset[str]:
    """The SQL functions every apsw connection has before anyone registers one."""
    probe = apsw.Connection(":memory:")
    try:
        return frozenset(str(name).lower() for (name,) in probe.execute("SELECT name FROM pragma_function_list"))
    finally:
        probe.close()


def refuse_nondeterministic(
    conn: apsw.Connection, sql: str, tokens: list[Token], whole: bool = False
) -> tuple[str, ...]:
    """Refuse calls whose result can change without a base-table change; return the
    user-defined functions the SELECT calls (a connection must have them to fold). `whole`: a
    view recomputed whole, where SQLite's own aggregate and window functions all run as written."""
    user_functions: set[str] = set()
    builtins = builtin_functions()
    deterministic: dict[str, bool] = {}
    aggregates: set[str] = set()
    overridden: set[str] = set()  # built-in names a user registered a function under
    for name, builtin, kind, flags in conn.execute("SELECT name, builtin, type, flags FROM pragma_function_list"):
        if not builtin and name in builtins:
            overridden.add(str(name))
        if kind == "s":
            deterministic[name] = deterministic.get(name, True) and bool(flags & _SQLITE_DETERMINISTIC)
        else:
            aggregates.add(str(name))
    for index, token in enumerate(tokens):
        if token.kind in _NONDETERMINISTIC_KEYWORDS:
            raise UnsupportedQuery(f"{token.text.upper()} is not deterministic: a view cannot be maintained on it")
        is_call = index + 1 < len(tokens) and tokens[index + 1].kind == TokenType.L_PAREN
        name = token.text.lower()
        if is_call and name in aggregates and name not in AGGREGATE_NAMES and name not in deterministic:
            if whole and name in builtins and name not in overridden:
                continue
            raise UnsupportedQuery(f"aggregate function {token.text}() is not supported yet")
        if not is_call or name not in deterministic:  # `"f"(x)` calls f too
            continue
        if name not in builtins or name in overridden:
            user_functions.add(name)
        if not deterministic[name]:
            raise UnsupportedQuery(
                f"function {token.text}() is not deterministic (register user functions with deterministic=True)"
            )
        if name in DATE_FUNCTIONS:
            refuse_clock_dependent_date(conn, sql, token, tokens[index + 2 : _close_paren(tokens, index + 1)])
    return tuple(sorted(user_functions))


def _close_paren(tokens: list[Token], open_index: int) -> int:
    depth = 0
    for index in range(open_index, len(tokens)):
        if tokens[index].kind == TokenType.L_PAREN:
            depth += 1
        elif tokens[index].kind == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                return index
    return len(tokens)


def refuse_unstable_rowid(tokens: list[Token], source: FromClause) -> None:
    """Refuse reading the rowid of a table without an INTEGER PRIMARY KEY: VACUUM (by any
    client) renumbers such rowids without a change any trigger sees, so the view would go
    stale. An INTEGER PRIMARY KEY is the rowid and never changes behind a view's back."""
    for index, token in enumerate(tokens):
        if not token.is_name or token.text.lower() not in ROWID_NAMES:
            continue
        if index and tokens[index - 1].kind == TokenType.ALIAS:
            continue  # `x AS rowid` names an output column
        if index + 1 < len(tokens) and tokens[index + 1].kind in (TokenType.L_PAREN, TokenType.DOT):
            continue
        qualified = index >= 2 and tokens[index - 1].kind == TokenType.DOT
        ref = source.resolve(tokens[index - 2].text if qualified else None, token.text)
        if ref is None and not qualified:
            tables = [o.table for o in source.occurrences if o.table.column(token.text) is None]
        elif ref is not None and ref.column is None:
            tables = [source.occurrences[ref.occurrence].table]
        else:
            continue  # a column of that name, or an INTEGER PRIMARY KEY
        for table in tables:
            if table.has_rowid and table.ipk is None:
                raise UnsupportedQuery(
                    f"{token.text} of table {table.name}, which has no INTEGER PRIMARY KEY: VACUUM renumbers "
                    "such rowids without any change a view could see; declare an INTEGER PRIMARY KEY column and use it"
                )
