"""INTERSECT and EXCEPT, incrementally (RELATIONAL.md R5: counted distinct).

Both are set operations over the arms' rows: a row is in `A INTERSECT B` when both arms have
it, in `A EXCEPT B` when only the first does (chains of one operator associate to the left:
A EXCEPT B EXCEPT C is A minus B minus C). Neither is linear, but like DISTINCT (Prop. 4.7) the
incremental version needs only the integral of each arm per row: the state keeps, per distinct
row, its count in every arm; a delta row changes the output exactly when the row's membership
flips. Rows compare by identity (1 and 1.0 apart), so the operator is used only where every
column has one variant per value (typed, BINARY), as SQLite's equality then is identity.
"""

from __future__ import annotations

from typing import Any

from matview.keys import row_key, row_of
from matview.storage.state import StateStore
from matview.zset import ZSet

SET_OPERATION_OP = 1_000_001  # operator id in the state table, clear of aggregate and DISTINCT ids


class SetOperation:
    def __init__(self, kind: str, arms: int) -> None:
        self.kind, self.arms = kind, arms

    def member(self, counts: list[int]) -> bool:
        if self.kind == "INTERSECT":
            return all(count > 0 for count in counts)
        return counts[0] > 0 and not any(count > 0 for count in counts[1:])  # EXCEPT

    def step(self, delta: ZSet[bytes], store: StateStore) -> ZSet[bytes]:
        """ΔO of stage-1 rows tagged with their arm (the last value)."""
        out: ZSet[bytes] = ZSet()
        for identity, weight in delta.items():
            row: tuple[Any, ...] = row_of(identity)
            key, arm = row_key(row[:-1]), int(row[-1])
            counts = list(store.get(SET_OPERATION_OP, key) or [0] * self.arms)
            before = self.member(counts)
            counts[arm] += weight
            after = self.member(counts)
            if before != after:
                out.add(key, 1 if after else -1)
            store.put(SET_OPERATION_OP, key, counts if any(counts) else None)
        return out
