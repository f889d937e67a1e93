"""Exact sums of REAL arguments, set at a time (the REAL part of `aggregate_sql`).

`SumState` keeps a REAL sum as the exact integer Σ w·v·2**1074. SQLite cannot add doubles
exactly, but it can split each one exactly: a finite double v ≠ 0 is |v| = m·2**s with m an
integer below 2**55, for s = ⌊log2 |v|⌋ − 53 (log2 may round ⌊…⌋ one off either way; m stays
an integer below 2**55 whatever the direction). `|v| · power(2, −s)` only rescales by a power of
two, which is exact in the double range used here (power(2, k) is exact: the result is a
double, and C's pow is correct to within an ulp's fraction). Each row's m is checked to be an
integer (`CAST(m AS INTEGER) = m`), so a wrong split cannot go unnoticed: the caller falls back
to the per-row path. SQLite then sums, per group, sign and exponent s, the weighted high and
low 28-bit halves of m (no int64 overflow below 2**35 rows a bucket; an overflow raises and
the per-row path takes over), and Python adds each bucket as (Σhigh·2**28 + Σlow)·2**(s+1074)
— the same integers the per-row path adds, so the state is identical, only added in another
order. Zeros and infinities are counted per sign in the same statement. Doubles too small or
too large for the split (|v| < 1e-270 or ≥ 1e300) are left to the per-row path (`REMAINING`).
Most REALs never reach the split: the lane below (`LANE`) adds them without an exponent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import apsw

from matview.operators.accumulators import SumState

#: the REAL arguments `add_real_sums` handles (v: the argument's SQL)
HANDLED = "(typeof({v}) = 'real' AND (abs({v}) = 0 OR abs({v}) = 9e999 OR abs({v}) BETWEEN 1e-270 AND 1e300))"
#: the non-integer arguments left to the per-row path: TEXT, BLOB, and extreme REALs
REMAINING = f"typeof({{v}}) NOT IN ('integer', 'null') AND NOT {HANDLED}"

_HALF = 28  # bits of m's low half

#: The common REALs, 2**-10 <= |v| < 2**53, take a cheaper split with no exponent: |v| = i + f·2**-62
#: for the integers i = trunc(|v|) < 2**53 and f = (|v| − i)·2**62 < 2**62. Both are exact: the
#: fraction |v| − i is (it drops bits above 2**0 only), and |v|'s last bit is worth at least
#: 2**-62, so f is an integer a power-of-two scaling reaches exactly (±0.0 are only counted, as
#: `add_real_partials` counts them). All the sums of a view take one statement grouped by the
#: view's groups alone (`add_lane_sums`); the exponent split handles the other REALs
#: (`NOT_IN_LANE`). Halves keep the SQL sums below 2**63.
LANE = "(typeof({v}) = 'real' AND (abs({v}) = 0 OR abs({v}) >= 0.0009765625 AND abs({v}) < 9007199254740992.0))"
NOT_IN_LANE = f" AND NOT {LANE}"
_LANE_SCALE = 62
_INT_HALF, _FRACTION_HALF = 26, 31


def _lane_sql(source: str, groups: list[str], terms: list[tuple[str, str]]) -> str:
    """Per group, and per term (argument, condition) and sign: Σw, Σw·i and Σw·f in halves, and
    the number of rows. `LIMIT -1` keeps each split computed once per row (no flattening)."""
    listed = "".join(f"{g}, " for g in groups)
    picked = "".join(
        f"CASE WHEN {LANE.format(v=arg)}{cond} THEN {arg} END AS v{j}, " for j, (arg, cond) in enumerate(terms)
    )
    split = "".join(
        f"sign(v{j}) AS s{j}, CAST(abs(v{j}) AS INTEGER) AS i{j}, "
        f"CAST((abs(v{j}) - CAST(abs(v{j}) AS INTEGER)) * {float(1 << _LANE_SCALE)!r} AS INTEGER) AS f{j}, "
        for j in range(len(terms))
    )
    sums = []
    for j in range(len(terms)):
        for sign in (1, -1):
            term = f"CASE WHEN s{j} = {sign} THEN {{}} END"
            sums += [
                f"sum({term.format('w')})",
                f"sum({term.format(f'w * (i{j} >> {_INT_HALF})')})",
                f"sum({term.format(f'w * (i{j} & {(1 << _INT_HALF) - 1})')})",
                f"sum({term.format(f'w * (f{j} >> {_FRACTION_HALF})')})",
                f"sum({term.format(f'w * (f{j} & {(1 << _FRACTION_HALF) - 1})')})",
            ]
        sums += [f"sum(CASE WHEN s{j} = 0 THEN w END)", f"count(s{j})"]
    rows = f'SELECT {listed}"__w" AS w, {picked}NULL FROM ({source}) LIMIT -1'
    splits = f"SELECT {listed}w, {split}NULL FROM ({rows}) LIMIT -1"
    group_by = f" GROUP BY {', '.join(groups)}" if groups else ""
    return f"SELECT {listed}{', '.join(sums)} FROM ({splits}){group_by}"


def add_lane_sums(
    conn: apsw.Connection,
    source: str,
    params: Any,
    groups: list[str],
    terms: list[tuple[str, str]],
    accumulators_of: list[Callable[[tuple[Any, ...]], list[Any]]],
) -> list[int] | None:
    """Add the REAL arguments in the `LANE` of each term (column, condition: an SQL ` AND …` or
    "") of `source` to the sums `accumulators_of[term](group values)` returns; per term, how
    many rows it added. None, with nothing added, when an SQL sum overflowed."""
    try:
        found: list[tuple[Any, ...]] = conn.execute(_lane_sql(source, groups, terms), params).fetchall()
    except apsw.SQLError:
        return None
    k, width = len(groups), 12
    handled = [0] * len(terms)
    for row in found:
        for j, accumulator_of in enumerate(accumulators_of):
            at = k + j * width
            for sign, (count, i_high, i_low, f_high, f_low) in ((1, row[at : at + 5]), (-1, row[at + 5 : at + 10])):
                if count is None:
                    continue  # (no row of that sign)
                integer = (i_high << _INT_HALF) + i_low
                fraction = (f_high << _FRACTION_HALF) + f_low
                mantissa = (integer << _LANE_SCALE) + fraction
                SumState.add_real_partials(accumulator_of(row[:k]), count, sign, -_LANE_SCALE, mantissa)
            if row[at + 10] is not None:
                SumState.add_real_partials(accumulator_of(row[:k]), row[at + 10], 0, None, 0)
            handled[j] += row[at + 11]
    return handled


def _buckets_sql(source: str, groups: list[str], arg: str, condition: str) -> str:
    """Per group, sign and exponent: Σw, Σw·high(m), Σw·low(m), whether every m was exact, and
    the number of rows.
    The exponent is NULL for ±Inf and ±0.0 (whose sign is 0). `LIMIT -1` keeps SQLite from
    flattening the subqueries, which would evaluate the split once per use instead of once."""
    listed = "".join(f"{g}, " for g in groups)
    exponent = f"CASE WHEN abs({arg}) IN (0, 9e999) THEN NULL ELSE CAST(floor(log2(abs({arg}))) AS INTEGER) - 53 END"
    rows = (
        f'SELECT {listed}"__w" AS w, {arg} AS v, {exponent} AS s FROM ({source}) '
        f"WHERE {HANDLED.format(v=arg)}{condition} LIMIT -1"
    )
    split = f"SELECT {listed}w, sign(v) AS sg, s, coalesce(abs(v) * power(2.0, -s), 0.0) AS m FROM ({rows}) LIMIT -1"
    exact = "CAST(m AS INTEGER)"
    return (
        f"SELECT {listed}sg, s, sum(w), sum(w * ({exact} >> {_HALF})), sum(w * ({exact} & {(1 << _HALF) - 1})), "
        f"min({exact} = m), count(*) FROM ({split}) GROUP BY {listed}sg, s"
    )


def add_real_sums(
    conn: apsw.Connection,
    source: str,
    params: Any,
    groups: list[str],
    arg: str,
    condition: str,
    accumulator_of: Callable[[tuple[Any, ...]], list[Any]],
) -> int | None:
    """Add the REAL arguments `HANDLED` (column `arg` of `source`, rows passing `condition`, an
    SQL ` AND …` or "") to the sums `accumulator_of(group values)` returns, and say how many
    rows it added. None, with nothing added, when SQLite could not split them exactly (the
    caller visits those rows itself)."""
    try:
        buckets: list[tuple[Any, ...]] = conn.execute(_buckets_sql(source, groups, arg, condition), params).fetchall()
    except apsw.SQLError:
        return None  # an overflowing bucket sum, or a SQLite without math functions
    if any(row[-2] != 1 for row in buckets):
        return None
    k = len(groups)
    for row in buckets:
        sign, exponent, count, high, low = row[k : k + 5]
        SumState.add_real_partials(accumulator_of(row[:k]), count, sign, exponent, (high << _HALF) + low)
    return sum(row[-1] for row in buckets)
