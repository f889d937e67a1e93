"""The value of each uncorrelated scalar subquery a partition-recompute view reaches rows by
(`plan.ValueReach`, found by `sql.value_reach`): kept with the view's state, bound in its SQL.

Partition recompute (RELATIONAL.md R4) keeps each root's rows; a root's rows change when a
change reaches it. Where a conjunct of the outer WHERE compares with a subquery's value that
every row reads, the roots a change of that value reaches are exactly those whose conjunct it
flips: their rows are the only ones that differ between the two values (DBSP's ΔV = Q(new) −
Q(old) is zero on every other root). The fold therefore

1. computes the value now, with the user's own subquery (SQLite's SUM/AVG, its plan), once —
   or takes the value kept, where none of its tables changed and its query plan and the schema
   version are those it was computed under (`_plan`);
2. compares it, by type and value, with the value the kept rows were computed under
   (`VALUE_OP` in the state);
3. if it moved, reaches the roots where `CASE WHEN <conjunct under old> …` differs from
   `… <conjunct under new>` (`reach_query`: SQLite scans the outer FROM, nothing else);
4. computes the reached roots' rows with the new value bound in place of the subquery
   (`substituted`), and keeps the value with them.

Invariant: the kept rows of every root were computed under the value kept. CREATE and REFRESH
(`populate_roots`) and every fold keep it; where no value is kept (state from before), every
root is reached once.
"""

from __future__ import annotations

from typing import Any

import apsw

from matview.errors import Error
from matview.plan import Plan, ValueReach, render
from matview.storage.state import StateStore, identical

VALUE_OP = 1_000_005  # the value each ValueReach's kept rows were computed under, by its position


def value_reaches(plan: Plan) -> tuple[tuple[int, ValueReach], ...]:
    """The plan's subqueries reached by value, with their position in `subquery_reach`."""
    return plan.value_reaches


def parameter(k: int, which: str) -> str:
    """The name of a bound parameter of value k: `new`, `old`, `moved` (1 where it may have
    moved) or `every` (1 where no value was kept: every root is reached)."""
    return f"__dbsp_value{k}_{which}"


def default_parameters(plan: Plan) -> dict[str, Any]:
    """The parameters every statement of a plan with values may name, unset (to prepare them)."""
    return {parameter(k, w): None for k, _ in value_reaches(plan) for w in ("new", "old", "moved", "every")}


def substituted(plan: Plan, sql: str, sources: dict[str, str]) -> str:
    """`sql` (rendered over `sources`) with each value's subquery replaced by its parameter in
    its conjunct (only there: the same subquery elsewhere, as a column, keeps its order-free
    twins)."""
    for k, value in value_reaches(plan):
        conjunct = render(value.conjunct, **sources)
        if conjunct not in sql:
            raise Error(f"matview: the conjunct of subquery value {k} is not in its view's SQL (a damaged plan)")
        bound = conjunct.replace(render(value.subquery, **sources), f":{parameter(k, 'new')}")
        sql = sql.replace(conjunct, bound, 1)
    return sql


def conjunct_as_written(value: ValueReach, sources: dict[str, str]) -> str:
    """The conjunct with the subquery as the user wrote it (for `explain`)."""
    return render(value.conjunct, **sources).replace(
        render(value.subquery, **sources), render(value.evaluated, **sources)
    )


def reach_query(k: int, value: ValueReach, key: str, outer: str, also: str, sources: dict[str, str]) -> str:
    """The SELECT of the roots whose conjunct value k flips (every root passing the outer
    filter where no value was kept). `outer`: the FROM clause, rendered; `also`: the filter's
    conjuncts and AND, or ""."""
    subquery = render(value.subquery, **sources)
    conjunct = render(value.conjunct, **sources)
    before = conjunct.replace(subquery, f":{parameter(k, 'old')}")
    after = conjunct.replace(subquery, f":{parameter(k, 'new')}")
    guard = f'(SELECT 1 WHERE :{parameter(k, "moved")}) AS "__dbsp_guard" CROSS JOIN {outer}'
    flips = f"(CASE WHEN {before} THEN 1 ELSE 0 END) <> (CASE WHEN {after} THEN 1 ELSE 0 END)"
    return f"SELECT {key} FROM {guard} WHERE {also}(:{parameter(k, 'every')} OR {flips})"


def unknown_tables(plan: Plan, store: StateStore) -> frozenset[str]:
    """The tables of the values no value is kept for: their reach must run (every root)."""
    return frozenset(
        plan.sources[n]
        for k, value in value_reaches(plan)
        if store.get(VALUE_OP, _key(k)) is None
        for n in _occurrences(plan, k)
    )


def bind_values(
    conn: apsw.Connection,
    plan: Plan,
    store: StateStore,
    changed: frozenset[str],
    sources: dict[str, str],
    fresh: bool = False,
) -> dict[str, Any]:
    """Each value's parameters now: computed where its tables changed (or none was kept),
    else the value kept; kept anew by a fold (`store.writable`). `fresh`: a snapshot (CREATE,
    REFRESH), which computes every root's rows under the values now."""
    params: dict[str, Any] = {}
    for k, value in value_reaches(plan):
        kept = None if fresh else store.get(VALUE_OP, _key(k))  # [value, plan]: a NULL value is kept too
        if not isinstance(kept, list) or len(kept) != 2:
            kept = None  # (none, or a damaged entry: every root is reached, as with none)
        select = f"SELECT {render(value.evaluated, **sources)}"
        planned = _plan(conn, select)
        unchanged = not any(plan.sources[n] in changed for n in _occurrences(plan, k))
        if kept is not None and unchanged and kept[1:] == [planned]:
            now = kept[0]
        else:
            now = conn.execute(select).fetchone()[0]  # type: ignore[index]
        params[parameter(k, "new")] = now
        params[parameter(k, "old")] = None if kept is None else kept[0]
        moved = kept is None or not identical(kept[0], now)
        params[parameter(k, "moved")] = int(moved)
        params[parameter(k, "every")] = int(kept is None)
        if store.writable and (moved or kept[1] != planned):  # type: ignore[index]
            store.put(VALUE_OP, _key(k), [now, planned])
    return params


def _plan(conn: apsw.Connection, select: str) -> str:
    """What decides the order SQLite reads the subquery's rows in, besides the rows: its query
    plan, and the schema version (a VACUUM, which may renumber rowids, bumps it). SQLite's own
    SUM/AVG round in that order and MIN/MAX keep the first of tied values, so a value kept is
    reused only while both stand (an index made since may change the value a SELECT gives)."""
    version = conn.execute("PRAGMA main.schema_version").fetchone()[0]  # type: ignore[index]
    lines = [str(row[3]) for row in conn.cursor().execute(f"EXPLAIN QUERY PLAN {select}", can_cache=False)]
    return "\n".join([str(version), *lines])


def _occurrences(plan: Plan, k: int) -> tuple[int, ...]:
    return plan.subquery_reach[k].occurrences


def _key(k: int) -> bytes:
    return str(k).encode()
