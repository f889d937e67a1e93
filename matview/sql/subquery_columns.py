"""The column references of a subquery: which column of its FROM a name is, whether its
equal values are identical (typed, BINARY), and the `a = b` conjuncts of its WHERE."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import apsw
from sqlglot.tokens import TokenType

from matview.errors import Error
from matview.names import fold
from matview.sql.from_items import FromItem, read_from_items
from matview.sql.sqltext import (
    Clauses,
    Span,
    Token,
    depth_walk,
    matching_paren,
    set_operators,
    split_alias,
    split_clauses,
    split_top_level,
    tokenize,
)
from matview.storage.schema import Column, TableInfo, has_one_variant, table_kind
from matview.upstream import read_source

#: operators that bind as loosely as `=` (SQLite reads them left to right: `k = x IS NOT NULL`
#: is `(k = x) IS NOT NULL`) or more loosely (`NOT`): beside a `=` at the top level of a
#: conjunct, that conjunct is no `a = b`
_LEVEL_OF_EQUALS = {"=", "==", "<>", "!=", "IS", "IN", "LIKE", "GLOB", "MATCH", "REGEXP", "BETWEEN"}
_LEVEL_OF_EQUALS |= {"ISNULL", "NOTNULL", "NOT", "OR"}


def equalities(text: str, where: Span) -> Iterator[tuple[tuple[Token, ...], tuple[Token, ...]]]:
    """The two sides of each top-level `a = b` conjunct of a WHERE clause: one `=` at its top
    level and no other operator of its precedence or lower (hunt 46: `k = x IS NOT NULL` is
    no lookup of k)."""
    for conjunct in split_top_level(text, where.tokens, TokenType.AND):
        toks = conjunct.tokens
        depths = depth_walk(toks)
        top = [(i, t) for i, (t, d) in enumerate(zip(toks, depths)) if d == 0 and t.kind != TokenType.STRING]
        equals = [i for i, t in top if t.kind == TokenType.EQ]
        others = [t for i, t in top if t.text.upper() in _LEVEL_OF_EQUALS and i not in equals[:1]]
        if len(equals) == 1 and not others:
            yield toks[: equals[0]], toks[equals[0] + 1 :]


def plain_column(conn: apsw.Connection, tokens: tuple[Token, ...], tables: list[FromItem]) -> Column | None:
    """The column `tokens` names, when it is exactly a column of one of `tables`."""
    found = plain_column_of(conn, tokens, tables)
    return None if found is None else found[1]


def column_shaped(tokens: Sequence[Token]) -> bool:
    """Whether `tokens` are `name` or `qualifier.name`, each a name (a keyword SQLite takes for a
    name too), never a string literal, whatever its text."""
    shaped = len(tokens) == 1 or (len(tokens) == 3 and tokens[1].kind == TokenType.DOT)
    return shaped and all(t.is_name and t.kind != TokenType.STRING for t in tokens[::2])


def plain_column_of(
    conn: apsw.Connection, tokens: tuple[Token, ...], tables: list[FromItem]
) -> tuple[TableInfo, Column] | None:
    """The table and column `tokens` names, when it is exactly a column of one of `tables`."""
    if not column_shaped(tokens):
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


def scalar_of_a_column(conn: apsw.Connection, sql: str, tokens: Sequence[Token]) -> bool:
    """Whether `tokens` (of `sql`) is a scalar subquery whose one output is a plain column of a
    base table it reads (`(SELECT u.name FROM users u WHERE u.id = o.uid)`): its values passed
    that column's affinity, so a view stores them in a column of that type unchanged, and its
    readers compare them as SQLite compares the subquery (under the column's affinity)."""
    if len(tokens) < 4 or tokens[0].kind != TokenType.L_PAREN or tokens[1].kind != TokenType.SELECT:
        return False
    if matching_paren(list(tokens), 0) != len(tokens) - 1:
        return False
    body = sql[tokens[1].start : tokens[-2].end]
    inner = tokenize(body)
    if set_operators(inner):
        return False
    clauses = split_clauses(body, inner)
    items = [span for span in split_top_level(body, clauses.select.tokens) if span.tokens]
    if len(items) != 1 or not clauses.from_.tokens:
        return False
    expression = split_alias(items[0].tokens)[0]
    try:
        from_items = read_from_items(body, list(clauses.from_.tokens), check=True)
    except Error:
        return False
    if any(item.name is None or table_kind(conn, item.name) != "table" for item in from_items):
        return False  # (a derived table, a view, a materialized view: its column may be an expression)
    found = plain_column_of(conn, tuple(expression), from_items)
    return found is not None and not found[0].materialized
