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

from collections.abc import Iterator, Sequence

import apsw
from sqlglot.tokens import TokenType

from matview.errors import Error, UnsupportedQuery
from matview.names import fold
from matview.operators.exact_extrema import EXACT_EXTREMA
from matview.operators.exact_sums import EXACT_SUMS
from matview.sql.comparison_affinity import OuterTables, may_convert_key
from matview.sql.from_items import FromItem, is_from_item, read_from_items
from matview.sql.row_keys import keeps_a_key
from matview.sql.sqltext import (
    SET_OPERATIONS,
    AggregateCall,
    Clauses,
    Span,
    Token,
    depth_walk,
    excerpt,
    find_aggregate_calls,
    matching_paren,
    set_operators,
    split_alias,
    split_clauses,
    split_top_level,
    tokenize,
)
from matview.storage.schema import Column, TableInfo, affinity, has_one_variant, read_table
from matview.upstream import find_entry, read_source


def equalities(text: str, where: Span) -> Iterator[tuple[tuple[Token, ...], tuple[Token, ...]]]:
    """The two sides of each top-level `a = b` conjunct of a WHERE clause."""
    for conjunct in split_top_level(text, where.tokens, TokenType.AND):
        toks = conjunct.tokens
        depths = depth_walk(toks)
        equals = [i for i, (t, d) in enumerate(zip(toks, depths)) if d == 0 and t.kind == TokenType.EQ]
        either = any(d == 0 and t.kind == TokenType.OR for t, d in zip(toks, depths))
        if len(equals) == 1 and not either:
            yield toks[: equals[0]], toks[equals[0] + 1 :]


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
        exact_groups = token.kind == TokenType.GROUP_BY and _exact_group_terms(conn, body, clauses, tables)
        # (DISTINCT over plain typed BINARY columns: each class one variant, whatever the order)
        exact_rows = (
            token.kind == TokenType.DISTINCT
            and bool(items)
            and all(_exact_column(conn, split_alias(span.tokens)[0], tables) for span in items)
        )
        exact = exact_groups or exact_rows
        if d == 0 and (dedup or token.kind in (TokenType.DISTINCT, TokenType.GROUP_BY)) and not exact:
            raise UnsupportedQuery(
                f"{token.text.upper()} inside a subquery: which of equal values (1 and 1.0, 'a' and 'A' under "
                "NOCASE) it keeps depends on the order SQLite scans the rows; not supported yet"
            )
    if clauses.group:
        _refuse_bare_columns(body, clauses, [call for call, _ in calls], grouped=_group_names(body, clauses))
    renames = []
    for call, name in calls:
        if call.name == "count" or (call.name in _ORDER_FREE and _exact_column(conn, call.args[0].tokens, tables)):
            continue
        if call.name in _ORDER_FREE and _derived_aggregate(call.args[0].tokens, from_items) == "count":
            continue  # the max of counts: integers, which no two variants share
        if call.name in _SUMS and len(call.args) == 1:
            if _integer_column(conn, call.args[0].tokens, tables):
                continue  # SQLite's own integer sum is exact
            if not call.distinct or _exact_column(conn, call.args[0].tokens, tables):
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
        or (simple and _unique_lookup(conn, body, clauses, tables))
        or (not compound and not clauses.group and _grouped_lookup(conn, body, clauses, from_items, outer))
        or (not compound and not clauses.group and _single_row_source(from_items))
    )
    ordered = simple and _total_order(conn, body, clauses, tables, items)
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


def _total_order(conn: apsw.Connection, body: str, clauses: Clauses, tables: list[FromItem], items: list[Span]) -> bool:
    """Whether a single-table subquery's ORDER BY leaves no ties: its terms include, as plain
    columns, the table's INTEGER PRIMARY KEY or every column of a NOT NULL primary key whose
    columns compare as BINARY (a key unique under any collation has no two values BINARY calls
    equal; 1 and 1.0 are one key value). A term an output column's alias could name is no
    column: SQLite reads ORDER BY names as aliases first."""
    if len(tables) != 1 or not clauses.order:
        return False
    table = read_source(conn, tables[0].name or "")
    if table.materialized:
        return False
    if table.has_rowid and table.ipk is not None:
        key = {fold(table.ipk)}
    elif table.primary_key and not table.key_may_be_null:
        key = {fold(c) for c in table.primary_key}
    else:
        return False
    aliases = {fold(span.tokens[-1].text) for span in items if _may_be_alias(span.tokens)}
    found = set()
    for term in split_top_level(body, clauses.order.tokens):
        tokens = tuple(t for t in term.tokens if t.text.upper() not in ("ASC", "DESC", "NULLS", "FIRST", "LAST"))
        found_ = _plain_column_of(conn, tokens, tables)
        if found_ is None or fold(tokens[-1].text) in aliases:
            continue
        column = found_[1]
        if fold(column.name) == fold(table.ipk or "") or column.collation.upper() == "BINARY":
            found.add(fold(column.name))
    return key <= found


def _may_be_alias(tokens: tuple[Token, ...]) -> bool:
    """Whether a select-list item may end in an alias (`x AS a`, `x a`, `x + a`: a name not
    after a dot, in an item of more than one token)."""
    return len(tokens) > 1 and tokens[-1].is_name and tokens[-2].kind != TokenType.DOT


def _exact_column(conn: apsw.Connection, tokens: tuple[Token, ...], tables: list[FromItem]) -> bool:
    """Whether `tokens` is a plain column whose equal values are identical (typed, BINARY)."""
    column = _plain_column(conn, tokens, tables)
    return column is not None and has_one_variant(column.decltype, column.collation)


def _ordered_by_its_value(conn: apsw.Connection, call: AggregateCall, tables: list[FromItem]) -> bool:
    """Whether `group_concat(x [, 'sep'] ORDER BY …)` concatenates in an order that leaves no
    choice: x a plain column whose equal values are identical (typed, BINARY), one of the
    ORDER BY terms as it is, and a literal separator — rows that tie are then the same text."""
    values, terms = call.arguments_and_order()
    if not terms or not values or len(values) > 2:
        return False
    if any(len(s) != 1 or s[0].kind != TokenType.STRING for s in values[1:]):
        return False
    written = _written(values[0])
    return _exact_column(conn, values[0], tables) and any(
        all(t.kind != TokenType.COLLATE for t in term) and _written(_unsorted(term)) == written for term in terms
    )


def _unsorted(tokens: Sequence[Token]) -> Sequence[Token]:
    """An ORDER BY term without its ASC/DESC: the expression it sorts by."""
    return tokens[:-1] if tokens and tokens[-1].kind in (TokenType.ASC, TokenType.DESC) else tokens


def _exact_group_terms(conn: apsw.Connection, body: str, clauses: Clauses, tables: list[FromItem]) -> bool:
    """Whether every GROUP BY term of a subquery is a plain column whose equal values are
    identical (typed, BINARY): each group then has one variant, whatever the scan order."""
    terms = split_top_level(body, clauses.group.tokens)
    return bool(terms) and all(_exact_column(conn, term.tokens, tables) for term in terms)


def _written(tokens: Sequence[Token]) -> str:
    """A column reference as written, folded (`t.c`, `c`): two references are compared so."""
    return ".".join(fold(t.text) for t in tokens if t.kind != TokenType.DOT)


def _group_names(body: str, clauses: Clauses) -> set[str]:
    """The column references a subquery's GROUP BY terms are, as written (`t.c`, `c`)."""
    return {_written(term.tokens) for term in split_top_level(body, clauses.group.tokens) if term.tokens}


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
        column = _plain_column(conn, written, tables)
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
        if grouped is not None and _written(toks[index - 2 : index + 1] if qualified else (token,)) in grouped:
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
    found = _plain_column_of(conn, tokens, tables)
    if found is None:
        return False
    table, column = found
    return (table.strict and affinity(column.decltype) == "INTEGER") or fold(table.ipk or "") == fold(column.name)


def _plain_column(conn: apsw.Connection, tokens: tuple[Token, ...], tables: list[FromItem]) -> Column | None:
    """The column `tokens` names, when it is exactly a column of one of `tables`."""
    found = _plain_column_of(conn, tokens, tables)
    return None if found is None else found[1]


def _plain_column_of(
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


def _unique_lookup(conn: apsw.Connection, body: str, clauses: Clauses, tables: list[FromItem]) -> bool:
    """A single-table subquery whose WHERE has a conjunct `key = expr` on its INTEGER PRIMARY
    KEY (or rowid), where expr does not read that table: at most one row."""
    if len(tables) != 1 or not clauses.where:
        return False
    item = tables[0]
    table = read_source(conn, item.name or "")
    keys = {"rowid", "_rowid_", "oid"} | ({fold(table.ipk)} if table.ipk else set())
    if table.materialized:
        # a materialized view that keeps its table's INTEGER PRIMARY KEY (`sql.row_keys`): one row per key
        keys = _kept_integer_key(conn, table)
        if not keys:
            return False
    elif not table.has_rowid:
        keys = {fold(table.primary_key[0])} if len(table.primary_key) == 1 else set()
        column = table.column(table.primary_key[0]) if keys else None
        if column is None or affinity(column.decltype) != "INTEGER":
            return False
    own = {fold(c.name) for c in table.columns} | {"rowid", "_rowid_", "oid"}
    for left, right in equalities(body, clauses.where):
        for key_side, other in ((left, right), (right, left)):
            if _is_column(key_side, item.alias, keys) and not reads_table(other, item.alias, own):
                return True
    return False


def _kept_integer_key(conn: apsw.Connection, view: TableInfo) -> set[str]:
    """The INTEGER PRIMARY KEY a select-project materialized view over one table keeps as a
    column of the same name (its rows never repeat: `upstream_info`); empty for anything else."""
    entry = find_entry(conn, view.name)
    if entry is None or not view.unique_rows or entry.plan.kind != "rows" or len(entry.plan.sources) != 1:
        return set()
    try:
        base = read_table(conn, entry.plan.sources[0])
    except Error:
        return set()
    if base.ipk is None or not keeps_a_key(conn, entry.sql):
        return set()
    column = view.column(base.ipk)
    return {fold(base.ipk)} if column is not None and affinity(column.decltype) == "INTEGER" else set()


def _single_row_source(from_items: list[FromItem]) -> bool:
    """Whether a FROM clause is one derived table that aggregates without GROUP BY (`(SELECT m
    FROM best)`, best a CTE `SELECT max(t) AS m FROM s`): one row at most, whatever its WHERE."""
    if len(from_items) != 1 or from_items[0].body is None:
        return False
    inner = from_items[0].body
    tokens = tokenize(inner)
    if not tokens or tokens[0].kind != TokenType.SELECT or set_operators(tokens):
        return False
    clauses = split_clauses(inner, tokens)
    return not clauses.group and bool(find_aggregate_calls(inner, clauses.select.tokens))


def _grouped_lookup(
    conn: apsw.Connection, body: str, clauses: Clauses, from_items: list[FromItem], outer: OuterTables
) -> bool:
    """A subquery over one grouped derived table (GROUP BY plain typed BINARY columns) whose
    WHERE has a conjunct `name = expr` for each grouped column's output name, expr not reading
    the derived table and not converting the column's values (`comparison_affinity`: a TEXT
    key `'01'` equals the INTEGER `1` as `'1'` does): one group, at most one row (`(SELECT n
    FROM g WHERE g.cid = c.id)` over `g AS (SELECT cid, count(*) n FROM o GROUP BY cid)`)."""
    if len(from_items) != 1 or from_items[0].body is None or not clauses.where:
        return False
    item, derived = from_items[0], from_items[0].body or ""
    tokens = tokenize(derived)
    inner = split_clauses(derived, tokens)
    if not inner.group or not inner.from_ or set_operators(tokens):
        return False
    inner_items = read_from_items(derived, list(inner.from_.tokens), check=True)
    if not _exact_group_terms(conn, derived, inner, [i for i in inner_items if i.name is not None]):
        return False
    outputs: dict[str, str] = {}  # per grouped column (folded): the name the derived table shows it under
    named = [i for i in inner_items if i.name is not None]
    shown: set[str] = set()
    for span in split_top_level(derived, inner.select.tokens):
        expression, alias = split_alias(span.tokens)
        name = alias or span.tokens[-1]
        shown.add(fold(name.text))
        plain = len(expression) == 1 or (len(expression) == 3 and expression[1].kind == TokenType.DOT)
        if plain and expression[-1].is_name:
            outputs.setdefault(_written(expression), fold(name.text))
    wanted = set()
    kinds: dict[str, str] = {}  # per output name: the grouped column's affinity
    terms = split_top_level(derived, inner.group.tokens)
    for term in terms:
        name_ = outputs.get(_written(term.tokens))  # (`a.k` is not `b.k`: each term its own output)
        column = _plain_column(conn, term.tokens, named)
        if name_ is None or name_ in wanted or column is None:
            return False
        wanted.add(name_)
        kinds[name_] = affinity(column.decltype)
    found = set()
    for left, right in equalities(body, clauses.where):
        if any(t.kind == TokenType.COLLATE for t in (*left, *right)):
            continue  # (an explicit collation may merge several BINARY groups)
        for key_side, other in ((left, right), (right, left)):
            # the comparison takes the left operand's collation: with the group column on the
            # right, a column on the left (`c.name = g.tag`, name NOCASE) could match several groups
            column_left = key_side is right and any(t.is_name and t.kind != TokenType.STRING for t in other)
            if column_left:
                continue
            looked_up = _is_column(key_side, item.alias, wanted) and not reads_table(other, item.alias, shown)
            if looked_up and not may_convert_key(kinds[fold(key_side[-1].text)], other, outer):
                found.add(fold(key_side[-1].text))
    return wanted <= found


def _is_column(tokens: tuple[Token, ...], alias: str, names_: set[str]) -> bool:
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
