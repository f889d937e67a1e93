"""Partition recompute per root row, with stored outputs (RELATIONAL.md R4): how views with
outer join chains or subqueries are maintained.

Every output row of such a view comes from exactly one row of its *root*: its first table (no
join pads it with NULLs), or the right table of its last RIGHT JOIN (`Plan.root`). A fold
finds the roots R a change can reach, asks SQLite for the stage-1 rows of those roots now, and
subtracts the rows each root had, which the view keeps in a table of their own
(`storage.kept_rows`, compared by SQLite): no old state of any table is evaluated for the
rows, so a change costs the rows it reaches.

R is found by SQLite, from the changes: the changed roots themselves; the roots joined to a
changed row of another table of the FROM clause (its joins up to that table, ΔX in X's place;
after a RIGHT JOIN, the whole FROM clause); the roots whose subquery reads a changed row (the
subquery's `FROM … WHERE …` with ΔX in X's place, correlated with the outer row); every root
where a nested subquery or one in an ON condition reads the changed table. Each over the new
states and, when another table changed too, over the old ones (`true_old_source`): a superset
never changes the result, only the work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import apsw
from sqlglot.tokens import TokenType

from matview import names
from matview.names import quote
from matview.operators import scalar_values
from matview.operators.prefix_conjuncts import prefix_conjuncts
from matview.plan import WEIGHT, Plan, Template, render
from matview.sql.from_items import JOIN_WORDS, OUTER_WORDS
from matview.sql.membership import reach_conditions
from matview.sql.sqltext import depth_walk, has_where_clause, tokenize
from matview.storage import kept_rows
from matview.storage.state import StateStore

if TYPE_CHECKING:
    from matview.delta_terms import DeltaTerms, Ranges

#: the tokens that start the next FROM item (a join operator)
_JOIN_SEPARATORS = {TokenType.COMMA, *JOIN_WORDS, *OUTER_WORDS}


def from_prefix(template: Template, occurrence: int) -> Template:
    """A FROM clause template cut after occurrence `occurrence` and its join constraint
    (joins in SQLite nest to the left: the prefix is a FROM clause of its own)."""
    at = template.index(f"source{occurrence}")
    literal = template[at + 1] if at + 1 < len(template) else ""
    tokens = tokenize(literal)
    depths = depth_walk(tokens)
    cut = next((t.start for t, d in zip(tokens, depths) if d == 0 and t.kind in _JOIN_SEPARATORS), len(literal))
    return (*template[: at + 1], literal[:cut])


def _outer_joins(template: Template) -> int:
    """How many LEFT, RIGHT or FULL joins a FROM clause template's text holds."""
    literal = " ".join(template[0::2])
    return sum(1 for token in tokenize(literal) if token.kind in (TokenType.LEFT, TokenType.RIGHT, TokenType.FULL))


def every_root_table(conn: apsw.Connection, plan: Plan) -> str | None:
    """A table of the outer FROM whose every change reaches every root: one a subquery reads
    too, where that subquery does not depend on the outer row (`x > (SELECT avg(x) FROM t)` over
    t: its value, which every row compares with, moves with any write). Recomputing each root
    row by row then costs more than running the SELECT once (`sql.whole`); None otherwise."""
    if not plan.root_recompute or plan.upstreams:
        return None
    top = sum(1 for part in plan.from_template[1::2] if part.startswith("source"))
    outer = set(plan.sources[:top])
    tables = {WEIGHT: "1", **{f"source{i}": f"main.{quote(t)}" for i, t in enumerate(plan.sources)}}
    for j in range(top, len(plan.sources)):
        if plan.sources[j] not in outer:
            continue
        reaches = [reach for reach in plan.subquery_reach if j in reach.occurrences]
        if not reaches:  # (a nested subquery's or an ON condition's table: every root, see `_root_queries`)
            return plan.sources[j]
        # (`x IN (SELECT col …)` reaches the rows whose x a change moves in or out: not every root)
        # (`x > (SELECT avg(x) FROM t)` reaches the rows whose comparison a new value flips)
        for template in [reach.template for reach in reaches if reach.membership is None and reach.value is None]:
            # (an IN reaches the outer rows by the value compared: its template is correlated by it)
            try:  # SQLite prepares it alone: it reads no column of the outer row
                conn.execute(f"EXPLAIN SELECT 1 {render(template, **tables)}").fetchall()
            except apsw.SQLError:
                continue
            return plan.sources[j]
    return None


def true_old_source(terms: DeltaTerms, number: int, table: str) -> str:
    """X^old as a set of rows (not a Z-set: an outer join's padding needs real rows) for the
    reach queries: the rows of X the pending changes did not insert, and the images they
    deleted. A row with a key (an INTEGER PRIMARY KEY, a PRIMARY KEY without NULLs) is known
    by it; one without (a table without a key, a NULL in its key) is kept whatever the
    changes did — a superset of X^old, which reaches more roots, never fewer: the rows it
    adds are ones the changes inserted, whose roots their own delta reaches anyway."""
    user, rowids = terms.columns_of(table)
    delta = quote(names.delta_table(table))
    seq, weight, rowid = quote(names.SEQ), quote(names.WEIGHT), quote(names.ROWID)
    in_range = f"{seq} > :lo{number} AND {seq} <= :hi{number}"
    exact = ", ".join([rowid, *(f"typeof({quote(c)}), {quote(c)} COLLATE BINARY" for c in user)])
    deleted_columns = ", ".join([*(quote(c) for c in user), *(f"{rowid} AS {a}" for a in rowids)])
    deleted = f"SELECT {deleted_columns} FROM {delta} WHERE {in_range} GROUP BY {exact} HAVING sum({weight}) < 0"
    if rowids and table in terms.plan.stable_rowid_tables:
        # by rowid (an INTEGER PRIMARY KEY): the identities with an inserted image, found once per statement
        inserted = f"SELECT {rowid} FROM {delta} WHERE {in_range} GROUP BY {exact} HAVING sum({weight}) > 0"
        kept = f"SELECT {terms.table_columns(table)} FROM main.{quote(table)} WHERE {rowids[0]} NOT IN ({inserted})"
        return f"({kept} UNION ALL {deleted})"
    condition = "1"  # (no key: kept, see above)
    found = terms.plan.image_key(table)
    if found is not None:
        # by key (a PRIMARY KEY): an inserted image is the one row of X with its key, so the
        # key finds it, set at a time — comparing images is a loop over the changes per row.
        # A key with a NULL matches nothing: such rows (they may repeat) are kept.
        image_key, nullable = found
        # BINARY: equal under it is equal under the key's collation, whatever the index says
        keys = ", ".join(f"t.{quote(c)} COLLATE BINARY" for c in image_key)
        inserted = (
            f"SELECT {', '.join(quote(c) for c in image_key)} FROM {delta} WHERE {in_range} AND "
            f"{_no_null(image_key, '')} GROUP BY {exact} HAVING sum({weight}) > 0"
        )
        by_key = f"({keys}) NOT IN ({inserted})"
        condition = f"CASE WHEN {_no_null(image_key, 't.')} THEN {by_key} ELSE {condition} END" if nullable else by_key
    # by image: no rowid, which VACUUM may renumber
    kept = ", ".join([*(f"t.{quote(c)}" for c in user), *(f"t.{rowids[0]} AS {a}" for a in rowids)])
    return f"(SELECT {kept} FROM main.{quote(table)} AS t WHERE {condition} UNION ALL {deleted})"


def _no_null(columns: tuple[str, ...], prefix: str) -> str:
    return " AND ".join(f"{prefix}{quote(c)} IS NOT NULL" for c in columns)


def _state(terms: DeltaTerms, table: str, new: bool, applied: bool) -> str:
    """A source's new or old state as real rows: a base table is new as it stands; an upstream
    view's storage is new once its ΔV is applied (the fold), old before (a reader)."""
    upstream = terms.upstream.get(table)
    if upstream is not None:
        return upstream.real_state(new, applied)
    if new:
        return f"main.{quote(table)}"
    return true_old_source(terms, terms.tables.index(table), table)


def root_queries(terms: DeltaTerms, changed: frozenset[str], applied: bool = True) -> tuple[str | None, str]:
    """For the changed tables: the SELECT of the reached roots' keys (None: every root),
    and the SELECT of their stage-1 rows now, the root key columns before the weight.
    `applied`: upstream views' storage holds their ΔV already (see `delta_terms.DeltaTerms.terms`)."""
    reach, rows, _ = _cached_root_queries(terms, changed, applied)
    return reach, rows


def reached_rows_query(terms: DeltaTerms, changed: frozenset[str], applied: bool = True) -> str:
    """The SELECT of the stage-1 rows now of the roots in `kept_rows.reached_table` (which a
    fold fills from the reach query once, rather than running it again inside this one)."""
    return _cached_root_queries(terms, changed, applied)[2]


def _cached_root_queries(terms: DeltaTerms, changed: frozenset[str], applied: bool) -> tuple[str | None, str, str]:
    found = terms.root_queries.get((changed, applied))
    if found is None:
        found = terms.root_queries[(changed, applied)] = _root_queries(terms, changed, applied)
    return found


def _root_queries(terms: DeltaTerms, changed: frozenset[str], applied: bool) -> tuple[str | None, str, str]:
    plan = terms.plan
    key = root_key(plan)
    root = quote(plan.aliases[plan.root])
    new = _sources(terms, applied)
    old = {f"source{i}": _state(terms, t, t not in changed, applied) for i, t in enumerate(plan.sources)}
    top = sum(1 for part in plan.from_template[1::2] if part.startswith("source"))
    rows_everywhere = scalar_values.substituted(plan, every_root_rows(terms, applied), new)
    also = f"{plan.reach_filter} AND " if plan.reach_filter else ""
    # a subquery reached by value: the rows whose conjunct its new value flips — asked whatever
    # changed (a guard skips it where the value did not move): an index made since may move it
    now = render(plan.from_template, **new)
    reached = [scalar_values.reach_query(k, value, key, now, also, new) for k, value in plan.value_reaches]
    for j in range(top, len(plan.sources)):
        if plan.sources[j] not in changed:
            continue
        # a subquery's table: the outer rows whose subquery reads a changed row (old or new)
        subqueries = [subquery for subquery in plan.subquery_reach if j in subquery.occurrences]
        if not subqueries:  # read by a nested subquery or an ON condition: every row
            return None, rows_everywhere, rows_everywhere
        delta = {f"source{j}": terms.delta_source(plan.sources[j])}
        for subquery in subqueries:
            if subquery.value is not None:
                continue  # (reached by value, above)
            for state in _states(new, old, changed, plan.sources[j], plan.sources):
                inner = render(subquery.template, **{**state, **delta})
                outer = render(plan.from_template, **state)
                if subquery.membership is not None:  # `x IN (SELECT col …)`: the rows its changed values reach
                    for guard, condition in reach_conditions(subquery.membership, inner):
                        source = outer
                        if guard and subquery.uncorrelated:  # (first, by CROSS JOIN: no outer row read if false)
                            source = f'(SELECT 1 WHERE {guard}) AS "__dbsp_guard" CROSS JOIN {outer}'
                        elif guard:
                            condition = f"{guard} AND {condition}"
                        reached.append(f"SELECT {key} FROM {source} WHERE {also}{condition}")
                elif subquery.joinable:  # the change leads: the outer rows are found by index from ΔX
                    tail = inner[len("FROM") :]
                    if plan.reach_filter:
                        tail += f" {'AND' if has_where_clause(tail) else 'WHERE'} {plan.reach_filter}"
                    reached.append(f"SELECT {key} FROM {outer}, {tail}")
                else:
                    reached.append(f"SELECT {key} FROM {outer} WHERE {also}EXISTS (SELECT 1 {inner})")
    for i, table in enumerate(plan.sources[:top]):
        if table not in changed:
            continue
        delta = {f"source{i}": terms.delta_source(table)}
        if i == plan.root:
            reached.append(f"SELECT {key} FROM {delta[f'source{i}']} AS {root}")
            continue
        matched = f"{quote(plan.aliases[i])}.{quote(names.WEIGHT)} IS NOT NULL"  # ΔX joined this row
        if i < plan.root:
            # X before the root's RIGHT JOIN: the joins up to the root (a later inner join may
            # accept the root's row only while X did not match it, `JOIN c ON c.y IS x.y`), in the
            # old state and the new; where X itself may be padded before the root (an outer join
            # among the tables before it), a change of X reaches every root
            upto_root = from_prefix(plan.from_template, plan.root)
            if _outer_joins(upto_root) > 1:
                return None, rows_everywhere, rows_everywhere
            # (the old state too where the table is read again before the root: a deleted row
            # joined to itself is found only there)
            for state in _states(new, old, changed, table, plan.sources[: plan.root + 1]):
                reached.append(f"SELECT {key} FROM {render(upto_root, **{**state, **delta})} WHERE {matched}")
            continue
        if plan.inner_from and plan.reach_filter:
            # inner joins: a row of the view that ΔX changes has X's old or new row in it and
            # passes the WHERE, so the whole FROM with ΔX in X's place, filtered, finds its root
            # through the join conditions (a prefix without them would be a cross product)
            for state in _states(new, old, changed, table, plan.sources[:top]):
                whole = render(plan.from_template, **{**state, **delta})
                reached.append(f"SELECT {key} FROM {whole} WHERE {plan.reach_filter}")
            continue
        # the joins up to X only: a later inner join may accept a row only where X did not
        # match it (`JOIN c ON c.y IS x.y`), so keeping it would lose that root
        through = from_prefix(plan.from_template, i)
        # (and the WHERE's conjuncts it can check: commas would make it a cross product)
        within = prefix_conjuncts(plan, i, top)
        filtered = f"{matched} AND {within}" if within else matched
        # a deleted row joined to itself through an earlier occurrence is reached by that
        # occurrence's own prefix: only other changed tables need the old state here
        for state in _states(new, old, changed, table, (table,)):
            reached.append(f"SELECT {key} FROM {render(through, **{**state, **delta})} WHERE {filtered}")
    # UNION ALL: a UNION compares the keys under their collation ('b' and 'B' under NOCASE are
    # one), and a root whose key changed case must be reached under both
    reach = " UNION ALL ".join(reached)
    joiner = "AND" if plan.outer_where else "WHERE"
    rows = render(plan.stage1, weight=f"{key}, 1", reach=f" {joiner} ({key}) IN ({reach})", **new)
    kept = kept_rows.reached_keys(key_width(plan))
    rows_kept = render(plan.stage1, weight=f"{key}, 1", reach=f" {joiner} ({key}) IN ({kept})", **new)
    return reach, scalar_values.substituted(plan, rows, new), scalar_values.substituted(plan, rows_kept, new)


def _states(
    new: dict[str, str], old: dict[str, str], changed: frozenset[str], table: str, sources: tuple[str, ...]
) -> list[dict[str, str]]:
    """The states a reach query runs over: the new one, and the old one when another table
    changed or the table is read twice (a deleted row may have met itself)."""
    return [new] if changed == {table} and sources.count(table) == 1 else [new, old]


def root_delta(conn: apsw.Connection, terms: DeltaTerms, ranges: Ranges, store: StateStore) -> list[tuple[Any, ...]]:
    """Stage-1 rows (with weights) of the pending changes `ranges`: the reached roots' rows
    now, less the rows they kept (`storage.kept_rows`), which a fold replaces."""
    plan = terms.plan
    changed = frozenset(ranges)
    params: dict[str, Any] = terms.parameters(ranges)
    values = scalar_values.bind_values(conn, plan, store, changed, _sources(terms, store.writable))
    reach, rows = root_queries(terms, changed, store.writable)
    if values is None:  # (a value raised: every root, its subqueries as written — see `bind_values`)
        reach, rows = None, every_root_rows(terms, store.writable)
    params |= values or {}
    width = key_width(plan)
    if terms.kept_width is None:
        kept_rows.require(conn, store.view)
        terms.kept_width = kept_rows.stage1_width(conn, rows, width)
    kept = kept_rows.KeptRows(conn, store.view, width, plan.root_key_nullable, terms.kept_width)
    if not store.writable:  # (a reader writes nothing, not even TEMP: `PRAGMA query_only`)
        return kept.read_delta(reach, rows, params)
    if reach is not None:
        rows = reached_rows_query(terms, changed, store.writable)
    return kept.delta(reach, rows, params)


def root_key(plan: Plan) -> str:
    """The root's key as SQL: its columns, or — where a rowid table's PRIMARY KEY may hold
    NULLs, which `IN` never matches — one text of their quoted values (NULL rows share one)."""
    root = quote(plan.aliases[plan.root])
    columns = [f"{root}.{quote(k)}" for k in plan.outer_key]
    if plan.root_key_nullable:
        return " || ',' || ".join(kept_rows.exact_text(c) for c in columns)
    return ", ".join(columns)


def populate_roots(conn: apsw.Connection, terms: DeltaTerms, store: StateStore) -> list[tuple[Any, ...]]:
    """The initial snapshot of a root-recompute view: every root's stage-1 rows, kept."""
    terms.kept_width = None  # (re-read at the next fold: a REFRESH may change it)
    plan = terms.plan
    values = scalar_values.bind_values(conn, plan, store, frozenset(plan.tables), _sources(terms, True), fresh=True)
    rows = snapshot_rows_query(terms, bound=values is not None)
    return kept_rows.fill(conn, store.view, rows, key_width(plan), plan.root_key_nullable, values or {})


def snapshot_rows_query(terms: DeltaTerms, bound: bool = True) -> str:
    """The SELECT of every root's stage-1 rows, the root key columns before the weight (the
    values of `scalar_values` bound as parameters, unless not `bound`)."""
    plan = terms.plan
    sources = _sources(terms, True)
    rows = render(plan.stage1, weight=f"{root_key(plan)}, 1", outer=plan.outer_kind, **sources)
    return scalar_values.substituted(plan, rows, sources) if bound else rows


def every_root_rows(terms: DeltaTerms, applied: bool) -> str:
    """The SELECT of every root's stage-1 rows now, its subqueries as written (none bound)."""
    return render(terms.plan.stage1, weight=f"{root_key(terms.plan)}, 1", **_sources(terms, applied))


def _sources(terms: DeltaTerms, applied: bool) -> dict[str, str]:
    """Every source in its new state (see `_state`)."""
    return {f"source{i}": _state(terms, t, True, applied) for i, t in enumerate(terms.plan.sources)}


def key_width(plan: Plan) -> int:
    """The number of columns a root's key takes in a root query's rows."""
    return 1 if plan.root_key_nullable else len(plan.outer_key)
