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
import apsw.ext

from matview import names
from matview.evaluator import Evaluator
from matview.keys import row_key, row_of
from matview.names import fold, quote
from matview.operators import aggregate_sql, partition
from matview.operators.aggregate import Aggregate
from matview.operators.distinct import Distinct
from matview.operators.set_operation import SetOperation
from matview.plan import Plan, render
from matview.storage.schema import ROWID_NAMES
from matview.storage.state import StateStore
from matview.upstream import UpstreamSource
from matview.zset import ZSet

#: deltas at least this large are aggregated set at a time by SQLite (see aggregate_sql)
BULK_ROWS = 64

#: pending changes of a view: per base table, the delta-log range lo < seq <= hi
Ranges = dict[str, tuple[int, int]]


class DeltaTerms:
    """The stage-1 SELECTs of a plan: over the base tables (the snapshot), and the delta terms
    of each set of changed tables."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.tables = plan.tables
        self.upstream = {u.name: UpstreamSource(u) for u in plan.upstreams}
        self._delta_sources = [self._delta_source(number, table) for number, table in enumerate(self.tables)]
        #: per (changed tables, whether upstream views' storage already holds their ΔV)
        self._terms: dict[tuple[frozenset[str], bool], list[str]] = {}
        #: `partition.root_queries` per set of changed tables and `applied` (SQL text only: ranges are parameters)
        self.root_queries: dict[tuple[frozenset[str], bool], tuple[str | None, str, str]] = {}
        #: partition recompute: the number of stage-1 columns its kept rows hold (read once)
        self.kept_width: int | None = None
        placeholders = {f"source{i}": self._new_source(table, True) for i, table in enumerate(plan.sources)}
        # an upstream view's rows carry their multiplicity: the snapshot's weight is their product
        weights = {name: " * ".join(ws) or "1" for name, ws in self._weights_per_arm(set())}
        self.base_sql = render(plan.stage1, **weights, outer=plan.outer_kind, **placeholders)

    def _new_source(self, table: str, applied: bool) -> str:
        if table in self.upstream:
            return self.upstream[table].state(new=True, applied=applied)
        return f"main.{quote(table)}"

    def _weight_of(self, occurrence: int) -> str:
        weight = quote(names.WEIGHT)
        return weight if len(self.plan.sources) == 1 else f"{quote(self.plan.aliases[occurrence])}.{weight}"

    def _weights_per_arm(self, weighted: set[int]) -> list[tuple[str, list[str]]]:
        """Each arm's weight placeholder and the weights of its `weighted` occurrences (the
        non-new inputs of a term, and every upstream view's rows)."""
        chosen = sorted(weighted | {j for j, table in enumerate(self.plan.sources) if table in self.upstream})
        names_ = ["weight", *(f"weight{k}" for k in range(1, len(self.plan.arms)))]
        return [(name, [self._weight_of(j) for j in chosen if self._arm(j) == k]) for k, name in enumerate(names_)]

    def columns_of(self, table: str) -> tuple[list[str], list[str]]:
        """The user columns of a base table, and the names of its rowid no column shadows."""
        user = [c[0] for c in self.plan.signature(table) or ()]
        if table in self.plan.without_rowid:
            return user, []
        lowered = {fold(c) for c in user}
        return user, [a for a in ROWID_NAMES if a not in lowered]

    def table_columns(self, table: str) -> str:
        """The base table's columns as a delta source shows them, its rowid by a name no user
        column shadows (`rowid` may be a column of the table)."""
        user, rowids = self.columns_of(table)
        return ", ".join([*(quote(c) for c in user), *(f"{rowids[0]} AS {a}" for a in rowids)])

    def delta_source(self, table: str) -> str:
        """ΔX of base table `table` (the delta-log range of the pending changes)."""
        return self._delta_sources[self.tables.index(table)]

    def _delta_source(self, number: int, table: str) -> str:
        """ΔX: the table's pending delta rows, shaped like the table, with their weight."""
        if table in self.upstream:
            return self.upstream[table].delta()
        user, rowids = self.columns_of(table)
        rowid = quote(names.ROWID)
        columns = ", ".join([*(quote(c) for c in [*user, names.WEIGHT]), *(f"{rowid} AS {a}" for a in rowids)])
        seq = quote(names.SEQ)
        return (
            f"(SELECT {columns} FROM {quote(names.delta_table(table))} "
            f"WHERE {seq} > :lo{number} AND {seq} <= :hi{number})"
        )

    def _old_source(self, number: int, table: str, applied: bool = True) -> str:
        """X^old = X^new ⊎ (−ΔX), without storing it."""
        if table in self.upstream:
            return self.upstream[table].state(new=False, applied=applied)
        user, rowids = self.columns_of(table)
        values = self.table_columns(table)
        delta = self._delta_sources[number]
        pending = ", ".join([*(quote(c) for c in user), *rowids])
        return (
            f"(SELECT {values}, 1 AS {quote(names.WEIGHT)} FROM main.{quote(table)} "
            f"UNION ALL SELECT {pending}, -{quote(names.WEIGHT)} FROM {delta})"
        )

    def terms(self, changed: frozenset[str], applied: bool = True) -> list[str]:
        """The stage-1 SELECTs whose rows (with weights) sum to Δ(stage 1) when the tables
        `changed` have pending deltas: one per occurrence of a changed table. `applied`: the
        storage of upstream views already holds their ΔV (the fold), or not yet (a reader)."""
        found = self._terms.get((changed, applied))
        if found is not None:
            return found
        plan = self.plan
        if plan.outer_on or plan.root_recompute:
            if plan.outer_on:
                terms = self._outer_terms(changed)
            else:  # the SQL `partition` runs; here to be prepared and checked at CREATE
                reach, rows = partition.root_queries(self, changed, applied)
                terms = [rows] if reach is None else [rows, reach]
            self._terms[(changed, applied)] = terms
            return terms
        changed_at = [i for i, table in enumerate(plan.sources) if table in changed]
        terms = []
        for i in changed_at:
            placeholders: dict[str, str] = {}
            weighted: set[int] = set()
            for j, table in enumerate(plan.sources):
                number = self.tables.index(table)
                if self._arm(j) != self._arm(i):  # another arm of a UNION: empty, it adds nothing
                    placeholders[f"source{j}"] = self._empty_source(table)
                    continue
                if j == i:
                    placeholders[f"source{j}"] = self._delta_sources[number]
                elif j > i and j in changed_at:
                    placeholders[f"source{j}"] = self._old_source(number, table, applied)
                else:
                    placeholders[f"source{j}"] = self._new_source(table, applied)
                    continue
                weighted.add(j)
            # each arm's weight placeholder: this arm's product, "1" in the empty others
            weight_of_arm = {
                name: " * ".join(ws) if k == self._arm(i) else "1"
                for k, (name, ws) in enumerate(self._weights_per_arm(weighted))
            }
            terms.append(render(plan.stage1, **weight_of_arm, **placeholders))
        self._terms[(changed, applied)] = terms
        return terms

    def _empty_source(self, table: str) -> str:
        if table in self.upstream:
            return self.upstream[table].empty()
        return f"(SELECT {self.table_columns(table)} FROM main.{quote(table)} LIMIT 0)"

    def _arm(self, occurrence: int) -> int:
        """Which arm of a UNION an occurrence is in (0 for a simple SELECT)."""
        return sum(1 for start in self.plan.arms[1:] if start <= occurrence)

    def _outer_terms(self, changed: frozenset[str]) -> list[str]:
        """Δ(P ⟕ N) for an outer join of a preserved occurrence P and a nullable one N
        (`P LEFT JOIN N ON p`, or `N RIGHT JOIN P ON p`), telescoped over (P, N) (DBSP §7.5:
        the outer join is the inner join plus the padded antijoin):

            ΔP ⟕ N_new                                   linear in the preserved side
          + P_old ⋈ ΔN                                   the inner part (LEFT/RIGHT becomes JOIN)
          + Σ_{a ∈ P_old reached by ΔN} w(a)·([n_new(a) = 0] − [n_old(a) = 0])·pad(a)

        where n(a) counts a's matches in N (n_old = n_new − Σ weights of a's matches in ΔN: no
        old state is stored) and pad(a) is a's row with N's columns NULL — evaluated by SQLite
        with the user's own select list and WHERE over `a LEFT JOIN (N LIMIT 0)`, so IS NULL,
        COALESCE, CASE and COUNT(b.x) over padded rows are SQLite's. A row's padding can flip
        only if ΔN matches it: the term visits those rows alone (found from ΔN, by index).

        `A FULL JOIN B` pads both sides, each telescoped so that the padded side is always a
        real (new) state:

            ΔA ⟕ B_new  +  A_new ⟖ ΔB  −  ΔA ⋈ ΔB        the inner join, and the padding of Δ rows
          + Σ_{b ∈ B_old reached by ΔA} w(b)·([m_new(b) = 0] − [m_old(b) = 0])·pad(b)
          + Σ_{a ∈ A_old reached by ΔB} w(a)·([n_new(a) = 0] − [n_old(a) = 0])·pad(a)
        """
        plan = self.plan
        if plan.outer_kind == "FULL":
            return self._full_terms(changed)
        kept = 1 if plan.outer_kind == "RIGHT" else 0
        nulled = 1 - kept
        preserved = plan.sources[kept]
        terms: list[str] = []
        kept_changed = preserved in changed
        if kept_changed:
            terms.append(
                self._outer_term(kept, self._delta_of(kept), nulled, self._base(nulled), [kept], plan.outer_kind)
            )
        if plan.sources[nulled] not in changed:
            return terms
        old_kept = self._old_source(self.tables.index(preserved), preserved) if kept_changed else self._base(kept)
        weighted = [kept, nulled] if kept_changed else [nulled]
        terms.append(self._outer_term(kept, old_kept, nulled, self._delta_of(nulled), weighted, ""))
        terms.append(self._flip_term(kept, old_kept, kept_changed, nulled, plan.outer_key))
        return terms

    def _full_terms(self, changed: frozenset[str]) -> list[str]:
        plan = self.plan
        terms: list[str] = []
        a_changed, b_changed = plan.sources[0] in changed, plan.sources[1] in changed
        old = [
            self._old_source(self.tables.index(table), table) if table in changed else self._base(i)
            for i, table in enumerate(plan.sources[:2])
        ]
        if a_changed:
            terms.append(self._outer_term(0, self._delta_of(0), 1, self._base(1), [0], "LEFT"))
            terms.append(self._flip_term(1, old[1], b_changed, 0, plan.full_key))
        if b_changed:
            terms.append(self._outer_term(0, self._base(0), 1, self._delta_of(1), [1], "RIGHT"))
            terms.append(self._flip_term(0, old[0], a_changed, 1, plan.outer_key))
        if a_changed and b_changed:  # ΔA ⋈ ΔB is in both outer terms above: once is right
            terms.append(self._outer_term(0, self._delta_of(0), 1, self._delta_of(1), [0, 1], "", negate=True))
        return terms

    def _base(self, occurrence: int) -> str:
        return f"main.{quote(self.plan.sources[occurrence])}"

    def _delta_of(self, occurrence: int) -> str:
        return self._delta_sources[self.tables.index(self.plan.sources[occurrence])]

    def _outer_term(
        self,
        first: int,
        first_source: str,
        second: int,
        second_source: str,
        weighted: list[int],
        outer: str,
        negate: bool = False,
    ) -> str:
        """The stage-1 SELECT over two sources, the weights of `weighted` multiplied (an outer
        join's padded side is always a real state, never weighted: its padding needs real rows)."""
        weight = quote(names.WEIGHT)
        weights = [f"{quote(self.plan.aliases[o])}.{weight}" for o in weighted]
        sign = "-" if negate else ""
        sources = {f"source{first}": first_source, f"source{second}": second_source}
        return render(self.plan.stage1, weight=sign + " * ".join(weights), outer=outer, **sources)

    def _flip_term(
        self, kept: int, kept_source: str, kept_weighted: bool, nulled: int, key_columns: tuple[str, ...]
    ) -> str:
        """Σ over rows of `kept_source` that ΔN reaches: w·([n_new = 0] − [n_old = 0])·pad, where
        n counts a row's matches in N (n_old = n_new − the weights of its matches in ΔN)."""
        plan = self.plan
        kept_alias, nulled_alias = quote(plan.aliases[kept]), quote(plan.aliases[nulled])
        weight = quote(names.WEIGHT)
        on, nullable = plan.outer_on, plan.sources[nulled]
        delta_nulled = self._delta_of(nulled)
        matches = f"(SELECT count(*) FROM {self._base(nulled)} AS {nulled_alias} WHERE ({on}))"
        net = f"(SELECT coalesce(sum({nulled_alias}.{weight}), 0) FROM {delta_nulled} AS {nulled_alias} WHERE ({on}))"
        flip = f"(({matches} = 0) - ({matches} - {net} = 0))"
        key = ", ".join(f"{kept_alias}.{quote(k)}" for k in key_columns)  # a rowid name or the (NOT NULL) PK
        pairs = f"{delta_nulled} AS {nulled_alias} JOIN {kept_source} AS {kept_alias} ON ({on})"
        reached = f"({key}) IN (SELECT {key} FROM {pairs})"
        joiner = "AND" if plan.outer_where else "WHERE"
        empty_nulled = f"(SELECT {self.table_columns(nullable)} FROM {self._base(nulled)} LIMIT 0)"
        weights = [f"{kept_alias}.{weight}"] if kept_weighted else []
        sources = {f"source{kept}": kept_source, f"source{nulled}": empty_nulled}
        return render(
            plan.stage1,
            weight=" * ".join([*weights, flip]),
            outer=plan.outer_kind,
            reach=f" {joiner} {reached}",
            **sources,
        )

    def parameters(self, ranges: Ranges) -> dict[str, int]:
        params: dict[str, int] = {}
        for number, table in enumerate(self.tables):
            lo, hi = ranges.get(table, (0, 0))
            params[f"lo{number}"], params[f"hi{number}"] = lo, hi
        return params


class Circuit:
    def __init__(self, view: str, plan: Plan, evaluator: Evaluator) -> None:
        self.view, self.plan = view, plan
        self.aggregate = Aggregate(view, plan, evaluator) if plan.kind == "aggregate" else None
        self.distinct = (
            Distinct(tuple(c.collation for c in plan.columns), plan.exact_distinct) if plan.distinct else None
        )
        self.set_operation = SetOperation(plan.set_operation, len(plan.arms)) if plan.set_operation else None
        self.delta_terms = DeltaTerms(plan)
        self.base_sql = self.delta_terms.base_sql
        one_rowid_table = (
            len(plan.sources) == 1
            and not plan.upstreams
            and not plan.root_recompute
            and not plan.arms
            and bool(self.delta_terms.columns_of(plan.sources[0])[1])
        )
        self._first_row_sql: dict[int, str] = {}
        if self.aggregate is not None and not plan.exact_groups and one_rowid_table:
            self.aggregate.first_variant = self._first_row
        if self.distinct is not None and plan.kind == "rows" and not plan.exact_distinct and one_rowid_table:
            self.distinct.first_variant = self._first_row

    def _first_row(self, store: StateStore, values: list[Any]) -> list[Any] | None:
        """The first stage-1 columns, as many as `values`, of the first row in rowid order among
        those whose columns equal `values` (under their collations): the variant SQLite shows
        for a GROUP BY or DISTINCT class ('a' and 'A' under NOCASE) when it scans the table."""
        conn, plan, count = store.conn, self.plan, len(values)
        sql = self._first_row_sql.get(count)
        if sql is None:
            table = plan.sources[0]
            rowid = self.delta_terms.columns_of(table)[1][0]
            rows = render(plan.stage1, weight=f"{quote(plan.aliases[0])}.{rowid}", source0=f"main.{quote(table)}")
            width = len(apsw.ext.query_info(conn, rows).description or ()) - 1
            columns = ", ".join([*(f"c{i}" for i in range(width)), "__dbsp_rid"])
            shown = ", ".join(f"c{i}" for i in range(count))
            match = " AND ".join(f"c{i} IS ?" for i in range(count))
            sql = self._first_row_sql[count] = (
                f"WITH __dbsp_f({columns}) AS ({rows}) SELECT {shown} FROM __dbsp_f WHERE {match} "
                "ORDER BY __dbsp_rid LIMIT 1"
            )
        found = conn.execute(sql, tuple(values)).fetchone()
        return None if found is None else list(found)

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
        ranges = {table: span for table, span in ranges.items() if table in self.delta_terms.tables}
        if not ranges:
            return ZSet()
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
        touched: set[bytes] = set()  # rows whose changes cancel: the first row of a class may change
        if self.aggregate is not None:
            delta = self.aggregate.step(list(rows), store)
        else:
            delta = ZSet()
            for row in rows:
                key = row_key(row[:-1])
                delta.add(key, row[-1])
                touched.add(key)
        if self.set_operation is not None:
            delta = self.set_operation.step(delta, store)
        if self.distinct is not None:
            delta = self.distinct.step(delta, store, touched if self.distinct.first_variant else ())
        return delta
