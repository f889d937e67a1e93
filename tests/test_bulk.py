"""Differential tests of the set-at-a-time paths: CREATE over a filled table and folds of
large deltas (>= circuit.BULK_ROWS rows), which small random write mixes rarely reach,
plus regressions found while building them."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from oracle import assert_view_matches

import matview
from matview.circuit import BULK_ROWS

VIEWS = [
    "SELECT g, COUNT(*), COUNT(x), SUM(x), TOTAL(x), AVG(x), MIN(x), MAX(x) FROM t GROUP BY g",
    "SELECT COUNT(*), SUM(x), MIN(x), MAX(y), AVG(y) FROM t",
    "SELECT g, h, MIN(y), MAX(y), SUM(y) FROM t WHERE x > 3 GROUP BY g, h HAVING COUNT(*) > 1",
    "SELECT g % 3 AS k, COUNT(*) FILTER (WHERE x > 5), SUM(x) FILTER (WHERE y IS NOT NULL), MAX(s) "
    "FROM t GROUP BY g % 3",
    "SELECT s, SUM(x) / COUNT(*), MAX(x) - MIN(x), SUM(s) FROM t GROUP BY s",
    "SELECT DISTINCT g, MIN(x) FROM t GROUP BY g",
    "SELECT g, x, y FROM t WHERE x % 2 = 0",
    "SELECT DISTINCT h, y FROM t",
]


def _rows(rng: random.Random, n: int) -> list[tuple[object, ...]]:
    return [
        (
            rng.randint(0, 6),
            rng.choice(["a", "b", None]),
            rng.choice([None, rng.randint(-5, 12)]),
            rng.choice([None, rng.randint(-8, 8) * 0.25]),
            rng.choice(["p", "q", "7", None]),
        )
        for _ in range(n)
    ]


@pytest.mark.parametrize("seed", range(4))
def test_large_deltas_and_create_match_sqlite(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    conn = matview.connect(str(tmp_path / "bulk.db"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, g INTEGER, h TEXT, x INTEGER, y REAL, s TEXT)")
    with conn:
        conn.executemany("INSERT INTO t(g, h, x, y, s) VALUES (?, ?, ?, ?, ?)", _rows(rng, rng.randint(0, 400)))
    names = []
    for index, sql in enumerate(VIEWS):
        for mode in ("immediate", "deferred"):
            name = f"v{index}_{mode}"
            conn.execute(f"CREATE MATERIALIZED VIEW {name} WITH (maintenance = '{mode}') AS {sql}")
            names.append((name, sql))
    for _step in range(8):
        action = rng.random()
        with conn:
            if action < 0.4:
                rows = _rows(rng, rng.randint(BULK_ROWS, 3 * BULK_ROWS))
                conn.executemany("INSERT INTO t(g, h, x, y, s) VALUES (?, ?, ?, ?, ?)", rows)
            elif action < 0.7:
                conn.execute("DELETE FROM t WHERE id % ? = ?", (rng.randint(2, 4), rng.randint(0, 1)))
            else:
                conn.execute(
                    "UPDATE t SET x = x + ?, g = (g + 1) % 7, y = NULL WHERE id % ? = 0",
                    (rng.randint(-3, 3), rng.randint(2, 3)),
                )
        if rng.random() < 0.3:
            conn.flush()
        for name, sql in names:
            assert_view_matches(conn, name, sql)
    conn.close()


def test_rows_equal_in_python_but_not_in_sqlite_stay_apart(tmp_path: Path) -> None:
    """3 and 3.0 are equal Python values but different SQLite rows (regression)."""
    conn = matview.connect(str(tmp_path / "id.db"))
    conn.execute("CREATE TABLE t(c0, c1 INTEGER)")
    views = {"v": "SELECT 0, c0 FROM t", "a": "SELECT c1, MAX(c0) FROM t GROUP BY c1", "d": "SELECT DISTINCT c0 FROM t"}
    for name, sql in views.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
    conn.execute("INSERT INTO t(c0, c1) VALUES (3, 1), (3.0, 2), ('3', 3), (x'33', 4)")
    for name, sql in views.items():
        assert_view_matches(conn, name, sql)
    conn.execute("DELETE FROM t WHERE c1 = 1")
    for name, sql in views.items():
        assert_view_matches(conn, name, sql)


def test_aggregate_without_stage1_columns(tmp_path: Path) -> None:
    """Only COUNT(*) and no GROUP BY: a stage-1 SELECT with no value columns (regression)."""
    conn = matview.connect(str(tmp_path / "c.db"))
    conn.execute("CREATE TABLE t(c0 INTEGER, c1 INTEGER)")
    sql = "SELECT COUNT(*) + COUNT(*) FROM t"
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {sql}")
    assert_view_matches(conn, "v", sql)
    conn.execute("INSERT INTO t VALUES (1, 2), (3, 4)")
    assert_view_matches(conn, "v", sql)


@pytest.mark.parametrize("rows", [3, BULK_ROWS])  # the row-by-row and the set-at-a-time path
def test_min_max_show_the_remaining_variant(tmp_path: Path, rows: int) -> None:
    """MIN/MAX over an untyped column holding 3 and 3.0: while both are there SQLite returns
    the one its scan meets first, and reading says so (`TIED`); after one goes, SQLite shows
    the other (regression: the ordered state merged them)."""
    conn = matview.connect(str(tmp_path / "mm.db"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, g INTEGER, x)")
    sql = "SELECT g, MIN(x), MAX(x), COUNT(DISTINCT x) FROM t GROUP BY g"
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {sql}")
    with conn:
        conn.executemany("INSERT INTO t(g, x) VALUES (?, ?)", [(i % 2, 3 if i % 3 else 3.0) for i in range(rows)])
    with pytest.raises(matview.Error, match="tied"):
        conn.execute("SELECT * FROM v").fetchall()
    with conn:
        conn.execute("DELETE FROM t WHERE typeof(x) = 'integer'")
    assert_view_matches(conn, "v", sql)
