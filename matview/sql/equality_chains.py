"""A front-end pass: join columns compared as equal under different collations in one chain.

SQLite's planner takes `x.k = y.k AND z.k = y.k` for a chain of equal columns and may look `z`
up by `x.k` (through an index on z.k under x.k's comparison's collation), which is right only
when both comparisons use one collation. With `c.k` RTRIM and `a.k` NOCASE, `SELECT … FROM c x
JOIN b y ON x.k = y.k JOIN a z ON z.k = y.k` gives one answer with an index on `a(k COLLATE
RTRIM)` and another without it (3.54, found by hunt 33): which rows such a view holds would
follow SQLite's plan, and the delta terms are planned otherwise than the SELECT re-run. The
same holds for `IS`, `==`, USING and NATURAL, row values, and a constant compared with a
chained column under another collation (`x.k = 'a' COLLATE NOCASE`, hunt 36). The engine
refuses such a chain (with the fallback on, the view is recomputed whole: its SELECT as
written, recomputed when an index appears). The operands are read near each operator (a column
in parentheses, after a unary `+`, with COLLATEs): where an operand is more than that, the
column next to the operator is taken for it — a refusal too many at worst, never one too few.
One collation per chain — every schema whose join keys share theirs — is untouched.
"""

from __future__ import annotations

from sqlglot.tokens import TokenType

from matview.errors import Error, UnsupportedQuery
from matview.names import fold
from matview.sql.from_clause import FromClause
from matview.sql.sqltext import Token, explicit_collation, inside_subqueries, matching_paren

Column = tuple[int, str]  # (occurrence, column name folded)


def refuse_mixed_collation_chains(sql: str, tokens: list[Token], source: FromClause) -> None:
    """Raise `UnsupportedQuery` where a column compared as equal with another column is also
    compared as equal with a column or a value under another collation (see the docstring)."""
    if not source.is_join:
        return
    inside = inside_subqueries(tokens)
    joined: set[Column] = set()  # columns in a column-to-column equality
    compared: dict[Column, dict[str, str]] = {}  # column → {collation: the comparison's text}

    def record(left: Column | None, right: Column | None, collation: str, text: str) -> None:
        for column in (left, right):
            if column is not None:
                compared.setdefault(column, {}).setdefault(collation, text)
        if left is not None and right is not None:
            joined.update((left, right))

    for index in range(len(tokens)):
        if index in inside or not _is_equality(tokens, index):
            continue
        left_at, right_end = _left_operand(tokens, index), _right_operand(tokens, index + 1)
        left, right = _balanced(tokens[left_at:index]), _balanced(tokens[index + 1 : right_end])
        text = sql[tokens[left_at].start : tokens[right_end - 1].end] if right_end > left_at else ""
        for one, other in _pairs(left, right):
            first, second = _column(source, one), _column(source, other)
            own = _own_collation(source, first) or _own_collation(source, second) or "BINARY"
            record(first, second, explicit_collation(one) or explicit_collation(other) or own, text)
    for earlier, later, collation, merged in _using_pairs(source):
        record(earlier, later, collation, merged)
    for column in joined:
        found = compared[column]
        if len(found) > 1:
            (first_collation, first_text), (second_collation, second_text) = list(found.items())[:2]
            raise UnsupportedQuery(
                f"join columns compared under two collations in one chain ({second_text} under {second_collation}, "
                f"{first_text} under {first_collation}): SQLite's answer depends on its plan"
            )


def _balanced(tokens: list[Token]) -> list[Token]:
    """An operand without the parentheses it was read with that open before it or close after
    it (`(x.k = y.k)` reads `(x.k` and `y.k)`)."""
    tokens = list(tokens)
    while tokens and tokens[0].kind == TokenType.L_PAREN and _excess(tokens) > 0:
        tokens.pop(0)
    while tokens and tokens[-1].kind == TokenType.R_PAREN and _excess(tokens) < 0:
        tokens.pop()
    return tokens if _excess(tokens) == 0 else []


def _excess(tokens: list[Token]) -> int:
    return sum(t.kind == TokenType.L_PAREN for t in tokens) - sum(t.kind == TokenType.R_PAREN for t in tokens)


def _is_equality(tokens: list[Token], index: int) -> bool:
    token = tokens[index]
    if token.kind == TokenType.EQ:
        return True
    return (
        token.kind == TokenType.IS
        and index + 1 < len(tokens)
        and tokens[index + 1].kind not in (TokenType.NOT, TokenType.NULL)
    )


def _left_operand(tokens: list[Token], at: int) -> int:
    """Where the column-like operand before the operator at `at` begins: COLLATEs, `)`s, a
    (qualified) name or a parenthesized row value, `+`, `(`s read backwards."""
    index = at - 1
    while index >= 1 and tokens[index - 1].kind == TokenType.COLLATE:
        index -= 2
    if index >= 0 and tokens[index].kind == TokenType.R_PAREN:
        opening = _group_start(tokens, index)
        if any(t.kind == TokenType.COMMA for t in tokens[opening:index]):  # (a row value: its whole group)
            return opening
    while index >= 0 and tokens[index].kind == TokenType.R_PAREN:
        index -= 1
    while index >= 2 and tokens[index - 1].kind == TokenType.DOT:
        index -= 2
    while index >= 1 and tokens[index - 1].kind in (TokenType.L_PAREN, TokenType.PLUS):
        index -= 1
    return max(index, 0)


def _group_start(tokens: list[Token], close: int) -> int:
    """The `(` the `)` at `close` closes."""
    depth = 0
    for index in range(close, -1, -1):
        depth += {TokenType.R_PAREN: 1, TokenType.L_PAREN: -1}.get(tokens[index].kind, 0)
        if depth == 0:
            return index
    return 0


def _right_operand(tokens: list[Token], start: int) -> int:
    """Where the column-like operand after an operator ending before `start` ends."""
    index = start
    if index < len(tokens) and tokens[index].kind == TokenType.L_PAREN:
        close = matching_paren(tokens, index)
        if any(t.kind == TokenType.COMMA for t in tokens[index:close]):  # (a row value: its whole group)
            return close + 1
    while index < len(tokens) and tokens[index].kind in (TokenType.L_PAREN, TokenType.PLUS):
        index += 1
    index += 1
    while index + 1 < len(tokens) and tokens[index].kind == TokenType.DOT:
        index += 2
    while index < len(tokens) and tokens[index].kind == TokenType.R_PAREN:
        index += 1
    while index + 1 < len(tokens) and tokens[index].kind == TokenType.COLLATE:
        index += 2
    return min(index, len(tokens))


def _pairs(left: list[Token], right: list[Token]) -> list[tuple[list[Token], list[Token]]]:
    """The operands compared: a row value's elements pairwise (SQLite splits `(a, b) = (c, d)`)."""
    a, b = _elements(left), _elements(right)
    if len(a) > 1 and len(a) == len(b):
        return list(zip(a, b))
    return [(left, right)]


def _elements(tokens: list[Token]) -> list[list[Token]]:
    if len(tokens) < 2 or tokens[0].kind != TokenType.L_PAREN or tokens[-1].kind != TokenType.R_PAREN:
        return [tokens]
    try:
        if matching_paren(tokens, 0) != len(tokens) - 1:
            return [tokens]
    except Error:  # (an operand read with a parenthesis that opens before it: `(x.k = y.k)`)
        return [tokens]
    parts: list[list[Token]] = [[]]
    depth = 0
    for token in tokens[1:-1]:
        if token.kind == TokenType.L_PAREN:
            depth += 1
        elif token.kind == TokenType.R_PAREN:
            depth -= 1
        if depth == 0 and token.kind == TokenType.COMMA:
            parts.append([])
        else:
            parts[-1].append(token)
    return parts


def _column(source: FromClause, operand: list[Token]) -> Column | None:
    """The (occurrence, column) an operand names: a column reference in parentheses, after a
    unary `+`, with COLLATEs — or the column nearest the operator in a larger expression."""
    names = [i for i, t in enumerate(operand) if t.is_name and t.kind != TokenType.COLLATE]
    names = [i for i in names if i == 0 or operand[i - 1].kind != TokenType.COLLATE]
    for at in names:
        qualified = at >= 2 and operand[at - 1].kind == TokenType.DOT
        if at + 1 < len(operand) and operand[at + 1].kind == TokenType.DOT:
            continue  # (a qualifier)
        ref = source.resolve(operand[at - 2].text if qualified else None, operand[at].text)
        if ref is not None and ref.column is not None:
            return ref.occurrence, fold(ref.column.name)
    return None


def _own_collation(source: FromClause, column: Column | None) -> str | None:
    if column is None:
        return None
    found = source.occurrences[column[0]].table.column(column[1])
    return found.collation.upper() if found is not None else None


def _using_pairs(source: FromClause) -> list[tuple[Column, Column, str, str]]:
    """The equalities USING and NATURAL make: each merged column of an occurrence with the same
    column of every occurrence before it (SQLite compares it with one of them: all are taken),
    under the earlier one's collation."""
    pairs = []
    for index, merged in enumerate(source.hidden):
        for name in merged:
            right = (index, fold(name))
            for before in range(index):
                column = source.occurrences[before].table.column(name)
                if column is not None:
                    collation = column.collation.upper()
                    pairs.append(((before, fold(name)), right, collation, f"USING ({name})"))
    return pairs
