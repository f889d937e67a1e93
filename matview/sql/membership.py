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
This module recognizes the form in the user's text: a plain column (`x`, `a.x`) on the left, at
the start of an expression (`a + x IN …`, `a = x IN …`, `y IS NOT x IN …` and `y BETWEEN 0
AND x IN …` have another left operand: SQLite groups them to the left), and a
subquery whose select list is one plain column and which has nothing after its WHERE (no GROUP
BY, aggregate, ORDER BY/LIMIT or set operation, which would make S something other than the
column's values over its rows).
"""

from __future__ import annotations

from sqlglot.tokens import TokenType

from matview.sql.sqltext import Token, column_reference

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


def reach_conditions(operands: Membership, inner: str) -> list[str]:
    """The conditions on an outer row a change of the set reaches (any one): its value entered
    or left the set; its left operand is NULL; a changed row's value is NULL (every row)."""
    lhs, column = operands
    value = '"__dbsp_value"'
    return [
        in_reach(operands, inner),
        f"({lhs}) IS NULL",
        f"EXISTS (SELECT 1 FROM (SELECT {column} AS {value} {inner}) WHERE {value} IS NULL)",
    ]
