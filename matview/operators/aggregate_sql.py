"""Grouped aggregation of a large delta, set at a time (DBSP §7.2 with SQLite doing the work).

The incremental rule is the one of `Aggregate`; only the evaluation differs. Instead of
visiting delta rows in Python, one GROUP BY over the stage-1 rows yields each touched
group's partial aggregates (Σw, Σ of integer arguments × w, the least/greatest inserted
value), and the MIN/MAX ordered multisets are updated by one ``INSERT … SELECT … ON
CONFLICT`` each. Python then visits each touched group once. Used for CREATE/REFRESH
(the whole table is one delta) and for folds of large deltas, in write mode, for the
aggregates whose partials SQL computes exactly (COUNT, SUM/TOTAL/AVG of integers, MIN,
MAX; real and text arguments of sums are added exactly in Python) and BINARY group keys.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import apsw

from matview.keys import group_key
from matview.names import quote
from matview.operators import real_sums
from matview.operators.accumulators import SumState, _strictly_better, _ties
from matview.storage.state import STORAGE_KIND_SQL, StateStore
from matview.zset import ZSet

if TYPE_CHECKING:
    from matview.operators.aggregate import Aggregate
    from matview.plan import AggSpec

GROUP_KEY_FUNCTION = "__dbsp_group_key"
_SQL_FUNCS = {"count", "sum", "total", "avg", "min", "max"}


@functools.lru_cache(maxsize=4096)
def group_key_sql(*values: Any) -> bytes:
    """SQL function: the group key of BINARY-collated group values (as `keys.group_key`).

    SQLite calls it once per row of a set-at-a-time statement, and rows repeat their group's
    values, so recent keys are kept. Values Python calls equal (`1`, `1.0`, `-0.0`, `0`)
    are exactly those SQLite's BINARY comparison calls equal, and those have one group key:
    a cached key is the key of every value that finds it."""
    return group_key(values, ("BINARY",) * len(values))


def eligible(aggregate: Aggregate) -> bool:
    plan = aggregate.plan
    return (
        plan.exact_groups
        and not plan.extreme_row  # (the extreme row is kept row by row: `bare_columns`)
        and all(a.func in _SQL_FUNCS and not a.distinct for a in plan.aggs)
        # (a MIN/MAX under NOCASE/RTRIM keeps its rows by (class, rowid): `Accumulator.collated`)
        and not any(a.func in ("min", "max") and a.collation != "BINARY" for a in plan.aggs)
    )


def _column(index: int) -> str:
    return quote(f"__c{index}")


def _and_filter(filter_: int | None) -> str:
    """An aggregate's FILTER (its stage-1 column) as a WHERE conjunct: ` AND "__c<i>"`, or ""."""
    return f" AND {_column(filter_)}" if filter_ is not None else ""


def sql_step(
    aggregate: Aggregate, conn: apsw.Connection, source: str, params: Any, store: StateStore
) -> ZSet[bytes] | None:
    """ΔO for the stage-1 rows of `source` (a SELECT with columns __c<i> and __w); None when
    SQLite cannot compute the partials (an integer overflow), before anything was written."""
    plan, k = aggregate.plan, aggregate.k
    groups = [_column(i) for i in range(k)]
    parts = ['sum("__w")']
    layout: list[tuple[str, int]] = []  # (what, position in the partials row)
    for spec in plan.aggs:
        condition = f"{_column(spec.filter)} AND " if spec.filter is not None else ""
        arg = _column(spec.arg) if spec.arg is not None else None
        if spec.func == "count" and arg is None:
            layout.append(("count", len(parts)))
            parts.append(f'sum(CASE WHEN {condition}1 THEN "__w" ELSE 0 END)')
        elif spec.func == "count":
            layout.append(("count", len(parts)))
            parts.append(f'sum(CASE WHEN {condition}{arg} IS NOT NULL THEN "__w" ELSE 0 END)')
        elif spec.func in ("sum", "total", "avg"):
            layout.append(("sum", len(parts)))
            # No `arg * w`: SQLite turns an overflowing product (−2^63 · −1) into a REAL. Each
            # weight sign's positive and negative arguments are summed apart (weights are ±1)
            # and combined exactly in Python; an overflowing sum() raises and Python takes over.
            integer = f"{condition}typeof({arg}) = 'integer'"
            parts.append(f'sum(CASE WHEN {integer} THEN "__w" ELSE 0 END)')
            for sign, weight in (("> 0", "= 1"), ("> 0", "= -1"), ("< 0", "= 1"), ("< 0", "= -1")):
                parts.append(f'sum(CASE WHEN {integer} AND {arg} {sign} AND "__w" {weight} THEN {arg} END)')
            parts.append(f"sum(CASE WHEN {condition}typeof({arg}) NOT IN ('integer', 'null') THEN 1 ELSE 0 END)")
        else:
            extreme = "min" if spec.func == "min" else "max"
            layout.append(("minmax", len(parts)))
            parts.append(f'{extreme}(CASE WHEN {condition}"__w" > 0 THEN {arg} END)')
            parts.append(f'{extreme}(CASE WHEN {condition}"__w" < 0 THEN {arg} END)')
            # integers, reals and -0.0 among the inserted values: the extreme may be tied across them
            numeric = f"{condition}typeof({arg}) IN ('integer', 'real')"
            parts.append(f"count(DISTINCT CASE WHEN {numeric} THEN {STORAGE_KIND_SQL.format(v=arg)} END)")
    parts.append('max(abs("__w"))')  # the partials above assume every weight is ±1
    parts.append('min("__w")')  # a negative weight: some value leaves an ordered multiset
    group_by = f" GROUP BY {', '.join(groups)}" if groups else ""
    select_groups = ", ".join(groups) + ", " if groups else ""
    multisets = _multisets(aggregate)
    with _Stage1Rows(aggregate, conn, source, params) as rows:
        rows.reread(1 + len(multisets))
        try:
            partials = conn.execute(
                f"SELECT {select_groups}{', '.join(parts)} FROM ({rows.source}){group_by}", rows.params
            ).fetchall()
        except apsw.SQLError:
            return None  # an integer sum left 64 bits inside SQLite: the exact Python path takes over
        if any(row[-2] not in (None, 1) for row in partials):
            return None
        return _apply_partials(aggregate, rows, store, partials, layout, multisets)


#: from how many touched groups their states are read in few queries (`StateStore.read_many`)
_READ_MANY_FROM = 16


def _multisets(aggregate: Aggregate) -> list[tuple[AggSpec, int]]:
    """(MIN/MAX, operator id) of each ordered multiset the aggregate keeps."""
    pairs = zip(aggregate.plan.aggs, aggregate.accumulators, strict=True)
    return [(spec, acc.op) for spec, acc in pairs if spec.func in ("min", "max") and acc.owns_multiset]


def _apply_partials(
    aggregate: Aggregate,
    rows: _Stage1Rows,
    store: StateStore,
    partials: list[tuple[Any, ...]],
    layout: list[tuple[str, int]],
    multisets: list[tuple[AggSpec, int]],
) -> ZSet[bytes]:
    """ΔO from the per-group partials, the REAL sums and ordered multisets added from `rows`."""
    plan, k, conn = aggregate.plan, aggregate.k, rows.conn

    touched: dict[bytes, list[Any]] = {}
    if not plan.has_group_by:
        touched[aggregate.empty_key] = aggregate.load(store, aggregate.empty_key, ())
    reals: dict[int, Any] = {}  # per sum with non-integer arguments: how many rows have one
    keys = [group_key(row[:k], plan.group_collations) if k else aggregate.empty_key for row in partials]
    if len(keys) > _READ_MANY_FROM:
        aggregate.read_groups(store, keys)
    for row, key in zip(partials, keys, strict=True):
        values = row[:k]
        group = touched.get(key)
        if group is None:
            group = touched[key] = aggregate.load(store, key, values)
        group[0] += row[k] or 0
        for index, (spec, (what, at)) in enumerate(zip(plan.aggs, layout, strict=True)):
            slot = 3 + index
            at += k
            if what == "count":
                group[slot] += row[at] or 0
            elif what == "sum":
                sums = [int(v or 0) for v in row[at + 1 : at + 5]]  # by (argument sign, weight sign)
                positive, negative = sums[0] - sums[1], sums[2] - sums[3]
                SumState.add_integer_partials(group[slot], row[at] or 0, positive + negative, positive, negative)
                if row[at + 5]:
                    reals[index] = reals.get(index, 0) + row[at + 5]
            else:
                inserted, deleted, numeric_kinds = row[at], row[at + 1], int(row[at + 2] or 0)
                cached, was_stale = group[slot]
                if deleted is not None or numeric_kinds > 1 or _ties(inserted, cached):
                    # The delta deletes a value, maybe the extreme or a value it inserted itself:
                    # re-seek in the ordered state once it is updated below. A group's delta
                    # that only inserts (CREATE's, most folds' of new rows) moves the extreme
                    # only to a better inserted value, as the per-row path (`Accumulator.update`).
                    group[slot] = [None, True]
                elif (
                    inserted is not None
                    and not was_stale
                    and (cached is None or _strictly_better(inserted, cached, spec.func == "max"))
                ):
                    group[slot] = [inserted, False]
    leaving = any(row[-1] is not None and row[-1] < 0 for row in partials)
    rows.reread((1 if reals else 0) + len(multisets) * (2 if leaving else 1))
    if reals:
        _add_non_integer_terms(aggregate, rows, reals, touched)
    for spec, op in multisets:
        _update_ordered(conn, store, rows.source, rows.params, op, spec.arg, spec.filter, k, leaving)
    return aggregate.emit(touched, store)


#: (connection, TEMP table) of the `_Stage1Rows` holding rows now
_STAGE1_IN_USE: set[tuple[int, str]] = set()
#: why the TEMP table may be refused, leaving the passes to read the stage-1 SELECT itself
_SCRATCH_REFUSED = (apsw.AuthError, apsw.FullError, apsw.CantOpenError, apsw.ReadOnlyError)


class _Stage1Rows:
    """The stage-1 rows the passes of `sql_step` read: `source` itself, or — once `reread`
    says it pays — its columns the passes use, computed once into a TEMP table (untyped
    columns: no affinity converts a value) when `source` joins tables, which each pass would
    otherwise join again. The table is emptied on exit."""

    def __init__(self, aggregate: Aggregate, conn: apsw.Connection, source: str, params: Any) -> None:
        plan, k = aggregate.plan, aggregate.k
        self.conn, self.source, self.params = conn, source, params
        self.joins = len(plan.sources) > 1 or bool(plan.upstreams) or " UNION ALL " in source
        self.used = sorted({*range(k), *(i for a in plan.aggs for i in (a.arg, a.filter) if i is not None)})
        self.table: str | None = None

    def reread(self, passes: int) -> None:
        """`passes` more statements will read the rows: keep them in a table if they join."""
        if passes < 2 or not self.joins or self.table is not None:
            return
        names = [*(_column(i) for i in self.used), '"__w"']
        table = f"__dbsp_stage1_{'_'.join(map(str, self.used))}"
        if (id(self.conn), table) in _STAGE1_IN_USE:
            return  # (a step inside another's, were there one: it must not empty that one's rows)
        try:
            self.conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {table} ({', '.join(names)})")
            self.conn.execute(f"DELETE FROM temp.{table}")  # (were an emptying on exit refused)
        except _SCRATCH_REFUSED:
            return  # (an application's authorizer, a full temp store: the passes read `source`)
        self.table = table
        _STAGE1_IN_USE.add((id(self.conn), table))
        try:
            self.conn.execute(f"INSERT INTO temp.{table} SELECT {', '.join(names)} FROM ({self.source})", self.params)
        except _SCRATCH_REFUSED:
            return  # (the statement wrote nothing: the table stays empty, `source` is read)
        self.source, self.params = f"SELECT * FROM temp.{table}", ()

    def __enter__(self) -> _Stage1Rows:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        if self.table is None:
            return
        _STAGE1_IN_USE.discard((id(self.conn), self.table))
        try:
            self.conn.execute(f"DELETE FROM temp.{self.table}")
        except _SCRATCH_REFUSED:
            pass  # (emptied before its next use)
        except apsw.Error:
            if kind is None:
                raise  # (under an error, a rollback may have taken the table: keep that error)


def _add_non_integer_terms(
    aggregate: Aggregate, rows: _Stage1Rows, reals: dict[int, int], touched: dict[bytes, list[Any]]
) -> None:
    """Exact sums of REAL and TEXT arguments (`reals`: per sum, how many rows have one): the
    common REALs of every sum in one statement (`real_sums.add_lane_sums`), the other REALs
    set at a time where SQLite splits them exactly (`real_sums.add_real_sums`), the rest
    visited in Python."""
    plan, k, conn = aggregate.plan, aggregate.k, rows.conn
    group_columns = [_column(i) for i in range(k)]
    indices = sorted(reals)

    def accumulator_of(index: int) -> Callable[[tuple[Any, ...]], list[Any]]:
        def of(values: tuple[Any, ...]) -> list[Any]:
            key = group_key(values, plan.group_collations) if k else aggregate.empty_key
            return touched[key][3 + index]  # type: ignore[no-any-return]

        return of

    def condition_of(index: int) -> str:
        return _and_filter(plan.aggs[index].filter)

    terms = [(_column(plan.aggs[i].arg), condition_of(i)) for i in indices]  # type: ignore[arg-type]
    lanes = real_sums.add_lane_sums(
        conn, rows.source, rows.params, group_columns, terms, [accumulator_of(i) for i in indices]
    )
    outside = real_sums.NOT_IN_LANE if lanes is not None else ""
    for position, index in enumerate(indices):
        left = reals[index] - (lanes[position] if lanes is not None else 0)
        if left == 0:
            continue
        arg, condition = terms[position][0], condition_of(index) + outside.format(v=terms[position][0])
        handled = real_sums.add_real_sums(
            conn, rows.source, rows.params, group_columns, arg, condition, accumulator_of(index)
        )
        if handled == left:
            continue
        remaining = real_sums.REMAINING if handled is not None else "typeof({v}) NOT IN ('integer', 'null')"
        groups = "".join(f"{g}, " for g in group_columns)
        coerce, of = aggregate.accumulators[index].coerce, accumulator_of(index)
        for row in conn.execute(
            f'SELECT {groups}{arg}, "__w" FROM ({rows.source}) WHERE {remaining.format(v=arg)}{condition}',
            rows.params,
        ):
            value = row[k]
            # SumState.add counts the value in n itself; the GROUP BY counted only integers
            SumState.add(of(row[:k]), value if isinstance(value, float) else coerce(value), row[k + 1])


def _update_ordered(
    conn: apsw.Connection,
    store: StateStore,
    source: str,
    params: Any,
    op: int,
    arg: int | None,
    filter_: int | None,
    k: int,
    leaving: bool,
) -> None:
    """Add the delta's values to MIN/MAX's ordered multiset `op`, set at a time (and drop the
    entries left with no weight, when the delta has `leaving` rows)."""
    ostate = store.ostate
    condition = _and_filter(filter_)
    key = f"{GROUP_KEY_FUNCTION}({', '.join(_column(i) for i in range(k))})"
    value = _column(arg)  # type: ignore[arg-type]
    kind = STORAGE_KIND_SQL.format(v=value)
    # Grouped by the raw group values under BINARY (what the key function calls one key,
    # `group_key_sql`), the key computed once per (group, value) afterwards: sorting rows on a
    # computed blob cost about three times the statement's own work.
    groups = [_column(i) for i in range(k)]
    by_groups = "".join(f"{g} COLLATE BINARY, " for g in groups)
    conn.execute(
        f"INSERT INTO {ostate} (operator_id, key, ord, kind, value, weight) "
        f"SELECT {op}, {GROUP_KEY_FUNCTION}({', '.join(groups)}), v, t, NULL, w FROM ("
        f'SELECT {"".join(f"{g}, " for g in groups)}{value} AS v, {kind} AS t, sum("__w") AS w '
        f"FROM ({source}) WHERE {value} IS NOT NULL{condition} GROUP BY {by_groups}v, t) WHERE w <> 0 "
        "ON CONFLICT (operator_id, key, ord, kind) DO UPDATE SET weight = weight + excluded.weight",
        params,
    )
    if not leaving:
        return
    conn.execute(
        f"DELETE FROM {ostate} WHERE operator_id = {op} AND weight <= 0 AND (key, ord, kind) IN "
        f'(SELECT {key}, {value}, {kind} FROM ({source}) WHERE "__w" < 0 AND {value} IS NOT NULL{condition})',
        params,
    )
