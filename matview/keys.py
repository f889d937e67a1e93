"""Row identity and SQLite equality, as hashable keys.

Two notions of "the same value" matter:

* identity (`row_key`): what a view stores. `1`, `1.0` and `'1'` are three rows, as
  SQLite returns them; encoded with msgpack, which keeps storage classes apart.
* SQLite equality under a collation (`group_key`): what GROUP BY, DISTINCT and
  COUNT(DISTINCT) merge. `1 = 1.0`; 'a' = 'A' under NOCASE; 'a' = 'a  ' under RTRIM.
  The key canonicalizes each value so equal values encode identically.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from matview.errors import UnsupportedQuery
from matview.names import fold
from matview.storage.codec import pack, unpack

SQLITE_INT_MIN = -(2**63)
SQLITE_INT_MAX = 2**63 - 1

#: the collations every SQLite has, whose equality we can canonicalize; any other is refused
#: where it matters (and never put into anything another client must evaluate)
BUILTIN_COLLATIONS = ("BINARY", "NOCASE", "RTRIM")


def row_key(values: Sequence[Any]) -> bytes:
    """The identity of a row: equal bytes iff every value has the same class and bytes.

    Z-sets of view rows are keyed by it, never by Python tuples: Python calls `3 == 3.0`,
    SQLite returns them as different rows."""
    return pack(tuple(values))


def row_keys(rows: Iterable[tuple[Any, ...]]) -> Iterator[bytes]:
    """`row_key` of each row of `rows` that are tuples already (apsw's): the encoder alone."""
    return map(pack, rows)


def row_of(key: bytes) -> tuple[Any, ...]:
    """The row a `row_key` encodes."""
    return tuple(unpack(key))


def canonical(value: Any, collation: str = "BINARY") -> Any:
    """A representative that is equal for exactly the values SQLite calls equal."""
    if isinstance(value, float):
        # Integral floats equal the integer of the same value (SQLite compares exactly).
        if value.is_integer() and SQLITE_INT_MIN <= value <= SQLITE_INT_MAX:
            return int(value)
        return value
    if isinstance(value, str):
        if collation == "NOCASE":
            cut = value.find("\0")
            if cut < 0:
                return fold(value)  # NOCASE folds only the 26 ASCII letters, as names do
            # SQLite's NOCASE stops comparing at a NUL; then the longer text (in bytes) is greater
            length = len(value.encode("utf-8", "surrogatepass"))
            return fold(value[: cut + 1]) + format(length, "020d")
        if collation == "RTRIM":
            return value.rstrip(" ")
    return value


def group_key(values: Sequence[Any], collations: Sequence[str]) -> bytes:
    """The key under which GROUP BY / DISTINCT put a row of `values`."""
    return pack(tuple(canonical(v, c) for v, c in zip(values, collations)))


def check_collation(collation: str, where: str) -> str:
    name = collation.upper()
    if name not in BUILTIN_COLLATIONS:
        raise UnsupportedQuery(f"collation {collation} in {where}: only BINARY, NOCASE and RTRIM are supported")
    return name
