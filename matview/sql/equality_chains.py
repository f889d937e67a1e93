"""A front-end pass: join columns compared by `=` under different collations in one chain.

SQLite's planner takes `x.k = y.k AND z.k = y.k` for a chain of equal columns and may look `z`
up by `x.k` (through an index on z.k under x.k's comparison's collation), which is right only
when both comparisons use one collation. With `c.k` RTRIM and `a.k` NOCASE, `SELECT … FROM c x
JOIN b y ON x.k = y.k JOIN a z ON z.k = y.k` gives one answer with an index on `a(k COLLATE
RTRIM)` and another without it (3.54, found by hunt 33): which rows such a view holds would
follow SQLite's plan, and the delta terms are planned otherwise than the SELECT re-run. The
engine refuses such a chain (with the fallback on, the view is recomputed whole: its SELECT as
written, recomputed when an index appears). One collation per chain — every schema whose join
keys share theirs — is untouched.
"""

from __future__ import annotations

from sqlglot.tokens import TokenType

from matview.errors import UnsupportedQuery
from matview.sql.from_clause import FromClause
from matview.sql.sqltext import Token, depth_walk, excerpt, explicit_collation, inside_subqueries

#: tokens that end an operand of `=` at its depth
_BOUNDS = {
    TokenType.AND,
    TokenType.OR,
    TokenType.NOT,
    TokenType.ON,
    TokenType.WHERE,
    TokenType.COMMA,
    TokenType.JOIN,
    TokenType.GROUP_BY,
    TokenType.HAVING,
    TokenType.ORDER_BY,
    TokenType.LIMIT,
    TokenType.WHEN,
    TokenType.THEN,
    TokenType.ELSE,
    TokenType.END,
}


def refuse_mixed_collation_chains(sql: str, tokens: list[Token], source: FromClause) -> None:
    """Raise `UnsupportedQuery` where a column of the FROM clause is compared by `=` with two
    columns under two collations (see the module docstring)."""
    if not source.is_join:
        return
    depths = depth_walk(tokens)
    inside = inside_subqueries(tokens)
    seen: dict[tuple[int, str], dict[str, str]] = {}  # column → {collation: the comparison's text}
    for index, token in enumerate(tokens):
        if token.kind != TokenType.EQ or index in inside:
            continue
        left = _operand(tokens, depths, index, -1)
        right = _operand(tokens, depths, index, 1)
        first, second = _column(source, left), _column(source, right)
        if first is None or second is None:
            continue
        collation = explicit_collation(left) or explicit_collation(right) or _own_collation(source, first)
        text = excerpt(sql[left[0].start : right[-1].end])
        for column in (first, second):
            found = seen.setdefault(column, {})
            found.setdefault(collation, text)
            if len(found) > 1:
                (one, one_text), (other, other_text) = list(found.items())[:2]
                raise UnsupportedQuery(
                    f"join columns compared under two collations in one chain ({other_text} under {other}, "
                    f"{one_text} under {one}): SQLite's answer depends on its plan"
                )


def _operand(tokens: list[Token], depths: list[int], at: int, step: int) -> list[Token]:
    """The tokens of the operand of `=` at `at` on one side (`step` -1: left, 1: right)."""
    depth, found = depths[at], []
    index = at + step
    while 0 <= index < len(tokens):
        token = tokens[index]
        if depths[index] < depth or (depth == depths[index] and token.kind in _BOUNDS):
            break
        if step < 0 and token.kind == TokenType.L_PAREN and depths[index] == depth - 1:
            break
        found.append(token)
        index += step
    return found[::-1] if step < 0 else found


def _column(source: FromClause, operand: list[Token]) -> tuple[int, str] | None:
    """The (occurrence, column) an operand names: a column reference, with an optional COLLATE."""
    core = operand
    if len(core) >= 3 and core[-2].kind == TokenType.COLLATE:
        core = core[:-2]
    names = [t for t in core if t.kind != TokenType.DOT]
    if not names or not all(t.is_name for t in names):
        return None
    if len(core) == 1:
        ref = source.resolve(None, core[0].text)
    elif len(core) == 3 and core[1].kind == TokenType.DOT:
        ref = source.resolve(core[0].text, core[2].text)
    else:
        return None
    if ref is None or ref.column is None:
        return None
    return ref.occurrence, ref.column.name.lower()


def _own_collation(source: FromClause, column: tuple[int, str]) -> str:
    found = source.occurrences[column[0]].table.column(column[1])
    return found.collation.upper() if found is not None else "BINARY"
