"""Which of the WHERE's conjuncts a reach query through a FROM prefix may check.

Where a view with outer joins is maintained per root row (`operators.partition`), a change of a
table X finds the roots it reaches through the joins up to X, with ΔX in X's place. Without the
WHERE's conjuncts, a FROM written with commas (`f LEFT JOIN r ON …, d, i WHERE f.d = d.d AND
f.i = i.i`: TPC-DS q40, q80, q93) makes that prefix a cross product. A conjunct may filter the
prefix's rows where it reads only tables of the prefix and not X itself when an outer join pads
X: every row of the view that a change of X adds or removes is an old or a new row of the whole
FROM passing the WHERE, whose part up to X is a row of the prefix (X's old or new row in it) on
which such a conjunct has the same value. A padded X is the exception: the row whose X a change
removes is padded with NULLs, where a conjunct on X's columns may pass that failed on X's row.
Names a conjunct reads that this module cannot place in one table make it left out."""

from __future__ import annotations

from sqlglot.tokens import TokenType

from matview.names import fold
from matview.plan import Plan, Template
from matview.sql.from_items import OUTER_WORDS
from matview.sql.sqltext import Token, split_conjuncts, tokenize

#: words of an expression that are never the name of a column (TRUE and FALSE are, where a
#: table has a column of that name: SQLite reads the column then)
_NOT_COLUMNS = {
    TokenType.AND,
    TokenType.OR,
    TokenType.NOT,
    TokenType.IS,
    TokenType.NULL,
    TokenType.IN,
    TokenType.LIKE,
    TokenType.GLOB,
    TokenType.BETWEEN,
    TokenType.CASE,
    TokenType.WHEN,
    TokenType.THEN,
    TokenType.ELSE,
    TokenType.END,
    TokenType.ESCAPE,
    TokenType.COLLATE,
    TokenType.DISTINCT,
}
_LITERAL_WORDS = {TokenType.TRUE, TokenType.FALSE}


def prefix_conjuncts(plan: Plan, occurrence: int, top: int) -> str:
    """The conjuncts of `plan.reach_filter` (joined by AND, "" for none) that a reach query
    through the FROM prefix up to `occurrence` (of the `top` outer ones) may check."""
    if not plan.reach_filter:
        return ""
    aliases = [fold(alias) for alias in plan.aliases[:top]]
    columns: list[set[str]] = []
    for table in plan.sources[:top]:
        signature = plan.signature(table)
        if signature is None:  # (a materialized view read as a source: its columns not at hand)
            return ""
        columns.append({fold(str(column[0])) for column in signature})
    allowed = set(range(occurrence + 1)) - ({occurrence} if padded(plan.from_template, occurrence) else set())
    kept = []
    for conjunct in split_conjuncts(plan.reach_filter, tokenize(plan.reach_filter)):
        read = _occurrences_read(list(conjunct.tokens), aliases, columns)
        if read is not None and read <= allowed:
            kept.append(conjunct.text)
    return " AND ".join(kept)


def padded(template: Template, occurrence: int) -> bool:
    """Whether an outer join may pad occurrence `occurrence` of a FROM template with NULLs (an
    outer join placeholder or word between it and the occurrence before it)."""
    at = template.index(f"source{occurrence}")
    before = next((k for k in range(at - 1, -1, -1) if template[k].startswith("source")), -1)
    between = template[before + 1 : at]
    return any(
        part == "outer" if position % 2 else any(t.kind in OUTER_WORDS for t in tokenize(part))
        for position, part in enumerate(between, before + 1)
    )


def _occurrences_read(tokens: list[Token], aliases: list[str], columns: list[set[str]]) -> set[int] | None:
    """The occurrences whose columns `tokens` read, or None where a name is not one column of
    one of them (unknown, ambiguous, or a word this module does not know: any word not an
    operator of an expression counts as a name, so that a conjunct is never taken to read less
    than it does)."""
    read: set[int] = set()
    for index, token in enumerate(tokens):
        if token.kind in _NOT_COLUMNS:
            if any(fold(token.text) in names for names in columns):
                return None  # (a keyword some table has a column named by: SQLite may read it so)
            continue
        if not token.is_name:  # (a quoted identifier is one, a string never)
            continue
        after = tokens[index + 1].kind if index + 1 < len(tokens) else None
        before = tokens[index - 1].kind if index else None
        if after == TokenType.L_PAREN or before in (TokenType.DOT, TokenType.COLLATE):
            continue  # (a function, a qualified column's name, a collation)
        if after == TokenType.DOT:
            if fold(token.text) not in aliases:
                return None
            read.add(aliases.index(fold(token.text)))
            continue
        owners = [k for k, names in enumerate(columns) if fold(token.text) in names]
        if token.kind in _LITERAL_WORDS and not owners:
            continue  # (TRUE, FALSE: a literal where no table has such a column)
        if len(owners) != 1:
            return None
        read.add(owners[0])
    return read
