"""`x [NOT] IN (SELECT col FROM … WHERE …)`: which outer rows a change of the subquery's tables reaches.

A view with subqueries is maintained per root row (`operators.partition`, RELATIONAL.md R4); a
change of a subquery's table reaches the outer rows whose subquery reads a changed row. An
uncorrelated IN subquery reads no outer column, so by that rule every outer row is reached
(SQLite joins each to the change: a scan of the outer table per fold). Its value for a row is
decided by the membership of `x` alone, so a change of the set S it reads flips only:

* the rows whose `x` equals a value that entered or left S — `x IN (SELECT col …)` over the
  changed rows (ΔX in X's place), SQLite's own IN (an index on `x` finds them);
* the rows whose `x` is NULL (`NULL IN S` is NULL or, for an empty S, 0);
* every row, where a changed row's `col` is NULL (a NULL in S turns a miss into NULL).

That superset is exact to reach (partition recompute then asks SQLite for those rows' values).
Evaluated, such a test makes SQLite build the whole set S each time a statement runs: a scan of
the subquery's tables per fold, however few outer rows it recomputes. Where the test is a whole
conjunct of the outer WHERE (`correlating_conjuncts`), only its truth counts — NULL and false
both drop the row — and `x IN (SELECT col … WHERE c)` is true exactly when
`x IN (SELECT col … WHERE (c) AND x = col)` is: SQLite compares IN's operands as it compares
`x = col` (the same affinity and collation rules, x on the left). The view's own SQL says so
(`correlated_membership`), where SQLite then searches the subquery's table by an index per outer
row instead of building S (checked with EXPLAIN QUERY PLAN at CREATE; otherwise left as written).

This module recognizes the form in the user's text: a plain column (`x`, `a.x`) on the left, at
the start of an expression (`a + x IN …`, `a = x IN …`, `y IS NOT x IN …` and `y BETWEEN 0
AND x IN …` have another left operand: SQLite groups them to the left), and a
subquery whose select list is one plain column and which has nothing after its WHERE (no GROUP
BY, aggregate, ORDER BY/LIMIT or set operation, which would make S something other than the
column's values over its rows).
"""

from __future__ import annotations

from collections.abc import Sequence

import apsw
from sqlglot.tokens import TokenType

from matview.names import fold, quote
from matview.sql.sqltext import Token, column_reference, matching_paren, split_conjuncts, tokenize
from matview.storage.schema import TableInfo

#: the operands of one membership test: the left operand's text and the subquery column's text
Membership = tuple[str, str]

#: tokens after which an expression starts (so a column right after one is a whole left operand)
_STARTS = {
    TokenType.WHERE,
    TokenType.AND,
    TokenType.OR,
    TokenType.NOT,
    TokenType.L_PAREN,
    TokenType.COMMA,
    TokenType.SELECT,
    TokenType.WHEN,
    TokenType.THEN,
    TokenType.ELSE,
    TokenType.CASE,
    TokenType.ON,
}


def _starts_expression(tokens: list[Token], depths: list[int], before: int) -> bool:
    """Whether the token at `before` ends what comes before an expression: a clause word, a
    parenthesis or comma, a CASE word, or a logical AND/OR/NOT — not `IS NOT` (`y IS NOT x IN …`
    is `(y IS NOT x) IN …`) nor the AND of a BETWEEN (`y BETWEEN 0 AND x IN …` is
    `(y BETWEEN 0 AND x) IN …`)."""
    kind = tokens[before].kind
    if kind not in _STARTS:
        return False
    if kind == TokenType.NOT:
        return before == 0 or (
            tokens[before - 1].kind != TokenType.NOT and _starts_expression(tokens, depths, before - 1)
        )
    if kind == TokenType.AND:
        return not _ends_a_between(tokens, depths, before)
    return True


def _ends_a_between(tokens: list[Token], depths: list[int], at: int) -> bool:
    """Whether the AND at `at` is a BETWEEN's: walking back over what it joins at its depth —
    whole parenthesized groups (`abs(0)`, `(0)`) and CASE … END spans skipped — a BETWEEN comes
    before any AND, OR or clause word."""
    depth, groups, cases = depths[at], 0, 0
    for index in range(at - 1, -1, -1):
        if depths[index] < depth:
            return False  # (the parenthesis this AND is inside)
        if depths[index] > depth:
            continue
        kind = tokens[index].kind
        if kind == TokenType.R_PAREN:
            groups += 1
        elif kind == TokenType.L_PAREN and groups:
            groups -= 1
        elif kind == TokenType.END:
            cases += 1
        elif kind == TokenType.CASE and cases:
            cases -= 1
        elif groups or cases:
            continue  # (inside a group or a CASE … END walked back over)
        elif kind == TokenType.BETWEEN:
            return True
        elif kind in _STARTS - {TokenType.NOT}:
            return False
    return False


def membership(
    text: str, tokens: list[Token], depths: list[int], select_at: int, from_at: int, where_end: int, end: int
) -> Membership | None:
    """The operands of the membership test whose subquery's SELECT is at `select_at` (its FROM at
    `from_at`, its FROM … WHERE ending at `where_end`, the subquery at `end`), or None where it
    is not one this module reaches by (see the module docstring)."""
    if where_end != end or select_at < 3 or tokens[select_at - 1].kind != TokenType.L_PAREN:
        return None
    at = select_at - 2
    if tokens[at].kind != TokenType.IN:
        return None
    if tokens[at - 1].kind == TokenType.NOT:
        at -= 1
    for width in (1, 3):
        start = at - width
        if start >= 1 and column_reference(tokens[start:at]) and _starts_expression(tokens, depths, start - 1):
            break
    else:
        return None
    if any(depths[i] != depths[at] for i in range(start, at)):
        return None
    first = select_at + 1
    if first < from_at and tokens[first].kind == TokenType.DISTINCT:
        first += 1
    if not column_reference(tokens[first:from_at]):
        return None
    lhs = text[tokens[start].start : tokens[at - 1].end]
    column = text[tokens[first].start : tokens[from_at - 1].end]
    return lhs, column


def in_reach(operands: Membership, inner: str) -> str:
    """The outer rows whose left operand is among the subquery column's values over `inner` (its
    `FROM … WHERE …`, the changed rows in a table's place): SQLite's own IN, so the same affinity
    and collation decide."""
    lhs, column = operands
    return f"({lhs}) IN (SELECT {column} {inner})"


def reach_conditions(operands: Membership, inner: str) -> list[tuple[str, str]]:
    """The conditions on an outer row a change of the set reaches (any one), each with its guard
    ("" or a condition on the change alone, asked once before any outer row is read): its value
    entered or left the set; its left operand is NULL; every row, if a changed value is NULL."""
    lhs, column = operands
    value = '"__dbsp_value"'
    return [
        ("", in_reach(operands, inner)),
        ("", f"({lhs}) IS NULL"),
        (f"EXISTS (SELECT 1 FROM (SELECT {column} AS {value} {inner}) WHERE {value} IS NULL)", "1"),
    ]


#: clause words that end a WHERE clause at its depth
_AFTER_WHERE = (
    TokenType.GROUP_BY,
    TokenType.HAVING,
    TokenType.WINDOW,
    TokenType.ORDER_BY,
    TokenType.LIMIT,
    TokenType.UNION,
    TokenType.INTERSECT,
    TokenType.EXCEPT,
)


def correlating_conjuncts(tokens: list[Token], depths: list[int]) -> set[int]:
    """The SELECT tokens (indexes) of the subqueries of `x IN (SELECT …)` tests that are each a
    whole conjunct of the depth-0 WHERE in `tokens` (or of a parenthesized conjunct of it, and so
    on): where only whether the test is true counts."""
    where = next((i for i, t in enumerate(tokens) if depths[i] == 0 and t.kind == TokenType.WHERE), None)
    if where is None:
        return set()
    end = next((i for i in range(where + 1, len(tokens)) if depths[i] == 0 and tokens[i].kind in _AFTER_WHERE), None)
    found: set[int] = set()
    _collect(tokens, where + 1, len(tokens) if end is None else end, found)
    return found


def _collect(tokens: list[Token], lo: int, hi: int, found: set[int]) -> None:
    at = {id(token): index for index, token in enumerate(tokens[lo:hi], lo)}
    for conjunct in split_conjuncts("", tokens[lo:hi]):
        parts = [at[id(token)] for token in conjunct.tokens]
        if not parts:
            continue
        first, last = parts[0], parts[-1]
        if tokens[first].kind == TokenType.L_PAREN and matching_paren(tokens, first) == last:
            _collect(tokens, first + 1, last, found)  # (a parenthesized group of conjuncts)
            continue
        for width in (1, 3):
            opening = first + width + 1
            if (
                opening + 1 <= last
                and column_reference(tokens[first : first + width])
                and tokens[first + width].kind == TokenType.IN
                and tokens[opening].kind == TokenType.L_PAREN
                and tokens[opening + 1].kind == TokenType.SELECT
                and matching_paren(tokens, opening) == last
            ):
                found.add(opening + 1)


def correlated_membership(
    conn: apsw.Connection,
    operands: Membership,
    outer: Sequence[tuple[str, TableInfo]],
    subquery: str,
    has_where: bool,
) -> str | None:
    """The conjunct `x = col` (x qualified by its outer table) that makes `subquery` (the text of
    `x IN (subquery)`, a whole WHERE conjunct) search its table per outer row, or None where x is
    not one outer table's column, a name inside the subquery could hide it, or SQLite would
    still scan (the subquery's tables unindexed for it: each outer row would cost a scan)."""
    lhs, column = operands
    reference = column_reference(tokenize(lhs))
    if reference is None:
        return None
    qualifier, name = reference
    owners = [
        (alias, table)
        for alias, table in outer
        if (fold(alias) == fold(qualifier) if qualifier else True) and table.column(name) is not None
    ]
    # (the outer alias named anywhere inside — an alias of the subquery's own tables, a derived
    # table, a CTE or a view inlined there under that alias, a table of that name — could bind
    # `alias.x` inside the subquery)
    if len(owners) != 1 or any(t.is_name and fold(t.text) == fold(owners[0][0]) for t in tokenize(subquery)):
        return None
    alias, table = owners[0]
    found = table.column(name)
    assert found is not None
    left = f"{quote(alias)}.{quote(found.name)}"
    condition = f"{left} = {column}"
    sources = ", ".join(f"main.{quote(t.name)} AS {quote(a)}" for a, t in outer)
    correlated = f"{subquery} AND {condition}" if has_where else f"{subquery} WHERE {condition}"
    return condition if _searched(conn, f"SELECT 1 FROM {sources} WHERE {left} IN ({correlated})") else None


def _searched(conn: apsw.Connection, select: str) -> bool:
    """Whether SQLite runs `select`'s IN subquery correlated, searching (never scanning) its tables."""
    try:
        plan = [(int(r[0]), int(r[1]), str(r[3])) for r in conn.execute(f"EXPLAIN QUERY PLAN {select}")]
    except apsw.Error:
        return False
    tops = {i for i, _parent, detail in plan if detail.startswith("CORRELATED LIST SUBQUERY")}
    inside = [detail for i, parent, detail in plan if parent in tops]
    return bool(inside) and all(d.startswith("SEARCH ") for d in inside)
