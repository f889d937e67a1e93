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
    "ltrim", "rtrim", "typeof", "instr", "date", "time", "datetime", "julianday", "strftime",
    "cast", "replace", "hex", "quote",
}  # fmt: skip

#: operators that raise on some operands: `->`/`->>` on text that is not JSON; LIKE and GLOB on
#: a pattern over 50,000 bytes or an ESCAPE of more than one character (checked below)
_RAISING_OPERATORS = {TokenType.ARROW, TokenType.DARROW, TokenType.RLIKE, TokenType.MATCH}
_PATTERN_OPERATORS = {TokenType.LIKE, TokenType.GLOB}
_LONGEST_PATTERN = 50_000  # (SQLITE_LIMIT_LIKE_PATTERN_LENGTH's default)


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
    """No call of a function that may raise, no operator that may (a LIKE or GLOB only of a
    short literal pattern, with a one-character ESCAPE), and no `schema.table.column` (a reach
    query may read a delta in the table's place, under its alias only)."""
    calls_safe = all(
        nxt.kind != TokenType.L_PAREN or not token.is_name or token.text.lower() in NEVER_FAILING
        for token, nxt in itertools.pairwise(tokens)
    )
    operators_safe = not any(t.kind in _RAISING_OPERATORS for t in tokens) and all(
        _literal(tokens, i + 1, _LONGEST_PATTERN) for i, t in enumerate(tokens) if t.kind in _PATTERN_OPERATORS
    )
    escapes_safe = all(_literal(tokens, i + 1, 1) for i, t in enumerate(tokens) if t.kind == TokenType.ESCAPE)
    return calls_safe and operators_safe and escapes_safe and not _three_part_name(tokens)


def _literal(tokens: tuple[Token, ...], at: int, longest: int) -> bool:
    """Whether token `at` is a string literal of at most `longest` bytes (an ESCAPE's: of one
    character)."""
    if at >= len(tokens) or tokens[at].kind != TokenType.STRING:
        return False
    text = tokens[at].text
    return len(text) == 1 if longest == 1 else len(text.encode()) <= longest


def _three_part_name(tokens: tuple[Token, ...]) -> bool:
    return any(
        a.is_name and b.kind == TokenType.DOT and c.is_name and d.kind == TokenType.DOT
        for a, b, c, d in zip(tokens, tokens[1:], tokens[2:], tokens[3:])
    )
