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
from matview.keys import check_collation
from matview.names import fold, is_node, quote
from matview.plan import AggSpec
from matview.sql.from_clause import ColumnRef, FromClause
from matview.sql.sqltext import (
    AggregateCall,
    Clauses,
    Span,
    Token,
    depth_walk,
    find_aggregate_calls,
    matching_paren,
    normalized,
    parse_sqlite,
    splice,
    split_top_level,
    tokenize,
)
from matview.storage.schema import Column, has_one_variant, primary_key_order, unique_key_columns

_AGG_FUNCS = {"string_agg": "group_concat"}


@dataclass
class _Item:
    tokens: tuple[Token, ...]  # for analysis; a `*` expansion has tokens of its own text
    alias: str | None
    column: ColumnRef | None  # the base column when the item is a plain column reference
    text: str  # the expression as written (without its alias)


class SelectList:
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
        #: why a bare column (neither aggregated nor grouped) cannot be maintained; None where it
        #: can (`allow_bare_columns`)
        self.bare_refusal: str | None = "SQLite takes it from an arbitrary row of the group"
        #: the one MIN/MAX's row is the group's only extreme row: its argument and the GROUP BY
        #: columns hold a NOT NULL key of the table (no ties, no NULLs: any scan order meets it)
        self.unique_extreme = False
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

    def collation_of(self, tokens: tuple[Token, ...]) -> str:
        """The collating sequence SQLite gives an expression (`sqlite3ExprCollSeq`): an explicit
        COLLATE anywhere outside subqueries wins — the leftmost, as SQLite follows the operand
        that holds one (`lower(a COLLATE NOCASE)` and `a COLLATE NOCASE || b` are NOCASE); else a
        column's own, seen through parentheses, unary `+` and CAST (`+tag`, `CAST(tag AS TEXT)`
        keep tag's NOCASE); else BINARY."""
        tokens = tuple(tokens)
        inside = _inside_subqueries(tokens)
        collates = [i for i, t in enumerate(tokens[:-1]) if t.kind == TokenType.COLLATE and i not in inside]
        if collates:
            at = collates[0]
            while at + 3 < len(tokens) and tokens[at + 2].kind == TokenType.COLLATE:
                at += 2  # (`x COLLATE a COLLATE b` is b: the outer one)
            return tokens[at + 1].text.upper()
        return self._column_collation(tokens)

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
        inside = _inside_subqueries(toks)
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

    # -- aggregates --------------------------------------------------------------------
    def _call_key(self, call: AggregateCall) -> tuple[tuple[str, str], ...]:
        """What two calls SQLite computes once share (its aggregates are deduplicated too)."""
        return (
            self.normalized([Token(TokenType.VAR, call.name, 0, 0)] + [t for a in call.args for t in a.tokens])
            + ((("distinct", str(call.distinct)),))
            + (self.normalized(call.filter.tokens) if call.filter else ())
        )

    def allow_bare_columns(self, calls: list[AggregateCall], has_subquery: bool) -> None:
        """Whether columns read outside aggregates and GROUP BY (`SELECT cat, name, max(price) …
        GROUP BY cat`) can be maintained. SQLite documents that beside exactly one MIN() or MAX()
        they come from the row holding the extreme; with none, its program takes them from a
        group's first row (the docs say "arbitrary": matview follows the program). matview keeps
        that row (`operators.bare_columns`) over one table with an INTEGER PRIMARY KEY read in
        rowid order. Else `bare_refusal` says why not, in the user's terms."""
        extremes = {self._call_key(call): call for call in calls if call.name in ("min", "max")}
        extreme = next(iter(extremes.values()), None)
        occurrences = self.source.occurrences
        if len(extremes) > 1:
            self.bare_refusal = "beside several MIN()/MAX() calls, SQLite takes it from a row that depends on all"
        elif extreme is not None and (extreme.distinct or extreme.filter is not None):
            self.bare_refusal = "beside MIN/MAX with DISTINCT or FILTER, SQLite's choice of row is not documented"
        elif self.source.is_join or len(occurrences) != 1:
            self.bare_refusal = "over a join, the row SQLite takes it from follows the join's loop order"
        elif has_subquery:
            self.bare_refusal = "in a query with a subquery, bare columns are not supported yet"
        elif extreme is not None and self._extreme_is_unique(extreme):
            self.bare_refusal, self.unique_extreme = None, True
        elif occurrences[0].table.materialized:
            what = "an aggregating subquery, CTE or view" if is_node(occurrences[0].table.name) else "a view"
            self.bare_refusal = f"over {what}, the row SQLite takes it from follows an order matview does not know"
        elif occurrences[0].table.ipk is None:
            table = occurrences[0].table
            kind = "is WITHOUT ROWID" if not table.has_rowid else "has no INTEGER PRIMARY KEY"
            self.bare_refusal = (
                f"{table.name} {kind}, so which row SQLite meets first is not known here (maintained beside a "
                "MIN/MAX whose argument and the GROUP BY columns hold its primary key: one row has the extreme)"
            )
        else:
            self.bare_refusal = None

    def _extreme_is_unique(self, extreme: AggregateCall) -> bool:
        """Whether MIN/MAX of a column over plain GROUP BY columns that, with it, hold a NOT NULL
        key of the table (`SELECT emp, max(from_date), amount … GROUP BY emp`, the key being
        (emp, from_date)): one row of a group has the extreme, whatever the scan order."""
        table = self.source.occurrences[0].table
        argument = self.column_of(extreme.args[0].tokens) if len(extreme.args) == 1 else None
        key = None if table.materialized else unique_key_columns(self.conn, table)
        if argument is None or argument.column is None or key is None:
            return False
        refs = [self.column_of(term) for term in self.group_terms]
        grouped = {fold(r.column.name) for r in refs if r is not None and r.column is not None}
        return key <= grouped | {fold(argument.column.name)}

    def bare_value(self, written: str, column: Column | None) -> int:
        """Register a bare column (`AggSpec` "bare": its value in the row MIN/MAX keeps); its index."""
        key = (("bare", ""), *self.normalized(tuple(tokenize(written))))
        if key not in self.agg_keys:
            self.aggs.append(AggSpec("bare", arg=self.add_stage1(written), sql=written))
            self.agg_keys[key] = len(self.aggs) - 1
            typed = (column.decltype, column.collation) if column is not None else ("INTEGER", "BINARY")  # (rowid)
            self.bare_columns[len(self.aggs) - 1] = typed
        return self.agg_keys[key]

    def _split_order_by(self, call: AggregateCall) -> tuple[list[Span], list[Span]]:
        """An aggregate call's arguments, and the terms of the ORDER BY written after the last
        (`group_concat(x, ';' ORDER BY a, b)`: the top-level commas also cut the terms apart)."""
        args = list(call.args)
        for position, arg in enumerate(args):
            at = next((i for i, t in enumerate(arg.tokens) if t.kind == TokenType.ORDER_BY), None)
            if at is not None:
                # (the call's text is the expression it stands in, not always the whole SELECT)
                terms = [Span(arg.sql, arg.tokens[at + 1 :]), *args[position + 1 :]]
                return [*args[:position], Span(arg.sql, arg.tokens[:at])], terms
        return args, []

    def _order_term(self, term: Span, where: str) -> tuple[int, bool, str, bool]:
        """One ORDER BY term of an aggregate: (stage-1 index, descending, collation, NULLs
        first); NULLs come first ascending and last descending unless NULLS FIRST/LAST says."""
        tokens = term.tokens
        words = [t.text.upper() for t in tokens]
        nulls_first: bool | None = None
        if len(words) > 2 and words[-2] == "NULLS" and words[-1] in ("FIRST", "LAST"):
            nulls_first, tokens, words = words[-1] == "FIRST", tokens[:-2], words[:-2]
        descending = bool(words) and words[-1] == "DESC"
        if words and words[-1] in ("ASC", "DESC"):
            tokens = tokens[:-1]
        if not tokens:
            raise UnsupportedQuery(f"ORDER BY inside {where}: an empty term")
        collation = check_collation(self.collation_of(tokens), f"ORDER BY inside {where}")
        index = self.add_stage1(Span(term.sql, tokens).text)
        return index, descending, collation, (not descending) if nulls_first is None else nulls_first

    def aggregate(self, call: AggregateCall, sql: str) -> int:
        """Register an aggregate call (deduplicated) and its stage-1 inputs; its index."""
        key = self._call_key(call)
        if key in self.agg_keys:
            return self.agg_keys[key]
        func = _AGG_FUNCS.get(call.name, call.name)
        where = f"aggregate {call.name}()"
        args, order_terms = self._split_order_by(call)
        if order_terms and func != "group_concat":
            raise UnsupportedQuery(f"ORDER BY inside {where} is not supported yet")
        separator = None
        if func == "count" and not args:
            if call.distinct:
                raise UnsupportedQuery("COUNT(DISTINCT *) is not valid")
        elif func == "group_concat":
            if len(args) == 2:
                separator = self.constant_text(args[1].text, where)
            elif len(args) != 1:
                raise UnsupportedQuery(f"{where} with {len(args)} arguments")
            if call.distinct and order_terms:
                # (SQLite sorts first, then drops repeats: which of 1 and 1.0 it keeps is not the first met)
                raise UnsupportedQuery("GROUP_CONCAT(DISTINCT … ORDER BY …) is not supported yet")
            if self.source.is_join:
                raise UnsupportedQuery("GROUP_CONCAT over a join: its order is the join's loop order, unspecified")
            table = self.source.occurrences[0].table
            stored = primary_key_order(self.conn, table)  # (WITHOUT ROWID: scanned in key order)
            if table.ipk is None and not stored:
                raise UnsupportedQuery(
                    f"GROUP_CONCAT on table {table.name}, which has no INTEGER PRIMARY KEY: its order "
                    "follows rowids that VACUUM may renumber"
                )
        elif len(args) != 1:
            raise UnsupportedQuery(f"{where} with {len(args)} arguments")
        if call.distinct and func in ("sum", "total", "avg"):
            # An untyped column may hold 3 and 3.0, equal for DISTINCT but of different types,
            # and SQLite's sum keeps whichever came first: refuse rather than guess.
            ref = self.column_of(args[0].tokens)
            base = ref.column if ref is not None else None
            if base is not None and not has_one_variant(base.decltype, self.collation_of(args[0].tokens)):
                raise UnsupportedQuery(
                    f"{where} with DISTINCT over column {base.name}, which has no type affinity (or a "
                    "NOCASE/RTRIM collation): equal values of different types make the result unspecified"
                )
        collation = "BINARY"
        if (call.distinct or func in ("min", "max")) and args:
            collation = check_collation(self.collation_of(args[0].tokens), where)
            # COUNT(DISTINCT email) counts NOCASE classes, whichever spelling each shows, and
            # GROUP_CONCAT(DISTINCT email) shows each class's first (in rowid order, as it keeps them)
            counted = func in ("count", "group_concat") and call.distinct
            # MIN/MAX of NOCASE email: SQLite keeps the first spelling of the least class it meets,
            # which the kept extreme row is (`operators.bare_columns`) where bare columns could be
            witnessed = func in ("min", "max") and not call.distinct and self.bare_refusal is None
            if collation != "BINARY" and not (counted or witnessed):
                raise UnsupportedQuery(f"{where} over a {collation}-collated value is not supported yet")
        arg_index = filter_index = None
        extreme = (args[0].text, call.filter.text if call.filter is not None else None) if args else None
        if func in ("min", "max") and not call.distinct and extreme in self.extreme_columns:
            # MIN(x) beside MAX(x): one stage-1 column, so they share one ordered multiset
            arg_index, filter_index = self.extreme_columns[extreme]
        else:
            if args:
                text = args[0].text
                arg_index = self.add_stage1(f"CAST(({text}) AS TEXT)" if func == "group_concat" else text)
            if call.filter is not None:
                filter_index = self.add_stage1(f"CASE WHEN ({call.filter.text}) THEN 1 ELSE 0 END")
            if func in ("min", "max") and not call.distinct and extreme is not None:
                self.extreme_columns[extreme] = (arg_index, filter_index)
        compared = self.add_stage1(args[0].text) if func == "group_concat" and call.distinct else None
        order = tuple(self._order_term(term, where) for term in order_terms)
        if func == "group_concat":
            # a WITHOUT ROWID table is met in its key's order: the concatenation's (its ties')
            alias = quote(self.source.occurrences[0].alias)
            order += tuple(
                (self.add_stage1(f"{alias}.{quote(name)}"), descending, collation, not descending)
                for name, descending, collation in primary_key_order(self.conn, self.source.occurrences[0].table)
            )
        spec = AggSpec(func, call.distinct, arg_index, filter_index, separator, sql, collation, compared, order)
        self.aggs.append(spec)
        self.agg_keys[key] = len(self.aggs) - 1
        return len(self.aggs) - 1

    def add_stage1(self, text: str) -> int:
        self.stage1.append(text)
        return len(self.stage1) - 1

    def constant_text(self, text: str, where: str) -> str:
        try:
            row = self.conn.execute(f"SELECT CAST(({text}) AS TEXT)").fetchone()
        except apsw.Error:
            raise UnsupportedQuery(f"{where}: the separator must be a constant") from None
        return "" if row is None or row[0] is None else str(row[0])

    def dependent_group_terms(self, group_terms: list[tuple[Token, ...]], spans: list[Span]) -> list[tuple[Token, ...]]:
        """Columns `spans` read outside aggregates that the GROUP BY determines: a column of a
        table whose key (INTEGER PRIMARY KEY, or a NOT NULL primary key) is grouped by
        (`SELECT c.name, count(*) … GROUP BY c.id`). Every row of a group has the same row of that
        table, so SQLite's "bare" column is that row's value, and grouping by it too changes no
        group: these are returned as extra GROUP BY terms (each once)."""
        refs = [self.column_of(toks) for toks in group_terms]
        grouped = {(r.occurrence, fold(r.column.name)) for r in refs if r is not None and r.column is not None}
        keyed = set()
        for index, occurrence in enumerate(self.source.occurrences):
            table = occurrence.table
            if table.materialized:
                continue
            key = unique_key_columns(self.conn, table)
            if key is not None and all((index, column) in grouped for column in key):
                keyed.add(index)
        extra: list[tuple[Token, ...]] = []
        if not keyed:
            return extra
        for span in spans:
            toks = span.tokens
            skipped = _inside_subqueries(toks) | {
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

    def substitute_group_terms(self, text: str) -> str:
        """Replace GROUP BY terms inside `text` by their per-group column `"__g{j}"`.
        A textual match is used only when it is a subtree of the expression: replacing it
        must leave sqlglot's parse of the rest unchanged (`x % 7` is not a subtree of
        `2 * x % 7`)."""
        for j, term in enumerate(self.group_terms):
            wanted = self.normalized(term)
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
        inside = _inside_subqueries(tuple(toks))
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


def _inside_subqueries(tokens: tuple[Token, ...]) -> set[int]:
    """Indexes of the tokens inside parenthesized subqueries."""
    inside: set[int] = set()
    for index, token in enumerate(tokens[:-1]):
        if token.kind == TokenType.L_PAREN and tokens[index + 1].kind in (TokenType.SELECT, TokenType.VALUES):
            inside.update(range(index, matching_paren(tokens, index) + 1))
    return inside


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
