"""Per-group accumulators of SQLite's aggregate functions (DBSP §7.2–7.4).

COUNT, SUM, TOTAL and AVG are linear: their state is a group element that a delta
row adds to with its weight, so deletes are subtraction (§7.2). MIN and MAX are not
invertible: they keep the group's values as an ordered multiset (`StateStore.adjust`)
and re-seek only when the current extreme is deleted. DISTINCT aggregates keep a
multiset of values and feed the inner aggregate only on 0↔positive transitions
(the distinct rule of Prop. 4.7 applied per group). GROUP_CONCAT keeps the values
ordered by base rowid, the order SQLite's table scan produces; with DISTINCT it shows each
value's first occurrence in that order, and with ORDER BY it sorts them (SQLite's sort is
stable: ties stay in scan order), so each entry then also holds the compared values. Over a
join (ORDER BY required, deciding the text of ties) an entry is keyed by its values.

Sums are exact: integers as Python ints, reals as integers scaled by 2**1074 (every
double is a multiple of 2**-1074), so subtraction never drifts. The result is the
correctly rounded exact sum, which is what SQLite's Kahan–Babuska–Neumaier sum
returns except in pathological cancellations.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import apsw

from matview.keys import SQLITE_INT_MAX, SQLITE_INT_MIN, canonical
from matview.plan import AggSpec
from matview.storage.codec import pack, unpack
from matview.storage.state import TIED, StateStore, sqlite_order, storage_kind

#: results that are not values: reading a view that shows one raises `matview.Error`
OVERFLOW = b"\x00matview: integer overflow"
ORDER_DEPENDENT = b"\x00matview: order-dependent sum"
#: a GROUP BY or DISTINCT class with several variants ('a' and 'A' under NOCASE, 1 and 1.0)
#: where the one SQLite shows follows a scan order matview does not know (see `operators.variants`)
VARIANT_DEPENDENT = b"\x00matview: variant"
RESULT_ERRORS = {
    OVERFLOW: "integer overflow (as its SELECT would raise)",
    TIED: (
        "MIN/MAX is tied between equal values of different types (1 and 1.0) or signs (-0.0 and 0.0), and "
        "SQLite returns the one "
        "its scan meets first; matview does not guess (use a typed column, or CAST the argument)"
    ),
    VARIANT_DEPENDENT: (
        "a GROUP BY or DISTINCT value has several spellings SQLite calls equal ('a' and 'A' under NOCASE, "
        "1 and 1.0 untyped) and which one it shows here follows its scan order; matview does not guess "
        "(group by a BINARY, typed column, or by lower()/CAST of it)"
    ),
    ORDER_DEPENDENT: (
        "a running sum leaves the number range in some row orders but not in others, so SQLite's "
        "SUM/TOTAL/AVG (integer overflow or ±Inf) depends on its scan order; matview does not guess"
    ),
}


class ScanOrderDependent(apsw.SQLError):
    """Raised by the order-free twins of a subquery's SUM/MIN/MAX (`exact_sums`,
    `exact_extrema`) where SQLite's own value would follow its scan order: `marker` says which
    (TIED or ORDER_DEPENDENT); a view recomputed whole answers it (`matview.fallback`)."""

    def __init__(self, message: str, marker: bytes) -> None:
        super().__init__(message)
        self.marker = marker


def result_error_markers_sql() -> str:
    """The RESULT_ERRORS markers as SQL blob literals, for `IN (…)`."""
    return ", ".join(f"X'{marker.hex()}'" for marker in RESULT_ERRORS)


_SCALE = 1074
_ONE = 1 << _SCALE
#: the least magnitude that rounds to ±Inf as a double (DBL_MAX plus half an ulp), scaled
_INF_THRESHOLD = ((1 << 1024) - (1 << 970)) * _ONE

NumericCoercion = Callable[[Any], Any]


def _scaled(value: float) -> int:
    numerator, denominator = value.as_integer_ratio()
    return numerator * (_ONE // denominator)


def _to_double(scaled: int) -> float:
    """The correctly rounded double of scaled / 2**1074; ±Inf beyond the double range."""
    try:
        return scaled / _ONE
    except OverflowError:
        return math.inf if scaled > 0 else -math.inf


class SumState:
    """[n non-null, n real, exact int sum, exact real sum × 2**1074, +inf count, −inf count,
    Σ positive ints, Σ negative ints, Σ positive reals × 2**1074, Σ negative reals × 2**1074]

    The last four (the positive and negative masses, all linear) say whether some order of
    the rows makes a running sum leave the range — int64 for SUM of integers, the double
    range otherwise — where another order does not: SQLite adds in scan order, so its answer
    then depends on that order and the result is `ORDER_DEPENDENT`. Integer masses stay
    unscaled so that integer-only state stays small. States written before the masses
    existed have six entries and read as masses 0.
    """

    WIDTH = 10

    @classmethod
    def initial(cls) -> list[Any]:
        return [0] * cls.WIDTH

    @classmethod
    def _widen(cls, acc: list[Any]) -> None:
        if len(acc) < cls.WIDTH:
            acc.extend([0] * (cls.WIDTH - len(acc)))

    @classmethod
    def add(cls, acc: list[Any], value: Any, weight: int) -> None:
        cls._widen(acc)
        acc[0] += weight
        if isinstance(value, int):
            acc[2] += value * weight
            acc[6 if value > 0 else 7] += value * weight
            return
        acc[1] += weight
        if math.isinf(value):
            acc[4 if value > 0 else 5] += weight
            return
        scaled = _scaled(value) * weight
        acc[3] += scaled
        acc[8 if value > 0 else 9] += scaled

    @classmethod
    def add_integer_partials(cls, acc: list[Any], count: Any, total: Any, positive: Any, negative: Any) -> None:
        """Add integer terms summed by SQL: their weighted count, sum, and positive and
        negative parts (the set-at-a-time path of `aggregate_sql`)."""
        cls._widen(acc)
        acc[0] += count
        acc[2] += total
        acc[6] += positive
        acc[7] += negative

    @classmethod
    def add_real_partials(cls, acc: list[Any], count: int, sign: int, exponent: int | None, mantissa: int) -> None:
        """Add REAL terms summed by SQL (`real_sums`): their weighted count, and Σ w·|v| =
        `mantissa`·2**`exponent` of terms of one `sign` (±Inf: exponent None; ±0.0: sign 0)."""
        cls._widen(acc)
        acc[0] += count
        acc[1] += count
        if sign == 0:
            return
        if exponent is None:
            acc[4 if sign > 0 else 5] += count
            return
        scaled = mantissa << (exponent + _SCALE)
        if sign < 0:
            scaled = -scaled
        acc[3] += scaled
        acc[8 if sign > 0 else 9] += scaled

    @classmethod
    def merge(cls, a: list[Any], b: list[Any]) -> list[Any]:
        """The state of two disjoint bags of rows together: every entry is linear."""
        cls._widen(a)
        cls._widen(b)
        return [x + y for x, y in zip(a, b, strict=True)]

    @staticmethod
    def real_total(acc: list[Any]) -> Any:
        """The sum as a double; None for +inf + −inf (SQLite's NaN, shown as NULL), or
        ORDER_DEPENDENT when a running double sum overflows in some orders only."""
        positive, negative = 0, 0
        if len(acc) >= SumState.WIDTH:
            positive, negative = acc[6] * _ONE + acc[8], acc[7] * _ONE + acc[9]
        if acc[4] and acc[5]:
            return None
        if acc[4]:  # +Inf, unless finite terms reach −Inf first in some order (then NaN)
            return ORDER_DEPENDENT if -negative >= _INF_THRESHOLD else math.inf
        if acc[5]:
            return ORDER_DEPENDENT if positive >= _INF_THRESHOLD else -math.inf
        total = acc[2] * _ONE + acc[3]
        if positive < _INF_THRESHOLD and -negative < _INF_THRESHOLD:
            return _to_double(total)
        if total >= _INF_THRESHOLD and -negative < _INF_THRESHOLD:
            return math.inf  # every order ends at +Inf, and no order reaches −Inf first
        if total <= -_INF_THRESHOLD and positive < _INF_THRESHOLD:
            return -math.inf
        return ORDER_DEPENDENT

    @classmethod
    def sum(cls, acc: list[Any]) -> Any:
        if acc[0] == 0:
            return None
        if acc[1] == 0:
            if not SQLITE_INT_MIN <= acc[2] <= SQLITE_INT_MAX:
                return OVERFLOW  # every order overflows at the latest on the last row
            if len(acc) >= SumState.WIDTH and (acc[6] > SQLITE_INT_MAX or acc[7] < SQLITE_INT_MIN):
                return ORDER_DEPENDENT
            return acc[2]
        return cls.real_total(acc)

    @classmethod
    def total(cls, acc: list[Any]) -> Any:
        if acc[0] == 0:
            return 0.0
        if acc[1] == 0:
            return float(acc[2])  # SQLite's TOTAL/AVG never raise: an int64 overflow turns approximate
        return cls.real_total(acc)

    @classmethod
    def avg(cls, acc: list[Any]) -> Any:
        if acc[0] == 0:
            return None
        total = cls.total(acc)
        return total if total is None or isinstance(total, bytes) else total / acc[0]


class Accumulator:
    """One aggregate call's state inside a group's state list."""

    def __init__(self, spec: AggSpec, op: int, coerce: NumericCoercion, owns_multiset: bool = True) -> None:
        self.spec, self.op, self.coerce = spec, op, coerce
        self.func = spec.func
        #: False for a MIN/MAX that reads another aggregate's multiset of the same values
        #: (`aggregate.multiset_ops`): that one writes it, this one only re-seeks in it
        self.owns_multiset = owns_multiset
        #: a MIN/MAX under NOCASE/RTRIM (beside another, or with FILTER: `AggregateCalls.aggregate`)
        #: shows the first spelling of its extreme class in rowid order: its multiset is keyed
        #: by (class, rowid) and holds each row's own value (`bare_columns` keeps the lone one's)
        self.collated = self.func in ("min", "max") and not spec.distinct and spec.collation != "BINARY"

    def initial(self) -> Any:
        if self.func == "count":
            return 0
        if self.func in ("sum", "total", "avg"):
            return SumState.initial()
        if self.func in ("min", "max"):
            return [None, False]  # cached extreme, stale flag
        return None

    def mergeable(self) -> bool:
        """Whether `merge` can combine two partial states (a partitioned CREATE)."""
        plain = not self.spec.distinct and not self.collated
        return plain and self.func in ("count", "sum", "total", "avg", "min", "max")

    def merge(self, a: Any, b: Any) -> Any:
        """The accumulator of two disjoint bags of rows, from theirs: COUNT and the sums add
        (exact group elements); MIN/MAX re-seek in the merged ordered multiset, whose weights
        add (`first` on the next `result`)."""
        if not self.mergeable():
            raise ValueError(f"{self.spec.sql or self.func}: partial states cannot be merged")
        if self.func == "count":
            return a + b
        if self.func in ("sum", "total", "avg"):
            return SumState.merge(a, b)
        return [None, True]

    def _numeric(self, value: Any) -> Any:
        return value if isinstance(value, (int, float)) else self.coerce(value)

    def update(self, acc: Any, value: Any, weight: int, store: StateStore, key: bytes, rowid: Any) -> Any:
        func, spec = self.func, self.spec
        if spec.arg is not None and value is None:
            return acc  # every SQLite aggregate ignores NULL arguments
        if func == "group_concat":
            # (with DISTINCT or ORDER BY, `value` is the text and the values compared: `Aggregate.step`)
            value = pack(value) if isinstance(value, tuple) else value
            # over a join, no row identity: an entry is keyed by its values, its weight counts
            # the equal rows (the ORDER BY, which decides the text of ties, sorts them)
            store.adjust(self.op, key, value if rowid is None else rowid, value, weight)
            return acc
        if spec.distinct:
            # (a NOCASE/RTRIM COUNT(DISTINCT …) keeps each class under its canonical spelling)
            ord_ = value if spec.collation == "BINARY" else canonical(value, spec.collation)
            old, new = store.adjust(self.op, key, ord_, None, weight)
            if old <= 0 < new:
                weight = 1
            elif new <= 0 < old:
                weight = -1
            else:
                return acc
        if func == "count":
            return acc + weight
        if func in ("sum", "total", "avg"):
            SumState.add(acc, self._numeric(value), weight)
            return acc
        # min / max: only deleting the current extreme needs the entry's remaining weight
        cached, stale = acc
        descending = func == "max"
        if self.collated:
            # (MAX: the greatest class's least rowid comes first in descending (class, ~rowid))
            order = ~rowid if descending else rowid
            store.adjust(self.op, key, canonical(value, spec.collation), value, weight, order)
            return [None, True]
        if not self.owns_multiset:
            # the owner writes the value (it comes first in the row); a deletion re-seeks
            if weight < 0 or _ties(value, cached):
                return [cached, True]
            if not stale and (cached is None or _strictly_better(value, cached, descending)):
                return [value, False]
            return acc
        kind = storage_kind(value)
        if weight < 0 and cached is not None and storage_kind(cached) == kind and canonical(cached) == canonical(value):
            _old, new = store.adjust(self.op, key, value, None, weight, kind)
            if new <= 0:
                acc = [None, True]
            return acc
        store.add(self.op, key, value, weight, kind)
        if weight < 0:
            # A −1 for another value may cancel a +1 this batch has not reached yet (a user's
            # trigger can log a row's delete before its insert): re-seek instead of trusting it.
            return [cached, True]
        if _ties(value, cached):
            return [cached, True]  # (re-seek: `StateStore.first` finds the tie)
        if not stale and (cached is None or _strictly_better(value, cached, descending)):
            acc = [value, False]
        return acc

    def result(self, acc: Any, store: StateStore, key: bytes) -> Any:
        func = self.func
        if func == "count":
            return acc
        if func == "sum":
            return SumState.sum(acc)
        if func == "total":
            return SumState.total(acc)
        if func == "avg":
            return SumState.avg(acc)
        if func in ("min", "max"):
            cached, stale = acc
            if self.collated:
                return store.first_entry(self.op, key, descending=func == "max")
            if stale:
                cached = store.first(self.op, key, descending=func == "max")
                if cached is TIED:
                    return TIED  # (stays stale: the next result seeks again)
                acc[0], acc[1] = cached, False
            return cached
        entries = [(value, weight) for _, value, weight in store.entries(self.op, key)]
        if self.spec.key is None and not self.spec.order:
            parts = [value for value, weight in entries for _ in range(weight)]
        else:
            rows = [tuple(unpack(value)) for value, weight in entries for _ in range(weight)]
            parts = _ordered_parts(self.spec, rows)
        if not parts:
            return None
        separator = "," if self.spec.separator is None else self.spec.separator
        return separator.join(parts)


def _ordered_parts(spec: AggSpec, rows: list[tuple[Any, ...]]) -> list[str]:
    """GROUP_CONCAT(DISTINCT x)'s or GROUP_CONCAT(x ORDER BY …)'s texts, from its rows in rowid
    order (text, then x for DISTINCT, then the ORDER BY values): the rows sorted stably by the
    terms (a WITHOUT ROWID table's key among them), then the first of each class SQLite calls
    equal (under x's collation) for DISTINCT."""
    terms, first = spec.order, 1 if spec.key is None else 2  # (the ORDER BY values come after x)
    if terms:

        def compare(a: tuple[Any, ...], b: tuple[Any, ...]) -> int:
            return _compare_terms(a[first:], b[first:], terms)

        rows = sorted(rows, key=functools.cmp_to_key(compare))
    if spec.key is None:
        return [row[0] for row in rows]
    seen: set[Any] = set()
    parts = []
    for row in rows:
        canon = canonical(row[1], spec.collation)
        if canon not in seen:
            seen.add(canon)
            parts.append(row[0])
    return parts


def _compare_terms(a: Sequence[Any], b: Sequence[Any], terms: tuple[tuple[int, bool, str, bool], ...]) -> int:
    """SQLite's ORDER BY comparison of two rows' term values (collations, DESC, NULLS FIRST/LAST)."""
    for x, y, (_index, descending, collation, nulls_first) in zip(a, b, terms, strict=True):
        if x is None or y is None:
            if x is None and y is None:
                continue
            return -1 if (x is None) == nulls_first else 1
        kx, ky = sqlite_order(canonical(x, collation)), sqlite_order(canonical(y, collation))
        if kx != ky:
            return (1 if kx > ky else -1) * (-1 if descending else 1)
    return 0


def _ties(value: Any, current: Any) -> bool:
    """Whether two numbers are equal but of different storage classes (1 and 1.0), or zeros
    of two signs (-0.0 and 0.0)."""
    return (
        current is not None
        and type(value) in (int, float)
        and type(current) in (int, float)
        and value == current
        and storage_kind(value) != storage_kind(current)
    )


def _strictly_better(value: Any, current: Any, descending: bool) -> bool:
    a, b = sqlite_order(value), sqlite_order(current)
    return a > b if descending else a < b
