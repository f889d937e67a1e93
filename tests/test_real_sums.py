"""The set-at-a-time split of REAL sums (`matview.operators.real_sums`) adds exactly what the
per-row path adds: the same `SumState`, entry for entry, over every kind of double (zeros of
both signs, infinities, subnormals, the largest doubles, random bit patterns), with deletions;
and a view whose REAL sums take that path holds the state and rows the per-row path builds
(its results against SQLite's are the differential suites' business)."""

from __future__ import annotations

import math
import random
import struct
from pathlib import Path
from typing import Any

import apsw
import pytest

import matview
from matview.circuit import BULK_ROWS
from matview.operators import real_sums
from matview.operators.accumulators import SumState
from matview.storage.codec import unpack

EDGES = [
    0.0,
    -0.0,
    math.inf,
    -math.inf,
    5e-324,
    -5e-324,
    2.0**-1022,
    1e-270,
    1e-271,
    1e300,
    1.7976931348623157e308,
    -1.7976931348623157e308,
    2.0**52,
    2.0**53 - 1,
    2.0**53 + 2,
    0.1,
    1 / 3,
    -(2.0**-900),
]


def _double(rng: random.Random) -> float:
    pick = rng.random()
    if pick < 0.15:
        return rng.choice(EDGES)
    if pick < 0.45:
        value: float = struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0]
        return 0.5 if math.isnan(value) else value  # (SQLite stores NaN as NULL)
    if pick < 0.7:
        return rng.uniform(-1e6, 1e6)
    return round(rng.uniform(0, 1000), 2) * rng.choice([1, -1])


@pytest.mark.parametrize("seed", range(8))
def test_split_adds_what_the_per_row_path_adds(seed: int) -> None:
    rng = random.Random(seed)
    conn = apsw.Connection(":memory:")
    conn.execute('CREATE TABLE s("__c0", "__c1", "__w")')
    for _ in range(40):
        rows = [(rng.randrange(3), _double(rng), rng.choice([1, 1, -1])) for _ in range(rng.randrange(1, 300))]
        conn.execute("DELETE FROM s")
        conn.executemany("INSERT INTO s VALUES (?, ?, ?)", rows)
        got = {g: SumState.initial() for g in range(3)}
        handled = real_sums.add_real_sums(
            conn, "SELECT * FROM s", (), ['"__c0"'], '"__c1"', "", lambda values, got=got: got[values[0]]
        )
        assert handled is not None
        remaining = real_sums.REMAINING.format(v='"__c1"')
        for group, value, weight in conn.execute(f'SELECT "__c0", "__c1", "__w" FROM s WHERE {remaining}'):
            SumState.add(got[group], value, weight)
        want = {g: SumState.initial() for g in range(3)}
        for group, value, weight in rows:
            SumState.add(want[group], value, weight)
        assert got == want


@pytest.mark.parametrize("seed", range(8))
def test_lane_and_split_add_what_the_per_row_path_adds(seed: int) -> None:
    """The lane (`add_lane_sums`, two sums and a FILTER-like condition in one statement), then
    the exponent split and the per-row path for the REALs outside it: the per-row state."""
    rng = random.Random(100 + seed)
    conn = apsw.Connection(":memory:")
    conn.execute('CREATE TABLE s("__c0", "__c1", "__c2", "__c3", "__w")')
    lane = real_sums.LANE
    for _ in range(30):
        rows = [
            (
                rng.randrange(3),
                _double(rng),
                rng.choice([_double(rng), 2.0**-10, -(2.0**53) + 1, 2.0**53, 7]),
                rng.choice([0, 1]),
                rng.choice([1, 1, -1]),
            )
            for _ in range(rng.randrange(1, 300))
        ]
        conn.execute("DELETE FROM s")
        conn.executemany("INSERT INTO s VALUES (?, ?, ?, ?, ?)", rows)
        got = [{g: SumState.initial() for g in range(3)} for _ in range(2)]
        terms = [('"__c1"', ""), ('"__c2"', ' AND "__c3"')]
        accumulators = [lambda values, sums=sums: sums[values[0]] for sums in got]
        handled = real_sums.add_lane_sums(conn, "SELECT * FROM s", (), ['"__c0"'], terms, accumulators)
        assert handled is not None
        for (arg, condition), of, count in zip(terms, accumulators, handled, strict=True):
            in_lane = conn.execute(f"SELECT count(*) FROM s WHERE {lane.format(v=arg)}{condition}").fetchone()[0]
            assert count == in_lane
            outside = condition + real_sums.NOT_IN_LANE.format(v=arg)
            assert real_sums.add_real_sums(conn, "SELECT * FROM s", (), ['"__c0"'], arg, outside, of) is not None
            remaining = real_sums.REMAINING.format(v=arg)
            for group, value, weight in conn.execute(f'SELECT "__c0", {arg}, "__w" FROM s WHERE {remaining}{outside}'):
                SumState.add(of((group,)), value, weight)
        want = [{g: SumState.initial() for g in range(3)} for _ in range(2)]
        for group, first, second, flag, weight in rows:
            SumState.add(want[0][group], first, weight)
            if flag and isinstance(second, float):
                SumState.add(want[1][group], second, weight)
        assert got == want


def _states(conn: Any) -> list[tuple[Any, ...]]:
    rows = conn.execute("SELECT operator_id, key, value FROM __dbsp_state_v ORDER BY operator_id, key").fetchall()
    return [(op, key, unpack(value)) for op, key, value in rows]


def test_view_state_is_the_per_row_state(tmp_path: Path) -> None:
    """CREATE over a filled table (the split) and the same rows inserted a few at a time (the
    per-row path) leave identical states and rows; then a large delete folds through the split."""
    rng = random.Random(11)
    rows = [(rng.choice("ab"), _double(rng), rng.choice([None, 1.5, "2.5", 3])) for _ in range(4 * BULK_ROWS)]
    sql = "SELECT g, SUM(r), TOTAL(r), AVG(r), SUM(q), COUNT(*) FROM t GROUP BY g"
    conns = []
    for name in ("bulk", "rows"):
        conn = matview.connect(str(tmp_path / f"{name}.db"))
        conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, g TEXT, r REAL, q)")
        conns.append(conn)
    bulk, by_row = conns
    with bulk:
        bulk.executemany("INSERT INTO t(g, r, q) VALUES (?, ?, ?)", rows)
    bulk.execute(f"CREATE MATERIALIZED VIEW v AS {sql}")
    by_row.execute(f"CREATE MATERIALIZED VIEW v AS {sql}")
    for start in range(0, len(rows), 3):
        with by_row:
            by_row.executemany("INSERT INTO t(g, r, q) VALUES (?, ?, ?)", rows[start : start + 3])
    assert _states(bulk) == _states(by_row)
    for conn in conns:
        with conn:
            conn.execute("DELETE FROM t WHERE id % 3 = 0")
    assert _states(bulk) == _states(by_row)
    got = [
        conn.execute("SELECT __dbsp_key, __dbsp_weight FROM __dbsp_view_v ORDER BY __dbsp_key").fetchall()
        for conn in conns
    ]
    assert got[0] == got[1]
