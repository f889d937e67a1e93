"""A view's incremental circuit: ΔV = Q^Δ(ΔI), built from its Plan by the chain rule.

    ΔI ──σ/π/⋈ (stage 1, run by SQLite over the delta logs and base tables)──▶ [Aggregate] ──▶ [Distinct] ──▶ ΔV

Stage 1 is the user's FROM/WHERE/SELECT. Over one table it is linear (Thm 3.3: Q^Δ = Q): SQLite
evaluates it over the delta rows, carrying each row's weight along. Over a join it is
multilinear in its occurrences (Thm 3.4, telescoped): for the changed occurrences c₁ < … < c_k

    ΔQ = Σᵢ Q[ X_j ← X_j^new (j < cᵢ),  X_cᵢ ← ΔX_cᵢ,  X_j ← X_j^old (j > cᵢ, changed) ]

one SELECT per changed occurrence, the weight the product of the weights of its non-new
inputs. The base tables are the integrals I(X) — X^new, with their indexes — and old states
are never stored: X^old = X^new ⊎ (−ΔX), a UNION ALL inside the SQL. A self-join's two
occurrences are two inputs with the same Δ, so a change is never counted twice (ΔA ⋈ ΔB is in
exactly one term). The same stage-1 SELECT over the base tables alone is the initial snapshot
(CREATE, REFRESH): the whole database as one delta from the empty state.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import apsw

from matview.db import column_count
from matview.delta_terms import DeltaTerms, Ranges
from matview.evaluator import Evaluator
from matview.keys import group_key, row_key, row_of
from matview.names import fold, quote
from matview.operators import aggregate_sql, partition, whole
from matview.operators.aggregate import Aggregate
from matview.operators.distinct import Distinct
from matview.operators.set_operation import SetOperation
from matview.plan import Plan, render
from matview.storage.scan_order import shows_first_rows
from matview.storage.state import StateStore
from matview.zset import ZSet

#: classes with several variants whose first row a fold asks for one by one; past this, all at once
_FIRST_ROWS_ONE_BY_ONE = 16

#: deltas at least this large are aggregated set at a time by SQLite (see aggregate_sql)
BULK_ROWS = 64


class Circuit:
    def __init__(self, view: str, plan: Plan, evaluator: Evaluator) -> None:
        self.view, self.plan, self.evaluator = view, plan, evaluator
        self.aggregate = Aggregate(view, plan, evaluator) if plan.kind == "aggregate" else None
        self.distinct = (
            Distinct(tuple(c.collation for c in plan.columns), plan.exact_distinct) if plan.distinct else None
        )
        self.set_operation = SetOperation(plan.set_operation, len(plan.arms)) if plan.set_operation else None
        self.delta_terms = DeltaTerms(plan)
        #: its tables by SQLite's case-blind names: a table another client renamed to another case
        #: is spelled one way in the catalog's list (the pending ranges) and another in the plan
        self._spelled = {fold(table): table for table in self.delta_terms.tables}
        self.base_sql = self.delta_terms.base_sql
        one_rowid_table = (
            len(plan.sources) == 1
            and not plan.upstreams
            and not plan.root_recompute
            and not plan.arms
            and bool(self.delta_terms.columns_of(plan.sources[0])[1])
        )
        self._first_row_sql: dict[int, str] = {}
        self._first_rows_sql: dict[int, str] = {}
        #: a GROUP BY or DISTINCT class with several variants shows its least rowid's (SQLite's
        #: table scan meets them in rowid order; an index that would not is refused, `scan_order`)
        self.first_rows = shows_first_rows(plan) and one_rowid_table
        if self.first_rows and self.aggregate is not None:
            self.aggregate.first_variant = self._first_row
        if self.first_rows and self.distinct is not None:
            self.distinct.first_variant = self._first_row

    def _first_row(self, store: StateStore, values: list[Any]) -> list[Any] | None:
        """The first stage-1 columns, as many as `values`, of the first row in rowid order among
        those whose columns equal `values` (under their collations): the variant SQLite shows
        for a GROUP BY or DISTINCT class ('a' and 'A' under NOCASE) when it scans the table.
        One query per class; past `_FIRST_ROWS_ONE_BY_ONE` classes in one fold, the first row
        of every class in one scan (a query per class could scan the table each time)."""
        conn, plan, count = store.conn, self.plan, len(values)
        if self._first_row_sql.get(count) is None:
            table = plan.sources[0]
            rowid = self.delta_terms.columns_of(table)[1][0]
            rows = render(plan.stage1, weight=f"{quote(plan.aliases[0])}.{rowid}", source0=f"main.{quote(table)}")
            width = column_count(conn, rows) - 1  # (the last: the rowid)
            columns = ", ".join([*(f"c{i}" for i in range(width)), "__dbsp_rid"])
            shown = ", ".join(f"c{i}" for i in range(count))
            match = " AND ".join(f"c{i} IS ?" for i in range(count))
            head = f"WITH __dbsp_f({columns}) AS ({rows}) SELECT {shown} FROM __dbsp_f"
            self._first_row_sql[count] = f"{head} WHERE {match} ORDER BY __dbsp_rid LIMIT 1"
            self._first_rows_sql[count] = (
                f"{head} WHERE __dbsp_rid IN (SELECT min(__dbsp_rid) FROM __dbsp_f GROUP BY {shown})"
            )
        collations = self._class_collations(count)
        memo = store.memo.setdefault(("first rows", count), {"asked": 0, "all": None})
        memo["asked"] += 1
        if memo["all"] is None and memo["asked"] > _FIRST_ROWS_ONE_BY_ONE:
            memo["all"] = {group_key(row, collations): list(row) for row in conn.execute(self._first_rows_sql[count])}
        if memo["all"] is not None:
            return memo["all"].get(group_key(values, collations))
        found = conn.execute(self._first_row_sql[count], tuple(values)).fetchone()
        return None if found is None else list(found)

    def _class_collations(self, count: int) -> tuple[str, ...]:
        """The collations GROUP BY (its first `count` stage-1 columns) or DISTINCT compares by."""
        if self.aggregate is not None:
            return self.plan.group_collations[:count]
        return tuple(c.collation for c in self.plan.columns)[:count]

    @property
    def base_rows_sql(self) -> str:
        """The rows of a view without aggregate or DISTINCT over the base tables, as columns
        c0…: the stage-1 SELECT less its trailing weight column (the initial snapshot)."""
        width = len(self.plan.columns)
        names_ = ", ".join(f"c{i}" for i in range(width + 1))
        kept = ", ".join(f"c{i}" for i in range(width))
        return f"WITH __dbsp_stage1({names_}) AS ({self.base_sql}) SELECT {kept} FROM __dbsp_stage1"

    def stage1_delta(self, conn: apsw.Connection, ranges: Ranges, applied: bool = True) -> list[tuple[Any, ...]]:
        """Stage-1 rows (with weights) of the pending changes `ranges`."""
        params = self.delta_terms.parameters(ranges)
        terms = self.delta_terms.terms(frozenset(ranges), applied)
        if len(self.plan.sources) == 1 and not self.plan.upstreams:
            # one table's log, scanned in sequence order: a row's −1 never comes before its +1
            return conn.execute(terms[0], params).fetchall()
        # A join term's rows come in the join's loop order (SQLite may scan another table and
        # probe the log), and several terms emit cancelling pairs (X^old = X^new ⊎ −ΔX); MIN/MAX
        # trust that a −1 is for a row already present, so consolidate first (by identity:
        # 3 and 3.0 stay apart).
        consolidated: ZSet[bytes] = ZSet()
        for term in terms:
            for row in conn.execute(term, params):
                consolidated.add(row_key(row[:-1]), row[-1])
        return [(*row_of(key), weight) for key, weight in consolidated.items()]

    def stage1_base(self, conn: apsw.Connection) -> Iterable[tuple[Any, ...]]:
        return conn.execute(self.base_sql)

    def writes_while_computing(self, pending: int) -> bool:
        """Whether computing ΔV of `pending` delta rows writes state as it goes (so a fold that
        raises must roll it back): partition recompute writes its kept rows; a delta that large
        is aggregated set at a time, which writes the ordered state (otherwise every change
        waits in the StateStore)."""
        if self.plan.root_recompute:
            return True
        return pending >= BULK_ROWS and self.aggregate is not None

    def delta(self, conn: apsw.Connection, ranges: Ranges, store: StateStore) -> ZSet[bytes]:
        """ΔV of the pending changes `ranges` (all of them at once: folding table by table
        would count ΔA ⋈ ΔB twice). The fold, which writes, has applied the ΔV of every
        upstream view first; a reader, which does not, reads their storage as it was."""
        spelled = self._spelled
        ranges = {spelled[fold(table)]: span for table, span in ranges.items() if fold(table) in spelled}
        if not ranges:
            return ZSet()
        if self.plan.whole:
            if store.writable:  # (a fold: the plan its rows are computed under, for `replanned_otherwise`)
                whole.keep_query_plan(conn, store, self.plan.whole)
            return whole.whole_delta(conn, self.view, self.plan)
        if self.plan.root_recompute:
            return self.step(partition.root_delta(conn, self.delta_terms, ranges, store), store)
        applied = store.writable
        if sum(hi - lo for lo, hi in ranges.values()) >= BULK_ROWS and store.writable:
            source = " UNION ALL ".join(self.delta_terms.terms(frozenset(ranges), applied))
            found = self._sql_aggregate(conn, source, self.delta_terms.parameters(ranges), store)
            if found is not None:
                return found
        return self.step(self.stage1_delta(conn, ranges, applied), store)

    def populate(self, conn: apsw.Connection, store: StateStore) -> ZSet[bytes] | None:
        """The initial snapshot: the whole base table as one delta from the empty state.
        None when the view's rows were written straight into its table by SQLite."""
        if self.plan.root_recompute:
            return self.step(partition.populate_roots(conn, self.delta_terms, store), store)
        if self.plan.whole:
            whole.keep_query_plan(conn, store, self.plan.whole)
            return whole.whole_rows(conn, self.plan)
        found = self._sql_aggregate(conn, self.base_sql, (), store)
        if found is not None:
            return found
        if (
            self.aggregate is None
            and self.distinct is None
            and self.set_operation is None
            and not self.plan.arms
            and not self.plan.upstreams  # (a row of an upstream view may stand for several)
        ):
            return None  # (a UNION ALL read as a FROM-subquery would take its first arm's affinity)
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
        # rows whose changes cancel may still change the first row of a DISTINCT class
        touched: set[bytes] | None = set() if self.distinct is not None and self.distinct.first_variant else None
        if self.aggregate is not None:
            delta = self.aggregate.step(list(rows), store)
        else:
            delta = ZSet()
            for row in rows:
                key = row_key(row[:-1])
                delta.add(key, row[-1])
                if touched is not None:
                    touched.add(key)
        if self.set_operation is not None:
            delta = self.set_operation.step(delta, store)
        if self.distinct is not None:
            delta = self.distinct.step(delta, store, touched or ())
        return delta
