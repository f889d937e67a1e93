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
from matview.names import fold
from matview.sql.sqltext import CLAUSE_WORDS, Token, depth_walk, matching_paren, split_top_level, tokenize
from matview.storage.catalog import load_views
from matview.storage.schema import view_sql

DATE_FUNCTIONS = frozenset({"date", "time", "datetime", "julianday", "unixepoch", "strftime", "timediff"})
#: time values that are the clock
CLOCK_WORDS = frozenset({"now", "subsec", "subsecond"})
#: table-valued functions whose rows are the elements of a (maybe constant) JSON text
JSON_TABLES = frozenset({"json_each", "json_tree", "jsonb_each", "jsonb_tree"})


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
        words = {t.text.strip().lower() for t in argument.tokens if _may_be_string(t)}
        if words & {"subsec", "subsecond"}:
            raise UnsupportedQuery(f"{where} of {argument.text} (the time now) is not deterministic")
        value = _constant_value(conn, argument.text, argument.tokens)
        if isinstance(value, (str, bytes)) and _text(value).strip().lower() in CLOCK_WORDS:
            raise UnsupportedQuery(
                f"{where} of {argument.text}, which is '{_text(value)}' (the time now), is not deterministic"
            )
    if any(word.strip().lower() == "now" for _index, word in _strings(inner)):
        raise UnsupportedQuery(f"{where} of 'now' is not deterministic")
    for token in inner:
        word = token.text.strip().lower()
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


def refuse_clock_handed_on(conn: apsw.Connection, sql: str) -> None:
    """Refuse a view's SELECT where a CTE, derived table or view it reads may hand a 'now' string
    to a date function (`clock_words`): through a node or a view no check of a call sees it."""
    clock = clock_words(tokenize(sql), [tokenize(text) for text in _texts_read(conn, sql)])
    if clock is not None:
        raise UnsupportedQuery(f"the string {clock} may reach a date function, which reads the clock for it")


def _texts_read(conn: apsw.Connection, sql: str) -> list[str]:
    """The SELECTs of the plain and materialized views `sql` names, and of those they name."""
    materialized = {fold(e.name): e.sql for e in load_views(conn).values()}
    texts: dict[str, str] = {}
    pending = [sql]
    while pending and len(texts) < 256:  # (views nest; a damaged catalog could loop)
        for name in dict.fromkeys(t.text for t in tokenize(pending.pop()) if t.is_name):
            if fold(name) in texts:
                continue
            text = materialized.get(fold(name)) or view_sql(conn, name)
            if text is not None:
                texts[fold(name)] = text
                pending.append(text)
    return list(texts.values())


def clock_words(select: list[Token], others: Iterable[list[Token]] = ()) -> str | None:
    """A 'now' string that a CTE, a derived table, a plain view or a materialized view (`others`:
    the texts of the views `select` reads) may hand to a date function as a column's value —
    one in a select list inside `select`'s parentheses, or in any of `others`' select lists —
    where one of them calls a date function; None otherwise. (A 'now' compared in a WHERE, or
    shown by the view itself, reaches no date function.)"""
    texts = [(select, 1), *((text, 0) for text in others)]
    calls = any(
        t.text.lower() in DATE_FUNCTIONS and i + 1 < len(tokens) and tokens[i + 1].kind == TokenType.L_PAREN
        for tokens, _ in texts
        for i, t in enumerate(tokens)
    )
    if not calls:
        return None
    for tokens, _least_depth in texts:
        # a table-valued JSON function over a constant hands each element on as a value
        # (`json_each('["now"]')`): any 'now' inside its text may reach the date call
        for i, t in enumerate(tokens[:-1]):
            if t.text.lower() in JSON_TABLES and tokens[i + 1].kind == TokenType.L_PAREN:
                inside = tokens[i + 2 : matching_paren(tokens, i + 1)]
                element = next((w for _, w in _strings(inside) if "now" in w.lower()), None)
                if element is not None:
                    return f"'{element}' (an element of {t.text}(…))"
    for tokens, least_depth in texts:
        depths = depth_walk(tokens)
        for index, word in _strings(tokens):
            clock = word.strip().lower() == "now" and depths[index] >= least_depth
            if clock and _in_select_list(tokens, depths, index):
                return f"'{word}'"
    return None


def _strings(tokens: Sequence[Token]) -> list[tuple[int, str]]:
    """Each string the tokens write, with the index of its first token: a literal (or a
    double-quoted name, which may be one), or literals joined by `||` (`'no' || 'w'`)."""
    found: list[tuple[int, str]] = []
    index = 0
    while index < len(tokens):
        if not _may_be_string(tokens[index]):
            index += 1
            continue
        start, parts = index, [tokens[index].text]
        while (
            index + 2 < len(tokens) and tokens[index + 1].kind == TokenType.DPIPE and _may_be_string(tokens[index + 2])
        ):
            index += 2
            parts.append(tokens[index].text)
        found += (
            [(start, tokens[start].text)] if len(parts) == 1 else [(start, tokens[start].text), (start, "".join(parts))]
        )
        index += 1
    return found


def _in_select_list(tokens: list[Token], depths: list[int], index: int) -> bool:
    """Whether token `index` is in a select list (or a VALUES row): the clause keyword before it
    at its own depth, or at the depth of the parentheses around it, is SELECT or VALUES."""
    depth = depths[index]
    for before in range(index - 1, -1, -1):
        if depths[before] < depth:  # (the parentheses it is in: VALUES (…), or a call in a select list)
            depth = depths[before]
            if tokens[before].kind == TokenType.VALUES:
                return True
            continue
        if depths[before] == depth and tokens[before].kind in _CLAUSES:
            return tokens[before].kind in (TokenType.SELECT, TokenType.VALUES)
    return False


#: the keywords that start a clause of a SELECT, or a VALUES list
_CLAUSES = CLAUSE_WORDS | {TokenType.VALUES, TokenType.WINDOW}


def _may_be_string(token: Token) -> bool:
    """A string, or a double-quoted name, which SQLite reads as a string where no column has it."""
    return token.kind == TokenType.STRING or token.kind == TokenType.IDENTIFIER


def _constant_value(conn: apsw.Connection, text: str, tokens: Sequence[Token]) -> object:
    """The value of a time-value argument that reads no column (a constant expression SQLite
    evaluates here: `'no' || 'w'`, `char(110, 111, 119)`); None for a literal or one that
    reads a column."""
    if len(tokens) == 1 and tokens[0].kind in (TokenType.STRING, TokenType.NUMBER, TokenType.NULL):
        return None
    kinds = {t.kind for t in tokens}
    if kinds & {TokenType.FROM, TokenType.PARAMETER, TokenType.COLON, TokenType.SEMICOLON}:
        return None  # (a subquery that reads a table, a bound value: not a constant)
    for index, token in enumerate(tokens):
        calls = index + 1 < len(tokens) and tokens[index + 1].kind == TokenType.L_PAREN
        cast_type = index > 0 and tokens[index - 1].kind == TokenType.ALIAS  # (CAST(… AS TEXT))
        if token.kind == TokenType.VAR and not calls and not cast_type:
            return None  # (a column: not a constant; a double-quoted name may be a string, evaluated)
    try:
        row = conn.execute(f"SELECT {text}").fetchone()
    except Exception:  # (a user's function may raise anything: SQLite will say what is wrong when it runs)
        return None
    return None if row is None else row[0]


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _time_zone_suffix(text: str) -> bool:
    """Whether a string ending in `text` could still be a time-zone modifier."""
    lowered = text.lower()
    return any(word.endswith(lowered) for word in ("localtime", "utc"))
