"""The FROM clause of one SELECT level as written, for the inline pass: its items (a table,
view or CTE name, or a parenthesized subquery) with their join words and constraints; the CTEs
of a leading WITH; the parts of a CREATE VIEW. Text in, text out: nothing is resolved here."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot.tokens import TokenType

from matview.errors import Error, UnsupportedQuery
from matview.names import fold
from matview.sql.sqltext import CLAUSE_WORDS, Span, Token, depth_walk, excerpt, matching_paren, tokenize

JOIN_WORDS = {TokenType.NATURAL, TokenType.CROSS, TokenType.INNER, TokenType.JOIN}
OUTER_WORDS = {TokenType.LEFT, TokenType.RIGHT, TokenType.FULL, TokenType.OUTER}


@dataclass(frozen=True)
class Cte:
    name: str
    columns: tuple[str, ...] | None
    body: str
    scope: dict[str, Cte]  # the CTEs visible inside its body: all of its WITH (SQLite reads ahead too)


def _name_and_columns(tokens: list[Token], index: int) -> tuple[str, tuple[str, ...] | None, int]:
    """`name [(column, …)]` at `index` (a CTE's or a view's): the name, the columns, the next index."""
    name = tokens[index].text
    index += 1
    if tokens[index].kind != TokenType.L_PAREN:
        return name, None, index
    close = matching_paren(tokens, index)
    return name, tuple(t.text for t in tokens[index + 1 : close] if t.kind != TokenType.COMMA), close + 1


def strip_with(sql: str) -> str:
    """`WITH … SELECT` whose CTEs no FROM uses: the SELECT alone."""
    tokens = tokenize(sql)
    if not tokens or tokens[0].kind != TokenType.WITH:
        return sql
    return read_with(sql, tokens, {})[1]


def read_with(sql: str, tokens: list[Token], outer: dict[str, Cte]) -> tuple[dict[str, Cte], str]:
    """The CTEs of a leading WITH (each seeing all of them) and the text of the SELECT."""
    try:
        return _read_with(sql, tokens, outer)
    except IndexError:  # (the text ends where a CTE or the SELECT after them should stand)
        raise Error(f"incomplete input: the WITH clause of {excerpt(sql)} has no SELECT after it") from None


def _read_with(sql: str, tokens: list[Token], outer: dict[str, Cte]) -> tuple[dict[str, Cte], str]:
    index = 1
    if index < len(tokens) and tokens[index].kind == TokenType.RECURSIVE:
        index += 1
    scope = dict(outer)
    while True:
        name, columns, index = _name_and_columns(tokens, index)
        index += 1  # AS
        while tokens[index].kind != TokenType.L_PAREN:  # [NOT] MATERIALIZED
            index += 1
        close = matching_paren(tokens, index)
        body = sql[tokens[index + 1].start : tokens[close - 1].end]
        scope[fold(name)] = Cte(name, columns, body, scope)  # one dict: later CTEs are visible too
        index = close + 1
        if tokens[index].kind != TokenType.COMMA:
            return scope, sql[tokens[index].start :]
        index += 1


@dataclass
class FromItem:
    """A FROM item as written: a table/view/CTE name or a parenthesized subquery."""

    name: str | None
    body: str | None
    alias: str
    joined_by: list[Token]  # the join words before it (empty: first item, or a comma)
    on: Span | None
    using: list[str] | None
    text: str
    named: bool = True  # a subquery without an alias is not
    schema: str = ""  # "main" when written `main.t`: a table or view, never a CTE
    name_span: tuple[int, int] = (0, 0)  # where `[main.]name` is written (a table reference)
    aliased: bool = False  # an alias is written after the name
    reference_span: tuple[int, int] = (0, 0)  # the name or parenthesized subquery, with its alias


def in_from_item(from_tokens: tuple[Token, ...], paren: Token) -> bool:
    """True when `paren` is inside a FROM item's parentheses (a derived table, whose own
    level checks it), not in an ON condition."""
    depths = depth_walk(from_tokens)
    opening = None  # the depth-0 parenthesis enclosing `paren`
    for index, (token, d) in enumerate(zip(from_tokens, depths)):
        if d == 0 and token.kind == TokenType.L_PAREN:
            opening = index
        if token.start == paren.start:
            break
    if opening is None:
        return False
    before = from_tokens[opening - 1].kind if opening else None
    return before in (None, TokenType.COMMA, TokenType.JOIN)


def is_from_item(tokens: list[Token], open_index: int) -> bool:
    """Whether the parenthesis at `open_index` opens a derived table of a FROM clause (after
    FROM, a join word, or a comma of the FROM clause) rather than an expression."""
    if not open_index:
        return False
    before = tokens[open_index - 1].kind
    if before in (TokenType.FROM, *JOIN_WORDS, *OUTER_WORDS):
        return True
    if before != TokenType.COMMA:
        return False
    depths = depth_walk(tokens)
    depth = depths[open_index]
    for index in range(open_index - 1, -1, -1):
        if depths[index] < depth:
            return False  # inside an argument list or an IN list
        if depths[index] == depth and tokens[index].kind in CLAUSE_WORDS:
            return tokens[index].kind in (TokenType.FROM, TokenType.ON, TokenType.USING)
    return False


# -- FROM items --------------------------------------------------------------------
def read_from_items(sql: str, tokens: list[Token], check: bool) -> list[FromItem]:
    """Cut a FROM clause into its items (depth 0), with their join words and constraints."""
    references: list[FromItem] = []
    depths = depth_walk(tokens)
    index = 0
    joined_by: list[Token] = []
    while index < len(tokens):
        first = index
        name = body = None
        schema = ""
        name_span = (0, 0)
        aliased = False
        if tokens[index].kind == TokenType.L_PAREN:
            close = matching_paren(tokens, index)
            inner = tokens[index + 1 : close]
            if not inner or inner[0].kind not in (TokenType.SELECT, TokenType.WITH):
                if check:
                    written = excerpt(text_of(sql, tokens[index : close + 1]))
                    raise UnsupportedQuery(f"FROM ({written}): a parenthesized join")
                return references
            body = text_of(sql, inner)
            index = close + 1
            alias = ""
        else:
            if index + 2 < len(tokens) and tokens[index + 1].kind == TokenType.DOT:
                if tokens[index].text.lower() != "main":
                    if check:
                        raise UnsupportedQuery(
                            f"table {tokens[index].text}.{tokens[index + 2].text}: "
                            "only tables of the main database are supported"
                        )
                    return references
                schema = "main"
                index += 2
            name = tokens[index].text
            name_span = (tokens[first].start, tokens[index].end)
            alias = name
            index += 1
            if index < len(tokens) and tokens[index].kind == TokenType.L_PAREN:
                if check:
                    raise UnsupportedQuery(f"FROM {name}(…): table-valued functions are not supported")
                return references
        if index < len(tokens) and tokens[index].kind == TokenType.ALIAS:
            index += 1
        if (
            index < len(tokens)
            and tokens[index].is_name
            and tokens[index].kind not in (*JOIN_WORDS, *OUTER_WORDS, TokenType.ON, TokenType.USING)
        ):
            if tokens[index].text.upper() in ("INDEXED", "NOT"):
                if check:
                    raise UnsupportedQuery(f"FROM {name}: INDEXED BY and table hints are not supported")
                return references
            alias = tokens[index].text
            aliased = True
            index += 1
        on: Span | None = None
        using: list[str] | None = None
        start = index
        reference_span = (tokens[first].start, tokens[index - 1].end)
        while index < len(tokens) and not (
            depths[index] == 0 and tokens[index].kind in (TokenType.COMMA, *JOIN_WORDS, *OUTER_WORDS)
        ):
            index += 1
        constraint = tokens[start:index]
        if constraint and constraint[0].kind == TokenType.ON:
            on = Span(sql, tuple(constraint[1:]))
        elif constraint and constraint[0].kind == TokenType.USING:
            using = [t.text for t in constraint[2:-1] if t.kind != TokenType.COMMA]
        text = text_of(sql, tokens[first:index])
        named = bool(alias)
        if not alias:
            alias = f"subquery{len(references) + 1}"  # nothing can refer to it by name
        references.append(
            FromItem(name, body, alias, joined_by, on, using, text, named, schema, name_span, aliased, reference_span)
        )
        joined_by = []
        while (
            index < len(tokens)
            and depths[index] == 0
            and (tokens[index].kind in (TokenType.COMMA, *JOIN_WORDS, *OUTER_WORDS))
        ):
            if tokens[index].kind != TokenType.COMMA:
                joined_by.append(tokens[index])
            index += 1
    return references


def on_token_runs(tokens: list[Token]) -> list[list[Token]]:
    """The ON conditions of a FROM clause (depth 0), as token runs."""
    depths = depth_walk(tokens)
    runs: list[list[Token]] = []
    current: list[Token] | None = None
    for token, d in zip(tokens, depths):
        if d == 0 and token.kind in (TokenType.COMMA, *JOIN_WORDS, *OUTER_WORDS, TokenType.USING):
            current = None
            continue
        if d == 0 and token.kind == TokenType.ON:
            current = []
            runs.append(current)
            continue
        if current is not None:
            current.append(token)
    return [r for r in runs if r]


def names_in_from(sql: str) -> list[str]:
    """Names that follow FROM or JOIN anywhere in `sql` (a CTE's reference to itself)."""
    tokens = tokenize(sql)
    found = []
    for index, token in enumerate(tokens[:-1]):
        if token.kind in (TokenType.FROM, TokenType.JOIN, TokenType.COMMA) and tokens[index + 1].is_name:
            after = tokens[index + 2].kind if index + 2 < len(tokens) else None
            if after != TokenType.L_PAREN and (token.kind != TokenType.COMMA or _in_from(tokens, index)):
                found.append(tokens[index + 1].text)
    return found


def _in_from(tokens: list[Token], index: int) -> bool:
    """Whether the comma at `index` separates FROM items (the nearest clause keyword before
    it at the same depth is FROM)."""
    depths = depth_walk(tokens)
    depth = depths[index]
    for back in range(index - 1, -1, -1):
        if depths[back] < depth:
            return False
        if depths[back] == depth and tokens[back].kind in (
            TokenType.FROM,
            TokenType.SELECT,
            TokenType.WHERE,
            TokenType.GROUP_BY,
            TokenType.HAVING,
            TokenType.ORDER_BY,
        ):
            return tokens[back].kind == TokenType.FROM
    return False


def view_parts(view_sql: str) -> tuple[str, tuple[str, ...] | None, str]:
    """CREATE VIEW [IF NOT EXISTS] [main.]name [(columns)] AS select: name, columns, select."""
    tokens = tokenize(view_sql)
    index = 2
    while tokens[index].text.upper() in ("IF", "NOT", "EXISTS"):
        index += 1
    if index + 2 < len(tokens) and tokens[index + 1].kind == TokenType.DOT:
        index += 2
    name, columns, index = _name_and_columns(tokens, index)
    if tokens[index].kind != TokenType.ALIAS:
        raise Error(f"cannot read the definition of view {name}")
    return name, columns, view_sql[tokens[index + 1].start : tokens[-1].end]


def text_of(sql: str, tokens: list[Token] | tuple[Token, ...]) -> str:
    return sql[tokens[0].start : tokens[-1].end] if tokens else ""
