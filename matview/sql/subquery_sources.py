"""CTEs and plain views read inside subqueries become derived tables there.

The inline pass flattens the CTEs and plain views of a view's FROM clause; a subquery in an
expression (`IN (SELECT … FROM recent)`, `EXISTS (SELECT … FROM v …)`) is planned later, table
by table (`matview.sql.subqueries`), and reads base tables only. This pass, run first, writes each
CTE or plain view a subquery reads as the parenthesized SELECT it stands for, under the same
name: SQLite evaluates a CTE or a view exactly as that derived table (both are subqueries in
the FROM clause; a CTE's name hides a table's), so the query means what it meant. The derived
table is then a subquery's FROM item like any other: select-project-join ones are maintained,
aggregating or DISTINCT ones refused there by `subquery_values` (their values follow the scan
order). A CTE with a column list (`WITH c(a, b) AS …`) is refused here (left as written, its
name could read a base table of the same name); a view with one is left as it is, and refused
by name later.
"""

from __future__ import annotations

import apsw
from sqlglot.tokens import TokenType

from matview.errors import UnsupportedQuery
from matview.names import fold, quote
from matview.sql.from_items import Cte, is_from_item, names_in_from, read_from_items, read_with, view_parts
from matview.sql.inline import plain_view_sql
from matview.sql.sqltext import ENDS_FROM, depth_walk, matching_paren, splice, tokenize

_MAX_ROUNDS = 32  # CTEs and views nested deeper than this inside a subquery are refused


def expand_subquery_sources(conn: apsw.Connection, sql: str, views: dict[str, str] | None = None) -> str:
    """`sql` with every CTE or plain view that a subquery in an expression reads written as
    its SELECT (see the module docstring); `views` gets each plain view expanded (name: its
    CREATE VIEW text), which the view then depends on as on one it inlines from FROM."""
    tokens = tokenize(sql)
    ctes: dict[str, Cte] = {}
    head, body = "", sql
    if tokens and tokens[0].kind == TokenType.WITH:
        ctes, body = read_with(sql, tokens, {})
        head = sql[: len(sql) - len(body)]
    for _round in range(_MAX_ROUNDS):
        expanded = _expand_once(conn, body, ctes, views if views is not None else {})
        if expanded == body:
            return head + body
        body = expanded
    raise UnsupportedQuery(f"CTEs or views nested more than {_MAX_ROUNDS} deep inside a subquery")


def _expand_once(conn: apsw.Connection, sql: str, ctes: dict[str, Cte], views: dict[str, str]) -> str:
    tokens = tokenize(sql)
    depths = depth_walk(tokens)
    edits: list[tuple[int, int, str]] = []
    spans = [
        (index, matching_paren(tokens, index))
        for index, token in enumerate(tokens[:-1])
        if token.kind == TokenType.L_PAREN
        and tokens[index + 1].kind == TokenType.SELECT
        and not is_from_item(tokens, index)
    ]
    for begin, end in spans:
        if any(b < begin and end < e for b, e in spans):
            continue  # inside another expression subquery: its FROM items are visited from there
        for index in range(begin + 1, end):
            if tokens[index].kind != TokenType.FROM:
                continue
            stop = next(
                (
                    i
                    for i in range(index + 1, end)
                    if depths[i] < depths[index] or (depths[i] == depths[index] and _ends_from(tokens[i].kind))
                ),
                end,
            )
            for item in read_from_items(sql, list(tokens[index + 1 : stop]), check=False):
                if item.name is None or item.schema:
                    continue
                replacement = _definition(conn, item.name, ctes, views)
                if replacement is not None:
                    alias = "" if item.aliased else f" AS {quote(item.name)}"
                    edits.append((item.name_span[0], item.name_span[1], f"({replacement}){alias}"))
    return splice(sql, edits) if edits else sql


def _ends_from(kind: TokenType) -> bool:
    return kind in ENDS_FROM


def _definition(conn: apsw.Connection, name: str, ctes: dict[str, Cte], views: dict[str, str]) -> str | None:
    """The SELECT a CTE in scope or a plain view named `name` stands for; None for a table,
    a materialized view, or one with a column list."""
    cte = ctes.get(fold(name))
    if cte is not None:
        if cte.columns:
            # (left as written, its name could read a base table of the same name)
            raise UnsupportedQuery(f"CTE {name} with a column list, read inside a subquery, is not supported yet")
        return cte.body
    text = plain_view_sql(conn, name)
    if text is None:
        return None
    view_name, columns, select = view_parts(text)
    captured = [n for n in names_in_from(select) if fold(n) in ctes]
    if captured:
        # written into the query, the view's table would be read as the query's CTE
        raise UnsupportedQuery(
            f"view {name} inside a subquery reads {captured[0]}, which this query names a CTE: rename the CTE"
        )
    if columns:
        return None
    views[view_name] = text
    return select
