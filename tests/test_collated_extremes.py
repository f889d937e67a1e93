"""MIN and MAX under NOCASE/RTRIM beside another MIN/MAX, or with FILTER (`SELECT country,
MIN(username), MAX(username) … GROUP BY country`, username NOCASE): SQLite shows the first
spelling of the extreme class its rowid scan meets; each such call keeps its rows by (class,
rowid) (`Accumulator.collated`). Maintained in both modes under random writes that change
spellings ('ann' → 'ANN', 'a' → 'a '), a bulk transaction, and CREATE over existing rows; an
index that reorders the scan breaks the view, by name."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_views_match, create_views_both_modes, run_scenario

import matview

SETUP = [
    "CREATE TABLE users(id INTEGER PRIMARY KEY, country TEXT, username TEXT COLLATE NOCASE, tag TEXT COLLATE RTRIM, x)",
    "INSERT INTO users VALUES (1, 'us', 'ann', 'a', 1), (2, 'us', 'ANN', 'a ', 2), (3, 'fr', 'Bob', 'b', 3), "
    "(4, 'fr', 'bob', 'B', 0), (5, 'us', NULL, NULL, 2), (6, 'fr', 1, 'a', 1.0)",
]

VIEWS = {
    "both": "SELECT country, MIN(username), MAX(username) FROM users GROUP BY country",
    "whole": "SELECT MIN(username), MAX(username), count(*) FROM users",
    "filtered": "SELECT country, MAX(username) FILTER (WHERE x > 1), MIN(tag), MAX(tag), min(x) FROM users "
    "GROUP BY country",
    "expression": "SELECT country, min(username) || '/' || max(username) AS r FROM users GROUP BY country "
    "HAVING max(username) > 'a'",
    "explicit": "SELECT country, max(username COLLATE NOCASE), min(country COLLATE NOCASE) FROM users GROUP BY country",
}

NAMES = ["'ann'", "'Ann'", "'ANN'", "'bob'", "'BOB'", "'b'", "'B'", "NULL", "1", "1.0", "'zed'", "'Zed'"]
TAGS = ["'a'", "'a '", "'a  '", "'b'", "'B'", "NULL"]


def _writes(rng: random.Random) -> list[list[str]]:
    steps = []
    for number in range(16):
        step = []
        for _ in range(rng.randrange(1, 7)):
            kind = rng.randrange(5)
            if kind < 2:
                row = f"{rng.randrange(15)}, '{rng.choice(['us', 'fr'])}', {rng.choice(NAMES)}, {rng.choice(TAGS)}"
                step.append(f"INSERT OR REPLACE INTO users VALUES ({row}, {rng.randrange(4)})")
            elif kind == 2:
                step.append(f"DELETE FROM users WHERE id = {rng.randrange(15)}")
            elif kind == 3:
                step.append(f"UPDATE users SET username = {rng.choice(NAMES)} WHERE id = {rng.randrange(15)}")
            else:
                step.append(
                    f"UPDATE users SET country = '{rng.choice(['us', 'fr', 'de'])}' WHERE id % 3 = {rng.randrange(3)}"
                )
        if number == 8:  # set at a time
            step.append(
                "INSERT OR REPLACE INTO users WITH RECURSIVE s(v) AS (SELECT 0 UNION ALL SELECT v + 1 FROM s "
                "WHERE v < 80) SELECT 100 + v, 'us', CASE v % 3 WHEN 0 THEN 'ANN' ELSE 'aNN' END, 'a ', 2 FROM s"
            )
        steps.append(step)
    return steps


@pytest.mark.parametrize("seed", range(3))
def test_collated_extremes_beside_others_are_maintained(tmp_path, seed):
    run_scenario(tmp_path, SETUP, VIEWS, _writes(random.Random(seed))).close()


def test_an_index_that_reorders_the_scan_breaks_the_view(tmp_path):
    conn = run_scenario(tmp_path, SETUP, {"both": VIEWS["both"]}, [])
    conn.execute("CREATE INDEX by_country_x ON users(country, x)")
    with pytest.raises(matview.Error, match="by_country_x"):
        conn.execute("SELECT * FROM both_imm").fetchall()
    conn.execute("DROP INDEX by_country_x")
    assert conn.execute("SELECT count(*) FROM both_imm").fetchone()[0] == 2


def test_a_null_extreme_grouped_by_the_key(tmp_path: Path) -> None:
    """MAX of a NOCASE column grouped by the INTEGER PRIMARY KEY keeps its row by value alone
    (one row per group): a NULL one was kept under a NULL order, which the ordered state
    refuses — CREATE failed, and so did every write of such a row (hunt 26)."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE c(id INTEGER PRIMARY KEY, email TEXT COLLATE NOCASE, n INT)")
    conn.execute("INSERT INTO c VALUES (1, NULL, 1), (2, 'A', 2)")
    live = create_views_both_modes(
        conn,
        {
            "top": "SELECT id, MAX(email) FROM c GROUP BY id",
            "low": "SELECT id, n, MIN(email) AS e FROM c GROUP BY id",
        },
    )
    for statement in (
        "INSERT INTO c VALUES (3, NULL, 3)",
        "UPDATE c SET email = NULL WHERE id = 2",
        "UPDATE c SET email = 'b' WHERE id = 1",
        "DELETE FROM c WHERE id = 3",
    ):
        conn.execute(statement)
        assert_views_match(conn, live)
