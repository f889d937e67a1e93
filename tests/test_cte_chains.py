"""CTE chains whose later CTEs read an aggregating one — `WITH t AS (… GROUP BY …), r AS (SELECT …
FROM t WHERE …) SELECT … FROM c JOIN r …`, `u AS (SELECT n, count(*) FROM t GROUP BY n) SELECT *
FROM u` — as analysts write them (were refused: "CTE … aggregated again"). The later CTE is an
internal node over the earlier one's node. Checked against SQLite under random writes, both modes."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from oracle import assert_views_match, check_write_mix, create_views_both_modes

import matview

SETUP = [
    "CREATE TABLE c(id INTEGER PRIMARY KEY, name TEXT, city TEXT)",
    "CREATE TABLE o(id INTEGER PRIMARY KEY, cid INT, amount INTEGER, day TEXT)",
]

VIEWS = {
    "filtered_then_joined": "WITH t AS (SELECT cid, sum(amount) AS s FROM o GROUP BY cid), "
    "r AS (SELECT cid, s FROM t WHERE s > 10) SELECT c.name, r.s FROM c JOIN r ON r.cid = c.id",
    "histogram": "WITH t AS (SELECT cid, count(*) AS n FROM o GROUP BY cid), "
    "u AS (SELECT n, count(*) AS k FROM t GROUP BY n) SELECT * FROM u",
    "three_deep": "WITH t AS (SELECT cid, day, sum(amount) AS s FROM o GROUP BY cid, day), "
    "d AS (SELECT cid, max(s) AS best FROM t GROUP BY cid), "
    "e AS (SELECT cid, best FROM d WHERE best > 0) SELECT c.city, count(*), sum(e.best) FROM c JOIN e ON e.cid = c.id "
    "GROUP BY c.city",
    "left_joined": "WITH t AS (SELECT cid, count(*) AS n FROM o GROUP BY cid), r AS (SELECT cid, n FROM t WHERE n > 1) "
    "SELECT c.id, coalesce(r.n, 0) AS n FROM c LEFT JOIN r ON r.cid = c.id",
    # an aggregating CTE joined inside a later CTE, which is read alone (refused before)
    "joined_inside": "WITH t AS (SELECT cid, sum(amount) AS s FROM o GROUP BY cid), "
    "b AS (SELECT c.name, t.s FROM t JOIN c ON c.id = t.cid) SELECT * FROM b WHERE s > 10",
    "joined_inside_regrouped": "WITH t AS (SELECT cid, count(*) AS n FROM o GROUP BY cid), "
    "b AS (SELECT c.city, t.n FROM t JOIN c ON c.id = t.cid), e AS (SELECT city, n * 2 AS n2 FROM b) "
    "SELECT city, sum(n2) FROM e GROUP BY city",
}


def _write(conn: matview.Connection, rng: random.Random) -> None:
    kind = rng.random()
    if kind < 0.4:
        conn.execute(
            "INSERT INTO o(cid, amount, day) VALUES (?, ?, ?)",
            (rng.randint(1, 5), rng.choice([1, 4, 9, -3, None]), rng.choice(["d1", "d2"])),
        )
    elif kind < 0.55:
        conn.execute("DELETE FROM o WHERE id % 4 = ?", (rng.randint(0, 3),))
    elif kind < 0.7:
        conn.execute(
            "UPDATE o SET cid = ?, amount = amount + 2 WHERE id % 3 = ?", (rng.randint(1, 5), rng.randint(0, 2))
        )
    elif kind < 0.9:
        conn.execute(
            "INSERT OR REPLACE INTO c VALUES (?, ?, ?)", (rng.randint(1, 5), rng.choice("abc"), rng.choice(["x", "y"]))
        )
    else:
        conn.execute("DELETE FROM c WHERE id = ?", (rng.randint(1, 5),))


@pytest.mark.parametrize("seed", range(3))
def test_cte_chains_over_aggregates(tmp_path: Path, seed: int) -> None:
    check_write_mix(tmp_path, SETUP, VIEWS, _write, seed, steps=16)


def test_star_over_an_aggregating_cte_in_a_set_operation_keeps_every_arm(tmp_path: Path) -> None:
    """`SELECT * FROM t UNION ALL SELECT * FROM t`, t an aggregating CTE: the statement is the
    set operation, not t's body (review: the other arms were lost)."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE o(id INTEGER PRIMARY KEY, cid INTEGER)")
    conn.execute("INSERT INTO o(cid) VALUES (1), (1), (2)")
    views = {
        "twice": "WITH t AS (SELECT cid, count(*) AS n FROM o GROUP BY cid) SELECT * FROM t UNION ALL SELECT * FROM t",
        "chained": "WITH t AS (SELECT cid, count(*) AS n FROM o GROUP BY cid), r AS (SELECT * FROM t WHERE n > 1) "
        "SELECT * FROM r UNION ALL SELECT * FROM t",
    }
    live = create_views_both_modes(conn, views)
    conn.execute("INSERT INTO o(cid) VALUES (2), (3)")
    conn.execute("DELETE FROM o WHERE id = 1")
    assert_views_match(conn, live)
