"""What a derived table is — a FROM-subquery, CTE or plain view — as `nodes` decides whether it
needs state of its own: its shape (DISTINCT, aggregating, a set operation, joins, outer joins,
subqueries), whether it reads an aggregating one, and a plain view's body as a node's SQL."""

from __future__ import annotations

import itertools

import apsw
from sqlglot.tokens import TokenType

from matview.errors import Error
from matview.names import fold, quote
from matview.sql.from_items import OUTER_WORDS, Cte, FromItem, is_from_item, read_from_items, read_with, view_parts
from matview.sql.inline import plain_view_sql
from matview.sql.sqltext import (
    is_aggregating,
    set_operator_kinds,
    set_operators,
    split_clauses,
    tokenize,
)
from matview.sql.validate import probe_columns
from matview.storage.schema import view_sql


def has_expression_subquery(select: str) -> bool:
    """Whether a SELECT has a subquery outside its FROM clause's derived tables (IN, EXISTS,
    a scalar subquery) at any depth."""
    tokens = tokenize(select)
    if tokens and tokens[0].kind == TokenType.WITH:
        ctes, main = read_with(select, tokens, {})
        return any(has_expression_subquery(c.body) for c in ctes.values()) or has_expression_subquery(main)
    return any(
        t.kind == TokenType.L_PAREN and n.kind == TokenType.SELECT and not is_from_item(tokens, i)
        for i, (t, n) in enumerate(itertools.pairwise(tokens))
    )


def union_all_only(select: str) -> bool:
    """Whether every set operation at the top of a SELECT is UNION ALL."""
    tokens = tokenize(select)
    return all(kind == "UNION ALL" for kind in set_operator_kinds(tokens, set_operators(tokens)))


def is_compound(select: str) -> bool:
    """Whether a SELECT (after its WITH list) is a set operation."""
    tokens = tokenize(select)
    if tokens and tokens[0].kind == TokenType.WITH:
        tokens = tokenize(read_with(select, tokens, {})[1])
    return bool(set_operators(tokens))


def reads_aggregating_cte(
    select: str, ctes: dict[str, Cte], depth: int = 0, conn: apsw.Connection | None = None
) -> bool:
    """Whether a SELECT reads, directly or through select-project-join CTEs, a CTE that
    aggregates or is DISTINCT (with `conn`: or such a plain view)."""
    tokens = tokenize(select)
    if depth > 32 or not tokens or tokens[0].kind != TokenType.SELECT or set_operators(tokens):
        return False
    clauses = split_clauses(select, tokens)
    if not clauses.from_:
        return False
    for item in read_from_items(select, list(clauses.from_.tokens), check=False):
        cte = ctes.get(fold(item.name or "")) if item.body is None and not item.schema else None
        if cte is not None and (any(shape(cte.body)) or reads_aggregating_cte(cte.body, cte.scope, depth + 1, conn)):
            return True
        plain = plain_view_body(conn, item, ctes) if conn is not None and cte is None else None
        if plain is not None and (any(shape(plain[0])) or reads_aggregating_cte(plain[0], {}, depth + 1, conn)):
            return True
    return False


def joins(select: str) -> bool:
    """Whether a SELECT's own FROM clause has several items."""
    tokens = tokenize(select)
    if not tokens or tokens[0].kind != TokenType.SELECT or set_operators(tokens):
        return False
    clauses = split_clauses(select, tokens)
    return bool(clauses.from_) and len(read_from_items(select, list(clauses.from_.tokens), check=False)) > 1


def has_outer_join(select: str) -> bool:
    """Whether a SELECT's own FROM clause has a LEFT, RIGHT or FULL JOIN."""
    tokens = tokenize(select)
    if tokens and tokens[0].kind == TokenType.WITH:
        select = read_with(select, tokens, {})[1]
        tokens = tokenize(select)
    if not tokens or tokens[0].kind != TokenType.SELECT or set_operators(tokens):
        return False
    clauses = split_clauses(select, tokens)
    if not clauses.from_:
        return False
    items = read_from_items(select, list(clauses.from_.tokens), check=False)
    return any(t.kind in OUTER_WORDS for item in items for t in item.joined_by)


def plain_view_body(
    conn: apsw.Connection, item: FromItem, ctes: dict[str, Cte]
) -> tuple[str, tuple[tuple[str, str]]] | None:
    """A plain view's body as a node's SQL, and the view (name, CREATE VIEW text) the reading view
    records so that it breaks when the view is redefined (`Node.views`); None for anything else.
    A column list renames the body's columns (`SELECT a AS k, … FROM (body)`). The body never sees
    the query's CTEs (a view reads the file's tables)."""
    if item.body is not None or item.name is None or (not item.schema and fold(item.name) in ctes):
        return None
    text = plain_view_sql(conn, item.name)  # (not a materialized view's readable one)
    if text is None:
        return None
    _name, columns, body = view_parts(text)
    if columns is None:
        return body, ((item.name, text),)
    try:
        inner = probe_columns(conn, body)[0]
    except Error:
        return None
    if len(inner) != len(columns) or len({fold(n) for n in inner}) != len(inner):
        return None  # (SQLite's own error, or names the renaming could not tell apart)
    renamed = ", ".join(f"{quote(a)} AS {quote(b)}" for a, b in zip(inner, columns, strict=True))
    return f"SELECT {renamed} FROM (\n{body}\n)", ((item.name, text),)


def plain_view_needs_a_node(conn: apsw.Connection, item: FromItem, ctes: dict[str, Cte]) -> bool:
    """A plain view (not a CTE of that name) whose body has an outer join, a subquery in an
    expression, DISTINCT, or joins an aggregating view or CTE: `SELECT * FROM` it needs a node (the inline
    pass cannot flatten it) — "materialize my existing view" as it is."""
    if plain_view_body(conn, item, ctes) is None:
        return False
    body = view_parts(plain_view_sql(conn, item.name or "") or "")[2]  # (as written: before any renaming)
    return (
        has_outer_join(body)
        or has_expression_subquery(body)
        or shape(body)[0]  # (DISTINCT)
        or (joins(body) and reads_aggregating_cte(body, {}, conn=conn))
    )


def derived_select(conn: apsw.Connection, item: FromItem, prefix: str, ctes: dict[str, Cte]) -> tuple[str, str] | None:
    """A derived table's own SELECT, and the SELECT its node is defined by; None for a table."""
    if item.body is not None:
        return item.body, prefix + item.body
    assert item.name is not None
    if not item.schema and fold(item.name) in ctes:
        return ctes[fold(item.name)].body, f"{prefix}SELECT * FROM {quote(item.name)}"
    text = view_sql(conn, item.name)
    if text is None:
        return None
    return view_parts(text)[2], f"SELECT * FROM main.{quote(item.name)}"


def shape(select: str) -> tuple[bool, bool]:
    """(DISTINCT, aggregates) of a SELECT; (False, False) for what the inline pass refuses by
    name (LIMIT, a window, a set operation) or cannot read."""
    text = select
    tokens = tokenize(text)
    if tokens and tokens[0].kind == TokenType.WITH:
        text = read_with(text, tokens, {})[1]
        tokens = tokenize(text)
    if not tokens or tokens[0].kind != TokenType.SELECT:
        return False, False
    if set_operators(tokens):
        return False, False
    clauses = split_clauses(text, tokens)
    if clauses.limit or clauses.window or any(t.kind == TokenType.OVER for t in clauses.select.tokens):
        return False, False
    distinct = clauses.distinct is not None and clauses.distinct.kind == TokenType.DISTINCT
    return distinct, is_aggregating(text, clauses)
