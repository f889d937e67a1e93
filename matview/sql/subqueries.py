"""Subqueries in a view's SELECT (`EXISTS`, `IN (SELECT …)`, scalar, nested, correlated or
not): every base table they read becomes an occurrence of the plan, a placeholder in the
user's own text like the tables of the outer FROM, so a term can put a table's old state in
its place — the expressions stay SQLite's to evaluate, NULL semantics of IN included.

A view with subqueries is maintained by partition recompute per row of its first table
(`delta_terms.DeltaTerms._root_terms`, RELATIONAL.md R4): a change of the first table reaches its
own rows; a change of a table a subquery reads may flip the subquery's value for any outer
row, so it reaches every row (the cost of a changed uncorrelated value that every row reads).
"""

from __future__ import annotations

from dataclasses import replace

import apsw
from sqlglot.tokens import TokenType

from matview.errors import Error, UnsupportedQuery
from matview.names import fold, quote
from matview.plan import Plan, SubqueryReach, Template, render
from matview.sql.comparison_affinity import OuterTables
from matview.sql.from_clause import FromClause, Occurrence
from matview.sql.from_items import FromItem, read_from_items
from matview.sql.membership import Membership, correlated_membership, correlating_conjuncts, in_reach, membership
from matview.sql.sqltext import (
    SET_OPERATIONS,
    Span,
    Token,
    column_reference,
    depth_walk,
    has_subquery,
    has_where_clause,
    tokenize,
)
from matview.sql.subquery_columns import equalities, reads_table
from matview.sql.subquery_values import exact_sum_renames
from matview.sql.value_reach import with_value_reaches
from matview.storage.schema import (
    ROWID_NAMES,
    TableInfo,
    image_keys,
    refuse_unstable_identity,
)
from matview.upstream import describe_upstream, read_source

#: clause keywords that end a subquery's FROM clause at its depth
_AFTER_FROM = (
    TokenType.WHERE,
    TokenType.GROUP_BY,
    TokenType.HAVING,
    TokenType.WINDOW,
    TokenType.ORDER_BY,
    TokenType.LIMIT,
    *SET_OPERATIONS,
)


#: a subquery that no other subquery encloses: the occurrences its own FROM reads, its
#: `FROM … [WHERE …]` as a template (which rows of the outer query a change of one reaches),
#: and, for an uncorrelated-looking `x IN (SELECT col …)`, its operands (`sql.membership`)
FoundReach = tuple[tuple[int, ...], Template, Membership | None]


def placeholders_in_subqueries(
    conn: apsw.Connection, template: Template, first: int, outer: OuterTables = ()
) -> tuple[Template, list[Occurrence], list[FoundReach], list[tuple[str, str, str]], list[tuple[str, str]]]:
    """`template` with every base table a subquery reads replaced by a placeholder
    `source<k> AS "alias"` (k from `first` on); those occurrences in order; and the reach
    templates of the outermost subqueries; and the (table, column, collation) they probe; and
    the (qualifier, column) of outer rows they compare by `=` (`_outer_columns`)."""
    occurrences: list[Occurrence] = []
    reaches: list[FoundReach] = []
    probes: list[tuple[str, str, str]] = []
    correlations: list[tuple[str, str]] = []
    out: list[str] = []
    for position, part in enumerate(template):
        if position % 2:
            out.append(part)
            continue
        # (numbers continue after `occurrences`)
        pieces = _split(conn, part, first, occurrences, reaches, probes, correlations, outer)
        if out and len(out) % 2 == 1:  # the previous piece is a literal: join them
            out[-1] += pieces[0]
            out += pieces[1:]
        else:
            out += pieces
    return tuple(out), occurrences, reaches, probes, correlations


def _probes(conn: apsw.Connection, text: str, where: Span, items: list[FromItem]) -> list[tuple[str, str, str]]:
    """(table, column, collation) a subquery probes: a WHERE conjunct `x.col = expr` where expr
    reads a column of no table of the subquery's (a correlation to the outer row) — what an
    index on x.col serves, so a reached outer row costs a SEARCH, not a scan."""
    found = []
    for left, right in equalities(text, where):
        for side, other in ((left, right), (right, left)):
            for item in items:
                table = read_source(conn, item.name or "")
                if table.materialized:
                    continue  # (a view's rows, in its own table: matview's indexes are for base tables)
                own = {fold(c.name) for c in table.columns}
                if len(side) == 3 and side[1].kind == TokenType.DOT and fold(side[0].text) == fold(item.alias):
                    column = table.column(side[2].text)
                elif len(side) == 1 and len(items) == 1:
                    column = table.column(side[0].text)
                else:
                    continue
                outer_names = [t for t in other if t.is_name and t.kind in (TokenType.VAR, TokenType.IDENTIFIER)]
                if column is None or not outer_names or any(reads_table(other, i.alias, own) for i in items):
                    continue
                found.append((table.name, column.name, column.collation))
    return found


def _outer_columns(text: str, where: Span, items: list[FromItem]) -> list[tuple[str, str]]:
    """(qualifier, column) of each outer column a subquery's WHERE compares by `=` with a column
    of its own (`o.customer_id` in `c.id = o.customer_id`): a change of the subquery's tables
    finds the outer rows it reaches by it (`operators.partition`), so an index on it serves."""
    inner = {fold(item.alias) for item in items}
    found = []
    for left, right in equalities(text, where):
        for side, other in ((left, right), (right, left)):
            outer, own = column_reference(side), column_reference(other)
            if outer and outer[0] and fold(outer[0]) not in inner and own and _is_own(own[0], inner, len(items)):
                found.append(outer)
    return found


def _is_own(qualifier: str, inner: set[str], tables: int) -> bool:
    """Whether a column so qualified is one of the subquery's own tables': qualified by one of
    its aliases, or unqualified where it reads one table."""
    return fold(qualifier) in inner if qualifier else tables == 1


def _split(
    conn: apsw.Connection,
    text: str,
    first: int,
    occurrences: list[Occurrence],
    reaches: list[FoundReach],
    probes: list[tuple[str, str, str]],
    correlations: list[tuple[str, str]],
    outer: OuterTables = (),
) -> list[str]:
    """One literal piece of a template, cut at the table references of its subqueries (their
    sums made exact first: `exact_sum_renames`)."""
    text = exact_sum_renames(conn, text, outer)
    tokens = tokenize(text)
    depths = depth_walk(tokens)
    truth_tested = correlating_conjuncts(tokens, depths)
    splices: list[tuple[int, str]] = []  # (position, text): memberships searched per outer row
    references: list[tuple[int, int, TableInfo, str, bool]] = []  # (start, end, table, alias, aliased)
    # (first, end, FROM at, WHERE end, references, membership operands)
    selects: list[tuple[int, int, int, int, list[int], Membership | None]] = []
    for index, token in enumerate(tokens):
        if token.kind == TokenType.WITH and index and tokens[index - 1].kind == TokenType.L_PAREN:
            raise UnsupportedQuery("WITH inside a subquery is not supported yet")
        if token.kind != TokenType.SELECT or index == 0:
            continue
        depth = depths[index]
        end = _select_end(tokens, depths, index)
        own = [i for i in range(index, end) if depths[i] == depth]
        rowid_names = [i for i in own if tokens[i].is_name and tokens[i].text.lower() in ROWID_NAMES]
        from_at = next((i for i in own if tokens[i].kind == TokenType.FROM), None)
        if from_at is None:
            if rowid_names:
                raise UnsupportedQuery(f"{tokens[rowid_names[0]].text} inside a subquery is not supported")
            continue
        stop = next((i for i in own if i > from_at and tokens[i].kind in _AFTER_FROM), end)
        where_end = stop
        if stop < end and tokens[stop].kind == TokenType.WHERE:
            where_end = next((i for i in own if i > stop and tokens[i].kind in _AFTER_FROM), end)
        mine: list[int] = []
        items = [i for i in read_from_items(text, list(tokens[from_at + 1 : stop]), check=True) if i.name is not None]
        for item in items:  # a FROM-subquery inside has its own SELECT, visited too
            table = _subquery_table(conn, item.name or "")
            mine.append(len(references))
            references.append((*item.name_span, table, item.alias, item.aliased))
        here = [(alias, table) for _s, _e, table, alias, _a in (references[i] for i in mine)]
        for i in rowid_names:
            if not _declared_column(tokens, i, here, occurrences):
                raise UnsupportedQuery(f"{tokens[i].text} inside a subquery is not supported")
        if stop < end and tokens[stop].kind == TokenType.WHERE:
            where = Span(text, tuple(tokens[i] for i in own if stop < i < where_end))
            probes.extend(_probes(conn, text, where, items))
            correlations.extend(_outer_columns(text, where, items))
        # (the select list's aliases only: `FROM t AS u WHERE u.g = …` names its table's alias)
        aliases = {fold(tokens[i + 1].text) for i in own if tokens[i].kind == TokenType.ALIAS and i + 1 < from_at}
        if any(fold(tokens[i].text) in aliases for i in range(from_at, where_end) if tokens[i].is_name):
            mine = []  # its WHERE names its own select-list alias: no FROM … WHERE of its own to reach by
        operands = membership(text, tokens, depths, index, from_at, where_end, end)
        if operands is not None and index in truth_tested and not any(references[i][2].materialized for i in mine):
            has_where = stop < end and tokens[stop].kind == TokenType.WHERE
            subquery = text[token.start : tokens[end - 1].end]
            if has_where:  # (its condition parenthesized: `a OR b AND x = col` would bind otherwise)
                where_at = tokens[stop + 1].start - token.start
                subquery = f"{subquery[:where_at]}({subquery[where_at:]})"
            condition = correlated_membership(conn, operands, outer, subquery, has_where)
            if condition is not None:
                tail = f") AND {condition}" if has_where else f" WHERE {condition}"
                splices += [(tokens[stop + 1].start, "(")] if has_where else []
                splices.append((tokens[end].start, tail))
        selects.append((index, end, from_at, where_end, mine, operands))
    numbers = []
    for _start, _end, table, alias, _aliased in references:
        numbers.append(first + len(occurrences))
        occurrences.append(Occurrence(table, alias))
    edits = [(start, end, n, alias, aliased) for (start, end, _t, alias, aliased), n in zip(references, numbers)]
    for begin, end, from_at, where_end, mine, operands in selects:
        if any(other[0] < begin and end <= other[1] for other in selects):
            continue  # nested in another subquery: reached through that one
        if any(tokens[i].kind in (TokenType.LEFT, TokenType.RIGHT, TokenType.FULL) for i in range(from_at, where_end)):
            continue  # an outer join inside pads rows a change can add or remove: every row is reached
        lo, hi = tokens[from_at].start, tokens[where_end - 1].end
        reaches.append((tuple(numbers[i] for i in mine), tuple(_template(text, edits, lo, hi)), operands))
    # (the reach templates above keep the subqueries as written; the evaluated SQL searches)
    for position, inserted in sorted(splices, reverse=True):
        text = text[:position] + inserted + text[position:]
        shift = len(inserted)
        edits = [(s + shift, e + shift, n, a, q) if s >= position else (s, e, n, a, q) for s, e, n, a, q in edits]
    return _template(text, edits, 0, len(text))


def _declared_column(
    tokens: list[Token], index: int, here: list[tuple[str, TableInfo]], outer: list[Occurrence]
) -> bool:
    """Whether a rowid name (`oid`, `rowid`, `_rowid_`) at `index` is a column a table
    declares (`items(oid, sku)`), not the rowid: qualified, its table's; unqualified, one of
    the subquery's own tables'."""
    name = tokens[index].text
    if index >= 2 and tokens[index - 1].kind == TokenType.DOT:
        qualifier = fold(tokens[index - 2].text)
        tables = [t for alias, t in here if fold(alias) == qualifier]
        tables = tables or [o.table for o in outer if fold(o.alias) == qualifier]
        return len(tables) == 1 and tables[0].column(name) is not None
    return any(table.column(name) is not None for _alias, table in here)


def _template(text: str, edits: list[tuple[int, int, int, str, bool]], lo: int, hi: int) -> list[str]:
    """text[lo:hi] as template pieces, each table reference inside it a placeholder."""
    pieces: list[str] = []
    position, literal = lo, ""
    for start, end, number, alias, aliased in sorted(edits):
        if not lo <= start < hi:
            continue
        literal += text[position:start]
        pieces += [literal, f"source{number}"]
        literal = "" if aliased else f" AS {quote(alias)}"
        position = end
    pieces.append(literal + text[position:hi])
    return pieces


def _subquery_table(conn: apsw.Connection, name: str) -> TableInfo:
    """A base table a subquery reads (a CTE or a view there is not inlined yet)."""
    try:
        return read_source(conn, name)
    except UnsupportedQuery:
        raise
    except Error:
        raise UnsupportedQuery(f"{name} inside a subquery: a CTE read there is not supported yet") from None


def _select_end(tokens: list[Token], depths: list[int], index: int) -> int:
    """One past the last token of the SELECT starting at `index` (where its parenthesis closes)."""
    depth = depths[index]
    return next((p for p in range(index + 1, len(tokens)) if depths[p] < depth), len(tokens))


def refuse_after_aggregation(texts: list[str]) -> None:
    """A subquery in HAVING or around an aggregate is evaluated per group, after aggregation,
    where no base table is at hand: not supported yet."""
    for text in texts:
        if text and has_subquery(text):
            raise UnsupportedQuery(
                "a subquery in HAVING or outside an aggregate call of an aggregate view is not supported yet"
            )


def with_subqueries(conn: apsw.Connection, plan: Plan, source: FromClause) -> Plan:
    """The plan of a view whose SELECT has subqueries: their tables become occurrences, and
    the view is maintained per row of its first table (see the module docstring)."""
    refuse_after_aggregation([*plan.post_exprs, plan.having or ""])
    if source.outer_kind == "RIGHT" or source.root:
        raise UnsupportedQuery("a subquery in a view with a RIGHT JOIN is not supported yet (write it as a LEFT JOIN)")
    if source.outer_kind == "FULL":
        raise UnsupportedQuery("a subquery in a view with a FULL JOIN is not supported yet")
    outer = [(o.alias, o.table) for o in source.occurrences]
    stage1, extra, reaches, probes, correlations = placeholders_in_subqueries(
        conn, plan.stage1, len(plan.sources), outer
    )
    # a subquery of an ON condition is in both the stage-1 SQL and the FROM clause's own text
    from_template = tuple(p if i % 2 else exact_sum_renames(conn, p, outer) for i, p in enumerate(source.template))
    # (the rows are kept per root row, by its key; another table, joined after it or read by a
    # subquery, is only searched for the roots a change reaches, by value, where a superset of
    # its old state is as good: `partition.true_old_source`)
    for index, occurrence in enumerate([*source.occurrences, *extra]):
        if index == 0 or occurrence.table.materialized:
            refuse_unstable_identity(occurrence.table, "a view with a subquery")
    root = source.occurrences[0].table
    if "reach" not in stage1[1::2]:
        stage1 = (*stage1, "reach", "")  # at the end of the outer WHERE, where a term restricts the rows
    tables = {o.table.name: o.table for o in extra}
    known = {name for name, _ in plan.signatures}
    known_views = set(plan.upstream_views)
    # (an uncorrelated scalar subquery compared in the WHERE reaches the rows its value flips)
    return with_value_reaches(
        conn,
        replace(
            plan,
            stage1=stage1,
            sources=(*plan.sources, *(o.table.name for o in extra)),
            aliases=(*plan.aliases, *(o.alias for o in extra)),
            signatures=(
                *plan.signatures,
                *(
                    (t.name, tuple((c.name, c.decltype, c.collation) for c in t.columns))
                    for t in tables.values()
                    if t.name not in known
                ),
            ),
            without_rowid=tuple(
                dict.fromkeys([*plan.without_rowid, *(t.name for t in tables.values() if not t.has_rowid)])
            ),
            stable_rowid_tables=tuple(
                dict.fromkeys([*plan.stable_rowid_tables, *(t.name for t in tables.values() if t.has_rowid and t.ipk)])
            ),
            root_recompute=True,
            image_keys=(*plan.image_keys, *image_keys([t for t in tables.values() if t.name not in known])),
            upstreams=(
                *plan.upstreams,
                *(
                    describe_upstream(conn, t.name)
                    for t in tables.values()
                    if t.materialized and t.name not in known_views
                ),
            ),
            # a grouped or DISTINCT upstream view's rows are their own key (its values, as quoted
            # text: exact, NULLs and 1 vs 1.0 included)
            outer_key=tuple(c.name for c in root.columns) if root.materialized else root.stable_key or plan.outer_key,
            root_key_nullable=root.materialized or root.key_may_be_null,
            subquery_probes=tuple(dict.fromkeys([*probes, *_reached_by(source, reaches, correlations)])),
            outer_on="",
            outer_kind=source.outer_kind or "LEFT",
            from_template=from_template,
            # a subquery in an ON condition reads its tables from the FROM clause's own text: a change
            # of one reaches every row (`delta_terms.DeltaTerms._root_terms`)
            subquery_reach=()
            if has_subquery("".join(source.template[::2]))
            else _joinable(conn, source, extra, reaches, plan.reach_filter),
        ),
    )


def _reached_by(
    source: FromClause, reaches: list[FoundReach], correlations: list[tuple[str, str]]
) -> list[tuple[str, str, str]]:
    """(table, column, collation) of the outer FROM's base tables that a change of a subquery's
    tables finds outer rows by: the columns its WHERE correlates by `=`, and the left operand of
    `x IN (SELECT col …)` (`sql.membership`). Indexed, a reach costs a SEARCH per changed row."""
    columns = list(correlations)
    for _numbers, _template, operands in reaches:
        left = column_reference(tokenize(operands[0])) if operands is not None else None
        if left is not None:
            columns.append(left)
    found = []
    for qualifier, name in columns:
        owners = [
            o.table
            for o in source.occurrences
            if (fold(o.alias) == fold(qualifier) if qualifier else o.table.column(name) is not None)
        ]
        if len(owners) == 1 and not owners[0].materialized:
            column = owners[0].column(name)
            if column is not None:
                found.append((owners[0].name, column.name, column.collation))
    return found


def _joinable(
    conn: apsw.Connection,
    source: FromClause,
    extra: list[Occurrence],
    reaches: list[FoundReach],
    reach_filter: str,
) -> tuple[SubqueryReach, ...]:
    """Whether each subquery's `FROM … WHERE …` can join the outer FROM clause to find the rows
    it reaches, driven by the change (an EXISTS would visit every outer row). It can when no
    alias is in both, and the join prepares with the outer `reach_filter`: a name both scopes
    know is ambiguous there (an error, never another binding). A membership test's operands
    are kept where its reach (`partition`) prepares too."""
    everything = [*source.occurrences, *extra]
    tables = {f"source{i}": f"main.{quote(o.table.name)}" for i, o in enumerate(everything)}
    outer = render(source.template, **tables)
    outer_aliases = {fold(o.alias) for o in source.occurrences}
    also = f"{reach_filter} AND " if reach_filter else ""
    found = []
    for numbers, template, operands in reaches:
        inner = render(template, **tables)
        joinable = not any(fold(everything[n].alias) in outer_aliases for n in numbers)
        if joinable:
            joiner = "AND" if has_where_clause(inner) else "WHERE"
            filtered = f" {joiner} {reach_filter}" if reach_filter else ""
            joinable = _prepares(conn, f"SELECT 1 FROM {outer}, {inner[len('FROM') :]}{filtered}")
        uncorrelated = False
        if operands is not None:  # (its reach prepares: a name it reads may be the select list's alias)
            reach = f"SELECT 1 FROM {outer} WHERE {also}{in_reach(operands, inner)}"
            operands = operands if _prepares(conn, reach) else None
            uncorrelated = operands is not None and _prepares(conn, f"SELECT {operands[1]} {inner}")
        found.append(SubqueryReach(numbers, template, joinable, operands, uncorrelated))
    return tuple(found)


def _prepares(conn: apsw.Connection, select: str) -> bool:
    try:
        conn.execute(f"EXPLAIN {select}").fetchall()
    except apsw.SQLError:
        return False
    return True
