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
from sqlglot import exp
from sqlglot.tokens import TokenType

from matview.errors import Error, UnsupportedQuery
from matview.keys import check_collation
from matview.names import is_node, quote
from matview.plan import WEIGHT, OutputColumn, Plan, PostColumn, Template
from matview.sql.collations import refuse_other_collations
from matview.sql.compound import blob_where_arms_conflict, combine, split_arms
from matview.sql.equality_chains import refuse_mixed_collation_chains
from matview.sql.from_clause import FromClause, read_from_clause
from matview.sql.from_items import read_from_items
from matview.sql.inline import inline_query
from matview.sql.reach_filter import reach_filter
from matview.sql.select_list import SelectList
from matview.sql.sqltext import (
    Clauses,
    Span,
    Token,
    find_aggregate_calls,
    has_subquery,
    matching_paren,
    split_clauses,
    split_top_level,
)
from matview.sql.subqueries import with_subqueries
from matview.sql.subquery_columns import scalar_of_a_column
from matview.sql.subquery_sources import expand_subquery_sources
from matview.sql.validate import (
    one_statement,
    parse_select,
    probe_columns,
    refuse_collated_membership,
    refuse_in_table_names,
    refuse_nondeterministic,
    refuse_unstable_rowid,
    refuse_unsupported,
)
from matview.sql.value_classes import output_has_one_variant
from matview.storage.schema import TableInfo, has_one_variant, image_keys, primary_key_order
from matview.upstream import describe_upstream

STAGE1_COLUMN = "__c{}"  # names of an aggregate view's stage-1 columns


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
    refuse_in_table_names(tokens)
    refuse_collated_membership(sql)
    compound = split_arms(sql, tokens) if tokens[0].kind == TokenType.SELECT else None
    if compound is not None:
        arms, operation = compound
        # each arm typed as SQLite types it alone: UNION compares across arms with each one's own
        compiled = [
            _compile_arm(conn, text, arm_tokens, names, probe_columns(conn, text)[1]) for text, arm_tokens in arms
        ]
        plan = combine(conn, [(c.plan, c.source) for c in compiled], operation)
        plan = replace(plan, columns=blob_where_arms_conflict(plan.columns, decltypes))
        refuse_other_collations(conn, sql, plan)
        arms_ = tuple(replace(c, plan=replace(c.plan, auto_indexes=auto_indexes)) for c in compiled)
        return Compiled(replace(plan, auto_indexes=auto_indexes), compiled[0].tree, compiled[0].source, arms_)
    written = sql
    read_views: dict[str, str] = {}  # plain views a subquery reads (name: CREATE VIEW text)
    expanded = expand_subquery_sources(conn, sql, read_views)
    inlined = inline_query(conn, expanded)
    if inlined.sql != sql:
        sql, tokens = one_statement(inlined.sql)
        refuse_collated_membership(sql)  # (a plain view's column may bring its COLLATE into a subquery)
    tree = parse_select(sql)
    refuse_unsupported(tree)
    functions = refuse_nondeterministic(conn, sql, tokens)
    clauses = split_clauses(sql, tokens)
    source = read_from_clause(conn, sql, clauses.from_.tokens)
    refuse_unstable_rowid(tokens, source)
    refuse_mixed_collation_chains(sql, tokens, source)
    if clauses.having and has_subquery(clauses.having.text):
        raise UnsupportedQuery("a subquery in HAVING is not supported yet (it is evaluated per group)")
    plan = build_plan(conn, sql, clauses, source, names, decltypes, tree, functions)
    if has_subquery(sql):
        plan = with_subqueries(conn, plan, source)
    plain_views = tuple({**read_views, **dict(inlined.views)}.items())
    inner_order = inlined.ordered[0] if inlined.ordered else ""
    plan = replace(
        plan, functions=functions, auto_indexes=auto_indexes, plain_views=plain_views, inner_order=inner_order
    )
    refuse_other_collations(conn, written, plan)
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
    refuse_mixed_collation_chains(sql, tokens, source)
    plan = build_plan(conn, sql, clauses, source, names, decltypes, tree, functions)
    return Compiled(replace(plan, functions=functions), tree, source)


def compile_view(conn: apsw.Connection, sql: str) -> Plan:
    """The plan of a view's SELECT (without the index pass, which needs its change capture)."""
    return compile_select(conn, sql).plan


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


def is_cast(tokens: tuple[Token, ...]) -> bool:
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
    functions: tuple[str, ...] = (),
) -> Plan:
    assert isinstance(tree, exp.Select)
    if clauses.window:
        raise UnsupportedQuery("WINDOW clause is not supported yet")
    builder = SelectList(conn, sql, source)
    builder.user_functions = frozenset(functions)  # (a user's `lower` is not the built-in: `value_classes`)
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
            # (a materialized view's expression column has no affinity: read as an expression; a
            # scalar subquery of a table's column has that column's, and values that passed it)
            (column is not None and not column.no_affinity)
            or (column is None and bool(decltype) and scalar_of_a_column(conn, sql, item.tokens)),
            column is None and is_cast(item.tokens),
            builder.value_class(item.tokens),
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
    # a materialized view or node whose rows never repeat is its own key: all its columns
    view_root = source.root_recompute and preserved.materialized
    if view_root:
        outer_key = tuple(c.name for c in preserved.columns)
    without_rowid = tuple(dict.fromkeys(o.table.name for o in source.occurrences if not o.table.has_rowid))
    signatures = tuple(
        (table.name, tuple((c.name, c.decltype, c.collation) for c in table.columns))
        for table in {o.table.name: o.table for o in source.occurrences}.values()
    )
    upstream_views = tuple(dict.fromkeys(o.table.name for o in source.occurrences if o.table.materialized))
    if upstream_views and source.outer_on:
        what = (
            "an aggregating or DISTINCT FROM-subquery, CTE or view"
            if is_node(upstream_views[0])
            else f"materialized view {upstream_views[0]}"
        )
        raise UnsupportedQuery(
            f"a {source.outer_kind} JOIN with {what} is not supported yet (a view's rows have no key to pad "
            "them by; a LEFT JOIN from a base table is maintained)"
        )
    where_sql = f" WHERE ({where})" if where else ""
    rows_plan = Plan(
        upstreams=tuple(describe_upstream(conn, name) for name in upstream_views),
        # (an expression of one storage class — `SELECT DISTINCT 0`, `strftime(…)` — has no variants)
        exact_distinct=all(output_has_one_variant(c) for c in columns),
        sources=sources,
        aliases=aliases,
        without_rowid=without_rowid,
        stable_rowid_tables=tuple(dict.fromkeys(o.table.name for o in source.occurrences if o.table.ipk)),
        root_key_nullable=source.root_recompute and (preserved.key_may_be_null or view_root),
        outer_on=source.outer_on,
        outer_kind=source.outer_kind,
        outer_where=bool(where),
        outer_key=outer_key,
        full_key=_row_key(source.occurrences[1].table) if source.outer_kind == "FULL" else (),
        root_recompute=source.root_recompute,
        root=source.root,
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
        toks = _without_outer_parentheses(sql, span.tokens)
        position = _ordinal(sql, toks)
        if position is not None:
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
    if group_terms:
        having_span = [clauses.having] if clauses.having else []
        spans = [Span(sql, i.tokens) for i in items] + having_span
        group_terms += builder.dependent_group_terms(group_terms, spans, _key_links(sql, clauses, source))
    group_collations = tuple(check_collation(builder.collation_of(toks), "GROUP BY") for toks in group_terms)
    builder.group_terms = group_terms
    for toks in group_terms:
        builder.add_stage1(Span(sql, toks).text)
    having_calls = find_aggregate_calls(sql, clauses.having.tokens) if clauses.having else []
    # (SQLite counts the MIN/MAX calls of its ORDER BY too: a second one makes the row arbitrary)
    order_calls = find_aggregate_calls(sql, clauses.order.tokens) if clauses.order else []
    builder.allow_bare_columns(
        [call for calls in calls_per_item for call in calls] + having_calls + order_calls, has_subquery(sql)
    )
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
    for call in order_calls:
        if call.name in ("min", "max"):
            # (the ORDER BY's MIN/MAX decides which row SQLite shows bare columns and GROUP BY
            # spellings from, as one in the select list does: kept, though no column shows it)
            order_tokens = clauses.order.tokens if clauses.order else ()
            builder.aggregate(call, Span(sql, tuple(order_tokens[call.first : call.last])).text)
    rowid_column = None
    exact_groups = all(
        (ref is not None and (ref.column is None or has_one_variant(ref.column.decltype, builder.collation_of(toks))))
        or builder.value_class(toks)
        for ref, toks in zip(group_refs, group_terms)
    )
    # beside one MIN/MAX, SQLite shows the extreme row's spelling of a GROUP BY column (an
    # expression term: the group's first row's); beside none, the first row's of every term
    # (`Circuit._first_row` finds that one without keeping every row, where no bare column needs it)
    extremes = any(a.func in ("min", "max") for a in builder.aggs)
    has_bare = any(a.func == "bare" for a in builder.aggs)
    spelled = not exact_groups and (
        not extremes or all(_plain_column(builder, toks) or builder.value_class(toks) for toks in group_terms)
    )
    # (a MIN/MAX under NOCASE/RTRIM shows its class's first spelling: the kept row's)
    collated = any(a.func in ("min", "max") and a.collation != "BINARY" for a in builder.aggs)
    extreme_row = builder.bare_refusal is None and (has_bare or collated or (extremes and spelled))
    extreme_spelling = extreme_row and spelled
    extreme_unique = extreme_row and builder.unique_extreme
    concat = any(a.func == "group_concat" for a in builder.aggs) and not source.is_join  # (a join's: by values)
    if (extreme_row and not extreme_unique) or concat or (collated and not extreme_row):
        first = source.occurrences[0]
        key = primary_key_order(conn, first.table)
        # (a WITHOUT ROWID row's identity: its key, as exact text — `accumulators` only needs it unique)
        identity = " || ',' || ".join(f"quote({quote(first.alias)}.{quote(name)})" for name, _d, _c in key)
        rowid_column = builder.add_stage1(identity or f"{quote(first.alias)}.{first.table.rowid_name}")
    # the per-group table: a plain column keeps its type (affinity) and collation
    # (a bare column keeps its column's type and collation there: `tag = 'X'` compares as SQLite does)
    post_columns = [
        PostColumn(f"__a{i}", *column, ("agg", i))
        if (column := builder.bare_columns.get(i)) is not None
        else PostColumn(f"__a{i}", "", "BINARY", ("agg", i))
        for i in range(len(builder.aggs))
    ] + [
        PostColumn(
            f"__g{j}",
            ref.column.decltype if (ref := group_refs[j]) is not None and ref.column is not None else "",
            group_collations[j],
            ("group", j),
        )
        for j in sorted(builder.used_groups)
    ]
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
        extreme_row=extreme_row,
        extreme_spelling=extreme_spelling,
        extreme_unique=extreme_unique,
    )


def _key_links(sql: str, clauses: Clauses, source: FromClause) -> list[tuple[int | None, Span]]:
    """The conditions that can tie a table's key to other columns: the WHERE clause (None), and
    the ON condition of each inner or LEFT join with the occurrence it brings in (a RIGHT or FULL
    JOIN's side is kept whatever its ON says)."""
    links: list[tuple[int | None, Span]] = [(None, clauses.where)] if clauses.where else []
    items = read_from_items(sql, list(clauses.from_.tokens), check=False) if clauses.from_ else []
    if len(items) != len(source.occurrences):
        return links
    for index, item in enumerate(items):
        outer = {t.kind for t in item.joined_by} & {TokenType.RIGHT, TokenType.FULL}
        if item.on is not None and not outer:
            links.append((index, item.on))
    return links


def _plain_column(builder: SelectList, tokens: tuple[Token, ...]) -> bool:
    """A GROUP BY term that is a column, COLLATE'd or not (SQLite loads it from the row its
    MIN/MAX keeps, as a bare column)."""
    if len(tokens) >= 3 and tokens[-2].kind == TokenType.COLLATE:
        tokens = tokens[:-2]
    return builder.column_of(tokens) is not None


def _ordinal(sql: str, tokens: tuple[Token, ...]) -> int | None:
    """The select item a GROUP BY term names by number, as SQLite reads it (`sqlite3ExprIsInteger`:
    an integer literal of 32 bits, through unary `+`, `-` and parentheses: `+1`, `(1)`, `-(-1)`,
    `0x1`); None for an expression (a larger integer is a constant). A COLLATE on an ordinal
    (item 1 under another collation) is refused."""
    collated = len(tokens) >= 3 and tokens[-2].kind == TokenType.COLLATE
    core = tokens[:-2] if collated else tokens
    sign = 1
    while core:
        if core[0].kind in (TokenType.PLUS, TokenType.DASH):
            sign, core = (-sign if core[0].kind == TokenType.DASH else sign), core[1:]
        elif core[0].kind == TokenType.L_PAREN and core[-1].kind == TokenType.R_PAREN:
            core = core[1:-1]  # (`(1) + (2)` leaves no single token: an expression)
        else:
            break
    if len(core) != 1:
        return None
    token, written = core[0], sql[core[0].start : core[0].end].lower()
    if token.kind == TokenType.NUMBER and token.text.isdigit():
        number = int(token.text)
    elif token.kind == TokenType.HEX_STRING and written.startswith("0x"):
        number = int(written, 16)
    else:
        return None
    if number >= 1 << 31:
        return None  # (not a 32-bit integer literal: a constant to SQLite)
    number *= sign
    if collated:
        raise UnsupportedQuery(f"GROUP BY {number} COLLATE …: a select item by number under another collation")
    return number


def _without_outer_parentheses(sql: str, tokens: tuple[Token, ...]) -> tuple[Token, ...]:
    """A GROUP BY term written `(expr)` (as the inline pass writes an alias it replaces) is
    `expr`, so it matches the select item it groups by; a row value `(a, b)` or a subquery
    keeps its parentheses."""
    while (
        len(tokens) > 2
        and tokens[0].kind == TokenType.L_PAREN
        and matching_paren(tokens, 0) == len(tokens) - 1
        and tokens[1].kind not in (TokenType.SELECT, TokenType.WITH, TokenType.VALUES)
        and len(split_top_level(sql, tokens[1:-1])) == 1
    ):
        tokens = tokens[1:-1]
    return tokens
