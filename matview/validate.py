"""Validation passes of the SQL front end: is this one SELECT SQLite accepts, and one the
engine can maintain exactly? Each pass raises `Error` (bad SQL, with SQLite's own message)
or `UnsupportedQuery` (naming the construct); `frontend.compile_view` runs them in order.
"""

from __future__ import annotations

from typing import Any

import apsw
import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

from matview.errors import Error, UnsupportedQuery
from matview.names import quote
from matview.sqltext import AGGREGATE_NAMES, Token, tokenize

_DATE_FUNCTIONS = {"date", "time", "datetime", "julianday", "unixepoch", "strftime", "timediff"}
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


def probe_columns(conn: apsw.Connection, sql: str) -> tuple[list[str], list[str]]:
    """Let SQLite validate the SELECT (its own error messages) and name its columns,
    through a temporary view. The SELECT is wrapped in a subquery, so text that tries to
    smuggle a second statement is a syntax error, never executed."""
    probe = quote("__dbsp_probe")
    try:
        conn.execute(f"DROP VIEW IF EXISTS temp.{probe}")
        conn.execute(f"CREATE TEMP VIEW {probe} AS SELECT * FROM (\n{sql}\n)")
        info = conn.execute(f"PRAGMA temp.table_xinfo({probe})").fetchall()
        conn.execute(f"SELECT * FROM temp.{probe} LIMIT 0").fetchall()
    except apsw.SQLError as exc:
        raise Error(f"invalid view definition: {_sqlite_message(exc)}") from None
    finally:
        try:
            conn.execute(f"DROP VIEW IF EXISTS temp.{probe}")
        except apsw.Error:
            pass
    return [str(row[1]) for row in info], [str(row[2] or "") for row in info]


def _sqlite_message(exc: BaseException) -> str:
    text = str(exc)
    return text.split(": ", 1)[1] if text.startswith("SQLError: ") else text


def parse_select(sql: str) -> Any:
    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except sqlglot.errors.ParseError as exc:
        raise UnsupportedQuery(f"matview cannot analyze this SELECT: {exc}") from None
    return tree


def refuse_unsupported(tree: Any) -> exp.Table:
    """Refuse every construct the single-table engine cannot maintain; return the base table."""
    if isinstance(tree, exp.SetOperation):
        raise UnsupportedQuery(f"set operation {tree.key.upper()} (UNION/INTERSECT/EXCEPT) is not supported yet")
    if not isinstance(tree, exp.Select):
        raise UnsupportedQuery(f"{tree.key.upper()}: a materialized view must be defined by a SELECT")
    if tree.args.get("with_") or tree.args.get("with"):
        raise UnsupportedQuery("WITH (common table expressions) is not supported yet")
    for window in tree.find_all(exp.Window):
        raise UnsupportedQuery(f"window function {window.sql(dialect='sqlite')[:60]} is not supported yet")
    for subquery in tree.find_all(exp.Subquery, exp.Exists):
        raise UnsupportedQuery(f"subquery {subquery.sql(dialect='sqlite')[:60]} is not supported yet")
    for select in tree.find_all(exp.Select):
        if select is not tree:
            raise UnsupportedQuery(f"subquery {select.sql(dialect='sqlite')[:60]} is not supported yet")
    if tree.args.get("joins"):
        raise UnsupportedQuery("JOIN (or a comma-separated FROM list) is not supported yet: one base table per view")
    if tree.args.get("limit") or tree.args.get("offset"):
        raise UnsupportedQuery("LIMIT/OFFSET is not supported: a view's rows have no order")
    from_ = tree.args.get("from_") or tree.args.get("from")
    if from_ is None:
        raise UnsupportedQuery("a SELECT without FROM is not supported: a view needs a base table")
    source = from_.this
    if not isinstance(source, exp.Table) or not isinstance(source.this, exp.Identifier):
        raise UnsupportedQuery(f"FROM {source.sql(dialect='sqlite')[:60]}: only a plain table is supported")
    if source.db and source.db.lower() != "main":
        raise UnsupportedQuery(f"table {source.db}.{source.name}: only tables of the main database are supported")
    if source.args.get("hints") or source.args.get("joins") or source.args.get("laterals"):
        raise UnsupportedQuery(f"FROM {source.sql(dialect='sqlite')}: INDEXED BY and table hints are not supported")
    return source


def refuse_nondeterministic(conn: apsw.Connection, tokens: list[Token]) -> None:
    """Refuse calls whose result can change without a base-table change."""
    deterministic: dict[str, bool] = {}
    aggregates: set[str] = set()
    for name, kind, flags in conn.execute("SELECT name, type, flags FROM pragma_function_list"):
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
            raise UnsupportedQuery(f"aggregate function {token.text}() is not supported yet")
        if not is_call or token.is_quoted or name not in deterministic:
            continue
        if not deterministic[name]:
            raise UnsupportedQuery(
                f"function {token.text}() is not deterministic (register user functions with deterministic=True)"
            )
        if name in _DATE_FUNCTIONS:
            close = _close_paren(tokens, index + 1)
            inner = tokens[index + 2 : close]
            if not inner or any(t.kind == TokenType.STRING and t.text.strip().lower() == "now" for t in inner):
                raise UnsupportedQuery(f"{token.text}() of 'now' is not deterministic")


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
