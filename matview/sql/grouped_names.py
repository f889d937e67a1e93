"""Helpers of `grouped_subqueries`: the text of an aggregating SELECT — its subqueries, the
names its select list and HAVING read, the columns of its FROM clause — as SQLite reads it."""

from __future__ import annotations

import apsw
from sqlglot import exp
from sqlglot.tokens import TokenType

from matview.errors import Error
from matview.names import PREFIX, fold, quote
from matview.sql.sqltext import Token, find_aggregate_calls, matching_paren, parse_sqlite, splice, tokenize
from matview.sql.validate import probe_columns


def identifiers(text: str) -> str:
    """`text` with every quoted name in backticks, which SQLite never reads as a string (a
    double-quoted name that names no column is the string, a fallback a probe must not take)."""
    quoted = [t for t in tokenize(text) if t.kind == TokenType.IDENTIFIER]
    return splice(text, [(t.start, t.end, backticked(t.text)) for t in quoted])


def backticked(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def subqueries(tokens: list[Token]) -> list[tuple[int, int]]:
    """(open, close) token indices of the outermost subqueries of an expression."""
    found = []
    index = 0
    while index < len(tokens) - 1:
        if tokens[index].kind == TokenType.L_PAREN and tokens[index + 1].kind == TokenType.SELECT:
            close = matching_paren(tokens, index)
            found.append((index, close))
            index = close + 1
        else:
            index += 1
    return found


def outer_subqueries(body: str, tokens: list[Token]) -> list[tuple[int, int]]:
    """The outermost subqueries of an expression that are not inside an aggregate call (a
    subquery in an aggregate's argument is evaluated per input row, before grouping)."""
    covered = {i for call in find_aggregate_calls(body, tokens) for i in range(call.first, call.last)}
    return [(open_, close) for open_, close in subqueries(tokens) if open_ not in covered]


def labels(names: list[str], width: int) -> list[str]:
    """The derived table's column names: the select list's own where they are unique (the
    frontend reads a name inside a subquery that equals an output alias as ambiguous unless
    a column has it), `__dbsp_h<i>` for the others and the HAVING's columns."""
    folded = [fold(n) for n in names]
    own = [quote(n) if folded.count(fold(n)) == 1 and not fold(n).startswith(PREFIX) else "" for n in names]
    return [(own[i] if i < len(own) else "") or quote(f"{PREFIX}h{i}") for i in range(width)]


def column_references(body: str, lo: int, hi: int) -> list[tuple[int, int, list[str]]]:
    """Column references written in `body[lo:hi]`: (start, end, their names), offsets in `body`."""
    found = []
    for node in parse_sqlite(body).find_all(exp.Column):
        if isinstance(node.this, exp.Star):
            continue
        written = (node.args.get("db"), node.args.get("table"), node.this)
        parts = [p for p in written if isinstance(p, exp.Identifier)]
        if not parts or "start" not in parts[0].meta or "end" not in parts[-1].meta:
            raise Error("unplaced name")
        start, end = parts[0].meta["start"], parts[-1].meta["end"] + 1
        if lo <= start < hi:
            found.append((start, end, [str(p.name) for p in parts]))
    return found


def is_column(conn: apsw.Connection, prefix: str, from_text: str, parts: list[str]) -> bool:
    """Whether `[schema.][table.]name` is a column of the FROM clause `from_text` (a column
    wins over a select-list alias in GROUP BY and HAVING)."""
    if not from_text:
        return False
    name = ".".join(backticked(p) for p in parts)
    try:
        probe_columns(conn, f"{prefix}SELECT {name} FROM {from_text}")
    except Error:
        return False
    return True
