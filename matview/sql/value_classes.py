"""The one storage class an expression's values have, where SQLite decides it whatever the rows
hold: a literal's, a text function's (`strftime`, `lower`, `printf`, `||`), an integer or real
one's (`length`, `julianday`), a CAST to TEXT, INTEGER, REAL or BLOB, a CASE whose every result
has that class (`CASE WHEN ms < 180000 THEN 'short' ELSE 'long' END`). Two such values SQLite calls
equal are identical (under BINARY), so GROUP BY, DISTINCT and set operations over them have no
variants to choose between (`operators.variants`)."""

from __future__ import annotations

from sqlglot.tokens import TokenType

from matview.plan import OutputColumn
from matview.sql.sqltext import Token, depth_walk, matching_paren
from matview.storage.schema import affinity, has_one_variant

#: functions whose result has one storage class (or is NULL), whatever their arguments
_FUNCTION_CLASSES = {
    **dict.fromkeys(
        (
            "strftime", "date", "time", "datetime", "printf", "format", "lower", "upper", "hex", "quote",
            "typeof", "char", "replace", "trim", "ltrim", "rtrim", "concat", "concat_ws",
        ),
        "text",
    ),
    **dict.fromkeys(("length", "octet_length", "instr", "unicode", "sign"), "integer"),  # (unixepoch: REAL with subsec)
    **dict.fromkeys(("julianday", "round"), "real"),
}  # fmt: skip

_CAST_CLASSES = {"TEXT": "text", "INTEGER": "integer", "REAL": "real", "BLOB": "blob"}


def one_class(tokens: tuple[Token, ...], collation: str, user_functions: frozenset[str] = frozenset()) -> str:
    """The one storage class of an expression's values where no two of them are equal but
    different: a literal's (one value, whatever its collation), or `result_class` under BINARY
    (`user_functions`: names the user registered, a built-in's too, which say nothing)."""
    if literal_class(tokens):
        return literal_class(tokens)
    return result_class(tokens, user_functions) if collation.upper() == "BINARY" else ""


def literal_class(tokens: tuple[Token, ...]) -> str:
    """The storage class of a literal ('text', 'integer', 'real', 'null'), or "" for anything else."""
    if len(tokens) == 2 and tokens[0].kind in (TokenType.DASH, TokenType.PLUS) and tokens[1].kind == TokenType.NUMBER:
        tokens = tokens[1:]  # (a sign makes a number of a string: -'a' is 0)
    if len(tokens) != 1:
        return ""
    kind, text = tokens[0].kind, tokens[0].text.lower()
    if kind == TokenType.STRING:
        return "text"
    if kind == TokenType.NULL:
        return "null"
    if kind == TokenType.NUMBER:
        return "real" if any(c in text for c in ".e") else "integer"
    return ""


def result_class(tokens: tuple[Token, ...], user_functions: frozenset[str] = frozenset()) -> str:
    """The one storage class of an expression's values (see the module docstring), or ""."""
    while len(tokens) > 2 and tokens[0].kind == TokenType.L_PAREN and matching_paren(tokens, 0) == len(tokens) - 1:
        tokens = tokens[1:-1]
    if not tokens:
        return ""
    found = literal_class(tokens)
    if found:
        return found
    depths = depth_walk(tokens)
    top = [t for t, d in zip(tokens, depths) if d == 0]
    if tokens[0].kind == TokenType.CASE and tokens[-1].kind == TokenType.END:
        return _case_class(tokens, depths, user_functions)
    if any(t.kind == TokenType.DPIPE for t in top):
        # operands joined by `||` only (`a || b + 1` is `(a || b) + 1`: a number)
        # (real names only: keywords such as CASE … ELSE d END look like names too)
        names_ = (TokenType.VAR, TokenType.IDENTIFIER)
        return "text" if all(t.kind in names_ or t.kind in _CONCATENATED for t in top) else ""
    if len(tokens) > 3 and tokens[1].kind == TokenType.L_PAREN and matching_paren(tokens, 1) == len(tokens) - 1:
        name = tokens[0].text.lower()
        if name == "cast":
            inner = tokens[2:-1]
            at = next(
                (i for i, (t, d) in enumerate(zip(inner, depth_walk(inner))) if d == 0 and t.kind == TokenType.ALIAS),
                None,
            )
            declared = " ".join(t.text for t in inner[at + 1 :]) if at is not None else ""
            return _CAST_CLASSES.get(affinity(declared), "") if declared else ""
        if tokens[0].is_name and tokens[0].kind != TokenType.STRING and name not in user_functions:
            return _FUNCTION_CLASSES.get(name, "")
    return ""


def _case_class(tokens: tuple[Token, ...], depths: list[int], user_functions: frozenset[str]) -> str:
    """A `CASE … END`'s one storage class: that of every THEN and ELSE result (NULL aside: a
    CASE without ELSE gives NULL too, which is one value), or ""."""
    results: list[list[Token]] = []
    nested = 0  # (a CASE inside a result: its WHEN/THEN/ELSE/END are its own)
    current: list[Token] | None = None
    for token, depth in zip(tokens[1:-1], depths[1:-1]):
        if depth == 0 and token.kind == TokenType.CASE:
            nested += 1
        elif depth == 0 and token.kind == TokenType.END:
            if not nested:
                return ""  # (this CASE ends before the last token: `CASE … END + CASE … END`)
            nested -= 1
        elif depth == 0 and not nested and token.kind in (TokenType.WHEN, TokenType.THEN, TokenType.ELSE):
            current = [] if token.kind in (TokenType.THEN, TokenType.ELSE) else None
            if current is not None:
                results.append(current)
            continue
        if current is not None:
            current.append(token)
    classes = {result_class(tuple(result), user_functions) for result in results}
    if not results or "" in classes or len(classes - {"null"}) > 1:
        return ""
    return next(iter(classes - {"null"}), "null")


#: what may stand at the top of a concatenation besides names (function calls' parentheses)
_CONCATENATED = {
    TokenType.DPIPE,
    TokenType.DOT,
    TokenType.L_PAREN,
    TokenType.R_PAREN,
    TokenType.STRING,
    TokenType.NUMBER,
    TokenType.NULL,
    TokenType.COLLATE,
}


def output_has_one_variant(column: OutputColumn) -> bool:
    """Whether values SQLite calls equal are identical in an output column: one storage class
    (`value_class`), or a typed BINARY column — but not a CAST to NUMERIC, which leaves a REAL 1.0
    a REAL where a NUMERIC column would store 1."""
    if column.value_class:
        return True
    numeric_cast = column.is_cast and affinity(column.decltype) == "NUMERIC"
    return has_one_variant(column.decltype, column.collation) and not numeric_cast
