"""The value of each uncorrelated scalar subquery a partition-recompute view reaches rows by
(`plan.ValueReach`, found by `sql.value_reach`): kept with the view's state, bound in its SQL.

Partition recompute (RELATIONAL.md R4) keeps each root's rows; a root's rows change when a
change reaches it. Where a conjunct of the outer WHERE compares with a subquery's value that
every row reads, the roots a change of that value reaches are exactly those whose conjunct it
flips: their rows are the only ones that differ between the two values (DBSP's ΔV = Q(new) −
Q(old) is zero on every other root). The fold therefore

1. computes the value now, with the user's own subquery (SQLite's SUM/AVG, its plan), once —
   or takes the value kept, where none of its tables changed and its query plan is the one it
   was computed under (`planned_as`);
2. compares it, by type and value, with the value the kept rows were computed under
   (`VALUE_OP` in the state);
3. if it moved, reaches the roots where `CASE WHEN <conjunct under old> …` differs from
   `… <conjunct under new>` (`reach_query`: SQLite scans the outer FROM, nothing else);
4. computes the reached roots' rows with the new value bound in place of the subquery
   (`substituted`), and keeps the value with them.

Invariant: the kept rows of every root were computed under the value kept. CREATE and REFRESH
(`populate_roots`) and every fold keep it; where no value is kept (a damaged entry), or one kept
under another plan differs from the value now, every root is reached once; a value that raises
leaves every root computed with the subqueries as written (`bind_values`).
"""

from __future__ import annotations

from typing import Any

import apsw

from matview.db import ENVIRONMENT_ERRORS
from matview.errors import Error
from matview.plan import Plan, ValueReach, render
from matview.storage.scan_order import plan_fingerprint
from matview.storage.state import StateStore, identical

VALUE_OP = 1_000_005  # the value each ValueReach's kept rows were computed under, by its position


def parameter(k: int, which: str) -> str:
    """The name of a bound parameter of value k: `new`, `old`, `moved` (1 where it may have
    moved) or `every` (1 where no value was kept, or one kept under another plan differs from
    the value now: every root is reached)."""
    return f"__dbsp_value{k}_{which}"


def default_parameters(plan: Plan) -> dict[str, Any]:
    """The parameters every statement of a plan with values may name, unset (to prepare them)."""
    return {parameter(k, w): None for k, _ in plan.value_reaches for w in ("new", "old", "moved", "every")}


def substituted(plan: Plan, sql: str, sources: dict[str, str]) -> str:
    """`sql` (rendered over `sources`) with each value's subquery replaced by its parameter in
    its conjunct (only there: the same subquery elsewhere, as a column, keeps its order-free
    twins)."""
    for k, value in plan.value_reaches:
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


def bind_values(
    conn: apsw.Connection,
    plan: Plan,
    store: StateStore,
    changed: frozenset[str],
    sources: dict[str, str],
    fresh: bool = False,
) -> dict[str, Any] | None:
    """Each value's parameters now: computed where its tables changed (or none was kept),
    else the value kept; kept anew by a fold (`store.writable`). `fresh`: a snapshot (CREATE,
    REFRESH), which computes every root's rows under the values now.

    None where a value raises (an integer overflow, a function's error) — which SQLite's own
    SELECT raises only if it evaluates the subquery, and over no row it does not: every root's
    rows are then computed with the subqueries as written, and no value is kept (so the next
    fold computes every root again)."""
    if not plan.value_reaches:
        return {}
    try:
        return _bind(conn, plan, store, changed, sources, fresh)
    except ENVIRONMENT_ERRORS:
        raise
    except Exception:  # (SQLite's, or any a user's function raises)
        if store.writable:
            for k, _value in plan.value_reaches:
                store.put(VALUE_OP, _key(k), None)
        return None


def _bind(
    conn: apsw.Connection,
    plan: Plan,
    store: StateStore,
    changed: frozenset[str],
    sources: dict[str, str],
    fresh: bool,
) -> dict[str, Any]:
    params: dict[str, Any] = {}
    puts: list[tuple[int, list[Any]]] = []
    for k, value in plan.value_reaches:
        kept = None if fresh else kept_value(store, k)
        select = _value_select(value, sources)
        planned = planned_as(conn, select)
        unchanged = not any(plan.sources[n] in changed for n in _occurrences(plan, k))
        reuse = kept is not None and unchanged and kept[1] == planned
        now = kept[0] if reuse else _value(conn, select)  # type: ignore[index]
        moved = kept is None or not identical(kept[0], now)
        # a value kept under another plan (an index since) or for another subquery (a damaged
        # file) that differs from the value now: whether the kept rows stand for it is not known
        every = kept is None or (moved and kept[1] != planned)
        params[parameter(k, "new")] = now
        params[parameter(k, "old")] = None if kept is None else kept[0]
        params[parameter(k, "moved")] = int(moved)
        params[parameter(k, "every")] = int(every)
        if store.writable and (moved or kept[1] != planned):  # type: ignore[index]
            puts.append((k, [now, planned]))
    for k, entry in puts:  # (once every value is known: one that raises keeps none)
        store.put(VALUE_OP, _key(k), entry)
    return params


def planned_as(conn: apsw.Connection, select: str) -> str:
    """What a value kept is known by: its subquery, and SQLite's plan for it (`plan_fingerprint`)
    — the order SQLite reads its rows in, in which its own SUM/AVG round and MIN/MAX keep the
    first of tied values (an index made since may change the value a SELECT gives)."""
    return f"{select}\n{plan_fingerprint(conn, select)}"


def replanned_otherwise(conn: apsw.Connection, view: str, plan: Plan, sources: dict[str, str]) -> bool:
    """Whether a value the view's kept rows stand for is planned otherwise now (an index made or
    dropped, ANALYZE) *and* gives another value: the view's rows are then not its SELECT's, with
    no change pending to fold (`Registry`, `rebuild.recompute_replanned` rebuild it)."""
    store = StateStore(conn, view, writable=False)
    for k, value in plan.value_reaches:
        kept = kept_value(store, k)
        if kept is None:
            continue  # (none kept: the next fold reaches every root)
        select = _value_select(value, sources)
        if kept[1] != planned_as(conn, select) and not identical(kept[0], _value(conn, select)):
            return True
    return False


def kept_value(store: StateStore, k: int) -> list[Any] | None:
    """Value k as kept, [value, `planned_as`] (a NULL value is kept too); None where none is
    kept or the entry is damaged (not msgpack, not a pair): every root is reached, as with none."""
    try:
        kept = store.get(VALUE_OP, _key(k))
    except ENVIRONMENT_ERRORS:
        raise
    except Exception:  # (msgpack's errors, a TEXT or INTEGER where the blob was)
        return None
    return kept if isinstance(kept, list) and len(kept) == 2 and isinstance(kept[1], str) else None


def _value_select(value: ValueReach, sources: dict[str, str]) -> str:
    """The SELECT of the value as SQLite's own SELECT computes it."""
    return f"SELECT {render(value.evaluated, **sources)}"


def _value(conn: apsw.Connection, select: str) -> Any:
    return conn.execute(select).fetchone()[0]  # type: ignore[index]


def _occurrences(plan: Plan, k: int) -> tuple[int, ...]:
    return plan.subquery_reach[k].occurrences


def _key(k: int) -> bytes:
    return str(k).encode()
