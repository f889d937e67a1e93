"""The stage-1 SELECTs of a view as delta terms (DBSP Thm 3.3, 3.4): what SQLite evaluates.

Over one table stage 1 is linear (Q^Δ = Q): SQLite evaluates it over the delta rows, carrying
each row's weight along. Over a join it is multilinear in its occurrences (telescoped): for the
changed occurrences c₁ < … < c_k

    ΔQ = Σᵢ Q[ X_j ← X_j^new (j < cᵢ),  X_cᵢ ← ΔX_cᵢ,  X_j ← X_j^old (j > cᵢ, changed) ]

one SELECT per changed occurrence, the weight the product of the weights of its non-new inputs.
The base tables are the integrals I(X) — X^new, with their indexes — and old states are never
stored: X^old = X^new ⊎ (−ΔX), a UNION ALL inside the SQL. Outer joins add their padding terms
(rule R2); partition recompute builds its own reach queries (`operators.partition`).
"""

from __future__ import annotations

from typing import Any

from matview import names
from matview.names import fold, quote
from matview.operators import partition, scalar_values
from matview.plan import Plan, render
from matview.storage.schema import ROWID_NAMES
from matview.upstream import UpstreamSource

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

    def parameters(self, ranges: Ranges) -> dict[str, Any]:
        """Each table's range of pending changes; the values of `scalar_values`, unset."""
        params: dict[str, Any] = scalar_values.default_parameters(self.plan)
        for number, table in enumerate(self.tables):
            lo, hi = ranges.get(table, (0, 0))
            params[f"lo{number}"], params[f"hi{number}"] = lo, hi
        return params
