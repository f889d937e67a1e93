"""Indexes for delta terms: a join's delta term is proportional to the change only when every
base table it probes is reached by an index SEARCH, not a SCAN (nor an automatic index, which
SQLite builds over the whole table for every statement).

At CREATE, each term is checked with EXPLAIN QUERY PLAN. An occurrence it scans gets an index
on the columns the query compares with `=` to the other side (ON, USING, WHERE conjuncts), with
the collation of the comparison (SQLite compares with the left operand's collation). Such
indexes are matview's (`__dbsp_ix_<table>_<columns>`), shared by the views that need them, and
dropped with the last one. What stays a scan (no equality to probe, or an affinity mismatch no
index can serve) is reported by `view.explain()`.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import replace
from typing import Any

import apsw
from sqlglot import exp

from matview import names
from matview.delta_terms import DeltaTerms
from matview.errors import UnsupportedQuery
from matview.keys import BUILTIN_COLLATIONS
from matview.names import fold, quote
from matview.plan import Plan
from matview.sql.from_clause import FromClause
from matview.sql.frontend import Compiled
from matview.storage import catalog
from matview.storage.ddl_guard import own_ddl
from matview.storage.scan_order import concat_order_problem, follows_scan_order, query_plan
from matview.storage.schema import index_table, kept_by_rowid, read_table

Probe = tuple[str, str]  # (column, collation)


def probed_columns(tree: exp.Select, source: FromClause) -> dict[int, list[Probe]]:
    """Per occurrence, the columns compared with `=` to columns of other occurrences."""
    conditions: list[exp.Expression] = []
    where = tree.args.get("where")
    if where is not None:
        conditions.append(where.this)
    for join in tree.args.get("joins") or []:
        if join.args.get("on") is not None:
            conditions.append(join.args["on"])
    found: dict[int, list[Probe]] = {}

    def note(occurrence: int, column: str, collation: str) -> None:
        if collation.upper() not in BUILTIN_COLLATIONS:
            return  # an index with a user collation would make every client need it to write the table
        probes = found.setdefault(occurrence, [])
        if (column, collation) not in probes:
            probes.append((column, collation))

    for condition in conditions:
        for conjunct in condition.flatten() if isinstance(condition, exp.And) else [condition]:
            if not isinstance(conjunct, exp.EQ):
                continue
            left, right = conjunct.left, conjunct.right
            left_ref, right_ref = _ref(left, source), _ref(right, source)
            left_uses, right_uses = _occurrences(left, source), _occurrences(right, source)
            # a join key: compared with something of another occurrence (a constant filter is
            # no probe: as an index's first column it would make the base table the outer loop)
            if right_ref is not None and left_uses and right_ref[0] not in left_uses:
                # the left operand's collation decides, when it has one
                collation = left_ref[2] if left_ref is not None else right_ref[2]
                note(right_ref[0], right_ref[1], collation)
            if left_ref is not None and right_uses and left_ref[0] not in right_uses:
                note(left_ref[0], left_ref[1], left_ref[2])
    for index, hidden in enumerate(source.hidden):
        for name in hidden:  # USING / NATURAL: left.k = right.k, the left one's collation
            leftmost = source.resolve(None, name)
            merged = source.resolve(source.occurrences[index].alias, name)
            if leftmost is not None and merged is not None and merged.column is not None:
                collation = leftmost.column.collation if leftmost.column is not None else "BINARY"
                note(index, merged.column.name, collation)
    return found


def _ref(node: Any, source: FromClause) -> tuple[int, str, str] | None:
    if not isinstance(node, exp.Column) or not isinstance(node.this, exp.Identifier):
        return None
    found = source.resolve(node.table or None, node.name)
    if found is None or found.column is None:
        return None
    return found.occurrence, found.column.name, found.column.collation


def _occurrences(node: Any, source: FromClause) -> set[int]:
    refs = (_ref(column, source) for column in node.find_all(exp.Column))
    return {ref[0] for ref in refs if ref is not None}


def term_reads(
    conn: apsw.Connection, term: str, params: dict[str, int], aliases: list[str]
) -> tuple[set[int], list[str]]:
    """What EXPLAIN QUERY PLAN shows `term` reading: the occurrences (by alias) it scans or
    reads through an automatic index, and the matview indexes (`index_name`) it searches."""
    scanned: set[int] = set()
    own: list[str] = []
    for row in conn.execute(f"EXPLAIN QUERY PLAN {term}", params):
        detail = str(row[-1])
        words = detail.split()
        for before, word in itertools.pairwise(words):
            if before == "INDEX" and word.startswith(f"{names.PREFIX}ix_") and word not in own:
                own.append(word)
        if len(words) < 2 or words[0] not in ("SCAN", "SEARCH"):
            continue
        if words[0] == "SEARCH" and "AUTOMATIC" not in detail:
            continue
        name = words[1].strip('"')
        for index, alias in enumerate(aliases):
            if alias == name:
                scanned.add(index)
    return scanned, own


def index_name(table: str, probes: list[Probe]) -> str:
    key = ",".join(f"{c}:{k}" for c, k in probes)
    return f"{names.PREFIX}ix_{table}_{hashlib.sha1(key.encode()).hexdigest()[:10]}"


def create_index(conn: apsw.Connection, table: str, probes: list[Probe]) -> str | None:
    """matview's index on `table` for `probes` (made once, shared); None where a new one would
    change the order in which SQLite answers a GROUP_CONCAT view's SELECT (the delta term
    then stays a scan, reported by `explain`)."""
    name = index_name(table, probes)
    if index_table(conn, name) is not None:
        return name
    columns = ", ".join(f"{quote(c)} COLLATE {quote(k)}" for c, k in probes)
    conn.execute(f"CREATE INDEX main.{quote(name)} ON {quote(table)} ({columns})")
    if any(name in detail for detail in scan_order_plans(conn, table)):
        with own_ddl(conn):
            conn.execute(f"DROP INDEX main.{quote(name)}")
        return None
    return name


def refuse_group_concat_through_own_index(conn: apsw.Connection, plan: Plan, sql: str) -> None:
    """A GROUP_CONCAT view whose SELECT SQLite answers through an index with other columns than
    its GROUP BY's (a user's, or one matview made for another view) concatenates in that
    index's order, not the rowid order kept here (`scan_order`)."""
    problem = concat_order_problem(conn, plan, sql)
    if problem is not None:
        raise UnsupportedQuery(problem)


def scan_order_plans(conn: apsw.Connection, table: str) -> list[str]:
    """The query-plan lines of the SELECTs of the views over `table` that follow SQLite's scan
    order (`scan_order.follows_scan_order`: GROUP_CONCAT, bare columns, first spellings), which
    an index of matview's must not change."""
    details: list[str] = []
    for entry in catalog.load_views(conn).values():
        plan = entry.plan
        if follows_scan_order(plan) and fold(table) in {fold(t) for t in plan.sources}:
            details += query_plan(conn, entry.sql)
    return details


def drop_unused(conn: apsw.Connection, dropped: tuple[str, ...], still_used: set[str]) -> None:
    for name in dropped:
        if name not in still_used:
            with own_ddl(conn):
                conn.execute(f"DROP INDEX IF EXISTS main.{quote(name)}")


def _prepare_every_term(conn: apsw.Connection, delta_terms: DeltaTerms, source: FromClause) -> None:
    """Prepare the terms of a change to every table at once (which includes every term shape:
    old states, an outer join's inner and padding terms), so a query whose delta terms SQLite
    would reject is refused at CREATE, not found stalled at its first write."""
    params = delta_terms.parameters({})
    for term in delta_terms.terms(frozenset(delta_terms.plan.tables)):
        try:
            conn.execute(f"EXPLAIN {term}", params).fetchall()
        except apsw.SQLError as exc:
            raise UnsupportedQuery(f"matview cannot build the delta terms of this query: {exc}") from None


def with_indexes(conn: apsw.Connection, compiled: Compiled) -> Plan:
    """Check every single-input delta term of a compiled view (its change capture installed);
    create the indexes scanned occurrences need, unless the view opted out. The plan, with
    the indexes it uses and the loops that remain scans (as messages)."""
    plan, source = compiled.plan, compiled.source
    if plan.whole:
        return plan  # (recomputed whole: no delta terms)
    delta_terms = DeltaTerms(plan)
    _prepare_every_term(conn, delta_terms, source)
    if compiled.arms:
        # a UNION's arm k contributes its own delta terms: its indexes are those it needs alone
        used = [name for arm in compiled.arms for name in with_indexes(conn, arm).indexes]
        return replace(plan, indexes=tuple(dict.fromkeys(used)))
    plan = keep_rowids(conn, plan, source)
    if not source.is_join:
        return _subquery_indexes(conn, plan)
    probes = probed_columns(compiled.tree, source)
    aliases = [o.alias for o in source.occurrences]
    params = delta_terms.parameters({})
    created: list[str] = []
    remaining: list[str] = []
    nullable = 1 - source.preserved if source.outer_on else 1
    for table in source.tables:
        terms = delta_terms.terms(frozenset({table}))
        padded = source.outer_kind == "FULL" or table == source.occurrences[nullable].table.name
        if source.outer_on and padded:
            terms = terms[:-1]  # the padding term reads N as an empty `LIMIT 0` subquery: no scan to fix
        for position, term in enumerate(terms):
            # the occurrence this term reads as ΔX (an outer join's terms do not map one to one)
            at = [i for i, o in enumerate(source.occurrences) if o.table.name == table]
            one_to_one = not (source.outer_on or source.root_recompute)
            delta_at = {at[position]} if position < len(at) and one_to_one else set()
            scanned = term_reads(conn, term, params, aliases)[0] - delta_at
            for occurrence in sorted(scanned):
                wanted = probes.get(occurrence)
                if wanted and plan.auto_indexes:
                    probed = source.occurrences[occurrence].table
                    table = (
                        names.view_table(probed.name) if probed.materialized else probed.name
                    )  # (an upstream's rows)
                    name = create_index(conn, table, wanted)
                    if name is not None and name not in created:
                        created.append(name)
            # as planned now, its indexes made: what it still scans, and the matview indexes it
            # reads — those another view made are its own too (that view's DROP keeps them)
            still, read = term_reads(conn, term, params, aliases)
            remaining += [f"a change of {table} scans {aliases[o]}" for o in sorted(still - delta_at)]
            created += [name for name in read if name not in created]
    if source.outer_on and plan.auto_indexes:
        # the padding term counts, for each row ΔN reaches, its matches in ΔN: the nullable side's
        # delta log is probed by the join keys there (an inner loop), so it gets their index too
        for side in (0, 1) if source.outer_kind == "FULL" else (nullable,):
            wanted = probes.get(side)
            if wanted:
                name = create_index(conn, names.delta_table(source.occurrences[side].table.name), wanted)
                if name is not None and name not in created:
                    created.append(name)
    return _subquery_indexes(conn, replace(plan, indexes=tuple(created), scans=tuple(dict.fromkeys(remaining))))


def keep_rowids(conn: apsw.Connection, plan: Plan, source: FromClause) -> Plan:
    """A view maintained per row of its root (and of the tables before a RIGHT JOIN's root)
    knows the rows of such a table without a PRIMARY KEY by rowid (`schema.kept_by_rowid`):
    each gets matview's empty index (`WHERE 0`: never written, never chosen by a query plan,
    no column named), which makes VACUUM keep its rowids. Made whatever `indexes = 'off'` says:
    the view is exact only with it; shared, and dropped with the last view that lists it."""
    if not plan.root_recompute:
        return plan
    made = list(plan.indexes)
    for occurrence in source.occurrences[: plan.root + 1]:
        if kept_by_rowid(occurrence.table):
            name = guard_rowids(conn, occurrence.table.name)
            if name not in made:
                made.append(name)
    return replace(plan, indexes=tuple(made))


def guard_rowids(conn: apsw.Connection, table: str) -> str:
    """The name of matview's index keeping `table`'s rowids, made where it is missing. An index
    of that name on another table (this one was renamed away, another made under its name) is
    replaced. Views that listed it while it was gone may have lost their rowids to a VACUUM
    meanwhile: they stay broken until their own REFRESH (`view_health.view_problem` saw them broken
    until now; the index made here would hide it)."""
    name = names.rowid_guard_index(table)
    on = index_table(conn, name)
    if on is not None and fold(on) == fold(table):
        return name
    if on is not None:
        with own_ddl(conn):
            conn.execute(f"DROP INDEX main.{quote(name)}")
    for entry in catalog.load_views(conn).values():
        if name in entry.plan.indexes and not entry.plan.needs_refresh:
            reason = (
                f"materialized view {entry.name}: matview's index {name}, which kept the rowids of table "
                f"{table} across VACUUM, was gone; REFRESH MATERIALIZED VIEW {entry.name} rebuilds the view"
            )
            catalog.update_plan(conn, entry.name, replace(entry.plan, needs_refresh=reason))
    conn.execute(f"CREATE INDEX main.{quote(name)} ON {quote(table)} ((0)) WHERE 0")
    return name


def _subquery_indexes(conn: apsw.Connection, plan: Plan) -> Plan:
    """A correlated subquery probes its table by the compared column for each reached row:
    that column gets an index unless one already leads with it."""
    created = list(plan.indexes)
    if plan.auto_indexes:
        for table, column, collation in plan.subquery_probes:
            if collation.upper() in BUILTIN_COLLATIONS and not _leads_an_index(conn, table, column, collation):
                name = create_index(conn, table, [(column, collation)])
                if name is not None and name not in created:
                    created.append(name)
    return replace(plan, indexes=tuple(created))


def _leads_an_index(conn: apsw.Connection, table: str, column: str, collation: str) -> bool:
    """Whether an index of `table` (or its INTEGER PRIMARY KEY) starts with `column` in `collation`."""
    info = read_table(conn, table)
    if info.ipk is not None and info.ipk.lower() == column.lower():
        return True
    for _seq, index, *_ in conn.execute(f"PRAGMA main.index_list({quote(table)})"):
        first = conn.execute(f"PRAGMA main.index_xinfo({quote(index)})").fetchone()
        if (
            first
            and first[2]
            and str(first[2]).lower() == column.lower()
            and str(first[4]).upper() == collation.upper()
        ):
            return True
    return False
