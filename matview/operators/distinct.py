"""DISTINCT, incrementally (DBSP Prop. 4.7).

distinct is not linear, but its incremental version only needs the integral of its
input per row: a delta row changes the output exactly when the row's total weight
crosses zero. The state per row (under SQLite's equality: collation, 1 = 1.0) is its
total weight and the representative first seen; ΔO is +row on 0 → positive and −row
on positive → 0.
"""

from __future__ import annotations

from matview.keys import group_key, row_key, row_of
from matview.state import StateStore
from matview.zset import ZSet

DISTINCT_OP = 1_000_000  # operator id in the state table, clear of aggregate ids


class Distinct:
    def __init__(self, collations: tuple[str, ...]) -> None:
        self.collations = collations

    def step(self, delta: ZSet[bytes], store: StateStore) -> ZSet[bytes]:
        out: ZSet[bytes] = ZSet()
        for identity, weight in delta.items():
            row = row_of(identity)
            key = group_key(row, self.collations)
            state = store.get(DISTINCT_OP, key)
            count, representative = (0, list(row)) if state is None else state
            new = count + weight
            if count <= 0 < new:
                out.add(row_key(representative), 1)
            elif new <= 0 < count:
                out.add(row_key(representative), -1)
            store.put(DISTINCT_OP, key, None if new == 0 else [new, representative])
        return out
