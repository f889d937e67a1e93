"""Z-sets: finite maps from rows to non-zero integer weights (DBSP §4, Table 1).

A Z-set is a bag with negative multiplicities allowed. Z-sets form an abelian group
under `+` (weights add pointwise, zero weights vanish) with `-` as inverse; every DBSP
stream value here is one. An *indexed* Z-set groups a Z-set by a key (Feldera's
"indexed Z-sets"), which is what GROUP BY and joins consume.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Generic, TypeVar

Row = TypeVar("Row", bound=Hashable)
Key = TypeVar("Key", bound=Hashable)


class ZSet(Generic[Row]):
    """A consolidated Z-set: every stored weight is non-zero."""

    __slots__ = ("_weights",)

    def __init__(self, items: Iterable[tuple[Row, int]] = ()) -> None:
        self._weights: dict[Row, int] = {}
        for row, weight in items:
            self.add(row, weight)

    @classmethod
    def from_counts(cls, counts: dict[Row, int]) -> ZSet[Row]:
        """The Z-set of a map of weights (a `collections.Counter`), zero weights dropped: built
        at C speed where `add` per row would be Python per row (a whole recompute's rows)."""
        result: ZSet[Row] = cls()
        result._weights = {row: weight for row, weight in counts.items() if weight}
        return result

    def add(self, row: Row, weight: int = 1) -> None:
        """Add `weight` to `row`'s weight, dropping the row when it reaches zero."""
        if not weight:
            return
        total = self._weights.get(row, 0) + weight
        if total:
            self._weights[row] = total
        else:
            del self._weights[row]

    def weight(self, row: Row) -> int:
        return self._weights.get(row, 0)

    def items(self) -> Iterator[tuple[Row, int]]:
        return iter(self._weights.items())

    def __iter__(self) -> Iterator[Row]:
        return iter(self._weights)

    def __len__(self) -> int:
        return len(self._weights)

    def __bool__(self) -> bool:
        return bool(self._weights)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ZSet) and self._weights == other._weights

    def __repr__(self) -> str:
        return f"ZSet({self._weights!r})"

    def __add__(self, other: ZSet[Row]) -> ZSet[Row]:
        result: ZSet[Row] = ZSet(self.items())
        for row, weight in other.items():
            result.add(row, weight)
        return result

    def __neg__(self) -> ZSet[Row]:
        return ZSet((row, -weight) for row, weight in self.items())

    def __sub__(self, other: ZSet[Row]) -> ZSet[Row]:
        return self + (-other)

    def is_set(self) -> bool:
        """True when every weight is 1 (the Z-set is a set, DBSP Def. 4.3)."""
        return all(weight == 1 for weight in self._weights.values())

    def is_positive(self) -> bool:
        """True when no weight is negative (the Z-set is a bag)."""
        return all(weight > 0 for weight in self._weights.values())

    def distinct(self) -> ZSet[Row]:
        """DBSP's distinct: weight 1 for every positive row, the rest dropped (Def. 4.4)."""
        return ZSet((row, 1) for row, weight in self.items() if weight > 0)

    def map(self, function: Callable[[Row], Hashable]) -> ZSet[Hashable]:
        """Apply `function` to every row, adding weights of rows that map together (linear)."""
        result: ZSet[Hashable] = ZSet()
        for row, weight in self.items():
            result.add(function(row), weight)
        return result

    def filter(self, predicate: Callable[[Row], bool]) -> ZSet[Row]:
        """Keep the rows satisfying `predicate` (linear, Thm 3.3)."""
        return ZSet((row, weight) for row, weight in self.items() if predicate(row))

    def index_by(self, key: Callable[[Row], Key]) -> IndexedZSet[Key, Row]:
        """Group rows by `key` into an indexed Z-set."""
        indexed: IndexedZSet[Key, Row] = IndexedZSet()
        for row, weight in self.items():
            indexed.add(key(row), row, weight)
        return indexed


class IndexedZSet(Generic[Key, Row]):
    """A map from keys to non-empty Z-sets: the input of GROUP BY and of joins."""

    __slots__ = ("_groups",)

    def __init__(self) -> None:
        self._groups: dict[Key, ZSet[Row]] = {}

    def add(self, key: Key, row: Row, weight: int = 1) -> None:
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = ZSet()
        group.add(row, weight)
        if not group:
            del self._groups[key]

    def group(self, key: Key) -> ZSet[Row]:
        return self._groups.get(key, ZSet())

    def items(self) -> Iterator[tuple[Key, ZSet[Row]]]:
        return iter(self._groups.items())

    def keys(self) -> Iterator[Key]:
        return iter(self._groups)

    def __len__(self) -> int:
        return len(self._groups)

    def flatten(self) -> ZSet[Row]:
        """Forget the index: the Z-set of all rows (linear)."""
        result: ZSet[Row] = ZSet()
        for group in self._groups.values():
            for row, weight in group.items():
                result.add(row, weight)
        return result
