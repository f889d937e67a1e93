"""The column references of a subquery: which column of its FROM a name is, whether its
equal values are identical (typed, BINARY), and the `a = b` conjuncts of its WHERE."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import apsw
from sqlglot.tokens import TokenType

from matview.names import fold
from matview.sql.from_items import FromItem
from matview.sql.sqltext import Clauses, Span, Token, depth_walk, split_top_level
from matview.storage.schema import Column, TableInfo, has_one_variant
from matview.upstream import read_source


def equalities(text: str, where: Span) -> Iterator[tuple[tuple[Token, ...], tuple[Token, ...]]]:
    """The two sides of each top-level `a = b` conjunct of a WHERE clause."""
    for conjunct in split_top_level(text, where.tokens, TokenType.AND):
        toks = conjunct.tokens
        depths = depth_walk(toks)
        equals = [i for i, (t, d) in enumerate(zip(toks, depths)) if d == 0 and t.kind == TokenType.EQ]
        either = any(d == 0 and t.kind == TokenType.OR for t, d in zip(toks, depths))
        if len(equals) == 1 and not either:
            yield toks[: equals[0]], toks[equals[0] + 1 :]


def plain_column(conn: apsw.Connection, tokens: tuple[Token, ...], tables: list[FromItem]) -> Column | None:
    """The column `tokens` names, when it is exactly a column of one of `tables`."""
    found = plain_column_of(conn, tokens, tables)
    return None if found is None else found[1]


def plain_column_of(
    conn: apsw.Connection, tokens: tuple[Token, ...], tables: list[FromItem]
) -> tuple[TableInfo, Column] | None:
    """The table and column `tokens` names, when it is exactly a column of one of `tables`."""
    if len(tokens) not in (1, 3) or not all(t.is_name and t.kind != TokenType.STRING for t in tokens[::2]):
        return None  # (a string literal is no column, whatever its text)
    if len(tokens) == 3 and tokens[1].kind != TokenType.DOT:
        return None
    name = tokens[-1].text
    candidates = [i for i in tables if len(tokens) == 1 or fold(i.alias) == fold(tokens[0].text)]
    infos = [read_source(conn, i.name or "") for i in candidates]
    found = [(info, column) for info in infos if (column := info.column(name)) is not None]
    return found[0] if len(found) == 1 else None


def exact_column(conn: apsw.Connection, tokens: tuple[Token, ...], tables: list[FromItem]) -> bool:
    """Whether `tokens` is a plain column whose equal values are identical (typed, BINARY)."""
    column = plain_column(conn, tokens, tables)
    return column is not None and has_one_variant(column.decltype, column.collation)


def exact_group_terms(conn: apsw.Connection, body: str, clauses: Clauses, tables: list[FromItem]) -> bool:
    """Whether every GROUP BY term of a subquery is a plain column whose equal values are
    identical (typed, BINARY): each group then has one variant, whatever the scan order."""
    terms = split_top_level(body, clauses.group.tokens)
    return bool(terms) and all(exact_column(conn, term.tokens, tables) for term in terms)


def written_name(tokens: Sequence[Token]) -> str:
    """A column reference as written, folded (`t.c`, `c`): two references are compared so."""
    return ".".join(fold(t.text) for t in tokens if t.kind != TokenType.DOT)


def names_column(tokens: tuple[Token, ...], alias: str, names_: set[str]) -> bool:
    if len(tokens) == 1:
        return tokens[0].is_name and fold(tokens[0].text) in names_
    return (
        len(tokens) == 3
        and tokens[1].kind == TokenType.DOT
        and fold(tokens[0].text) == fold(alias)
        and fold(tokens[2].text) in names_
    )


def reads_table(tokens: tuple[Token, ...], alias: str, names_: set[str]) -> bool:
    """Whether `tokens` may name a column of the subquery's own table (unqualified or by alias)."""
    for index, token in enumerate(tokens):
        if not token.is_name:
            continue
        qualified = index and tokens[index - 1].kind == TokenType.DOT
        if qualified:
            if fold(tokens[index - 2].text) == fold(alias):
                return True
            continue
        if fold(token.text) in names_ or fold(token.text) == fold(alias):
            return True
    return False
