"""Values SQLite calls equal but shows differently.

GROUP BY and DISTINCT merge values that compare equal (``3`` and ``3.0`` in an untyped
column, ``'a'`` and ``'A'`` under NOCASE) and show one of them. When the one shown is
deleted while an equal one remains, SQLite shows the remaining one; so a group keeps a
count per variant and shows one that still exists. Keys of typed, BINARY columns have one
variant only (see `schema.has_one_variant`) and skip this.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matview.keys import row_key

Variants = dict[bytes, list[Any]]  # exact values' row key -> [values, count]


def count_variant(variants: Variants | None, values: Sequence[Any], weight: int) -> Variants | None:
    """Add `weight` to the count of the exact `values`; None when no variant is left."""
    variants = variants or {}
    key = row_key(values)
    entry = variants.setdefault(key, [list(values), 0])
    entry[1] += weight
    if entry[1] == 0:
        del variants[key]
    return variants or None


def shown_variant(current: Sequence[Any], variants: Variants | None) -> list[Any]:
    """The values to show: the current ones while they exist, else a remaining variant."""
    if not variants or row_key(current) in variants:
        return list(current)
    return list(next(iter(variants.values()))[0])
