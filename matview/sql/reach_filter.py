"""Which conditions a reach query may evaluate on rows the view's SELECT never evaluates them on.

A reach query (`operators.partition`) finds the outer rows a change reaches; it evaluates the
WHERE's conjuncts it carries (`Plan.reach_filter`), and the conjunct around a subquery reached by
value (`sql.value_reach`), on rows the SELECT may skip before it gets to them — so only those
that can raise no error on any row (`json_extract` of text that is not JSON raises) are carried.
"""

from __future__ import annotations

import itertools

from sqlglot.tokens import TokenType

from matview.sql.sqltext import Token, has_subquery, split_conjuncts, tokenize

#: functions that never raise an error, whatever row they see: a reach query evaluates its
#: filter on rows the SELECT may never evaluate it on (`Plan.reach_filter`)
NEVER_FAILING = {
    "coalesce", "ifnull", "nullif", "iif", "lower", "upper", "length", "substr", "substring", "trim",
    "ltrim", "rtrim", "typeof", "instr", "date", "time", "datetime", "julianday", "strftime", "like",
    "glob", "cast", "replace", "hex", "quote",
}  # fmt: skip


def reach_filter(where: str) -> str:
    """The WHERE's top-level conjuncts that hold no subquery and call no function that may
    raise an error (`Plan.reach_filter`)."""
    kept = [
        c.text
        for c in split_conjuncts(where, tokenize(where))
        if c.tokens and not has_subquery(c.text) and never_fails(c.tokens)
    ]
    return " AND ".join(f"({text})" for text in kept)


def never_fails(tokens: tuple[Token, ...]) -> bool:
    """No call of a function that may raise, and no `schema.table.column` (a reach query may
    read a delta in the table's place, under its alias only)."""
    calls_safe = all(
        nxt.kind != TokenType.L_PAREN or not token.is_name or token.text.lower() in NEVER_FAILING
        for token, nxt in itertools.pairwise(tokens)
    )
    return calls_safe and not _three_part_name(tokens)


def _three_part_name(tokens: tuple[Token, ...]) -> bool:
    return any(
        a.is_name and b.kind == TokenType.DOT and c.is_name and d.kind == TokenType.DOT
        for a, b, c, d in zip(tokens, tokens[1:], tokens[2:], tokens[3:])
    )
