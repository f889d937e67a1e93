"""DISTINCT, incrementally (DBSP Prop. 4.7).

distinct is not linear, but its incremental version only needs the integral of its
input per row: a delta row changes the output exactly when the row's total weight
crosses zero. The state per row (under SQLite's equality: collation, 1 = 1.0) is its
total weight and the representative first seen; ΔO is +row on 0 → positive and −row
on positive → 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from matview.keys import group_key, row_key, row_of
from matview.operators.accumulators import VARIANT_DEPENDENT
from matview.operators.variants import count_variant, shown_variant
from matview.storage.state import StateStore
from matview.zset import ZSet

DISTINCT_OP = 1_000_000  # operator id in the state table, clear of aggregate ids


class Distinct:
    def __init__(self, collations: tuple[str, ...], exact: bool) -> None:
        self.collations, self.exact = collations, exact
        #: where set (one rowid table: `Circuit`), the variant SQLite shows for a row with several
        #: (its first in rowid order); None when it cannot tell
        self.first_variant: Callable[[StateStore, list[Any]], list[Any] | None] | None = None

    def merge(self, a: list[Any], b: list[Any]) -> list[Any]:
        """One row's state over two disjoint bags of input rows: the weights add (exact
        DISTINCT only, whose representative is the one value of its class)."""
        if not self.exact:
            raise ValueError("DISTINCT states with several variants cannot be merged")
        return [a[0] + b[0], a[1], a[2]]

    def step(self, delta: ZSet[bytes], store: StateStore, touched: Iterable[bytes] = ()) -> ZSet[bytes]:
        """ΔO of ΔI; `touched`: rows whose changes cancelled in ΔI (with `first_variant`, the
        row a class shows may still change: its first row may have gone or come)."""
        out: ZSet[bytes] = ZSet()
        items = list(delta.items())
        items += [(identity, 0) for identity in touched if not delta.weight(identity)]
        for identity, weight in items:
            row = row_of(identity)
            key = group_key(row, self.collations)
            state = store.get(DISTINCT_OP, key)
            if weight == 0 and (state is None or not state[2] or len(state[2]) < 2):
                continue  # (one variant or none: the row it shows cannot change)
            count, shown, variants = (0, list(row), None) if state is None else state
            new = count + weight
            if not self.exact:
                variants = count_variant(variants, row, weight)
            if count > 0:
                out.add(row_key(shown), -1)
            if new > 0:
                if not self.exact:
                    first = None
                    if variants and len(variants) > 1:
                        if self.first_variant is None:
                            # which variant SQLite shows follows a scan order matview does not know
                            first = [VARIANT_DEPENDENT] * len(row)
                        else:
                            first = self.first_variant(store, list(row))
                    shown = first if first is not None else shown_variant(shown if count > 0 else row, variants)
                out.add(row_key(shown), 1)
            store.put(DISTINCT_OP, key, None if new == 0 else [new, shown, variants])
        return out
