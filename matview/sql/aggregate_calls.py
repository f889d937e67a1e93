"""The aggregate calls of a select list (`SelectList` inherits them): each call registered once
with its stage-1 inputs (`aggregate`), GROUP_CONCAT's separator, ORDER BY terms and DISTINCT key,
and whether columns outside aggregates and GROUP BY can be maintained as bare columns
(`allow_bare_columns`, `operators.bare_columns`)."""

from __future__ import annotations

from dataclasses import replace

import apsw
from sqlglot.tokens import TokenType

from matview.errors import UnsupportedQuery
from matview.keys import check_collation
from matview.names import fold, is_node, quote
from matview.plan import AggSpec
from matview.sql.from_clause import ColumnRef, FromClause
from matview.sql.sqltext import AggregateCall, Span, Token, tokenize
from matview.storage.schema import Column, has_one_variant, primary_key_order, unique_key_columns

_AGG_FUNCS = {"string_agg": "group_concat"}


class AggregateCalls:
    """What `SelectList` keeps of its aggregate calls, and how it registers them."""

    conn: apsw.Connection
    source: FromClause
    aggs: list[AggSpec]
    agg_keys: dict[tuple[tuple[str, str], ...], int]
    extreme_columns: dict[tuple[str, str | None], tuple[int | None, int | None]]
    group_terms: list[tuple[Token, ...]]
    stage1: list[str]
    bare_refusal: str | None
    unique_extreme: bool
    rowid_ordered: bool
    bare_columns: dict[int, tuple[str, str]]

    def column_of(self, tokens: tuple[Token, ...]) -> ColumnRef | None:
        raise NotImplementedError  # (`SelectList`)

    def collation_of(self, tokens: tuple[Token, ...]) -> str:
        raise NotImplementedError  # (`SelectList`)

    def normalized(self, tokens: tuple[Token, ...] | list[Token]) -> tuple[tuple[str, str], ...]:
        raise NotImplementedError  # (`SelectList`)

    def value_class(self, tokens: tuple[Token, ...]) -> str:
        raise NotImplementedError  # (`SelectList`)

    def reads_only(self, tokens: tuple[Token, ...], occurrences: set[int]) -> bool:
        raise NotImplementedError  # (`SelectList`)

    def add_stage1(self, text: str) -> int:
        self.stage1.append(text)
        return len(self.stage1) - 1

    def constant_text(self, text: str, where: str) -> str:
        try:
            row = self.conn.execute(f"SELECT CAST(({text}) AS TEXT)").fetchone()
        except apsw.Error:
            raise UnsupportedQuery(f"{where}: the separator must be a constant") from None
        return "" if row is None or row[0] is None else str(row[0])

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
        # (a MIN/MAX under NOCASE/RTRIM, beside another: each keeps its rows by (class, rowid))
        self.rowid_ordered = (
            not self.source.is_join
            and len(occurrences) == 1
            and not has_subquery
            and not occurrences[0].table.materialized
            and occurrences[0].table.ipk is not None
        )

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

    def _order_decides_text(self, arg: Span, terms: list[Span]) -> bool:
        """Whether rows that GROUP_CONCAT's ORDER BY `terms` leave tied always concatenate the
        same text (then the join's loop order, which breaks SQLite's ties, cannot show): a term
        is the argument itself, compared under BINARY, whose equal values are identical (typed
        column, one storage class); or it is the INTEGER PRIMARY KEY (rowid) of the one table
        the argument reads — tied rows are one row of that table, joined to several others."""
        written = self.normalized(arg.tokens)
        for term in terms:
            tokens = term.tokens
            words = [t.text.upper() for t in tokens]
            if len(words) > 2 and words[-2] == "NULLS":
                tokens = tokens[:-2]
            if tokens and tokens[-1].text.upper() in ("ASC", "DESC"):
                tokens = tokens[:-1]
            if self.normalized(tokens) == written and self.collation_of(tokens) == "BINARY":
                ref = self.column_of(tokens)
                if (ref is not None and (ref.column is None or has_one_variant(ref.column.decltype, "BINARY"))) or (
                    self.value_class(tokens)
                ):
                    return True
            ref = self.column_of(tokens)
            if ref is None:
                continue
            table = self.source.occurrences[ref.occurrence].table
            is_key = ref.column is None or (table.has_rowid and fold(ref.column.name) == fold(table.ipk or ""))
            if is_key and not table.materialized and self.reads_only(arg.tokens, {ref.occurrence}):
                return True
        return False

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
        if call.distinct and _AGG_FUNCS.get(call.name, call.name) in ("min", "max"):
            # MIN/MAX(DISTINCT x) is MIN/MAX(x) in SQLite: DISTINCT keeps the first row of each
            # class its scan meets, which the extreme is too (a -0.0 kept apart from 0.0 likewise)
            call = replace(call, distinct=False)
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
            if self.source.is_join and (call.distinct or not self._order_decides_text(args[0], order_terms)):
                raise UnsupportedQuery(
                    f"{call.name.upper()} over a join without an ORDER BY that decides it: rows it leaves "
                    "tied come in the join's loop order (order by the value itself, under BINARY, or by "
                    "the INTEGER PRIMARY KEY of the table it reads)"
                )
            table = self.source.occurrences[0].table
            stored = primary_key_order(self.conn, table)  # (WITHOUT ROWID: scanned in key order)
            if self.source.is_join:
                pass  # (each entry is keyed by its values: `Accumulator.update`)
            elif table.ipk is None and not stored:
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
            # (beside another MIN/MAX or with FILTER, each keeps its own rows by (class, rowid):
            # `Accumulator.update`)
            witnessed = (
                func in ("min", "max") and not call.distinct and (self.bare_refusal is None or self.rowid_ordered)
            )
            if collation != "BINARY" and not (counted or witnessed):
                raise UnsupportedQuery(f"{where} over a {collation}-collated value is not supported yet")
        arg_index = filter_index = None
        extreme = (args[0].text, call.filter.text if call.filter is not None else None) if args else None
        if func in ("min", "max") and not call.distinct and collation == "BINARY" and extreme in self.extreme_columns:
            # MIN(x) beside MAX(x): one stage-1 column, so they share one ordered multiset
            arg_index, filter_index = self.extreme_columns[extreme]
        else:
            if args:
                text = args[0].text
                arg_index = self.add_stage1(f"CAST(({text}) AS TEXT)" if func == "group_concat" else text)
            if call.filter is not None:
                filter_index = self.add_stage1(f"CASE WHEN ({call.filter.text}) THEN 1 ELSE 0 END")
            if func in ("min", "max") and not call.distinct and collation == "BINARY" and extreme is not None:
                self.extreme_columns[extreme] = (arg_index, filter_index)
        compared = self.add_stage1(args[0].text) if func == "group_concat" and call.distinct else None
        order = tuple(self._order_term(term, where) for term in order_terms)
        if func == "group_concat" and not self.source.is_join:
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
