"""Uncorrelated scalar subqueries compared in the outer WHERE: the outer rows a change of their
value reaches (RELATIONAL.md R4; issue 6's "work proportional to the change").

In `amount > (SELECT avg(amount) FROM orders)` every row reads the average, so any write of
orders may flip any row — but only the rows whose conjunct is true under the old value and not
under the new one (or the reverse) do flip. Such a subquery's reach (`ValueReach`) is its
conjunct: a fold computes the value now, compares it with the value the kept rows were computed
under, and where it moved asks SQLite for the roots whose conjunct differs under the two values
(`operators.scalar_values`) — a scan of the outer FROM inside SQLite, where recomputing every
root, or the whole SELECT, cost a row in Python per output row.

The value is bound as a parameter in the conjunct and in the rows the fold computes, so the
value kept is the one the kept rows stand for. A bound parameter has no affinity; a
subquery's value has its result expression's (a column's, a CAST's). Only subqueries whose
result is a function call or an arithmetic expression, which have none, are reached by value:
the comparison is then the same. (SQLite takes no collation from a subquery's value.)
"""

from __future__ import annotations

import itertools
import re
from dataclasses import replace

import apsw
from sqlglot.tokens import TokenType

from matview.errors import Error
from matview.names import quote
from matview.operators.exact_extrema import EXACT_EXTREMA
from matview.operators.exact_sums import EXACT_SUMS
from matview.plan import WEIGHT, Plan, Template, ValueReach, render
from matview.sql.grouped_names import identifiers
from matview.sql.reach_filter import never_fails
from matview.sql.sqltext import (
    SET_OPERATIONS,
    Token,
    depth_walk,
    matching_paren,
    split_clauses,
    split_conjuncts,
    tokenize,
)

#: a source placeholder, rendered as a name the tokenizer keeps whole and `_template` finds again
_MARKER = re.compile(r'"__dbsp_source_(\d+)"')

#: the order-free SUM/TOTAL/AVG `subquery_values.exact_sum_renames` called instead, back to
#: SQLite's own, which a value is computed with (in C: a Python aggregate cost a call per row)
_SUMS = {twin: name for name, twin in EXACT_SUMS.items()}

#: … and MIN/MAX, where the subquery's value is the extreme itself and is compared: which of tied
#: 5 and 5.0 (or 0.0 and -0.0) SQLite's scan meets first, which an index made later may change,
#: then decides no row
_EXTREMA = {twin: name for name, twin in EXACT_EXTREMA.items()}

#: the operators around a subquery whose value is only compared or tested for truth
_COMPARING = {
    TokenType.EQ, TokenType.NEQ, TokenType.LT, TokenType.GT, TokenType.LTE, TokenType.GTE, TokenType.IS,
    TokenType.NOT, TokenType.BETWEEN, TokenType.AND, TokenType.OR,
}  # fmt: skip

#: functions whose call keeps its argument's affinity (SQLite skips them as it skips COLLATE)
_TRANSPARENT = {"likely", "unlikely", "likelihood", "cast"}

#: binary operators whose result has no affinity
_ARITHMETIC = {TokenType.PLUS, TokenType.DASH, TokenType.STAR, TokenType.SLASH, TokenType.MOD, TokenType.DPIPE}


def with_value_reaches(conn: apsw.Connection, plan: Plan) -> Plan:
    """`plan` with a `ValueReach` on each uncorrelated scalar subquery that stands alone in a
    top-level conjunct of the outer WHERE, reads base tables only and has a value without
    affinity; the others as they were."""
    if not plan.root_recompute or not plan.subquery_reach:
        return plan
    text = render(
        plan.stage1, **{WEIGHT: "1"}, **{f"source{i}": f'"__dbsp_source_{i}"' for i in range(len(plan.sources))}
    )
    tokens = tokenize(text)
    try:
        where = split_clauses(text, tokens).where
    except Error:
        return plan
    if not where:
        return plan
    found = list(plan.subquery_reach)
    main = {f"source{i}": f"main.{quote(t)}" for i, t in enumerate(plan.sources)}
    for conjunct in _conjuncts(text, where.tokens):
        value = _value_reach(conjunct, plan)
        if value is None:
            continue
        numbers, reach = value
        at = next((k for k, r in enumerate(found) if set(r.occurrences) == numbers and r.membership is None), None)
        if at is not None and _usable(conn, plan, reach, main):
            found[at] = found[at]._replace(value=reach)
    return replace(plan, subquery_reach=tuple(found))


def _conjuncts(text: str, tokens: tuple[Token, ...]) -> list[str]:
    """The top-level conjuncts of a condition, a parenthesized AND split too (the front end
    writes the user's WHERE in parentheses)."""
    found = []
    for conjunct in split_conjuncts(text, tokens):
        inner = conjunct.tokens
        wrapped = (
            len(inner) > 2
            and inner[0].kind == TokenType.L_PAREN
            and inner[1].kind not in (TokenType.SELECT, TokenType.WITH, TokenType.VALUES)
            and matching_paren(inner, 0) == len(inner) - 1
        )
        found += _conjuncts(text, inner[1:-1]) if wrapped else [conjunct.text]
    return found


def _value_reach(conjunct: str, plan: Plan) -> tuple[set[int], ValueReach] | None:
    """The conjunct's one subquery (none nested) as a `ValueReach`, with the occurrences it
    reads: None where it has none, several, or one whose value may have an affinity."""
    tokens = tokenize(conjunct)
    opens = [
        i
        for i, (a, b) in enumerate(itertools.pairwise(tokens))
        if a.kind == TokenType.L_PAREN and b.kind in (TokenType.SELECT, TokenType.WITH, TokenType.VALUES)
    ]
    if len(opens) != 1 or tokens[opens[0] + 1].kind != TokenType.SELECT:
        return None
    close = matching_paren(tokens, opens[0])
    if not never_fails((*tokens[: opens[0]], *tokens[close + 1 :])):
        return None  # (the reach evaluates it on rows the SELECT may skip: `json_extract` of text raises)
    inner = tokens[opens[0] + 1 : close]
    depths = depth_walk(inner)
    if any(d == 0 and t.kind in SET_OPERATIONS for t, d in zip(inner, depths)):
        return None
    from_at = next((i for i, (t, d) in enumerate(zip(inner, depths)) if d == 0 and t.kind == TokenType.FROM), None)
    first = 2 if len(inner) > 1 and inner[1].kind in (TokenType.DISTINCT, TokenType.ALL) else 1
    if from_at is None or not _without_affinity(inner[first:from_at]):
        return None
    subquery = conjunct[tokens[opens[0]].start : tokens[close].end]
    numbers = {int(n) for n in _MARKER.findall(subquery)}
    if not numbers or any(plan.sources[n] in plan.upstream_views for n in numbers):
        return None  # (a materialized view's rows are read through its shadow: not by value)
    before = tokens[opens[0] - 1].kind if opens[0] else None
    after = tokens[close + 1].kind if close + 1 < len(tokens) else None
    compared = before in (None, *_COMPARING) and after in (None, *_COMPARING)
    result = inner[first:from_at]
    bare = len(result) > 2 and result[0].text.lower() in _EXTREMA and matching_paren(result, 1) == len(result) - 1
    # (the extreme itself, compared: `max(y) / 2` or `typeof(max(y))` would tell 5 from 5.0)
    evaluated = _originals(subquery, {**_SUMS, **_EXTREMA} if compared and bare else _SUMS)
    if any(t.text.lower() in _EXTREMA for t in tokenize(evaluated)):
        return None  # (its MIN/MAX twin raises on tied 5 and 5.0, where SQLite's SELECT answers)
    return numbers, ValueReach(_template(subquery), _template(conjunct), _template(evaluated))


def _without_affinity(expression: list[Token]) -> bool:
    """Whether a result expression has no affinity: a function call (not CAST, nor one SQLite
    sees through), or an expression whose outermost operator is arithmetic."""
    if not expression or any(t.kind == TokenType.COMMA for t, d in zip(expression, depth_walk(expression)) if d == 0):
        return False
    head = expression[0]
    if (
        len(expression) >= 3
        and head.is_name
        and head.text.lower() not in _TRANSPARENT
        and expression[1].kind == TokenType.L_PAREN
        and matching_paren(expression, 1) == len(expression) - 1
    ):
        return True
    depths = depth_walk(expression)
    return any(d == 0 and t.kind in _ARITHMETIC for t, d in zip(expression[1:], depths[1:]))


def _originals(subquery: str, originals: dict[str, str]) -> str:
    """The subquery calling SQLite's own functions where the front end made them order-free
    (`originals`: twin → SQLite's): the value is bound for every row at once, and is then the
    one SQLite's own SELECT gives — in its scan order, which the value kept is checked against
    (`scalar_values.planned_as`)."""
    edits = [t for t in tokenize(subquery) if t.text.lower() in originals]
    for token in reversed(edits):
        subquery = subquery[: token.start] + originals[token.text.lower()] + subquery[token.end :]
    return subquery


def _template(text: str) -> Template:
    """`text` with each source marker a placeholder again."""
    pieces: list[str] = []
    position = 0
    for match in _MARKER.finditer(text):
        pieces += [text[position : match.start()], f"source{match.group(1)}"]
        position = match.end()
    return (*pieces, text[position:])


def _usable(conn: apsw.Connection, plan: Plan, reach: ValueReach, main: dict[str, str]) -> bool:
    """Whether the value prepares alone (it reads no outer column), the reach query does (the
    conjunct may name a select-list alias, which only the SELECT knows), and the conjunct reads
    the outer row: one that does not (`(SELECT count(*) FROM t) > 0`) flips every row at once,
    where running the SELECT once is cheaper than recomputing each row."""
    subquery = render(reach.subquery, **main)
    conjunct = render(reach.conjunct, **main).replace(subquery, "?")
    outer = render(plan.from_template, **main)
    try:  # (backticked: a double-quoted name no table has is a string alone, an outer column in the query)
        conn.execute(f"EXPLAIN SELECT {identifiers(render(reach.evaluated, **main))}").fetchall()
        conn.execute(f"EXPLAIN SELECT 1 FROM {outer} WHERE CASE WHEN {conjunct} THEN 1 ELSE 0 END", (None,)).fetchall()
    except apsw.SQLError:
        return False
    try:
        conn.execute(f"EXPLAIN SELECT CASE WHEN {identifiers(conjunct)} THEN 1 ELSE 0 END", (None,)).fetchall()
    except apsw.SQLError:
        return True  # (it names a column of the outer FROM)
    return False
