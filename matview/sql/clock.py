"""Date and time functions that read the clock or the process's time zone.

SQLite's date functions are deterministic except where a time value is 'now' (or missing), or
'subsec'/'subsecond' (the time now, to the millisecond), and where a modifier is 'localtime' or
'utc' (the time zone of the process that folds): SQLite itself calls those uses non-deterministic.
A view over them would keep the clock of its last fold, so they are refused — written as
literals, as constant expressions that compute them (`'no' || 'w'`, which SQLite evaluates here),
or (`clock_words`) as a 'now' string a CTE or plain view may hand to a date function. A
column that *stores* 'now' is the data's affair (README: limits).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import apsw
from sqlglot.tokens import TokenType

from matview.errors import UnsupportedQuery
from matview.sql.sqltext import Token, split_top_level

DATE_FUNCTIONS = frozenset({"date", "time", "datetime", "julianday", "unixepoch", "strftime", "timediff"})
#: time values that are the clock
CLOCK_WORDS = frozenset({"now", "subsec", "subsecond"})


def refuse_clock_dependent_date(conn: apsw.Connection, sql: str, function: Token, inner: list[Token]) -> None:
    """Refuse one call of a date function (`inner`: the tokens between its parentheses) whose
    time value may be the clock or whose modifier may be a time zone."""
    where = f"{function.text}()"
    arguments = [a for a in split_top_level(sql, inner) if a] if inner else []
    # (strftime's first is the format; timediff's two are both time values, without modifiers)
    needed = 2 if function.text.lower() in ("strftime", "timediff") else 1
    if len(arguments) < needed:
        raise UnsupportedQuery(f"{where} without a time value means 'now', which is not deterministic")
    times = arguments[1:needed] if function.text.lower() == "strftime" else arguments[:needed]
    for argument in times:
        # ('subsec' or 'subsecond' as the time value is the clock too, to the millisecond: SQLite 3.42)
        words = {t.text.strip().lower() for t in argument.tokens if t.kind == TokenType.STRING}
        if words & {"subsec", "subsecond"}:
            raise UnsupportedQuery(f"{where} of {argument.text} (the time now) is not deterministic")
        value = _constant_value(conn, argument.text, argument.tokens)
        if isinstance(value, (str, bytes)) and _text(value).strip().lower() in CLOCK_WORDS:
            raise UnsupportedQuery(
                f"{where} of {argument.text}, which is '{_text(value)}' (the time now), is not deterministic"
            )
    for token in inner:
        word = token.text.strip().lower()
        if token.kind == TokenType.STRING and word == "now":
            raise UnsupportedQuery(f"{where} of 'now' is not deterministic")
        if token.kind == TokenType.STRING and word in ("localtime", "utc"):
            raise UnsupportedQuery(
                f"{where} with the '{word}' modifier depends on the time zone of the process that folds, "
                "so it is not deterministic"
            )
    for argument in arguments[needed:]:
        first, last = argument.tokens[0], argument.tokens[-1]
        if len(argument.tokens) == 1 and first.kind in (TokenType.STRING, TokenType.NUMBER):
            continue
        if first.kind == TokenType.STRING and first.text.strip()[:1] in ("+", "-", *"0123456789"):
            continue  # '+' || n || ' days': a computed amount, never a time-zone modifier
        ends_with = len(argument.tokens) >= 3 and argument.tokens[-2].kind == TokenType.DPIPE
        if ends_with and last.kind == TokenType.STRING and last.text and not _time_zone_suffix(last.text):
            continue  # n || ' days': SQLite matches a modifier whole, so this is never 'localtime' or 'utc'
        raise UnsupportedQuery(
            f"{where} with a computed modifier ({argument.text}): it could be 'localtime' or 'utc', "
            "which are not deterministic; write modifiers as literals"
        )


def clock_words(texts: Iterable[list[Token]]) -> str | None:
    """A 'now' string among `texts` that call a date function, which a CTE, a
    derived table or a plain view may hand to one (`WITH c AS (SELECT 'now' AS n) … strftime(…,
    n)`); None when there is none or no date function is called."""
    tokens = [t for text in texts for t in text]
    calls = any(
        t.text.lower() in DATE_FUNCTIONS and i + 1 < len(tokens) and tokens[i + 1].kind == TokenType.L_PAREN
        for i, t in enumerate(tokens)
    )
    # (only 'now': 'subsec' is also a modifier, a deterministic one)
    found = (f"'{t.text}'" for t in tokens if t.kind == TokenType.STRING and t.text.strip().lower() == "now")
    return next(found, None) if calls else None


def _constant_value(conn: apsw.Connection, text: str, tokens: Sequence[Token]) -> object:
    """The value of a time-value argument that reads no column (a constant expression SQLite
    evaluates here: `'no' || 'w'`, `char(110, 111, 119)`); None for a literal or one that
    reads a column."""
    if len(tokens) == 1 and tokens[0].kind in (TokenType.STRING, TokenType.NUMBER, TokenType.NULL):
        return None
    for index, token in enumerate(tokens):
        calls = index + 1 < len(tokens) and tokens[index + 1].kind == TokenType.L_PAREN
        if token.kind in (TokenType.SELECT, TokenType.PARAMETER, TokenType.COLON, TokenType.SEMICOLON) or (
            token.is_name and not calls
        ):
            return None  # (a column, a subquery or a bound value: not a constant)
    try:
        row = conn.execute(f"SELECT {text}").fetchone()
    except apsw.Error:
        return None  # (SQLite will say what is wrong with it)
    return None if row is None else row[0]


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _time_zone_suffix(text: str) -> bool:
    """Whether a string ending in `text` could still be a time-zone modifier."""
    lowered = text.lower()
    return any(word.endswith(lowered) for word in ("localtime", "utc"))
