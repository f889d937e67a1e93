"""Whether a subquery returns at most one row, or its rows in an order without ties: where
SQLite's choice of a scalar subquery's first row (or of a LIMIT's rows) is no choice at all.

At most one row: a lookup by INTEGER PRIMARY KEY or every column of a UNIQUE key
(`unique_lookup`), of a grouped derived table
by its GROUP BY columns where the comparison converts no key value (`grouped_lookup`,
`comparison_affinity`), a derived table that aggregates without GROUP BY
(`single_row_source`). No ties: an ORDER BY that ends with the table's key (`total_order`).
"""

from __future__ import annotations

from collections.abc import Callable

import apsw
from sqlglot.tokens import TokenType

from matview.errors import Error
from matview.names import fold
from matview.sql.comparison_affinity import OuterTables, may_convert_key
from matview.sql.from_items import FromItem, read_from_items
from matview.sql.row_keys import keeps_a_key
from matview.sql.sqltext import (
    Clauses,
    Span,
    Token,
    find_aggregate_calls,
    set_operators,
    split_alias,
    split_clauses,
    split_top_level,
    tokenize,
)
from matview.sql.subquery_columns import (
    equalities,
    exact_group_terms,
    names_column,
    plain_column,
    plain_column_of,
    reads_table,
    written_name,
)
from matview.storage.schema import ROWID_NAMES, TableInfo, affinity, read_table
from matview.upstream import find_entry, read_source


def total_order(conn: apsw.Connection, body: str, clauses: Clauses, tables: list[FromItem], items: list[Span]) -> bool:
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
        found_ = plain_column_of(conn, tokens, tables)
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


def unique_lookup(
    conn: apsw.Connection, body: str, clauses: Clauses, tables: list[FromItem], outer: OuterTables
) -> bool:
    """A single-table subquery whose WHERE fixes a key of its table with `key = expr`, expr not
    reading that table: at most one row. The INTEGER PRIMARY KEY (or rowid); or every column of
    another PRIMARY KEY or UNIQUE index (`unique_key_lookup`)."""
    if len(tables) != 1 or not clauses.where:
        return False
    return _integer_key_lookup(conn, body, clauses, tables) or unique_key_lookup(conn, body, clauses, tables, outer)


def _integer_key_lookup(conn: apsw.Connection, body: str, clauses: Clauses, tables: list[FromItem]) -> bool:
    item = tables[0]
    table = read_source(conn, item.name or "")
    keys = set(ROWID_NAMES) | ({fold(table.ipk)} if table.ipk else set())
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
    own = _own_names(table)
    for left, right in equalities(body, clauses.where):
        for key_side, other in ((left, right), (right, left)):
            if names_column(key_side, item.alias, keys) and not reads_table(other, item.alias, own):
                return True
    return False


def unique_key_lookup(
    conn: apsw.Connection, body: str, clauses: Clauses, tables: list[FromItem], outer: OuterTables
) -> bool:
    """Every column of a PRIMARY KEY or UNIQUE index (not a partial one) fixed by a WHERE
    conjunct `column = expr` that converts no key value (`comparison_affinity`) and compares
    under the index's collation: the column's own, with no COLLATE written and no column on
    the left to lend another (`_fixed_keys`) — so no two rows the index keeps apart can both
    match (`(SELECT n FROM settings WHERE k = 'bonus')`, `k TEXT PRIMARY KEY`)."""
    table = read_source(conn, tables[0].name or "")
    if table.materialized:
        return False
    kinds = {fold(c.name): affinity(c.decltype) for c in table.columns}
    fixed = _fixed_keys(body, clauses, kinds, _column_key(conn, tables), tables[0].alias, _own_names(table), outer)
    for key, collations in table.full_unique_keys():
        columns = [table.column(name) for name in key]
        if all(
            column is not None and fold(column.name) in fixed and column.collation.upper() == collation
            for column, collation in zip(columns, collations, strict=True)
        ):
            return True
    return False


def _column_key(conn: apsw.Connection, tables: list[FromItem]) -> Callable[[tuple[Token, ...]], str | None]:
    """`_fixed_keys`' `key_of` for keys that are columns of `tables`: the column a side names."""

    def key_of(tokens: tuple[Token, ...]) -> str | None:
        column = plain_column(conn, tokens, tables)
        return fold(column.name) if column is not None else None

    return key_of


def _own_names(table: TableInfo) -> set[str]:
    """The names that may read a subquery's own table's columns: its columns and the rowid's."""
    return {fold(c.name) for c in table.columns} | set(ROWID_NAMES)


def grouped_by_looked_up_keys(
    conn: apsw.Connection, body: str, clauses: Clauses, tables: list[FromItem], outer: OuterTables
) -> bool:
    """A single-table subquery that groups by plain typed BINARY columns (`exact_group_terms`)
    and whose WHERE fixes each of them with a conjunct `column = expr`, expr not reading the
    table and not converting the column's values (`comparison_affinity`): one group, at most
    one row (`(SELECT count(*) FROM o WHERE o.cid = c.id GROUP BY o.cid)`)."""
    if len(tables) != 1 or not clauses.where or not exact_group_terms(conn, body, clauses, tables):
        return False
    item = tables[0]
    own = _own_names(read_source(conn, item.name or ""))
    wanted: dict[str, str] = {}  # per grouped column (folded name): its affinity
    for term in split_top_level(body, clauses.group.tokens):
        column = plain_column(conn, term.tokens, tables)
        if column is None:
            return False
        wanted[fold(column.name)] = affinity(column.decltype)
    return set(wanted) <= _fixed_keys(body, clauses, wanted, _column_key(conn, tables), item.alias, own, outer)


def _fixed_keys(
    body: str,
    clauses: Clauses,
    kinds: dict[str, str],
    key_of: Callable[[tuple[Token, ...]], str | None],
    alias: str,
    own: set[str],
    outer: OuterTables,
) -> set[str]:
    """The keys (of `kinds`: key → its affinity) that a WHERE conjunct `key = expr` fixes to one
    value: `key_of` names the key a side is, expr reads none of the subquery's table (`alias`,
    its columns `own`) and converts no key value (`comparison_affinity`)."""
    found = set()
    for left, right in equalities(body, clauses.where):
        if any(t.kind == TokenType.COLLATE for t in (*left, *right)):
            continue  # (an explicit collation may merge several BINARY groups)
        for key_side, other in ((left, right), (right, left)):
            # the comparison takes the left operand's collation: with the key on the right, a
            # column on the left (`c.name = g.tag`, name NOCASE) could match several of its values
            if key_side is right and any(t.is_name and t.kind != TokenType.STRING for t in other):
                continue
            key = key_of(key_side)
            if key in kinds and not reads_table(other, alias, own) and not may_convert_key(kinds[key], other, outer):
                found.add(key)
    return found


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


def single_row_source(from_items: list[FromItem]) -> bool:
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


def grouped_lookup(
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
    if not exact_group_terms(conn, derived, inner, [i for i in inner_items if i.name is not None]):
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
            outputs.setdefault(written_name(expression), fold(name.text))
    kinds: dict[str, str] = {}  # per output name: the grouped column's affinity
    terms = split_top_level(derived, inner.group.tokens)
    for term in terms:
        name_ = outputs.get(written_name(term.tokens))  # (`a.k` is not `b.k`: each term its own output)
        column = plain_column(conn, term.tokens, named)
        if name_ is None or name_ in kinds or column is None:
            return False
        kinds[name_] = affinity(column.decltype)

    keys = set(kinds)

    def key_of(tokens: tuple[Token, ...]) -> str | None:
        return fold(tokens[-1].text) if names_column(tokens, item.alias, keys) else None

    return set(kinds) <= _fixed_keys(body, clauses, kinds, key_of, item.alias, shown, outer)
