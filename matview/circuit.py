"""A view's incremental circuit: ΔV = Q^Δ(ΔI), built from its Plan by the chain rule.

    ΔI ──σ/π (stage 1, run by SQLite over the delta log)──▶ [Aggregate] ──▶ [Distinct] ──▶ ΔV

Stage 1 is linear (Thm 3.3: Q^Δ = Q), so SQLite evaluates the view's own WHERE and
expressions over the delta rows, carrying each row's weight along. The same stage-1
SELECT over the base table itself yields the initial snapshot (CREATE, REFRESH): the
whole table as one delta from the empty state.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import apsw

from matview import names
from matview.evaluator import Evaluator
from matview.keys import row_key
from matview.names import quote
from matview.operators import aggregate_sql
from matview.operators.aggregate import Aggregate
from matview.operators.distinct import Distinct
from matview.plan import Plan, render
from matview.schema import ROWID_NAMES
from matview.state import StateStore
from matview.zset import ZSet

#: deltas at least this large are aggregated set at a time by SQLite (see aggregate_sql)
BULK_ROWS = 64


class Circuit:
    def __init__(self, view: str, plan: Plan, evaluator: Evaluator) -> None:
        self.view, self.plan = view, plan
        self.aggregate = Aggregate(view, plan, evaluator) if plan.kind == "aggregate" else None
        self.distinct = (
            Distinct(tuple(c.collation for c in plan.columns), plan.exact_distinct) if plan.distinct else None
        )
        user_columns = [c[0] for c in plan.base_signature]
        lowered = {c.lower() for c in user_columns}
        aliases = [f"{quote(names.ROWID)} AS {quote(a)}" for a in ROWID_NAMES if a not in lowered]
        delta = (
            f"(SELECT {', '.join(quote(c) for c in [*user_columns, names.WEIGHT])}"
            f"{''.join(', ' + a for a in aliases)} FROM {quote(names.delta_table(plan.table))} "
            f"WHERE {quote(names.SEQ)} > :lo AND {quote(names.SEQ)} <= :hi)"
        )
        self.delta_sql = render(plan.stage1, source=delta, weight=quote(names.WEIGHT))
        self.base_sql = render(plan.stage1, source=f"main.{quote(plan.table)}", weight="1")

    @property
    def base_rows_sql(self) -> str:
        """The rows of a view without aggregate or DISTINCT over the base table, as columns
        c0…: the stage-1 SELECT less its trailing weight column (the initial snapshot)."""
        width = len(self.plan.columns)
        names_ = ", ".join(f"c{i}" for i in range(width + 1))
        kept = ", ".join(f"c{i}" for i in range(width))
        return f"WITH __dbsp_stage1({names_}) AS ({self.base_sql}) SELECT {kept} FROM __dbsp_stage1"

    def stage1_delta(self, conn: apsw.Connection, lo: int, hi: int) -> list[tuple[Any, ...]]:
        """Stage-1 rows of the deltas with lo < seq <= hi."""
        return conn.execute(self.delta_sql, {"lo": lo, "hi": hi}).fetchall()

    def stage1_base(self, conn: apsw.Connection) -> Iterable[tuple[Any, ...]]:
        return conn.execute(self.base_sql)

    def delta(self, conn: apsw.Connection, lo: int, hi: int, store: StateStore) -> ZSet[bytes]:
        """ΔV of the deltas with lo < seq <= hi."""
        if hi - lo >= BULK_ROWS and store.writable:
            found = self._sql_aggregate(conn, self.delta_sql, {"lo": lo, "hi": hi}, store)
            if found is not None:
                return found
        return self.step(self.stage1_delta(conn, lo, hi), store)

    def populate(self, conn: apsw.Connection, store: StateStore) -> ZSet[bytes] | None:
        """The initial snapshot: the whole base table as one delta from the empty state.
        None when the view's rows were written straight into its table by SQLite."""
        found = self._sql_aggregate(conn, self.base_sql, (), store)
        if found is not None:
            return found
        if self.aggregate is None and self.distinct is None:
            return None
        return self.step(self.stage1_base(conn), store)

    def _sql_aggregate(self, conn: apsw.Connection, source: str, params: Any, store: StateStore) -> ZSet[bytes] | None:
        if self.aggregate is None or not aggregate_sql.eligible(self.aggregate):
            return None
        delta = aggregate_sql.sql_step(self.aggregate, conn, source, params, store)
        if delta is not None and self.distinct is not None:
            delta = self.distinct.step(delta, store)
        return delta

    def step(self, rows: Iterable[tuple[Any, ...]], store: StateStore) -> ZSet[bytes]:
        """Push stage-1 rows (values…, weight) through the rest of the circuit; ΔV."""
        if self.aggregate is not None:
            delta = self.aggregate.step(list(rows), store)
        else:
            delta = ZSet()
            for row in rows:
                delta.add(row_key(row[:-1]), row[-1])
        if self.distinct is not None:
            delta = self.distinct.step(delta, store)
        return delta
