"""Whether a SELECT's rows never repeat because it keeps a key of its one table (`SELECT *`, or
the INTEGER PRIMARY KEY, or every column of a NOT NULL primary key, among its plain columns):
then each row is its own identity — for a LEFT JOIN to it (`nodes`: a keyed node) and for a view
that reads it as a materialized view (`upstream.upstream_info`)."""

from __future__ import annotations

import apsw
from sqlglot.tokens import TokenType

from matview.errors import Error
from matview.names import fold
from matview.sql.from_items import read_from_items
from matview.sql.sqltext import split_clauses, split_top_level, tokenize
from matview.storage.schema import read_table, unique_key_columns


def keeps_a_key(conn: apsw.Connection, select: str) -> bool:
    """Whether a select-project-join SELECT reads one base table and keeps its key among its
    columns (`*`, or its INTEGER PRIMARY KEY, or every column of a NOT NULL primary key, as plain
    columns): no two of its rows are equal."""
    tokens = tokenize(select)
    if not tokens or tokens[0].kind != TokenType.SELECT:
        return False
    clauses = split_clauses(select, tokens)
    if not clauses.from_ or clauses.group or clauses.having:
        return False
    items = read_from_items(select, list(clauses.from_.tokens), check=False)
    if len(items) != 1 or items[0].body is not None or items[0].name is None:
        return False
    try:
        table = read_table(conn, items[0].name)
    except Error:
        return False  # (a view, a CTE or no such table: not this rule's)
    key = unique_key_columns(conn, table)
    if key is None:
        return False
    alias = fold(items[0].alias)
    kept: set[str] = set()
    for item in split_top_level(select, clauses.select.tokens):
        toks = item.tokens
        if len(toks) == 1 and toks[0].kind == TokenType.STAR:
            return True
        if len(toks) == 3 and toks[2].kind == TokenType.STAR and fold(toks[0].text) == alias:
            return True
        plain = len(toks) == 1 or (len(toks) == 3 and toks[1].kind == TokenType.DOT and fold(toks[0].text) == alias)
        if plain and toks[-1].is_name and toks[-1].kind != TokenType.STRING:
            kept.add(fold(toks[-1].text))
    return key <= kept
