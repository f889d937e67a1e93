"""MIN and MAX as SQL aggregate functions whose value does not depend on row order.

Inside a subquery of a view maintained by partition recompute (`partition`), a value computed
once must come back bit for bit when a reached row is evaluated again, in another scan order
(see `exact_sums`). SQLite's MIN/MAX keep the first of equal extremes they meet: where equal
values differ (5 and 5.0 in an untyped column, a SUM that is INTEGER in one group and REAL in
another), which one the subquery returns follows the scan order. These twins return the same
extreme under SQLite's BINARY order (numbers by value, then TEXT by code point, then BLOB by
bytes; NULL skipped) and raise an error when the extreme is tied between an INTEGER and a REAL:
the fold that meets it fails (`ScanOrderDependent`) and the view is recomputed whole from then
on, or stalled where it cannot be (`matview.fallback`) — never a guess.
The front end calls them only for arguments that compare under BINARY (`subquery_values`).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import apsw

from matview.operators.accumulators import ScanOrderDependent
from matview.storage.state import TIED

#: SQLite's aggregate → its order-free twin, registered on every matview connection
EXACT_EXTREMA = {"min": "__dbsp_exact_min", "max": "__dbsp_exact_max"}

_CLASS = {int: 1, float: 1, str: 2, bytes: 3}  # SQLite's order of storage classes (NULL skipped)


class _Extreme:
    """One evaluation: the extreme value so far, and whether an equal one of the other numeric
    storage class was seen beside it."""

    def __init__(self, largest: bool, text_order: str) -> None:
        self.largest, self.text_order = largest, text_order
        self.best: Any = None
        self.tied = False

    def step(self, value: Any) -> None:
        if value is None:
            return
        if self.best is None:
            self.best = value
            return
        kind, best = _CLASS[type(value)], _CLASS[type(self.best)]
        if kind == best == 2 and self.text_order != "utf-8":
            # BINARY compares a UTF-16 database's text as UTF-16 bytes, not by code point
            order = self.text_order
            better = (value.encode(order) > self.best.encode(order)) == self.largest and value != self.best
        elif kind == best:
            if value == self.best:
                # (5 and 5.0; 0.0 and -0.0, which SQLite keeps apart)
                if type(value) is not type(self.best) or (
                    kind == 1 and math.copysign(1, value) != math.copysign(1, self.best)
                ):
                    self.tied = True
                return
            better = value > self.best if self.largest else value < self.best
        else:
            better = kind > best if self.largest else kind < best
        if better:
            self.best, self.tied = value, False

    def final(self) -> Any:
        if self.tied:
            name = "max" if self.largest else "min"
            raise ScanOrderDependent(
                f"a subquery's {name}(): its extreme {self.best!r} is tied with an equal but different value "
                "(an INTEGER and a REAL, 0.0 and -0.0), "
                "and which one SQLite returns follows its scan order",
                TIED,
            )
        return self.best


def register_exact_extrema(connection: apsw.Connection) -> None:
    """Register the order-free MIN/MAX (`EXACT_EXTREMA`) on `connection`."""
    encoding = str(connection.execute("PRAGMA encoding").fetchone()[0]).lower()  # type: ignore[index]
    text_order = {"utf-16le": "utf-16-le", "utf-16be": "utf-16-be"}.get(encoding, "utf-8")
    for function, name in EXACT_EXTREMA.items():
        factory = functools.partial(_Extreme, function == "max", text_order)
        connection.create_aggregate_function(name, factory, 1, flags=apsw.SQLITE_DETERMINISTIC)  # type: ignore[arg-type]
