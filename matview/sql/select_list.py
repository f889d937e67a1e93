"""The select list of a view, cut from the user's text: its items, their aliases, the aggregate
calls (deduplicated) and their stage-1 inputs, the GROUP BY terms, and the post-aggregation
expressions over `"__a{i}"` / `"__g{j}"` columns that SQLite evaluates per group (`build_plan`
in `frontend` puts them together into a Plan).
"""

from __future__ import annotations

from dataclasses import dataclass

import apsw
import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

from matview.errors import UnsupportedQuery
from matview.names import fold, quote
from matview.plan import AggSpec
from matview.sql.aggregate_calls import AggregateCalls
from matview.sql.from_clause import ColumnRef, FromClause
from matview.sql.sqltext import (
    Clauses,
    Span,
    Token,
    depth_walk,
    explicit_collation,
    find_aggregate_calls,
    inside_subqueries,
    matching_paren,
    normalized,
    parse_sqlite,
    splice,
    split_top_level,
    tokenize,
)
from matview.sql.subquery_columns import equalities
from matview.sql.value_classes import one_class
from matview.storage.schema import Column, unique_key_columns


@dataclass
class _Item:
    tokens: tuple[Token, ...]  # for analysis; a `*` expansion has tokens of its own text
    alias: str | None
    column: ColumnRef | None  # the base column when the item is a plain column reference
    text: str  # the expression as written (without its alias)


class SelectList(AggregateCalls):
    """Builds a Plan from the clauses of one SELECT over the occurrences of its FROM clause."""

    def __init__(self, conn: apsw.Connection, sql: str, source: FromClause) -> None:
        self.conn, self.sql, self.source = conn, sql, source
        self.aggs: list[AggSpec] = []
        self.group_terms: list[tuple[Token, ...]] = []
        self.used_groups: set[int] = set()  # GROUP BY terms post-aggregation expressions use
        self.agg_keys: dict[tuple[tuple[str, str], ...], int] = {}
        #: per (argument, FILTER) text of a MIN/MAX: its stage-1 columns (shared by MIN and MAX of it)
        self.extreme_columns: dict[tuple[str, str | None], tuple[int | None, int | None]] = {}
        self.stage1: list[str] = []
        #: the user-defined functions the SELECT calls, built-in names a user overrode among them
        self.user_functions: frozenset[str] = frozenset()
        #: why a bare column (neither aggregated nor grouped) cannot be maintained; None where it
        #: can (`allow_bare_columns`)
        self.bare_refusal: str | None = "SQLite takes it from an arbitrary row of the group"
        #: the one MIN/MAX's row is the group's only extreme row: its argument and the GROUP BY
        #: columns hold a NOT NULL key of the table (no ties, no NULLs: any scan order meets it)
        self.unique_extreme = False
        #: one rowid table with an INTEGER PRIMARY KEY, read in rowid order, no subquery: a
        #: MIN/MAX under NOCASE/RTRIM can keep its rows by (class, rowid) (`allow_bare_columns`)
        self.rowid_ordered = False
        #: per "bare" aggregate: the declared type and collation of the column it reads
        self.bare_columns: dict[int, tuple[str, str]] = {}

    # -- column references -------------------------------------------------------------
    def column_of(self, tokens: tuple[Token, ...]) -> ColumnRef | None:
        """The base column a token run names, if it is exactly a (qualified) column reference."""
        toks = list(tokens)
        if len(toks) == 5 and toks[0].text.lower() == "main" and toks[1].kind == TokenType.DOT:
            toks = toks[2:]
        if len(toks) == 3 and toks[1].kind == TokenType.DOT and toks[0].is_name and toks[2].is_name:
            return self.source.resolve(toks[0].text, toks[2].text)
        if len(toks) != 1 or not toks[0].is_name:
            return None
        return self.resolve(toks[0].text)

    def bare_column(self, item: _Item) -> Column | None:
        """The base column whose values an output column holds unchanged: a plain column
        reference, in parentheses or with a COLLATE (which changes comparisons, not values)."""
        if item.column is not None:
            return item.column.column
        tokens = item.tokens
        while True:
            if len(tokens) > 2 and tokens[-2].kind == TokenType.COLLATE:
                tokens = tokens[:-2]
            elif (
                len(tokens) > 2 and tokens[0].kind == TokenType.L_PAREN and matching_paren(tokens, 0) == len(tokens) - 1
            ):
                tokens = tokens[1:-1]
            else:
                break
        ref = self.column_of(tokens)
        return ref.column if ref is not None else None

    def resolve(self, name: str) -> ColumnRef | None:
        return self.source.resolve(None, name)

    def identity(self, qualifier: str | None, name: str) -> str | None:
        """A column's identity for comparing expressions (see `sqltext.normalized`)."""
        ref = self.source.resolve(qualifier, name)
        return None if ref is None else f"{ref.occurrence}.{fold(ref.name)}"

    def normalized(self, tokens: tuple[Token, ...] | list[Token]) -> tuple[tuple[str, str], ...]:
        return normalized(tokens, self.identity)

    def value_class(self, tokens: tuple[Token, ...]) -> str:
        """The one storage class of an expression's values, where no two are equal but different
        (`sql.value_classes`); ""."""
        return one_class(tokens, self.collation_of(tokens), self.user_functions)

    def collation_of(self, tokens: tuple[Token, ...]) -> str:
        """The collating sequence SQLite gives an expression (`sqlite3ExprCollSeq`): an explicit
        COLLATE anywhere outside subqueries wins — the leftmost, as SQLite follows the operand
        that holds one (`lower(a COLLATE NOCASE)` and `a COLLATE NOCASE || b` are NOCASE); else a
        column's own, seen through parentheses, unary `+` and CAST (`+tag`, `CAST(tag AS TEXT)`
        keep tag's NOCASE); else BINARY."""
        tokens = tuple(tokens)
        return explicit_collation(tokens) or self._column_collation(tokens)

    def _column_collation(self, tokens: tuple[Token, ...]) -> str:
        """A column's collation through parentheses, unary `+` and CAST; BINARY for anything else."""
        if not tokens:
            return "BINARY"
        if tokens[0].kind == TokenType.L_PAREN and matching_paren(tokens, 0) == len(tokens) - 1:
            return self._column_collation(tokens[1:-1])
        if tokens[0].kind == TokenType.PLUS:
            return self._column_collation(tokens[1:])  # (`+a || b` leaves `a || b`: no column, BINARY)
        is_cast = len(tokens) > 3 and tokens[0].text.upper() == "CAST" and tokens[1].kind == TokenType.L_PAREN
        if is_cast and matching_paren(tokens, 1) == len(tokens) - 1:
            inner = tokens[2:-1]
            depths = depth_walk(inner)
            at = next((i for i, (t, d) in enumerate(zip(inner, depths)) if d == 0 and t.kind == TokenType.ALIAS), None)
            return self._column_collation(inner[:at]) if at is not None else "BINARY"
        ref = self.column_of(tokens)
        return ref.column.collation if ref is not None and ref.column is not None else "BINARY"

    # -- select list -------------------------------------------------------------------
    def items(self, clauses: Clauses, tree: exp.Select) -> list[_Item]:
        spans = split_top_level(self.sql, clauses.select.tokens)
        expressions = tree.expressions
        if len(spans) != len(expressions):
            raise UnsupportedQuery("matview cannot analyze this select list")
        items: list[_Item] = []
        for span, node in zip(spans, expressions):
            toks = span.tokens
            if isinstance(node, exp.Star) or (isinstance(node, exp.Column) and isinstance(node.this, exp.Star)):
                qualifier = node.table if isinstance(node, exp.Column) and node.table else None
                for ref in self.source.star(qualifier):
                    text = f"{quote(self.source.occurrences[ref.occurrence].alias)}.{quote(ref.name)}"
                    items.append(_Item(tuple(tokenize(text)), None, ref, text))
                continue
            alias = None
            if isinstance(node, exp.Alias):
                alias = node.alias
                toks = toks[:-1]
                if toks and toks[-1].kind == TokenType.ALIAS:
                    toks = toks[:-1]
            items.append(_Item(toks, alias, self.column_of(toks), Span(self.sql, toks).text))
        return items

    def substitute_aliases(self, span: Span, items: list[_Item]) -> str:
        """Replace references to select-list aliases (SQLite allows them in WHERE, GROUP BY,
        HAVING) by the aliased expression; a real column of the same name wins."""
        aliases = {item.alias.lower(): item for item in items if item.alias}
        replacements = []
        toks = span.tokens
        inside = inside_subqueries(toks)
        for index, token in enumerate(toks):
            if token.kind not in (TokenType.VAR, TokenType.IDENTIFIER):  # never a keyword such as NULL
                continue
            if token.text.lower() not in aliases or self.resolve(token.text):
                continue
            if index + 1 < len(toks) and toks[index + 1].kind == TokenType.DOT:
                continue  # (a qualifier, `cust.id`: a table's name, never the alias)
            if index and toks[index - 1].kind in (TokenType.ALIAS, TokenType.VAR, TokenType.IDENTIFIER):
                continue  # (a name given, `customers cust`: not a reference)
            if index in inside:
                # the subquery's own tables may have a column of that name, which wins there
                raise UnsupportedQuery(
                    f"the name {token.text} inside a subquery, where it could be the select-list alias or a "
                    "column of the subquery's tables: not supported yet"
                )
            if index > 0 and toks[index - 1].kind == TokenType.DOT:
                continue
            if index + 1 < len(toks) and toks[index + 1].kind in (TokenType.DOT, TokenType.L_PAREN):
                continue
            replacements.append((token.start, token.end, f"({aliases[token.text.lower()].text})"))
        if not toks:
            return ""
        base = toks[0].start
        return splice(span.text, [(s - base, e - base, r) for s, e, r in replacements])

    def dependent_group_terms(
        self,
        group_terms: list[tuple[Token, ...]],
        spans: list[Span],
        links: list[tuple[int | None, Span]] | None = None,
    ) -> list[tuple[Token, ...]]:
        """Columns `spans` read outside aggregates that the GROUP BY determines: a column of a
        table whose key (INTEGER PRIMARY KEY, or a NOT NULL primary key) is grouped by
        (`SELECT c.name, count(*) … GROUP BY c.id`), or equated to columns of such a table
        (`… JOIN customers c ON c.id = o.customer_id … GROUP BY o.id`: `links`, the WHERE clause
        (None) and each ON condition with the occurrence its join brings in). Every row of a group
        has the same row of that table (or none), so SQLite's "bare" column is that row's value,
        and grouping by it too changes no group: these are returned as extra GROUP BY terms."""
        refs = [self.column_of(toks) for toks in group_terms]
        grouped = {(r.occurrence, fold(r.column.name)) for r in refs if r is not None and r.column is not None}
        keys: dict[int, set[str]] = {}
        for index, occurrence in enumerate(self.source.occurrences):
            key = None if occurrence.table.materialized else unique_key_columns(self.conn, occurrence.table)
            if key is not None:
                keys[index] = key
        keyed = {index for index, key in keys.items() if all((index, column) in grouped for column in key)}
        keyed |= self._keyed_through(keys, keyed, links or [])
        extra: list[tuple[Token, ...]] = []
        if not keyed:
            return extra
        for span in spans:
            toks = span.tokens
            skipped = inside_subqueries(toks) | {
                i for call in find_aggregate_calls(span.sql, toks) for i in range(call.first, call.last)
            }
            for index, token in enumerate(toks):
                if index in skipped or not token.is_name or token.kind == TokenType.STRING:
                    continue
                if index and toks[index - 1].kind == TokenType.DOT:
                    continue
                following = toks[index + 1].kind if index + 1 < len(toks) else None
                if following == TokenType.L_PAREN:
                    continue
                qualified = following == TokenType.DOT and index + 2 < len(toks)
                written = toks[index : index + 3] if qualified else (token,)
                ref = self.column_of(written)
                if ref is None or ref.column is None or ref.occurrence not in keyed:
                    continue
                if (ref.occurrence, fold(ref.column.name)) not in grouped:
                    grouped.add((ref.occurrence, fold(ref.column.name)))
                    extra.append(written)
        return extra

    def _keyed_through(
        self, keys: dict[int, set[str]], keyed: set[int], links: list[tuple[int | None, Span]]
    ) -> set[int]:
        """The occurrences whose key is equated, column by column, to expressions over the
        columns of keyed occurrences only — in the WHERE clause, or in the ON condition of the
        join that brings the occurrence in (a LEFT JOIN's ON bounds its own side only) — until
        no more are found."""
        found = set(keyed)
        while True:
            more = set()
            for index, key in keys.items():
                if index in found:
                    continue
                bound: set[str] = set()
                for brings, span in links:
                    if brings is not None and brings != index:
                        continue
                    for left, right in equalities(span.sql, span):
                        for side, other in ((left, right), (right, left)):
                            ref = self.column_of(side)
                            if ref is None or ref.occurrence != index or ref.column is None:
                                continue
                            if self.reads_only(other, found):
                                bound.add(fold(ref.column.name))
                if key <= bound:
                    more.add(index)
            if not more:
                return found - keyed
            found |= more

    def reads_only(self, tokens: tuple[Token, ...], occurrences: set[int]) -> bool:
        """Whether an expression reads columns, and only columns of `occurrences` (no subquery)."""
        if inside_subqueries(tokens):
            return False
        read = False
        for index, token in enumerate(tokens):
            if not token.is_name or token.kind == TokenType.STRING:
                continue
            if index and tokens[index - 1].kind == TokenType.DOT:
                continue
            following = tokens[index + 1].kind if index + 1 < len(tokens) else None
            if following == TokenType.L_PAREN:
                continue
            written = tokens[index : index + 3] if following == TokenType.DOT else (token,)
            ref = self.column_of(tuple(written))
            if ref is None:
                if following == TokenType.DOT:
                    return False  # (a qualified name of no occurrence)
                continue  # (a keyword or a literal-like name)
            if ref.occurrence not in occurrences:
                return False
            read = True
        return read

    def substitute_group_terms(self, text: str) -> str:
        """Replace GROUP BY terms inside `text` by their per-group column `"__g{j}"`.
        A textual match is used only when it is a subtree of the expression: replacing it
        must leave sqlglot's parse of the rest unchanged (`x % 7` is not a subtree of
        `2 * x % 7`). Longer terms first: with `GROUP BY c0, c0 % c1`, `(c0 % c1)` is the second
        term, not the first with a bare `c1` beside it."""
        wanted_terms = sorted(
            ((j, self.normalized(term)) for j, term in enumerate(self.group_terms)), key=lambda jt: -len(jt[1])
        )
        for j, wanted in wanted_terms:
            toks = tokenize(text)
            for first in range(len(toks)):
                for last in range(first + 1, len(toks) + 1):
                    if self.normalized(toks[first:last]) != wanted:
                        continue
                    # checked with a name of its own, so earlier replacements stay as they are
                    probe = quote("__dbsp_candidate")
                    before, after = text[: toks[first].start], text[toks[last - 1].end :]
                    matched = text[toks[first].start : toks[last - 1].end]
                    if _same_with(before + probe + after, probe, matched, text):
                        self.used_groups.add(j)
                        return self.substitute_group_terms(before + quote(f"__g{j}") + after)
        return text

    def post_expression(self, text: str, where: str) -> str:
        """Rewrite a post-aggregation expression: aggregate calls become `"__a{i}"` columns,
        then GROUP BY terms `"__g{j}"`; any column left is neither, which SQLite answers from
        a row of the group it picks (a bare column): the MIN/MAX row's value `"__a{k}"` where
        that is maintained (`allow_bare_columns`), else refused."""
        toks = tokenize(text)
        replacements = []
        for call in find_aggregate_calls(text, toks):
            call_text = text[toks[call.first].start : toks[call.last - 1].end]
            index = self.aggregate(call, call_text)
            replacements.append((toks[call.first].start, toks[call.last - 1].end, quote(f"__a{index}")))
        text = self.substitute_group_terms(splice(text, replacements))
        toks = tokenize(text)
        inside = inside_subqueries(tuple(toks))
        bare: list[tuple[int, int, str]] = []
        for index, token in enumerate(toks):
            if not token.is_name or (index and toks[index - 1].kind == TokenType.DOT):
                continue
            following = [t.kind for t in toks[index + 1 : index + 3]]
            if following[:1] == [TokenType.L_PAREN]:
                continue
            qualified = following[:1] == [TokenType.DOT] and index + 2 < len(toks)
            ref = self.source.resolve(token.text, toks[index + 2].text) if qualified else self.resolve(token.text)
            if ref is not None:
                written = text[token.start : toks[index + 2].end] if qualified else token.text
                if index in inside:
                    raise UnsupportedQuery(
                        f"a subquery in {where} of an aggregating query is not supported in this form (with "
                        "DISTINCT, a window, `*`, or an alias two items share)"
                    )
                if self.bare_refusal is not None:
                    raise UnsupportedQuery(
                        f"column {written} in {where} is neither aggregated nor a GROUP BY column: {self.bare_refusal}"
                    )
                last = index + 2 if qualified else index
                # (unqualified, as SQL: a quoted name such as "a b" or "order" must stay quoted)
                column_sql = written if qualified else quote(token.text)
                bare.append((token.start, toks[last].end, quote(f"__a{self.bare_value(column_sql, ref.column)}")))
        return splice(text, bare)


def _same_with(candidate: str, column: str, term: str, original: str) -> bool:
    """True when `candidate` (original with one span replaced by `column`) parses like the
    original once `column` is replaced back by the parsed `term`."""
    try:
        replaced = parse_sqlite(f"SELECT {candidate}")
        term_ast = parse_sqlite(f"SELECT {term}").expressions[0]
        expected = parse_sqlite(f"SELECT {original}")
    except sqlglot.errors.ParseError:
        return False
    name = column.strip('"')

    def put_back(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and node.name == name and not node.table:
            return term_ast.copy()
        return node

    return bool(replaced.transform(put_back) == expected)
