"""Internal nodes: an aggregating or DISTINCT derived table that is joined or aggregated again,
or an uncorrelated aggregating or DISTINCT subquery under `IN`, is maintained as a hidden
materialized view of its own (RELATIONAL.md §1.2, `Materialize`).

A FROM-subquery, a CTE or a plain view whose SELECT aggregates (or is DISTINCT) cannot be
flattened into the query that reads it: its rows are the output of a non-linear operator, which
needs state. This pass, run before the inline pass, finds such derived tables at the top level
of a view's SELECT, gives each one a name (`__dbsp_node_<view>_<k>`, the same for the same
text), and rewrites the reference to read that name, as a view over a view reads its upstream
(`matview.upstream`). `lifecycle` creates the nodes first, as hidden materialized views; the
view and its nodes fold together, and are dropped and refreshed together.

Left alone (the inline pass merges or refuses them): an aggregating derived table read alone
by an outer query that neither aggregates nor has a subquery (merged into one aggregate), derived tables with
LIMIT, a window or a set operation, a derived table in an outer join that neither aggregates nor
is DISTINCT (LEFT JOINed, it is a LEFT JOIN of its table once inlined) unless it keeps its table's
key (then a DISTINCT node), and any query with a set operation.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import apsw
from sqlglot.tokens import TokenType

from matview.errors import Error
from matview.names import NODE_PREFIX, fold, quote
from matview.sql.compound import one_operation
from matview.sql.derived_shapes import (
    derived_select,
    has_expression_subquery,
    has_outer_join,
    is_compound,
    joins,
    plain_view_body,
    plain_view_needs_a_node,
    reads_aggregating_cte,
    shape,
    union_all_only,
)
from matview.sql.from_items import OUTER_WORDS, Cte, FromItem, is_from_item, read_from_items, read_with, view_parts
from matview.sql.grouped_subqueries import rewrite_grouped_subqueries
from matview.sql.inline import plain_view_sql
from matview.sql.row_keys import keeps_a_key
from matview.sql.sqltext import (
    Clauses,
    Token,
    depth_walk,
    excerpt,
    is_aggregating,
    item_alias,
    matching_paren,
    set_operator_kinds,
    set_operators,
    splice,
    split_clauses,
    split_top_level,
    tokenize,
)
from matview.sql.validate import probe_columns


@dataclass(frozen=True)
class Node:
    name: str
    sql: str  # its SELECT: the derived table's body (with the CTEs it may read)
    words: str = ""  # what it is in the user's words, where its SQL is the front end's own
    keyed: bool = False  # a select-project-join derived table keeping its table's key, as DISTINCT
    #: plain views whose body is its SQL (name, CREATE VIEW text): the view reading it is broken
    #: when one is redefined, as if it read the view by name (`Plan.plain_views`)
    views: tuple[tuple[str, str], ...] = ()


def extract_nodes(conn: apsw.Connection, sql: str, owner: str) -> tuple[str, list[Node]]:
    """`sql` with each derived table that needs state of its own read from a node; the nodes."""
    tokens = tokenize(sql)
    prefix, body = "", sql
    ctes: dict[str, Cte] = {}
    if tokens and tokens[0].kind == TokenType.WITH:
        ctes, body = read_with(sql, tokens, {})
        prefix = sql[: len(sql) - len(body)]
        tokens = tokenize(body)
    if not tokens or tokens[0].kind != TokenType.SELECT:
        return sql, []
    inner = _star_over_derived(body, tokens, prefix, ctes)
    if inner is not None:
        return extract_nodes(conn, prefix + inner, owner)
    if set_operators(tokens):
        arms: dict[str, Node] = {}
        probe_columns(conn, sql)  # SQLite's own errors first (an ORDER BY term out of range, …)
        rewritten = _arm_nodes(body, tokens, prefix, owner, arms)
        return (rewritten, list(arms.values())) if arms else (sql, [])
    original, body = body, rewrite_grouped_subqueries(conn, body, prefix)
    nodes: dict[str, Node] = {}
    cte_nodes: dict[str, str] = {}
    rewritten = _from_nodes(conn, body, prefix, ctes, owner, nodes, cte_nodes)
    if body != original:  # the aggregate written as a derived table: its one node
        group = split_clauses(original, tokenize(original)).group
        words = f"GROUP BY {group.text}" if group else "the aggregate"
        for key, node in nodes.items():
            nodes[key] = replace(node, words=f"{words} beside a subquery in the select list or HAVING")
    rewritten = _in_nodes(conn, rewritten, prefix, owner, nodes)
    rewritten = _subquery_node_reads(conn, rewritten, prefix, ctes, owner, nodes, cte_nodes)
    if nodes:
        rewritten = _keep_column_names(conn, prefix + body, body, rewritten)
    return prefix + rewritten, list(nodes.values())


def _star_over_derived(body: str, tokens: list[Token], prefix: str, ctes: dict[str, Cte]) -> str | None:
    """`SELECT * FROM d`, d a set operation or an aggregating or DISTINCT SELECT (a FROM-subquery,
    or a CTE without a column list), is d: the same rows under the same column names (so the
    CTEs d reads are its derived tables: `WITH t AS (… GROUP BY …), u AS (SELECT n, count(*) FROM
    t GROUP BY n) SELECT * FROM u`). None otherwise."""
    if set_operators(tokens):
        return None  # (`SELECT * FROM t UNION ALL …`: t is one arm, not the statement)
    clauses = split_clauses(body, tokens)
    if not clauses.from_ or not _reads_alone(clauses) or clauses.limit or clauses.order:
        return None
    items = read_from_items(body, list(clauses.from_.tokens), check=False)
    if len(items) != 1:
        return None
    item = items[0]
    inner = item.body
    if inner is None and item.name is not None and not item.schema:
        cte = ctes.get(fold(item.name))
        inner = cte.body if cte is not None and cte.columns is None else None
    if inner is None or not (is_compound(inner) or any(shape(inner)) or reads_aggregating_cte(inner, ctes)):
        return None
    if prefix and tokenize(inner)[0].kind == TokenType.WITH:
        return None  # (two WITH lists)
    return inner


def _keep_column_names(conn: apsw.Connection, sql: str, body: str, rewritten: str) -> str:
    """`rewritten` with the names SQLite gives `sql`'s columns: an unaliased item whose text a
    node changed (`n IN (SELECT n FROM b INTERSECT …)`) is named by its text, which would
    otherwise show the node."""
    names = probe_columns(conn, sql)[0]
    before = [span.text for span in split_top_level(body, split_clauses(body, tokenize(body)).select.tokens) if span]
    tokens = tokenize(rewritten)
    after = [span for span in split_top_level(rewritten, split_clauses(rewritten, tokens).select.tokens) if span]
    if not (len(names) == len(before) == len(after)):
        return rewritten  # (`*` items: their names are columns' own)
    edits = [
        (span.tokens[-1].end, span.tokens[-1].end, f" AS {quote(name)}")
        for name, old, span in zip(names, before, after)
        if span.text != old and item_alias(span) is None
    ]
    return splice(rewritten, edits)


def _arm_nodes(body: str, tokens: list[Token], prefix: str, owner: str, nodes: dict[str, Node]) -> str:
    """A set operation whose arms need state of their own (an aggregate, DISTINCT, a subquery,
    an outer join, a derived table) or read the query's CTEs: each such arm becomes a node,
    read as `SELECT * FROM node` — the set operation then combines select-project arms, as
    it does over any materialized view (each arm is a bag of rows: the node's rows are the
    arm's, with their types). A trailing ORDER BY is dropped (a view has no order); a LIMIT
    leaves the query as written (refused by name)."""
    depths = depth_walk(tokens)
    if any(d == 0 and t.kind == TokenType.LIMIT for t, d in zip(tokens, depths)):
        return prefix + body
    end = next((i for i, (t, d) in enumerate(zip(tokens, depths)) if d == 0 and t.kind == TokenType.ORDER_BY), None)
    if end is not None:
        body, tokens, depths = body[: tokens[end - 1].end], tokens[:end], depths[:end]
    operators = set_operators(tokens)
    starts = [0, *(i + (2 if tokens[i + 1].kind == TokenType.ALL else 1) for i in operators)]
    arms = [tokens[start:stop] for start, stop in zip(starts, [*operators, len(tokens)])]
    if any(not arm or arm[0].kind != TokenType.SELECT for arm in arms):
        return prefix + body  # (refused by name later)
    edits = []
    # mixed operators: the chain is left-associative, so all before the last run of one
    # operator is the left operand of that run, a node of its own (itself split likewise)
    split = _last_run(tokens, operators)
    if split:
        left = body[: tokens[operators[split]].start].rstrip()
        node = _node(nodes, owner, prefix + left)
        edits.append((0, len(left), f"SELECT * FROM {quote(node.name)}"))
    for arm in arms[split + 1 if split else 0 :]:
        text = body[arm[0].start : arm[-1].end]
        if prefix or _needs_node(text, arm):
            node = _node(nodes, owner, prefix + text)
            edits.append((arm[0].start, arm[-1].end, f"SELECT * FROM {quote(node.name)}"))
    return splice(body, edits)


def _last_run(tokens: list[Token], operators: list[int]) -> int:
    """The index of the first operator of the chain's last run that one set operation
    computes (`compound.split_arms`: one operator, or UNION ALL and UNION ending in UNION)."""
    kinds = set_operator_kinds(tokens, operators)
    split = len(kinds) - 1
    while split > 0 and one_operation(kinds[split - 1 :]):
        split -= 1
    return split


def _needs_node(text: str, tokens: list[Token]) -> bool:
    """Whether an arm of a set operation is more than a select-project-join of tables."""
    depths = depth_walk(tokens)
    distinct, aggregates = shape(text)
    outer = any(d == 0 and t.kind in OUTER_WORDS for t, d in zip(tokens, depths))
    opens = (TokenType.SELECT, TokenType.WITH)
    nested = any(t.kind == TokenType.L_PAREN and n.kind in opens for t, n in itertools.pairwise(tokens))
    return distinct or aggregates or outer or nested


def _node(nodes: dict[str, Node], owner: str, sql: str) -> Node:
    """The node defined by `sql` (one per distinct text)."""
    node = nodes.get(sql)
    if node is None:
        node = nodes[sql] = Node(f"{NODE_PREFIX}{owner}_{len(nodes) + 1}", sql)
    return node


def _in_nodes(conn: apsw.Connection, body: str, prefix: str, owner: str, nodes: dict[str, Node]) -> str:
    """`x [NOT] IN (SELECT … GROUP BY … | SELECT DISTINCT …)` that reads nothing of the outer
    query: the subquery becomes a node, read as `IN (SELECT <its columns> FROM node)` (a set:
    its rows' order and multiplicity do not matter, and the node's aggregates are exact)."""
    tokens = tokenize(body)
    edits: list[tuple[int, int, str]] = []
    index = 0
    while index < len(tokens) - 2:
        token, paren, first = tokens[index], tokens[index + 1], tokens[index + 2]
        if token.kind != TokenType.IN or paren.kind != TokenType.L_PAREN or first.kind != TokenType.SELECT:
            index += 1
            continue
        close = matching_paren(tokens, index + 1)
        inner = body[first.start : tokens[close - 1].end]
        index = close + 1
        distinct, aggregates = shape(inner)
        if _collates_its_columns(inner):
            continue  # (read from a node, an explicit COLLATE would become the column's implicit one)
        # (a UNION ALL alone is left to `subqueries`, which reads it as it is: only the
        # deduplicating set operations keep state)
        deduplicates = is_compound(inner) and not union_all_only(inner)
        columns = _self_contained(conn, prefix + inner) if distinct or aggregates or deduplicates else None
        if not columns:
            continue
        # (its GROUP BY terms as columns too, where the select list lacks them: then its rows never
        # repeat — `id IN (SELECT max(id) FROM t GROUP BY acct)`, the latest row per group — and the
        # view reading it is maintained per row of its first table)
        keyed_inner = _with_group_terms(inner) if aggregates else inner
        node = _node(nodes, owner, prefix + keyed_inner)
        if keyed_inner != inner:  # (messages show the subquery as written)
            node = nodes[prefix + keyed_inner] = replace(node, words=f"the subquery ({excerpt(inner)})")
        listed = ", ".join(quote(c) for c in columns)
        edits.append((paren.start, tokens[close].end, f"(SELECT {listed} FROM {quote(node.name)})"))
    for start, end, text in reversed(edits):
        body = body[:start] + text + body[end:]
    return body


def _with_group_terms(select: str) -> str:
    """A grouped SELECT with the GROUP BY terms its select list lacks appended as columns
    (`"__group_1"`, …), so that its rows never repeat; as it is where that cannot be told (a
    WITH, a set operation, an ordinal or alias term, `*`)."""
    tokens = tokenize(select)
    if not tokens or tokens[0].kind != TokenType.SELECT or set_operators(tokens):
        return select
    clauses = split_clauses(select, tokens)
    if not clauses.group or not clauses.select.tokens:
        return select
    items = [span for span in split_top_level(select, clauses.select.tokens) if span]
    written = {" ".join(t.text.lower() for t in span.tokens) for span in items}
    aliases = {fold(alias) for span in items if (alias := item_alias(span)) is not None}
    extra: list[str] = []
    for term in split_top_level(select, clauses.group.tokens):
        words = " ".join(t.text.lower() for t in term.tokens)
        if len(term.tokens) == 1 and (term.tokens[0].text.isdigit() or fold(term.tokens[0].text) in aliases):
            continue  # (names an item: output already)
        if words in written or any(t.kind == TokenType.STAR for t in clauses.select.tokens):
            continue
        extra.append(f"{term.text} AS {quote(f'__group_{len(extra) + 1}')}")
    if not extra:
        return select
    end = clauses.select.tokens[-1].end
    return f"{select[:end]}, {', '.join(extra)}{select[end:]}"


def _collates_its_columns(select: str) -> bool:
    """Whether a SELECT's select list has a COLLATE (which an `IN` compares with)."""
    tokens = tokenize(select)
    if tokens and tokens[0].kind == TokenType.WITH:
        return True  # (not looked into: left alone)
    clauses = split_clauses(select, tokens)
    return any(t.kind == TokenType.COLLATE for t in clauses.select.tokens)


def _self_contained(conn: apsw.Connection, select: str) -> list[str] | None:
    """A subquery's column names, when it reads nothing of the query around it (SQLite can
    run it alone); None otherwise."""
    try:
        return probe_columns(conn, select)[0]
    except Error:
        return None


def _from_nodes(
    conn: apsw.Connection,
    body: str,
    prefix: str,
    ctes: dict[str, Cte],
    owner: str,
    nodes: dict[str, Node],
    cte_nodes: dict[str, str],
) -> str:
    """The derived tables of a SELECT's FROM clause that need state of their own, read from
    nodes; `cte_nodes` gets the node of each CTE made one (by folded name)."""
    tokens = tokenize(body)
    clauses = split_clauses(body, tokens)
    if not clauses.from_:
        return body
    items = read_from_items(body, list(clauses.from_.tokens), check=False)
    if len(items) == 1 and _reads_alone(clauses) and not plain_view_needs_a_node(conn, items[0], ctes):
        return body  # `SELECT * FROM d`: a node would be the view itself
    # an outer join: its derived tables that need state become nodes (the view is then
    # maintained per row of its first table, `partition`); the inline pass refuses the others
    outer = any(t.kind in OUTER_WORDS for item in items for t in item.joined_by)
    left_joins_only = outer and not any(t.kind in (TokenType.RIGHT, TokenType.FULL) for i in items for t in i.joined_by)
    outer_aggregates = is_aggregating(body, clauses)
    # an outer query with a subquery is maintained per row of its first table (`subqueries`):
    # merged into one aggregate, its WHERE would become a HAVING with a subquery
    outer_subquery = has_expression_subquery(body)
    rewritten = body
    for item in sorted(items, key=lambda i: -i.reference_span[0]):  # from the end: offsets stay valid
        found = derived_select(conn, item, prefix, ctes)
        if found is None:
            continue
        inner, node_sql = found
        distinct, aggregates = shape(inner)
        # over an aggregating CTE: a select-project-join one (`r AS (SELECT … FROM t WHERE s > 10)`,
        # t grouped) is that aggregate with a larger HAVING once inlined — state of its own too;
        # an aggregating one is an aggregate of an aggregate, which no inlining merges
        over_aggregate = reads_aggregating_cte(inner, ctes, conn=conn)
        # (an aggregating CTE joined inside it, `b AS (SELECT … FROM a JOIN d …)` over a grouped a,
        # is an aggregate joined again there: no inlining merges it, so it is a node of its own)
        nested = (aggregates or joins(inner)) and over_aggregate
        aggregates = aggregates or (not distinct and over_aggregate)
        # a subquery in it: the inline pass cannot flatten it (its names would move scope)
        subquery = has_expression_subquery(inner) and not (prefix and inner.lstrip()[:4].upper() == "WITH")
        compound = is_compound(inner)
        again = len(items) > 1 or outer_aggregates or outer_subquery  # joined, aggregated or filtered again
        # an outer join inside: the inline pass cannot flatten it (it joins by WHERE), so it is a
        # node (over its own FROM clause, as a view's top level; a plain view's body as written)
        plain = plain_view_body(conn, item, ctes)
        derived = item.body is not None or plain is not None or (not item.schema and fold(item.name or "") in ctes)
        inside_outer = derived and has_outer_join(inner)  # (a materialized view is read as a source)
        keyed = (
            left_joins_only
            # (joined by a LEFT JOIN, or the first item, whose rows the LEFT JOINs keep)
            and (any(t.kind == TokenType.LEFT for t in item.joined_by) or item is items[0])
            and not (distinct or aggregates or subquery or compound)
            and keeps_a_key(conn, inner)
        )
        if not (distinct or subquery or compound or keyed or nested or inside_outer or (aggregates and again)):
            continue
        if outer and not (aggregates or distinct or keyed):
            continue  # (a select-project-join one: a LEFT JOIN of its table once inlined, or refused there)
        if keyed:
            # a select-project-join one that keeps its table's key has rows that never repeat: as
            # a DISTINCT node (the same rows) it is joined as a grouped one is, per row of the first
            name = quote(item.name or "") if item.body is None else None
            source = f"main.{name}" if name and item.schema else name or f"(\n{inner}\n)"
            # its columns named as they are now: a column another ALTER TABLE adds to the table
            # (`SELECT *` inside) is not the node's, whose columns stay those the view was made with
            columns = ", ".join(quote(c) for c in probe_columns(conn, f"{prefix}SELECT * FROM {source}")[0])
            node_sql = f"{prefix}SELECT DISTINCT {columns} FROM {source}"
        views: tuple[tuple[str, str], ...] = ()
        if (distinct or subquery or compound) and item.body is None:
            # a DISTINCT CTE or view, or one with a subquery, is its own body (`SELECT * FROM` it
            # would be refused as a derived table the inline pass cannot flatten), where no
            # column list renames its columns
            cte = ctes.get(fold(item.name or "")) if not item.schema else None
            if cte is not None and cte.columns is None:
                node_sql = prefix + cte.body
            elif plain is not None:
                node_sql, views = plain
            else:
                continue
        elif (inside_outer or nested) and plain is not None:
            node_sql, views = plain  # (its body: reading it by name, the inline pass would meet the join again)
        node = _node(nodes, owner, node_sql)
        if views:
            # (refused for its variants, it is named as the user knows it)
            words = node.words or f"view {item.name}{' with DISTINCT' if distinct else ''}"
            node = nodes[node_sql] = replace(node, views=views, words=words)
        if keyed:
            # its rows are DISTINCT because they keep a key: each class is one row, whatever its
            # values' variants (1 and 1.0 untyped), so the class shows that row's values
            node = nodes[node_sql] = replace(node, words=item.text, keyed=True)
        named = item.body is None and not item.schema and (fold(item.name or "") in ctes or plain is not None)
        if (distinct or aggregates) and named:
            # (its rows never repeat: a subquery may read it — TPC-H Q15's revenue0, a CTE or a view)
            cte_nodes[fold(item.name or "")] = node.name
        start, end = item.reference_span
        rewritten = f"{rewritten[:start]}{quote(node.name)} AS {quote(item.alias)}{rewritten[end:]}"
    return rewritten


def _subquery_node_reads(
    conn: apsw.Connection,
    body: str,
    prefix: str,
    ctes: dict[str, Cte],
    owner: str,
    nodes: dict[str, Node],
    cte_nodes: dict[str, str],
) -> str:
    """A CTE or plain view that aggregates or is DISTINCT, read by a subquery in an expression
    (TPC-H Q15's `(SELECT max(total_revenue) FROM revenue0)`), reads a node there: the same
    rows, whose aggregates are kept exactly, instead of an aggregate the subquery would evaluate
    again in scan order — the node the FROM clause reads it from (`cte_nodes`), or, read by a
    subquery that aggregates it, one of its own. Left alone where a subquery has a WITH list of
    its own (which may hide the name)."""
    tokens = tokenize(body)
    opens = [i for i, (t, n) in enumerate(itertools.pairwise(tokens)) if t.kind == TokenType.L_PAREN]
    if any(tokens[i + 1].kind == TokenType.WITH for i in opens):
        return body
    edits = []
    for index in (i for i in opens if tokens[i + 1].kind == TokenType.SELECT):
        close = matching_paren(tokens, index)
        base = tokens[index + 1].start
        inner = body[base : tokens[close - 1].end]
        inner_tokens = tokenize(inner)
        if set_operators(inner_tokens):
            continue
        clauses = split_clauses(inner, inner_tokens)
        for item in read_from_items(inner, list(clauses.from_.tokens), check=False) if clauses.from_ else []:
            if item.body is not None or item.schema:
                continue
            node = cte_nodes.get(fold(item.name or ""))
            if node is None and not is_from_item(tokens, index):
                # (an aggregate of an aggregate; a lookup or an IN reads the derived table, whose
                # GROUP BY keys `subquery_values` knows, unless a column list renames its columns)
                node = _named_aggregate_node(
                    conn, item, prefix, ctes, owner, nodes, renamed_only=not is_aggregating(inner, clauses)
                )
            if node is not None:
                cte_nodes[fold(item.name or "")] = node
                start, end = item.name_span
                shown = quote(node) if item.aliased else f"{quote(node)} AS {quote(item.alias)}"
                edits.append((base + start, base + end, shown))
    return splice(body, edits)


def _named_aggregate_node(
    conn: apsw.Connection,
    item: FromItem,
    prefix: str,
    ctes: dict[str, Cte],
    owner: str,
    nodes: dict[str, Node],
    renamed_only: bool = False,
) -> str | None:
    """The node of a CTE (without a column list) or plain view named by `item` whose SELECT
    aggregates or is DISTINCT — with `renamed_only`, of a plain view with a column list only;
    None for anything else (a table, a materialized view)."""
    cte = ctes.get(fold(item.name or ""))
    plain = None if cte is not None else plain_view_body(conn, item, ctes)
    if (cte is None or cte.columns is not None or renamed_only) and plain is None:
        return None
    if renamed_only and view_parts(plain_view_sql(conn, item.name or "") or "")[1] is None:
        return None
    found = derived_select(conn, item, prefix, ctes)
    if found is None or not any(shape(found[0])):
        return None
    node = _node(nodes, owner, found[1])
    if plain is not None:
        node = nodes[found[1]] = replace(node, views=plain[1])
    return node.name


def _reads_alone(clauses: Clauses) -> bool:
    """Whether a SELECT is `SELECT * FROM <one item>` and nothing more."""
    select = [t.text for t in clauses.select.tokens]
    return select == ["*"] and not (clauses.where or clauses.group or clauses.having or clauses.distinct)
