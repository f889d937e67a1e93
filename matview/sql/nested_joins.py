"""A pass of the front end: a parenthesized join that starts a FROM clause — the way Microsoft
Access and many query builders write every join, `FROM ((a JOIN b ON …) JOIN c ON …) JOIN d ON …`
— written without its parentheses.

SQLite's joins nest to the left (`a JOIN b ON x JOIN c ON y` is `(a JOIN b ON x) JOIN c ON y`),
so the parentheses around the leading join change nothing: the same joins in the same order,
whatever their kind (LEFT, RIGHT, FULL too), the same columns for `*`, each table still named
by its own alias. Left as written (and refused by name by the later passes): a parenthesized
join elsewhere in the FROM clause (`a JOIN (b JOIN c ON …) ON …` nests to the right), one with
an alias of its own, and one whose joins merge columns (USING, NATURAL), which SQLite resolves
inside the parentheses as a subquery of their own.
"""

from __future__ import annotations

from sqlglot.tokens import TokenType

from matview.sql.from_items import JOIN_WORDS, OUTER_WORDS
from matview.sql.sqltext import ENDS_FROM, depth_walk, matching_paren, splice, tokenize

_OPENS_A_QUERY = (TokenType.SELECT, TokenType.WITH, TokenType.VALUES)
#: what may follow the closing parenthesis: a join, or the end of the FROM clause
_AFTER = {
    *JOIN_WORDS,
    *OUTER_WORDS,
    TokenType.COMMA,
    TokenType.R_PAREN,
    TokenType.SEMICOLON,
    *ENDS_FROM,
}


def unnest_leading_joins(sql: str) -> str:
    """`sql` with the parentheses around each FROM clause's leading join removed (see the
    module docstring); `sql` itself when there are none."""
    while True:
        tokens = tokenize(sql)
        edits: list[tuple[int, int, str]] = []
        for index, token in enumerate(tokens[:-2]):
            if token.kind != TokenType.FROM or tokens[index + 1].kind != TokenType.L_PAREN:
                continue
            opening = index + 1
            if tokens[opening + 1].kind in _OPENS_A_QUERY:
                continue
            closing = matching_paren(tokens, opening)
            inner = tokens[opening + 1 : closing]
            depths = depth_walk(inner)
            if any(d == 0 and t.kind in (TokenType.USING, TokenType.NATURAL) for t, d in zip(inner, depths)):
                continue
            if closing + 1 < len(tokens) and tokens[closing + 1].kind not in _AFTER:
                continue  # (an alias: the join is a subquery of that name)
            edits += [(tokens[i].start, tokens[i].end, " ") for i in (opening, closing)]
            break  # (one at a time: the offsets of the others move)
        if not edits:
            return sql
        sql = splice(sql, edits)
