"""Which subqueries have a value that does not depend on the order SQLite visits rows.

Partition recompute (`partition`) re-evaluates a root's rows later, over other query plans,
and must reproduce the value stored then, bit for bit. So a subquery is refused where its
value follows the scan order: ordered aggregates (GROUP_CONCAT), sums of values that may be
REAL (rounding), MIN/MAX/DISTINCT/GROUP BY/UNION where equal values can differ (which one
is kept), a bare column beside an aggregate, and a scalar subquery that may return several
rows (SQLite takes the first) — unless it is an aggregate, a lookup by INTEGER PRIMARY KEY,
or ordered by a key (no ties); LIMIT/OFFSET under the same conditions (or under EXISTS).
"""

from __future__ import annotations

from collections.abc import Sequence

import apsw
from sqlglot.tokens import TokenType

from matview.errors import UnsupportedQuery
from matview.names import fold
from matview.operators.exact_extrema import EXACT_EXTREMA
from matview.operators.exact_sums import EXACT_SUMS
from matview.sql.comparison_affinity import OuterTables
from matview.sql.from_items import FromItem, is_from_item, read_from_items
from matview.sql.single_row import (
    grouped_by_looked_up_keys,
    grouped_lookup,
    single_row_source,
    total_order,
    unique_lookup,
)
from matview.sql.sqltext import (
    SET_OPERATIONS,
    AggregateCall,
    Clauses,
    Token,
    depth_walk,
    excerpt,
    find_aggregate_calls,
    matching_paren,
    split_alias,
    split_clauses,
    split_top_level,
    tokenize,
)
from matview.sql.subquery_columns import (
    exact_column,
    exact_group_terms,
    plain_column,
    plain_column_of,
    written_name,
)
from matview.storage.schema import affinity

#: aggregates whose value inside a subquery does not depend on the order SQLite scans rows in
_ORDER_FREE = {"count", "min", "max"}
_SUMS = {"sum", "total", "avg"}
_CONCATS = {"group_concat", "string_agg"}


def exact_sum_renames(conn: apsw.Connection, text: str, outer: OuterTables = ()) -> str:
    """`text` with every subquery's value made independent of the order SQLite visits rows
    (or `UnsupportedQuery`, see `refuse_unstable_value`): its SUM/TOTAL/AVG calls that may
    add REALs call their order-free twins (`operators.exact_sums.EXACT_SUMS`). `outer`: the
    outer query's tables, whose columns a subquery may compare with (none known: any may be
    numeric, `comparison_affinity`)."""
    tokens = tokenize(text)
    renames: list[Token] = []
    for index, token in enumerate(tokens[:-1]):
        if token.kind == TokenType.L_PAREN and tokens[index + 1].kind == TokenType.SELECT:
            renames += refuse_unstable_value(conn, text, tokens, index, outer)
    for name in sorted(set(renames), key=lambda t: t.start, reverse=True):
        twin = {**EXACT_SUMS, **EXACT_EXTREMA}[name.text.lower()]
        text = text[: name.start] + twin + text[name.end :]
    return text


def refuse_unstable_value(
    conn: apsw.Connection, text: str, tokens: list[Token], open_index: int, outer: OuterTables = ()
) -> list[Token]:
    """A subquery's value must not depend on the order SQLite visits rows: a delta term
    evaluates it over other sources (a table's old state) and must reproduce, bit for bit,
    the value computed when the row was stored. Refused: GROUP_CONCAT and other ordered
    aggregates; MIN/MAX, DISTINCT, GROUP BY and UNION/INTERSECT/EXCEPT where equal values can
    differ (which one is kept follows the order); a scalar subquery that may return several
    rows (SQLite takes the first). SUM/TOTAL/AVG of values that may be REAL round in scan
    order: returned are their name tokens (offsets in `text`), to call the exact sums instead
    — all but sums of an INTEGER PRIMARY KEY or an INTEGER column of a STRICT table."""
    close = matching_paren(tokens, open_index)
    base = tokens[open_index + 1].start
    body = text[base : tokens[close - 1].end]
    inner = tokenize(body)
    clauses = split_clauses(body, inner)
    items = [span for span in split_top_level(body, clauses.select.tokens) if span]
    from_items = read_from_items(body, list(clauses.from_.tokens), check=True)
    tables = [i for i in from_items if i.name is not None]
    alone = len(from_items) == 1 and len(tables) == 1  # one table, no derived table beside it
    calls = [
        (call, span.tokens[call.first])
        for span in (clauses.select, clauses.having)
        for call in find_aggregate_calls(body, span.tokens)
    ]
    depths = depth_walk(inner)
    before = tokens[open_index - 1].kind if open_index else None
    for index, (token, d) in enumerate(zip(inner, depths)):
        after = inner[index + 1].kind if index + 1 < len(inner) else None
        dedup = token.kind in SET_OPERATIONS and not (token.kind == TokenType.UNION and after == TokenType.ALL)
        if before == TokenType.EXISTS and (dedup or token.kind == TokenType.DISTINCT):
            continue  # (which variant a set keeps never decides whether it has a row)
        exact_groups = token.kind == TokenType.GROUP_BY and exact_group_terms(conn, body, clauses, tables)
        # (DISTINCT over plain typed BINARY columns: each class one variant, whatever the order)
        exact_rows = (
            token.kind == TokenType.DISTINCT
            and bool(items)
            and all(exact_column(conn, split_alias(span.tokens)[0], tables) for span in items)
        )
        exact = exact_groups or exact_rows
        if d == 0 and dedup:
            raise UnsupportedQuery(
                f"{token.text.upper()} inside a subquery: matview does not check a set operation's columns for "
                "equal but different values (1 and 1.0, 'a' and 'A' under NOCASE), whose kept one depends on the "
                "order SQLite scans the rows; not supported yet (DISTINCT of typed columns, or the set operation "
                "right under IN, is)"
            )
        if d == 0 and token.kind in (TokenType.DISTINCT, TokenType.GROUP_BY) and not exact:
            raise UnsupportedQuery(
                f"{token.text.upper()} inside a subquery: which of equal values (1 and 1.0, 'a' and 'A' under "
                "NOCASE) it keeps depends on the order SQLite scans the rows; not supported yet"
            )
    if clauses.group:
        _refuse_bare_columns(body, clauses, [call for call, _ in calls], grouped=_group_names(body, clauses))
    renames = []
    for call, name in calls:
        if call.name == "count" or (call.name in _ORDER_FREE and exact_column(conn, call.args[0].tokens, tables)):
            continue
        if call.name in _ORDER_FREE and _derived_aggregate(call.args[0].tokens, from_items) == "count":
            continue  # the max of counts: integers, which no two variants share
        if call.name in _SUMS and len(call.args) == 1:
            if _integer_column(conn, call.args[0].tokens, tables):
                continue  # SQLite's own integer sum is exact
            if not call.distinct or exact_column(conn, call.args[0].tokens, tables):
                # (DISTINCT keeps one of 1 and 1.0 in scan order: the sum's type would follow it)
                renames.append(Token(name.kind, name.text, base + name.start, base + name.end))
                continue
        if call.name in _CONCATS and _ordered_by_its_value(conn, call, tables):
            continue
        plain = call.name in EXACT_EXTREMA and not call.distinct and call.filter is None and len(call.args) == 1
        if plain and _binary_argument(conn, call.args[0].tokens, tables):
            # (equal extremes that differ make the exact twin raise: never a guess)
            renames.append(Token(name.kind, name.text, base + name.start, base + name.end))
            continue
        if plain and any(item.name is None for item in from_items):
            raise UnsupportedQuery(
                f"{call.name}() of a FROM-subquery's column inside a subquery: matview cannot see that column's "
                "collation, and under NOCASE or RTRIM which of equal values it returns depends on the order "
                "SQLite scans the rows; not supported yet (MIN/MAX of a table's BINARY column is)"
            )
        raise UnsupportedQuery(
            f"{call.name}() inside a subquery: its value depends on the order SQLite scans the rows "
            "(COUNT, SUM/TOTAL/AVG, MIN/MAX under BINARY, and DISTINCT sums of a typed BINARY column are "
            "supported there)"
        )
    if calls and not clauses.group:
        _refuse_bare_columns(body, clauses, [call for call, _ in calls])
    compound = any(d == 0 and t.kind in SET_OPERATIONS for t, d in zip(inner, depths))
    # an aggregate without GROUP BY is one row (bare columns are refused above); so is no FROM
    one_row = not clauses.group and not compound and (bool(calls) or not clauses.from_) and bool(items)
    simple = not compound and not clauses.group and alone
    at_most_one = (
        one_row
        or (simple and unique_lookup(conn, body, clauses, tables, outer))
        or (not compound and not clauses.group and grouped_lookup(conn, body, clauses, from_items, outer))
        or (not compound and not clauses.group and single_row_source(from_items))
        or (
            not compound
            and alone
            and bool(clauses.group)
            and grouped_by_looked_up_keys(conn, body, clauses, tables, outer)
        )
    )
    ordered = simple and total_order(conn, body, clauses, tables, items)
    if clauses.limit and before != TokenType.EXISTS and not (at_most_one or ordered):
        # (EXISTS asks how many rows there are, never which)
        raise UnsupportedQuery(
            f"LIMIT/OFFSET inside a subquery ({excerpt(body)}) without an ORDER BY that ends ties by the table's "
            "INTEGER PRIMARY KEY (or NOT NULL primary key): which rows it keeps would follow the scan order"
        )
    if before in (TokenType.IN, TokenType.EXISTS) or is_from_item(tokens, open_index):
        return renames  # a set (or a derived table, a bag): the order of its rows does not matter
    if at_most_one or ordered:
        return renames
    raise UnsupportedQuery(
        f"scalar subquery ({excerpt(body)}) may return several rows, and SQLite takes the first in an unspecified "
        "order; aggregate it (max(), min(), count()), look it up by INTEGER PRIMARY KEY, or ORDER BY a key"
    )


def _ordered_by_its_value(conn: apsw.Connection, call: AggregateCall, tables: list[FromItem]) -> bool:
    """Whether `group_concat(x [, 'sep'] ORDER BY …)` concatenates in an order that leaves no
    choice: x a plain column whose equal values are identical (typed, BINARY), one of the
    ORDER BY terms as it is, and a literal separator — rows that tie are then the same text."""
    values, terms = call.arguments_and_order()
    if not terms or not values or len(values) > 2:
        return False
    if any(len(s) != 1 or s[0].kind != TokenType.STRING for s in values[1:]):
        return False
    written = written_name(values[0])
    return exact_column(conn, values[0], tables) and any(
        all(t.kind != TokenType.COLLATE for t in term) and written_name(_unsorted(term)) == written for term in terms
    )


def _unsorted(tokens: Sequence[Token]) -> Sequence[Token]:
    """An ORDER BY term without its ASC/DESC: the expression it sorts by."""
    return tokens[:-1] if tokens and tokens[-1].kind in (TokenType.ASC, TokenType.DESC) else tokens


def _group_names(body: str, clauses: Clauses) -> set[str]:
    """The column references a subquery's GROUP BY terms are, as written (`t.c`, `c`)."""
    return {written_name(term.tokens) for term in split_top_level(body, clauses.group.tokens) if term.tokens}


def _derived_aggregate(tokens: tuple[Token, ...], from_items: list[FromItem]) -> str | None:
    """The aggregate (`count`, `sum`, …) a derived table's column is, when `tokens` names a
    column of a FROM-subquery whose select item is exactly one aggregate call."""
    if len(tokens) == 3 and tokens[1].kind == TokenType.DOT:
        candidates = [i for i in from_items if i.body is not None and fold(i.alias) == fold(tokens[0].text)]
    elif len(tokens) == 1:
        candidates = [i for i in from_items if i.body is not None]
    else:
        return None
    name = fold(tokens[-1].text)
    if not tokens[-1].is_name or tokens[-1].kind == TokenType.STRING or len(candidates) != 1:
        return None
    body = candidates[0].body or ""
    inner = tokenize(body)
    clauses = split_clauses(body, inner)
    for item in split_top_level(body, clauses.select.tokens):
        expression, alias = split_alias(item.tokens)
        if not item.tokens or fold((alias or item.tokens[-1]).text) != name:
            continue  # (the first item SQLite names so is the one the name reads)
        calls = find_aggregate_calls(body, expression)
        if len(calls) == 1 and calls[0].first == 0 and calls[0].last == len(expression):
            return calls[0].name
        return None
    return None


def _binary_argument(conn: apsw.Connection, tokens: tuple[Token, ...], tables: list[FromItem]) -> bool:
    """Whether MIN/MAX compare `tokens`' values under BINARY: no COLLATE, no subquery, and
    every column it names (of `tables`, where known) collated BINARY; an unknown name is not."""
    for index, token in enumerate(tokens):
        if token.kind in (TokenType.COLLATE, TokenType.SELECT):
            return False
        if not token.is_name or token.kind == TokenType.STRING:
            continue
        following = tokens[index + 1].kind if index + 1 < len(tokens) else None
        if following in (TokenType.L_PAREN, TokenType.DOT):
            continue  # a function's name, or a table's before its column
        qualified = index >= 2 and tokens[index - 1].kind == TokenType.DOT
        written = tokens[index - 2 : index + 1] if qualified else (token,)
        column = plain_column(conn, written, tables)
        if column is None or column.collation.upper() != "BINARY":
            return False
    return True


def _refuse_bare_columns(
    body: str, clauses: Clauses, calls: list[AggregateCall], grouped: set[str] | None = None
) -> None:
    """An aggregate subquery's select list may read columns only inside its aggregates (or,
    with GROUP BY, the columns it groups by, `grouped`): a bare column comes from an arbitrary
    row (SQLite's choice follows the scan order)."""
    toks = clauses.select.tokens
    covered = {i for call in calls for i in range(call.first, call.last)}
    for index, token in enumerate(toks):
        if index in covered or token.kind not in (TokenType.VAR, TokenType.IDENTIFIER):
            continue
        qualified = index >= 2 and toks[index - 1].kind == TokenType.DOT
        if grouped is not None and written_name(toks[index - 2 : index + 1] if qualified else (token,)) in grouped:
            continue
        if index + 1 < len(toks) and toks[index + 1].kind in (TokenType.L_PAREN, TokenType.DOT):
            continue  # a function's name, or a table's before its column
        after = toks[index + 1].kind if index + 1 < len(toks) else TokenType.COMMA
        if index and (toks[index - 1].kind == TokenType.ALIAS or (index - 1 in covered and after == TokenType.COMMA)):
            continue  # an item's alias (`sum(x) AS s`, `sum(x) s`)
        raise UnsupportedQuery(
            f"column {token.text} outside the aggregates of an aggregating subquery: SQLite takes it from an "
            "arbitrary row"
        )


def _integer_column(conn: apsw.Connection, tokens: tuple[Token, ...], tables: list[FromItem]) -> bool:
    """Whether `tokens` is a column that holds only integers: an INTEGER column of a STRICT
    table, or an INTEGER PRIMARY KEY (INTEGER affinity alone still keeps 1.5 or 1e308 as REAL,
    whose sums round in scan order)."""
    found = plain_column_of(conn, tokens, tables)
    if found is None:
        return False
    table, column = found
    return (table.strict and affinity(column.decltype) == "INTEGER") or fold(table.ipk or "") == fold(column.name)
