"""Grouped aggregation, incrementally (DBSP §7.2, Prop. 7.3 applied per group).

For a delta ΔI the operator touches only the groups ΔI mentions: it folds each
group's delta rows into the group's accumulators (linear ones by adding weights,
MIN/MAX through their ordered multiset), recomputes that group's output row, and
emits ΔO = −(row it emitted before) + (row now). Each group's state also keeps the
row it last emitted, so the old row never has to be recomputed. A group without rows
disappears; an aggregate without GROUP BY always has its one group, as in SQLite.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from matview.evaluator import Evaluator
from matview.keys import group_key, row_key
from matview.operators.accumulators import RESULT_ERRORS, VARIANT_DEPENDENT, Accumulator
from matview.operators.bare_columns import BareColumns
from matview.operators.variants import count_variant, shown_variant
from matview.plan import AggSpec, Plan
from matview.storage.state import StateStore
from matview.zset import ZSet

GROUPS_OP = 0  # operator id of the per-group accumulator lists in the state table
EMPTY_KEY = group_key((), ())


def multiset_ops(plan: Plan) -> list[int]:
    """Per aggregate, the operator id of its ordered multiset: its own (position + 1), but
    MIN and MAX of one argument under one FILTER keep the same values (under BINARY: a collated
    one keeps its own, by (class, rowid)), so the later ones read the first one's multiset
    (`MIN(x), MAX(x)` store and update every value once, not twice).
    The front end gives them one stage-1 column (`SelectList.aggregate`); plans stored before
    gave each its own, and keep a multiset each."""
    first: dict[tuple[Any, Any], int] = {}
    ops = []
    for index, spec in enumerate(plan.aggs):
        if spec.func in ("min", "max") and not spec.distinct and spec.collation == "BINARY":
            ops.append(first.setdefault((spec.arg, spec.filter), index + 1))
        else:
            ops.append(index + 1)
    return ops


class Aggregate:
    """State per group: [row count, group values, emitted row or None, acc_0, acc_1, …]."""

    def __init__(self, view: str, plan: Plan, evaluator: Evaluator) -> None:
        self.view, self.plan, self.evaluator = view, plan, evaluator
        #: where set (one rowid table: `Circuit`), the GROUP BY values SQLite shows for a group
        #: whose values have several variants ('a' and 'A' under NOCASE): its first row's, in
        #: rowid order (a table scan's); None when it cannot tell
        self.first_variant: Callable[[StateStore, list[Any]], list[Any] | None] | None = None
        self.k = plan.group_count
        self._extremes = any(a.func in ("min", "max") for a in plan.aggs)
        #: whether the view shows a group's values (or computes with them): which variant it
        #: shows matters only then
        self._shows_groups = any(source == "group" for source, _ in plan.outputs) or any(
            c.source[0] == "group" for c in plan.post_columns
        )
        self.empty_key = EMPTY_KEY
        self.accumulators = [
            Accumulator(spec, op=op, coerce=evaluator.numeric_sum_term, owns_multiset=op == index + 1)
            for index, (spec, op) in enumerate(zip(plan.aggs, multiset_ops(plan), strict=True))
        ]
        #: bare columns beside one MIN/MAX: that aggregate's and their results (`bare_columns`)
        self.bare_columns = BareColumns.of(plan)
        self._own = [i not in (self.bare_columns.covers if self.bare_columns else ()) for i in range(len(plan.aggs))]

    def fresh_group(self, values: Sequence[Any]) -> list[Any]:
        """[row count, shown group values, emitted row, acc…, variants of the group values]"""
        return [0, list(values), None, *(a.initial() for a in self.accumulators), None]

    def mergeable(self) -> bool:
        """Whether partial group states of disjoint parts of the input merge exactly (`merge`)."""
        exact = self.plan.exact_groups and self.plan.rowid_column is None and not self.plan.extreme_row
        return exact and all(a.mergeable() for a in self.accumulators)

    def merge(self, a: list[Any], b: list[Any]) -> list[Any]:
        """One group's state over two disjoint bags of rows (two partitions of a CREATE), from
        the states each left: the row counts and accumulators add; the emitted row is reset
        (`emit` computes it). Exact groups only: their group values are identical."""
        if not self.mergeable():
            raise ValueError(f"view {self.view}: its group states cannot be merged")
        accs = [acc.merge(a[3 + i], b[3 + i]) for i, acc in enumerate(self.accumulators)]
        return [a[0] + b[0], a[1], None, *accs, None]

    def step(self, rows: Sequence[tuple[Any, ...]], store: StateStore) -> ZSet[bytes]:
        """Apply stage-1 delta rows (group values…, aggregate inputs…, weight); return ΔO."""
        k, plan = self.k, self.plan
        collations = plan.group_collations
        touched: dict[bytes, list[Any]] = {}
        if not plan.has_group_by:
            touched[EMPTY_KEY] = self.load(store, EMPTY_KEY, ())
        rowid_column = plan.rowid_column
        track_variants = not plan.exact_groups
        specs = [
            (i, a, a.spec.arg, a.spec.filter, _compared(a.spec))
            for i, a in enumerate(self.accumulators)
            if self._own[i]
        ]
        bare_columns = self.bare_columns
        for row in rows:
            weight = row[-1]
            values = row[:k]
            key = group_key(values, collations) if k else EMPTY_KEY
            group = touched.get(key)
            if group is None:
                group = touched[key] = self.load(store, key, values)
            group[0] += weight
            if track_variants:
                group[-1] = count_variant(group[-1], values, weight)
            rowid = row[rowid_column] if rowid_column is not None else None
            for index, acc, arg, filt, compared in specs:
                if filt is not None and not row[filt]:
                    continue
                value = row[arg] if arg is not None else None
                if compared and value is not None:
                    value = (value, *(row[c] for c in compared))
                group[3 + index] = acc.update(group[3 + index], value, weight, store, key, rowid)
            if bare_columns is not None:
                bare_columns.update(store, key, row, weight, rowid)
        return self.emit(touched, store)

    def read_groups(self, store: StateStore, keys: list[bytes]) -> None:
        """Read the states of many groups at once (`load` of each is then free)."""
        store.read_many(GROUPS_OP, keys)

    def load(self, store: StateStore, key: bytes, values: Sequence[Any]) -> list[Any]:
        group = store.get(GROUPS_OP, key)
        return group if group is not None else self.fresh_group(values)

    def emit(self, touched: dict[bytes, list[Any]], store: StateStore) -> ZSet[bytes]:
        plan = self.plan
        delta: ZSet[bytes] = ZSet()
        live: list[tuple[bytes, list[Any], list[Any]]] = []
        for key, group in touched.items():
            if group[2] is not None:
                delta.add(row_key(group[2]), -1)
            if group[0] < 0:
                raise RuntimeError(f"view {self.view}: group weight became negative")
            if group[0] == 0 and plan.has_group_by:
                store.put(GROUPS_OP, key, None)
                continue
            results = [
                a.result(group[3 + i], store, key) if self._own[i] else None for i, a in enumerate(self.accumulators)
            ]
            spelled = self.bare_columns.fill(results, store, key) if self.bare_columns is not None else None
            ambiguous = False
            if spelled is not None:
                group[1] = spelled  # (the extreme row's spelling: `bare_columns`)
            elif not plan.exact_groups:
                variants = group[-1]
                first = None
                if variants and len(variants) > 1 and self._shows_groups:
                    # SQLite shows the first row's variant of a scan (one rowid table: the least
                    # rowid) — or, beside MIN/MAX, the extreme row's (kept where `Plan.extreme_row`);
                    # elsewhere the scan order is the join's or the plan's, which matview does not know
                    if self.first_variant is None or self._extremes:
                        ambiguous = True
                    else:
                        first = self.first_variant(store, group[1])
                group[1] = first if first is not None else shown_variant(group[1], variants)
            if ambiguous:
                results = [VARIANT_DEPENDENT for _ in results] or [VARIANT_DEPENDENT]
            live.append((key, group, results))
        evaluated: list[tuple[list[Any], bool]] = []
        if plan.post_exprs or plan.having:
            evaluated = self.evaluator.evaluate(
                self.view, plan, [self._post_row(group, results) for _, group, results in live]
            )
        for position, (key, group, results) in enumerate(live):
            exprs, keep = evaluated[position] if evaluated else ([], True)
            failed = next((r for r in results if type(r) is bytes and r in RESULT_ERRORS), None)
            row = None
            if failed is VARIANT_DEPENDENT:
                row = [failed] * len(plan.outputs)  # (the GROUP BY values themselves are in doubt)
                delta.add(row_key(row), 1)
            elif failed is not None:
                # SQLite's SELECT raises for the whole query, whatever the HAVING or the select
                # list use of the failed aggregate: the group's aggregates and expressions are
                # the error (its GROUP BY values stay, so a filter on them finds it), or every
                # column where it shows none, so that reading the row raises it
                row = [failed if source != "group" else group[1][index] for source, index in plan.outputs]
                if failed not in row:
                    row = [failed] * len(row)
                delta.add(row_key(row), 1)
            elif keep:
                row = [self._output(source, index, group, results, exprs) for source, index in plan.outputs]
                delta.add(row_key(row), 1)
            group[2] = row
            store.put(GROUPS_OP, key, group)
        return delta

    def _post_row(self, group: list[Any], results: list[Any]) -> list[Any]:
        return [
            group[1][c.source[1]] if c.source[0] == "group" else results[c.source[1]] for c in self.plan.post_columns
        ]

    @staticmethod
    def _output(source: str, index: int, group: list[Any], results: list[Any], exprs: list[Any]) -> Any:
        if source == "group":
            return group[1][index]
        if source == "agg":
            return results[index]
        return exprs[index]


def _compared(spec: AggSpec) -> tuple[int, ...]:
    """The stage-1 columns GROUP_CONCAT(DISTINCT x) or GROUP_CONCAT(x ORDER BY …) compares, which
    its state keeps beside each text (`accumulators._ordered_parts`)."""
    return (*(() if spec.key is None else (spec.key,)), *(term[0] for term in spec.order))
