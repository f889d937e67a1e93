"""SUM, TOTAL and AVG as SQL aggregate functions whose value does not depend on row order.

A view with subqueries is maintained by partition recompute (`partition`, RELATIONAL.md R4):
a reached outer row's subquery is evaluated again later — over a table's old state, in
another scan order — and must give back, bit for bit, the value computed when the row was
stored. SQLite's own SUM adds REALs in scan order (Kahan–Babuska–Neumaier), so its last bit
may follow that order. Inside subqueries the front end therefore calls these functions
instead (`subquery_values.exact_sum_renames`): the same exact group element the view's own
aggregates keep (`SumState`, DBSP §7.2), rounded once. The result is SQLite's SUM/TOTAL/AVG
type for type — an integer sum of integers, "integer overflow" where every order overflows —
and the correctly rounded sum, which is what SQLite's compensated sum returns except in
pathological cancellations (the view's top-level sums make the same choice). Where some
orders would overflow and others not, SQLite's answer follows its scan order: the
function raises instead of guessing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import apsw

from matview.operators.accumulators import OVERFLOW, RESULT_ERRORS, ScanOrderDependent, SumState

#: SQLite's aggregate → its order-free twin, registered on every matview connection
EXACT_SUMS = {"sum": "__dbsp_exact_sum", "total": "__dbsp_exact_total", "avg": "__dbsp_exact_avg"}

_FINISH: dict[str, Callable[[list[Any]], Any]] = {"sum": SumState.sum, "total": SumState.total, "avg": SumState.avg}

_numeric_terms: dict[tuple[type, Any], Any] = {}
_scratch: apsw.Connection | None = None


def _numeric_term(value: Any) -> Any:
    """What SQLite's sum() adds for a TEXT or BLOB value (its numeric conversion), cached."""
    global _scratch
    key = (type(value), value)
    if key not in _numeric_terms:
        if _scratch is None:
            _scratch = apsw.Connection(":memory:")
        _numeric_terms[key] = _scratch.execute("SELECT sum(?)", (value,)).fetchone()[0]  # type: ignore[index]
    return _numeric_terms[key]


class _ExactSum:
    """One evaluation of an exact SUM/TOTAL/AVG: an exact sum, rounded at the end."""

    def __init__(self, function: str) -> None:
        self.acc = SumState.initial()
        self.finish = _FINISH[function]
        # integers are counted and summed here, by sign, and added to the state once
        self.ints = self.positive = self.negative = 0

    def step(self, value: Any) -> None:
        if type(value) is int:
            self.ints += 1
            if value > 0:
                self.positive += value
            else:
                self.negative += value
        elif value is not None:  # (every SQLite aggregate skips NULL arguments)
            SumState.add(self.acc, value if isinstance(value, float) else _numeric_term(value), 1)

    def final(self) -> Any:
        SumState.add_integer_partials(self.acc, self.ints, self.positive + self.negative, self.positive, self.negative)
        result = self.finish(self.acc)
        if result == OVERFLOW:
            raise apsw.SQLError("integer overflow")
        if isinstance(result, bytes) and result in RESULT_ERRORS:
            raise ScanOrderDependent(f"a subquery's sum: {RESULT_ERRORS[result]}", result)
        return result


def register_exact_sums(connection: apsw.Connection) -> None:
    """Register the order-free SUM/TOTAL/AVG (`EXACT_SUMS`) on `connection`."""
    for function, name in EXACT_SUMS.items():
        factory = functools.partial(_ExactSum, function)
        connection.create_aggregate_function(name, factory, 1, flags=apsw.SQLITE_DETERMINISTIC)  # type: ignore[arg-type]
