"""Token-level surgery on the user's SQL text.

matview never regenerates a user's expressions from an AST (a round trip can change
meaning: ``CAST(x AS NUMERIC)`` is not ``CAST(x AS REAL)``). It cuts the original text
into clauses, select items and aggregate calls at token boundaries and splices in its
own sources and columns, so SQLite evaluates exactly what the user wrote.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

from matview.errors import Error

_DIALECT = sqlglot.Dialect.get_or_raise("sqlite")

#: clause keywords that can start a clause at nesting depth 0 of a simple SELECT
_CLAUSES = {
    TokenType.FROM: "from",
    TokenType.WHERE: "where",
    TokenType.GROUP_BY: "group",
    TokenType.HAVING: "having",
    TokenType.WINDOW: "window",
    TokenType.ORDER_BY: "order",
    TokenType.LIMIT: "limit",
}
#: clause keywords: where a walk back from a parenthesis learns which clause holds it
CLAUSE_WORDS = frozenset(
    {
        TokenType.SELECT,
        TokenType.FROM,
        TokenType.WHERE,
        TokenType.GROUP_BY,
        TokenType.HAVING,
        TokenType.ORDER_BY,
        TokenType.LIMIT,
        TokenType.ON,
        TokenType.USING,
    }
)
_NAME_TYPES = {TokenType.VAR, TokenType.IDENTIFIER}
#: literals whose text sqlglot gives unquoted: `'a'` is never the column a
_STRING_TYPES = {kind for name, kind in TokenType.__members__.items() if name.endswith("_STRING") or name == "STRING"}

#: compound operators (UNION [ALL], INTERSECT, EXCEPT) as tokens
SET_OPERATIONS = (TokenType.UNION, TokenType.INTERSECT, TokenType.EXCEPT)
#: the words that end a FROM clause (at its depth)
ENDS_FROM = frozenset(
    {
        TokenType.WHERE,
        TokenType.GROUP_BY,
        TokenType.HAVING,
        TokenType.ORDER_BY,
        TokenType.LIMIT,
        TokenType.WINDOW,
        *SET_OPERATIONS,
    }
)

AGGREGATE_NAMES = {"count", "sum", "total", "avg", "min", "max", "group_concat", "string_agg"}


@dataclass(frozen=True)
class Token:
    kind: TokenType
    text: str  # unquoted for quoted identifiers
    start: int  # offset of the first character in the SQL text
    end: int  # offset one past the last character

    @property
    def is_name(self) -> bool:
        return self.kind in _NAME_TYPES or (
            self.text.isidentifier() and self.kind not in _CLAUSES and self.kind not in _STRING_TYPES
        )

    @property
    def is_quoted(self) -> bool:
        return self.kind == TokenType.IDENTIFIER


def tokenize(sql: str) -> list[Token]:
    try:
        raw = _DIALECT.tokenize(sql)
    except sqlglot.errors.TokenError as exc:
        raise Error(f"cannot tokenize view definition: {exc}") from exc
    return [Token(t.token_type, t.text, t.start, t.end + 1) for t in raw]


#: functions sqlglot parses with a grammar of their own that rejects SQLite's plain calls
#: (`trim(a < 1)`), each with a same-length stand-in parsed as an ordinary call
_PARSE_STAND_INS = {"trim": "__tr"}


def parse_sqlite(sql: str) -> Any:
    """sqlglot's tree of `sql`, offsets kept: where sqlglot's own grammar of a function
    rejects a call SQLite accepts, the name is swapped for a same-length stand-in (the tree
    is for structure and column positions; no SQL is generated from it)."""
    try:
        return sqlglot.parse_one(sql, read="sqlite")
    except sqlglot.errors.ParseError:
        tokens = tokenize(sql)
        edits = [
            (t.start, t.end, _PARSE_STAND_INS[t.text.lower()])
            for t, after in itertools.pairwise(tokens)
            if t.text.lower() in _PARSE_STAND_INS and not t.is_quoted and after.kind == TokenType.L_PAREN
        ]
        if not edits:
            raise
        return sqlglot.parse_one(splice(sql, edits), read="sqlite")


@dataclass(frozen=True)
class Span:
    """Tokens [first, last) of a statement; `text` is the original SQL between them."""

    sql: str
    tokens: tuple[Token, ...]

    @property
    def text(self) -> str:
        if not self.tokens:
            return ""
        return self.sql[self.tokens[0].start : self.tokens[-1].end]

    def __bool__(self) -> bool:
        return bool(self.tokens)


def depth_walk(tokens: Sequence[Token]) -> list[int]:
    """The parenthesis depth before each token."""
    depth, depths = 0, []
    for token in tokens:
        if token.kind == TokenType.R_PAREN:
            depth -= 1
        depths.append(depth)
        if token.kind == TokenType.L_PAREN:
            depth += 1
    return depths


def set_operators(tokens: Sequence[Token]) -> list[int]:
    """Indexes of the set operators (UNION, INTERSECT, EXCEPT) at depth 0 of `tokens`."""
    return [i for i, (t, d) in enumerate(zip(tokens, depth_walk(tokens))) if d == 0 and t.kind in SET_OPERATIONS]


def set_operator_kinds(tokens: Sequence[Token], operators: Sequence[int]) -> list[str]:
    """Each operator at `operators` as "UNION ALL", "UNION", "INTERSECT" or "EXCEPT"."""
    return [
        "UNION ALL"
        if tokens[i].kind == TokenType.UNION and i + 1 < len(tokens) and tokens[i + 1].kind == TokenType.ALL
        else tokens[i].text.upper()
        for i in operators
    ]


def item_alias(item: Span) -> str | None:
    """The name a select-list item gives its column (`x AS a`, `x a`), if any."""
    tokens = item.tokens
    if len(tokens) >= 2 and tokens[-1].is_name and tokens[-2].kind == TokenType.ALIAS:
        return tokens[-1].text.strip('"`[]')
    try:
        tree = parse_sqlite(f"SELECT {item.text}")
    except Exception:
        return None
    node = tree.expressions[0] if isinstance(tree, exp.Select) and len(tree.expressions) == 1 else None
    return str(node.alias) if isinstance(node, exp.Alias) else None


#: what a select item's expression can end with right before an alias written without AS (`x a`)
_BEFORE_BARE_ALIAS = {TokenType.VAR, TokenType.IDENTIFIER, TokenType.R_PAREN, TokenType.NUMBER, TokenType.STRING}


def split_alias(tokens: Sequence[Token]) -> tuple[tuple[Token, ...], Token | None]:
    """A select item's expression, and the alias it ends with (`x AS a`, `x a`, `f(x) a`) or None."""
    tokens = tuple(tokens)
    if len(tokens) >= 3 and tokens[-2].kind == TokenType.ALIAS and tokens[-1].is_name:
        return tokens[:-2], tokens[-1]
    bare = len(tokens) >= 2 and tokens[-1].is_name and tokens[-1].kind != TokenType.STRING
    if bare and tokens[-2].kind in _BEFORE_BARE_ALIAS:
        return tokens[:-1], tokens[-1]
    return tokens, None


def split_top_level(sql: str, tokens: Sequence[Token], separator: TokenType = TokenType.COMMA) -> list[Span]:
    """Split `tokens` at separators of depth 0 (select items, GROUP BY terms, arguments)."""
    parts: list[Span] = []
    current: list[Token] = []
    for token, depth in zip(tokens, depth_walk(tokens)):
        if depth == 0 and token.kind == separator:
            parts.append(Span(sql, tuple(current)))
            current = []
        else:
            current.append(token)
    parts.append(Span(sql, tuple(current)))
    return parts


def has_where_clause(text: str) -> bool:
    """Whether a `FROM … [WHERE …]` text has its WHERE (at depth 0)."""
    tokens = tokenize(text)
    return any(t.kind == TokenType.WHERE and d == 0 for t, d in zip(tokens, depth_walk(tokens)))


def has_subquery(text: str) -> bool:
    """Whether `text` holds a parenthesized SELECT (EXISTS, IN, scalar or nested)."""
    tokens = tokenize(text)
    return any(
        a.kind == TokenType.L_PAREN and b.kind in (TokenType.SELECT, TokenType.WITH, TokenType.VALUES)
        for a, b in itertools.pairwise(tokens)
    )


def split_conjuncts(sql: str, tokens: Sequence[Token]) -> list[Span]:
    """The top-level `AND` terms of a condition: not an AND inside parentheses, inside a
    CASE … END, or the one of a `BETWEEN x AND y`. A top-level OR binds looser than AND
    (`a OR b AND c` is `a OR (b AND c)`): the condition is then one term."""
    parts: list[Span] = []
    current: list[Token] = []
    cases = betweens = 0
    for token, depth in zip(tokens, depth_walk(tokens)):
        top = depth == 0 and cases == 0
        if depth == 0 and token.kind == TokenType.CASE:
            cases += 1
        elif depth == 0 and token.kind == TokenType.END and cases:
            cases -= 1
        elif top and token.kind == TokenType.BETWEEN:
            betweens += 1
        elif top and token.kind == TokenType.OR:
            return [Span(sql, tuple(tokens))]
        if top and token.kind == TokenType.AND:
            if betweens:
                betweens -= 1
            else:
                parts.append(Span(sql, tuple(current)))
                current = []
                continue
        current.append(token)
    parts.append(Span(sql, tuple(current)))
    return parts


@dataclass(frozen=True)
class Clauses:
    """The clauses of a simple SELECT, each the span after its keyword."""

    sql: str
    distinct: Token | None  # the DISTINCT / ALL keyword, if any
    select: Span
    from_: Span
    where: Span
    group: Span
    having: Span
    order: Span
    limit: Span
    window: Span


def split_clauses(sql: str, tokens: Sequence[Token]) -> Clauses:
    if not tokens or tokens[0].kind != TokenType.SELECT:
        raise Error("a materialized view must be defined by a SELECT")
    found: dict[str, list[Token]] = {"select": []}
    current = "select"
    distinct: Token | None = None
    for index, (token, depth) in enumerate(zip(tokens, depth_walk(tokens))):
        if index == 0:
            continue
        if index == 1 and token.kind in (TokenType.DISTINCT, TokenType.ALL):
            distinct = token
            continue
        if depth == 0 and token.kind in _CLAUSES:
            current = _CLAUSES[token.kind]
            found[current] = []
            continue
        if depth == 0 and token.kind == TokenType.SEMICOLON:
            break
        found[current].append(token)

    def span(name: str) -> Span:
        return Span(sql, tuple(found.get(name, ())))

    return Clauses(
        sql,
        distinct,
        span("select"),
        span("from"),
        span("where"),
        span("group"),
        span("having"),
        span("order"),
        span("limit"),
        span("window"),
    )


@dataclass(frozen=True)
class AggregateCall:
    """One aggregate call found in a select item or HAVING: `name(args) [FILTER (WHERE f)]`."""

    name: str
    distinct: bool
    args: tuple[Span, ...]
    filter: Span | None
    first: int  # index of the name token in the enclosing token list
    last: int  # index one past the call's last token (its `)` or FILTER's `)`)

    def arguments_and_order(self) -> tuple[list[tuple[Token, ...]], list[tuple[Token, ...]]]:
        """The call's value arguments and the terms of its own ORDER BY (`group_concat(x, ','
        ORDER BY y, z DESC)`: [x, ','] and [y, z DESC]), which `args` holds split at commas."""
        for number, arg in enumerate(self.args):
            at = next((i for i, t in enumerate(arg.tokens) if t.kind == TokenType.ORDER_BY), None)
            if at is not None:
                values = [a.tokens for a in self.args[:number]] + ([arg.tokens[:at]] if at else [])
                return values, [arg.tokens[at + 1 :], *(a.tokens for a in self.args[number + 1 :])]
        return [a.tokens for a in self.args], []


def is_aggregating(sql: str, clauses: Clauses) -> bool:
    """Whether a SELECT aggregates: GROUP BY, HAVING, or an aggregate call in its select list."""
    return bool(clauses.group or clauses.having or find_aggregate_calls(sql, clauses.select.tokens))


def find_aggregate_calls(sql: str, tokens: Sequence[Token]) -> list[AggregateCall]:
    """Aggregate calls at any depth, outermost first, outside subqueries. `min`/`max` with
    two or more arguments are SQLite's scalar functions, not aggregates."""
    calls: list[AggregateCall] = []
    index = 0
    while index < len(tokens) - 1:
        token = tokens[index]
        if token.kind == TokenType.L_PAREN and tokens[index + 1].kind in (TokenType.SELECT, TokenType.VALUES):
            index = matching_paren(tokens, index) + 1  # a subquery's aggregates are its own
            continue
        name = token.text.lower()
        # a quoted name calls the function too (`"count"(*)` is count)
        if name in AGGREGATE_NAMES and tokens[index + 1].kind == TokenType.L_PAREN:
            close = matching_paren(tokens, index + 1)
            inner = list(tokens[index + 2 : close])
            distinct = bool(inner) and inner[0].kind == TokenType.DISTINCT
            if inner and inner[0].kind in (TokenType.DISTINCT, TokenType.ALL):
                inner = inner[1:]  # ALL is the default quantifier
            args = tuple(a for a in split_top_level(sql, inner) if a) if inner else ()
            if name in ("min", "max") and len(args) != 1:
                index += 1
                continue
            if len(args) == 1 and args[0].tokens[0].kind == TokenType.STAR and len(args[0].tokens) == 1:
                args = ()
            last = close + 1
            filter_span: Span | None = None
            if last < len(tokens) and tokens[last].kind == TokenType.FILTER:
                open_paren = last + 1
                filter_close = matching_paren(tokens, open_paren)
                filter_tokens = tokens[open_paren + 2 : filter_close]  # skip '(' WHERE
                filter_span = Span(sql, tuple(filter_tokens))
                last = filter_close + 1
            calls.append(AggregateCall(name, distinct, args, filter_span, index, last))
            index = last
            continue
        index += 1
    return calls


def column_reference(tokens: Sequence[Token]) -> tuple[str, str] | None:
    """(qualifier, name) where `tokens` are exactly `name` or `qualifier.name`, written as
    identifiers (plain or quoted; never a keyword nor a string): qualifier "" when there is none."""
    names = (TokenType.VAR, TokenType.IDENTIFIER)
    if len(tokens) == 1 and tokens[0].kind in names:
        return "", tokens[0].text
    if len(tokens) == 3 and tokens[0].kind in names and tokens[1].kind == TokenType.DOT and tokens[2].kind in names:
        return tokens[0].text, tokens[2].text
    return None


def inside_subqueries(tokens: Sequence[Token]) -> set[int]:
    """Indexes of the tokens inside parenthesized subqueries."""
    inside: set[int] = set()
    for index, token in enumerate(tokens[:-1]):
        if token.kind == TokenType.L_PAREN and tokens[index + 1].kind in (TokenType.SELECT, TokenType.VALUES):
            inside.update(range(index, matching_paren(tokens, index) + 1))
    return inside


def explicit_collation(tokens: Sequence[Token]) -> str | None:
    """The collation an explicit COLLATE gives an expression, as `sqlite3ExprCollSeq` finds it:
    from the top, a COLLATE applied to the whole wins (`(b COLLATE RTRIM) COLLATE NOCASE`,
    `lower(x COLLATE A) COLLATE B`, `x COLLATE a COLLATE b` are the outer one); else the
    leftmost operand or argument that holds one (`lower(a COLLATE NOCASE)`, `a COLLATE NOCASE
    || b` are NOCASE). Subqueries, a window's OVER (…) and FILTER (…), and an aggregate's ORDER
    BY give the expression none. None without one."""
    ignored = _collation_blind(tokens)
    collates = [i for i, t in enumerate(tokens[:-1]) if t.kind == TokenType.COLLATE and i not in ignored]
    if not collates:
        return None
    depths = depth_walk(tokens)
    at = collates[0]
    while True:
        while at + 3 < len(tokens) and tokens[at + 2].kind == TokenType.COLLATE:
            at += 2  # (`x COLLATE a COLLATE b` is b)
        # the parenthesized groups around it, closed by `)` after `)`: a COLLATE after the last
        # applies to all of them (a function call's parentheses as a group's)
        close, depth = at, depths[at]
        while depth > 0:
            close = next((j for j in range(close + 1, len(tokens)) if depths[j] < depth), len(tokens))
            depth -= 1
            if close + 1 >= len(tokens) or tokens[close + 1].kind != TokenType.R_PAREN:
                break
        if close + 2 < len(tokens) and tokens[close + 1].kind == TokenType.COLLATE and close + 1 not in ignored:
            at = close + 1
            continue
        return tokens[at + 1].text.upper()


def _collation_blind(tokens: Sequence[Token]) -> set[int]:
    """The tokens whose COLLATE gives an enclosing expression none: inside subqueries, a window's
    OVER (…), a FILTER (…), and an aggregate's ORDER BY (up to its call's closing parenthesis)."""
    ignored = inside_subqueries(tokens)
    depths = depth_walk(tokens)
    for index, token in enumerate(tokens[:-1]):
        if index in ignored:
            continue
        following = tokens[index + 1].kind
        if token.text.upper() in ("OVER", "FILTER") and following == TokenType.L_PAREN:
            ignored.update(range(index + 1, matching_paren(tokens, index + 1) + 1))
        elif token.kind == TokenType.ORDER_BY and depths[index] > 0:
            end = next((j for j in range(index, len(tokens)) if depths[j] < depths[index]), len(tokens))
            ignored.update(range(index, end))
    return ignored


def matching_paren(tokens: Sequence[Token], open_index: int) -> int:
    depth = 0
    for index in range(open_index, len(tokens)):
        kind = tokens[index].kind
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                return index
    raise Error("unbalanced parentheses in view definition")


#: an internal node read under the name the user wrote (`sql.nodes`): `"__dbsp_node_v_1" AS "rev"`
_NODE_READ = re.compile(r'"__dbsp_node_[^"]*"(?: AS ("[^"]*"|\w+))?')


def excerpt(text: str, limit: int = 60) -> str:
    """`text` for a message: whole, or cut at a word with an ellipsis; an internal node is shown
    by the name the user wrote for what it stands for."""
    text = _NODE_READ.sub(lambda m: (m.group(1) or "a derived table").strip('"'), text)
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return f"{cut} …"


def splice(sql: str, replacements: Sequence[tuple[int, int, str]]) -> str:
    """Replace text ranges [start, end) of `sql`; ranges must not overlap."""
    out, position = [], 0
    for start, end, text in sorted(replacements):
        out.append(sql[position:start])
        out.append(text)
        position = end
    out.append(sql[position:])
    return "".join(out)


#: resolves `[qualifier.]name` to a canonical column identity, or None when it names no column
ColumnResolver = Callable[[str | None, str], str | None]


def normalized(tokens: Sequence[Token], resolve: ColumnResolver) -> tuple[tuple[str, str], ...]:
    """Tokens as comparable pairs: a column reference, qualified or not, as its resolved
    identity (so `o.id` and `id` compare equal when they are one column, and `o.id` and
    `c.id` never do); other names case-folded."""
    out: list[tuple[str, str]] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        after = tokens[index + 1].kind if index + 1 < len(tokens) else None
        if token.is_name and after == TokenType.DOT and index + 2 < len(tokens) and tokens[index + 2].is_name:
            follows = tokens[index + 3].kind if index + 3 < len(tokens) else None
            column = resolve(token.text, tokens[index + 2].text) if follows != TokenType.L_PAREN else None
            if column is not None:
                out.append(("column", column))
                index += 3
                continue
        if token.is_name:
            before = tokens[index - 1].kind if index else None
            column = resolve(None, token.text) if after != TokenType.L_PAREN and before != TokenType.DOT else None
            out.append(("column", column) if column is not None else ("name", token.text.lower()))
        else:
            out.append((token.kind.name, token.text))
        index += 1
    return tuple(out)


def parse_failure(exc: BaseException) -> str:
    """sqlglot's parse error as plain text (it colours the failing token for terminals)."""
    return re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
