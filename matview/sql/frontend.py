"""SQL front end: validate a view's SELECT (the passes of `validate`) and compile it
into a `Plan`.

Pipeline (each step small, in the spirit of sqlglot's optimizer passes):
  1. `probe_columns`   SQLite itself validates the SELECT and names its columns.
  2. `refuse_unsupported`  sqlglot's AST finds subqueries, set operations, windows, …
  3. `refuse_nondeterministic`  SQLite's function list says which calls are deterministic.
  4. `read_from_clause`  the base tables of FROM, each occurrence a placeholder; names resolve.
  5. `build_plan`      the select list, WHERE, GROUP BY and HAVING are cut from the user's
                       text (`sqltext`) into the stage-1 SELECT and post-aggregate expressions.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import apsw
import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

from matview.errors import Error, UnsupportedQuery
from matview.keys import check_collation
from matview.names import NODE_PREFIX, fold, quote
from matview.operators.partition import reach_filter
from matview.plan import WEIGHT, AggSpec, OutputColumn, Plan, PostColumn, Template
from matview.sql.compound import combine, split_arms
from matview.sql.from_clause import ColumnRef, FromClause, read_from_clause
from matview.sql.inline import inline_query
from matview.sql.sqltext import (
    AggregateCall,
    Clauses,
    Span,
    Token,
    find_aggregate_calls,
    matching_paren,
    normalized,
    parse_sqlite,
    splice,
    split_clauses,
    split_top_level,
    tokenize,
)
from matview.sql.subqueries import has_subquery, with_subqueries
from matview.sql.subquery_sources import expand_subquery_sources
from matview.sql.validate import (
    one_statement,
    parse_select,
    probe_columns,
    refuse_nondeterministic,
    refuse_unstable_rowid,
    refuse_unsupported,
)
from matview.storage.schema import Column, TableInfo, has_one_variant, image_keys
from matview.upstream import describe_upstream

STAGE1_COLUMN = "__c{}"  # names of an aggregate view's stage-1 columns
_AGG_FUNCS = {"string_agg": "group_concat"}


@dataclass(frozen=True)
class Compiled:
    """A compiled SELECT: its plan, and the parse the index pass reads (`indexes`)."""

    plan: Plan
    tree: exp.Select
    source: FromClause
    arms: tuple[Compiled, ...] = ()  # a UNION [ALL]: each arm, compiled on its own


def compile_select(conn: apsw.Connection, sql: str, auto_indexes: bool = True) -> Compiled:
    """Compile the defining SELECT of a view, or raise `Error` / `UnsupportedQuery`."""
    sql, tokens = one_statement(sql)
    names, decltypes = probe_columns(conn, sql)
    compound = split_arms(sql, tokens) if tokens[0].kind == TokenType.SELECT else None
    if compound is not None:
        arms, operation = compound
        # each arm typed as SQLite types it alone: UNION compares across arms with each one's own
        compiled = [
            _compile_arm(conn, text, arm_tokens, names, probe_columns(conn, text)[1]) for text, arm_tokens in arms
        ]
        plan = combine(conn, [(c.plan, c.source) for c in compiled], operation)
        arms_ = tuple(replace(c, plan=replace(c.plan, auto_indexes=auto_indexes)) for c in compiled)
        return Compiled(replace(plan, auto_indexes=auto_indexes), compiled[0].tree, compiled[0].source, arms_)
    expanded = expand_subquery_sources(conn, sql)
    inlined = inline_query(conn, expanded)
    if inlined.sql != sql:
        sql, tokens = one_statement(inlined.sql)
    tree = parse_select(sql)
    refuse_unsupported(tree)
    functions = refuse_nondeterministic(conn, sql, tokens)
    clauses = split_clauses(sql, tokens)
    source = read_from_clause(conn, sql, clauses.from_.tokens)
    refuse_unstable_rowid(tokens, source)
    if clauses.having and has_subquery(clauses.having.text):
        raise UnsupportedQuery("a subquery in HAVING is not supported yet (it is evaluated per group)")
    plan = build_plan(conn, sql, clauses, source, names, decltypes, tree)
    if has_subquery(sql):
        plan = with_subqueries(conn, plan, source)
    plan = replace(plan, functions=functions, auto_indexes=auto_indexes, plain_views=inlined.views)
    return Compiled(plan, tree, source)


def _compile_arm(
    conn: apsw.Connection, sql: str, tokens: list[Token], names: list[str], decltypes: list[str]
) -> Compiled:
    """One arm of a set operation: a select-project-join SELECT over base tables."""
    tree = parse_select(sql)
    refuse_unsupported(tree)
    if has_subquery(sql):
        raise UnsupportedQuery("a subquery in an arm of a set operation is not supported yet")
    functions = refuse_nondeterministic(conn, sql, tokens)
    clauses = split_clauses(sql, tokens)
    source = read_from_clause(conn, sql, clauses.from_.tokens)
    refuse_unstable_rowid(tokens, source)
    plan = build_plan(conn, sql, clauses, source, names, decltypes, tree)
    return Compiled(replace(plan, functions=functions), tree, source)


def compile_view(conn: apsw.Connection, sql: str) -> Plan:
    """The plan of a view's SELECT (without the index pass, which needs its change capture)."""
    return compile_select(conn, sql).plan


@dataclass
class _Item:
    tokens: tuple[Token, ...]  # for analysis; a `*` expansion has tokens of its own text
    alias: str | None
    column: ColumnRef | None  # the base column when the item is a plain column reference
    text: str  # the expression as written (without its alias)


class _Builder:
    """Builds a Plan from the clauses of one SELECT over the occurrences of its FROM clause."""

    def __init__(self, conn: apsw.Connection, sql: str, source: FromClause) -> None:
        self.conn, self.sql, self.source = conn, sql, source
        self.aggs: list[AggSpec] = []
        self.group_terms: list[tuple[Token, ...]] = []
        self.used_groups: set[int] = set()  # GROUP BY terms post-aggregation expressions use
        self.agg_keys: dict[tuple[tuple[str, str], ...], int] = {}
        self.stage1: list[str] = []

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
        if len(tokens) >= 3 and tokens[-2].kind == TokenType.COLLATE:
            return tokens[-1].text.upper()
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
    def aggregate(self, call: AggregateCall, sql: str) -> int:
        """Register an aggregate call (deduplicated) and its stage-1 inputs; its index."""
        key = (
            self.normalized([Token(TokenType.VAR, call.name, 0, 0)] + [t for a in call.args for t in a.tokens])
            + ((("distinct", str(call.distinct)),))
            + (self.normalized(call.filter.tokens) if call.filter else ())
        )
        if key in self.agg_keys:
            return self.agg_keys[key]
        func = _AGG_FUNCS.get(call.name, call.name)
        where = f"aggregate {call.name}()"
        args = list(call.args)
        separator = None
        for token in (t for a in args for t in a.tokens):
            if token.kind == TokenType.ORDER_BY:
                raise UnsupportedQuery(f"ORDER BY inside {where} is not supported yet")
        if func == "count" and not args:
            if call.distinct:
                raise UnsupportedQuery("COUNT(DISTINCT *) is not valid")
        elif func == "group_concat":
            if len(args) == 2:
                separator = self.constant_text(args[1].text, where)
            elif len(args) != 1:
                raise UnsupportedQuery(f"{where} with {len(args)} arguments")
            if call.distinct:
                raise UnsupportedQuery("GROUP_CONCAT(DISTINCT …) is not supported yet")
            if self.source.is_join:
                raise UnsupportedQuery("GROUP_CONCAT over a join: its order is the join's loop order, unspecified")
            table = self.source.occurrences[0].table
            if table.ipk is None:
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
        if (call.distinct or func in ("min", "max")) and args:
            collation = self.collation_of(args[0].tokens)
            if check_collation(collation, where) != "BINARY":
                raise UnsupportedQuery(f"{where} over a {collation}-collated value is not supported yet")
        arg_index = filter_index = None
        if args:
            text = args[0].text
            arg_index = self.add_stage1(f"CAST(({text}) AS TEXT)" if func == "group_concat" else text)
        if call.filter is not None:
            filter_index = self.add_stage1(f"CASE WHEN ({call.filter.text}) THEN 1 ELSE 0 END")
        spec = AggSpec(func, call.distinct, arg_index, filter_index, separator, sql)
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
        then GROUP BY terms `"__g{j}"`; any column left is neither, which SQLite would
        answer from an arbitrary row of the group (a bare column): refused."""
        toks = tokenize(text)
        replacements = []
        for call in find_aggregate_calls(text, toks):
            call_text = text[toks[call.first].start : toks[call.last - 1].end]
            index = self.aggregate(call, call_text)
            replacements.append((toks[call.first].start, toks[call.last - 1].end, quote(f"__a{index}")))
        text = self.substitute_group_terms(splice(text, replacements))
        toks = tokenize(text)
        inside = _inside_subqueries(tuple(toks))
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
                raise UnsupportedQuery(
                    f"column {written} in {where} is neither aggregated nor a GROUP BY column "
                    "(bare columns are not supported)"
                )
        return text


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


def _stage1(columns: list[str], source: FromClause, where_sql: str, weight_alias: str = "") -> Template:
    """The stage-1 SELECT: the user's expressions, FROM and WHERE, then the weight. The
    FROM clause keeps a placeholder per occurrence (`from_clause`)."""
    head = "SELECT " + "".join(f"{c}, " for c in columns)
    body = list(source.template)
    body[0] = f"{weight_alias} FROM {body[0]}"
    body[-1] = f"{body[-1]}{where_sql}"
    if source.outer_on or source.root_recompute:
        body += ["reach", ""]  # where a delta term of the outer join restricts the rows it visits
    return (head, WEIGHT, *body)


def _named_stage1(expressions: list[str], source: FromClause, where_sql: str) -> Template:
    """The stage-1 SELECT of an aggregate view, its columns named `__c<i>` and `__w` so the
    set-at-a-time aggregate path can select from it."""
    columns = [f"{e} AS {quote(STAGE1_COLUMN.format(i))}" for i, e in enumerate(expressions)]
    return _stage1(columns, source, where_sql, ' AS "__w"')


def _row_key(table: TableInfo) -> tuple[str, ...]:
    """What identifies a row of `table` within one fold: its rowid, or its PRIMARY KEY."""
    return (table.rowid_name,) if table.has_rowid else table.primary_key


def _is_cast(tokens: tuple[Token, ...]) -> bool:
    """Whether an expression is one CAST(… AS type), as written."""
    return (
        len(tokens) > 3
        and tokens[0].text.upper() == "CAST"
        and tokens[1].kind == TokenType.L_PAREN
        and matching_paren(tokens, 1) == len(tokens) - 1
    )


def build_plan(
    conn: apsw.Connection,
    sql: str,
    clauses: Clauses,
    source: FromClause,
    names: list[str],
    decltypes: list[str],
    tree: Any,
) -> Plan:
    assert isinstance(tree, exp.Select)
    if clauses.window:
        raise UnsupportedQuery("WINDOW clause is not supported yet")
    builder = _Builder(conn, sql, source)
    items = builder.items(clauses, tree)
    if len(items) != len(names):
        raise UnsupportedQuery("matview cannot match the select list to its columns")
    where = builder.substitute_aliases(clauses.where, items) if clauses.where else ""
    distinct = clauses.distinct is not None and clauses.distinct.kind == TokenType.DISTINCT
    bare = [builder.bare_column(item) for item in items]
    columns = tuple(
        OutputColumn(
            name,
            # a plain column has its base column's type (as `read_table` mirrors STRICT tables)
            column.decltype if column is not None else decltype,
            builder.collation_of(item.tokens),
            column is not None,
            column is None and _is_cast(item.tokens),
        )
        for name, decltype, item, column in zip(names, decltypes, items, bare)
    )
    calls_per_item = [find_aggregate_calls(sql, item.tokens) for item in items]
    is_aggregate = bool(clauses.group or clauses.having or any(calls_per_item))
    sources = tuple(o.table.name for o in source.occurrences)
    aliases = tuple(o.alias for o in source.occurrences)
    preserved = source.occurrences[source.preserved].table
    outer_key = _row_key(preserved)
    if source.root_recompute:  # a key VACUUM keeps (see `partition`)
        outer_key = preserved.stable_key or outer_key
    without_rowid = tuple(dict.fromkeys(o.table.name for o in source.occurrences if not o.table.has_rowid))
    signatures = tuple(
        (table.name, tuple((c.name, c.decltype, c.collation) for c in table.columns))
        for table in {o.table.name: o.table for o in source.occurrences}.values()
    )
    upstream_views = tuple(dict.fromkeys(o.table.name for o in source.occurrences if o.table.materialized))
    if upstream_views and source.outer_on:
        what = (
            "an aggregating or DISTINCT FROM-subquery, CTE or view"
            if fold(upstream_views[0]).startswith(NODE_PREFIX)
            else f"materialized view {upstream_views[0]}"
        )
        raise UnsupportedQuery(
            f"a {source.outer_kind} JOIN with {what} is not supported yet (a view's rows have no key to pad "
            "them by; a LEFT JOIN from a base table is maintained)"
        )
    where_sql = f" WHERE ({where})" if where else ""
    rows_plan = Plan(
        upstreams=tuple(describe_upstream(conn, name) for name in upstream_views),
        exact_distinct=all(has_one_variant(c.decltype, c.collation) for c in columns),
        sources=sources,
        aliases=aliases,
        without_rowid=without_rowid,
        stable_rowid_tables=tuple(dict.fromkeys(o.table.name for o in source.occurrences if o.table.ipk)),
        root_key_nullable=source.root_recompute and preserved.key_may_be_null,
        outer_on=source.outer_on,
        outer_kind=source.outer_kind,
        outer_where=bool(where),
        outer_key=outer_key,
        full_key=_row_key(source.occurrences[1].table) if source.outer_kind == "FULL" else (),
        root_recompute=source.root_recompute,
        from_template=source.template if source.root_recompute else (),
        reach_filter=reach_filter(where),
        image_keys=image_keys([o.table for o in source.occurrences]),
        inner_from=not source.outer_kind and not source.root_recompute,
        kind="rows",
        stage1=_stage1([item.text for item in items], source, where_sql),
        columns=columns,
        distinct=distinct,
        signatures=signatures,
    )
    if not is_aggregate:
        if distinct:
            for output in columns:
                check_collation(output.collation, f"SELECT DISTINCT column {output.name}")
        return rows_plan
    # GROUP BY terms: ordinals and aliases name select items; columns win over aliases.
    group_terms: list[tuple[Token, ...]] = []
    for span in split_top_level(sql, clauses.group.tokens) if clauses.group else []:
        toks = span.tokens
        if len(toks) == 1 and toks[0].kind == TokenType.NUMBER and toks[0].text.isdigit():
            position = int(toks[0].text)
            if not 1 <= position <= len(items):
                raise Error(f"GROUP BY term {position} out of range")
            toks = items[position - 1].tokens
        elif len(toks) == 1 and toks[0].is_name and builder.resolve(toks[0].text) is None:
            matches = [i for i in items if i.alias and i.alias.lower() == toks[0].text.lower()]
            if matches:
                toks = matches[0].tokens
        if find_aggregate_calls(sql, toks):
            raise Error("aggregate functions are not allowed in the GROUP BY clause")
        group_terms.append(toks)
    group_collations = tuple(check_collation(builder.collation_of(toks), "GROUP BY") for toks in group_terms)
    builder.group_terms = group_terms
    for toks in group_terms:
        builder.add_stage1(Span(sql, toks).text)
    group_norm = [builder.normalized(toks) for toks in group_terms]
    group_refs = [builder.column_of(toks) for toks in group_terms]
    outputs: list[tuple[str, int]] = []
    post_exprs: list[str] = []
    for item, calls in zip(items, calls_per_item):
        norm = builder.normalized(item.tokens)
        if norm in group_norm:
            outputs.append(("group", group_norm.index(norm)))
            continue
        text = item.text
        if len(calls) == 1 and calls[0].first == 0 and calls[0].last == len(item.tokens):
            outputs.append(("agg", builder.aggregate(calls[0], text)))
            continue
        post_exprs.append(builder.post_expression(text, "the select list"))
        outputs.append(("expr", len(post_exprs) - 1))
    having = None
    if clauses.having:
        having_text = builder.substitute_aliases(clauses.having, items)
        having = builder.post_expression(having_text, "HAVING")
    rowid_column = None
    if any(a.func == "group_concat" for a in builder.aggs):
        first = source.occurrences[0]
        rowid_column = builder.add_stage1(f"{quote(first.alias)}.{first.table.rowid_name}")
    # the per-group table: a plain column keeps its type (affinity) and collation
    post_columns = [PostColumn(f"__a{i}", "", "BINARY", ("agg", i)) for i in range(len(builder.aggs))] + [
        PostColumn(
            f"__g{j}",
            ref.column.decltype if (ref := group_refs[j]) is not None and ref.column is not None else "",
            group_collations[j],
            ("group", j),
        )
        for j in sorted(builder.used_groups)
    ]
    exact_groups = all(
        ref is not None and (ref.column is None or has_one_variant(ref.column.decltype, builder.collation_of(toks)))
        for ref, toks in zip(group_refs, group_terms)
    )
    return replace(
        rows_plan,
        exact_groups=exact_groups,
        kind="aggregate",
        stage1=_named_stage1(builder.stage1, source, where_sql),
        group_collations=group_collations,
        has_group_by=bool(group_terms),
        aggs=tuple(builder.aggs),
        outputs=tuple(outputs),
        post_columns=tuple(post_columns),
        post_exprs=tuple(post_exprs),
        having=having,
        rowid_column=rowid_column,
    )
