"""Whether `key = other` may convert the key's values before comparing (SQLite's affinity rules).

A lookup `(SELECT n FROM g WHERE g.code = c.id)` finds at most one group of `g` only if two
distinct values of the key cannot both equal the other side. Distinct typed BINARY values stay
distinct unless the comparison converts them: SQLite applies NUMERIC affinity to an operand of
TEXT, BLOB or no affinity when the other operand has INTEGER, REAL or NUMERIC affinity — the
TEXT keys `'1'` and `'01'` both equal the INTEGER `1`. So a key of numeric affinity is never
converted; a TEXT key is, when the other side may have numeric affinity: a column of numeric
affinity, a CAST to a numeric type, a subquery (its column's affinity), anything not known.
An expression (arithmetic, a function, a literal, a parameter, `+x`) has no affinity.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot.tokens import TokenType

from matview.names import fold
from matview.sql.sqltext import Token, depth_walk, matching_paren
from matview.sql.subquery_columns import column_shaped
from matview.storage.schema import TableInfo, affinity

#: the outer query's tables a subquery may read columns of: (alias, table)
OuterTables = Sequence[tuple[str, TableInfo]]

_NUMERIC = {"INTEGER", "REAL", "NUMERIC"}


def may_convert_key(key_affinity: str, other: Sequence[Token], outer: OuterTables) -> bool:
    """Whether `key = other` may apply NUMERIC affinity to the key's values (see above)."""
    if key_affinity in _NUMERIC:
        return False
    return _may_be_numeric(list(other), outer)


def _may_be_numeric(tokens: list[Token], outer: OuterTables) -> bool:
    if not tokens:
        return True
    if len(tokens) >= 3 and tokens[-2].kind == TokenType.COLLATE:  # (the operand's own affinity)
        return _may_be_numeric(tokens[:-2], outer)
    if tokens[0].kind == TokenType.L_PAREN and matching_paren(tokens, 0) == len(tokens) - 1:
        if len(tokens) > 1 and tokens[1].kind in (TokenType.SELECT, TokenType.WITH, TokenType.VALUES):
            return True  # (a scalar subquery has its column's affinity)
        return _may_be_numeric(tokens[1:-1], outer)
    whole_call = (
        len(tokens) > 2 and tokens[1].kind == TokenType.L_PAREN and matching_paren(tokens, 1) == len(tokens) - 1
    )
    if tokens[0].text.upper() == "CAST" and whole_call:
        types = [i for i, (t, d) in enumerate(zip(tokens, depth_walk(tokens))) if t.kind == TokenType.ALIAS and d == 1]
        return not types or affinity(" ".join(t.text for t in tokens[types[-1] + 1 : -1])) in _NUMERIC
    if not column_shaped(tokens) or (len(tokens) == 1 and tokens[0].text.upper() == "NULL"):
        return False  # an expression, a literal, a parameter: no affinity
    name = tokens[-1].text
    candidates = [table for alias, table in outer if len(tokens) == 1 or fold(alias) == fold(tokens[0].text)]
    columns = [column for table in candidates if (column := table.column(name)) is not None]
    if len(columns) != 1:
        return True  # (a column of another level, or one not known: it may be numeric)
    return affinity(columns[0].decltype) in _NUMERIC
