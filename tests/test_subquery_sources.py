"""CTEs, plain views and derived tables read inside subqueries (`matview.sql.subquery_sources`,
`from_items.is_from_item`): maintained in both modes under random multi-table writes,
and the shapes that stay refused, by name."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import run_scenario

import matview

SETUP = [
    "CREATE TABLE t(id INTEGER PRIMARY KEY, g INT, x TEXT)",
    "CREATE TABLE u(id INTEGER PRIMARY KEY, t_id INT, v INT)",
    "CREATE TABLE w(id INTEGER PRIMARY KEY, u_id INT, name TEXT)",
    "CREATE VIEW pv AS SELECT t_id, v FROM u WHERE v > 3",
    "CREATE VIEW pw AS SELECT u_id FROM w WHERE name IS NOT NULL",
    "CREATE VIEW nested AS SELECT t_id FROM pv WHERE v < 8",
]

VIEWS = {
    "cte_in": "WITH big AS (SELECT id, t_id FROM u WHERE v > 4) SELECT * FROM t WHERE id IN (SELECT t_id FROM big)",
    "cte_chain_exists": (
        "WITH big AS (SELECT id, t_id FROM u WHERE v > 2), bigger AS (SELECT t_id FROM big WHERE id % 2 = 0) "
        "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM bigger b WHERE b.t_id = t.id)"
    ),
    "cte_count": (
        "WITH big AS (SELECT id, t_id FROM u WHERE v > 4) "
        "SELECT t.id, (SELECT count(*) FROM big WHERE big.t_id = t.id) AS n FROM t"
    ),
    "view_in": "SELECT * FROM t WHERE id IN (SELECT t_id FROM pv)",
    "nested_view_not_in": "SELECT id, g FROM t WHERE id NOT IN (SELECT t_id FROM nested WHERE t_id IS NOT NULL)",
    "view_join_exists": (
        "SELECT u.id, u.v FROM u WHERE EXISTS (SELECT 1 FROM pw JOIN t ON t.id = u.t_id WHERE pw.u_id = u.id)"
    ),
    "derived_in": "SELECT * FROM t WHERE id IN (SELECT t_id FROM (SELECT t_id FROM u WHERE v > 1))",
    "derived_exists": (
        "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM (SELECT t_id, v FROM u WHERE v < 6) s WHERE s.t_id = t.id)"
    ),
    "derived_joined": (
        "SELECT * FROM t WHERE id IN (SELECT s.t_id FROM u AS a, (SELECT t_id, id FROM u WHERE v > 1) AS s "
        "WHERE s.id = a.id AND a.v < 9)"
    ),
    # a derived table with a subquery of its own: a hidden view (`matview.sql.nodes`)
    "node_projected": "SELECT s.k FROM (SELECT id AS k FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.t_id = t.id)) AS s",
    "node_grouped": (
        "SELECT s.k, count(*) FROM (SELECT g AS k FROM t WHERE NOT EXISTS "
        "(SELECT 1 FROM u WHERE u.t_id = t.id AND u.v > 5)) AS s GROUP BY s.k"
    ),
    "node_q22_shape": (
        "WITH custsale AS (SELECT substr(x, 1, 1) AS code, g FROM t WHERE g IN (0, 1) AND NOT EXISTS "
        "(SELECT * FROM u WHERE u.t_id = t.id)) SELECT code, count(*), sum(g) FROM custsale GROUP BY code"
    ),
    "node_joined": (
        "SELECT w.name, s.k FROM w JOIN (SELECT id AS k FROM u WHERE v IN (SELECT g FROM t)) AS s ON s.k = w.u_id"
    ),
    "aggregate_over_cte_sub": (
        "WITH big AS (SELECT t_id FROM u WHERE v > 3) "
        "SELECT g, count(*) FROM t WHERE id IN (SELECT t_id FROM big) GROUP BY g"
    ),
}


def _writes(rng: random.Random) -> list[list[str]]:
    steps = []
    for _ in range(14):
        step = []
        for _ in range(rng.randrange(1, 5)):
            kind = rng.randrange(7)
            if kind == 0:
                x = rng.choice(["'x1'", "'y2'", "NULL"])
                step.append(f"INSERT OR REPLACE INTO t VALUES ({rng.randrange(12)}, {rng.randrange(3)}, {x})")
            elif kind == 1:
                t_id = rng.choice([str(rng.randrange(12)), "NULL"])
                step.append(f"INSERT OR REPLACE INTO u VALUES ({rng.randrange(20)}, {t_id}, {rng.randrange(10)})")
            elif kind == 2:
                name = rng.choice(["'a'", "NULL"])
                step.append(f"INSERT OR REPLACE INTO w VALUES ({rng.randrange(15)}, {rng.randrange(20)}, {name})")
            elif kind == 3:
                step.append(f"UPDATE u SET v = {rng.randrange(10)} WHERE id % 5 = {rng.randrange(5)}")
            elif kind == 4:
                step.append(f"UPDATE u SET t_id = {rng.randrange(12)} WHERE id = {rng.randrange(20)}")
            elif kind == 5:
                step.append(f"DELETE FROM {rng.choice('tuw')} WHERE id % 4 = {rng.randrange(4)}")
            else:
                step.append(f"UPDATE w SET name = NULL WHERE id = {rng.randrange(15)}")
        steps.append(step)
    return steps


@pytest.mark.parametrize("seed", range(3))
def test_sources_read_inside_subqueries_are_maintained(tmp_path, seed):
    run_scenario(tmp_path, SETUP, VIEWS, _writes(random.Random(seed)))


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("WITH c(a) AS (SELECT t_id FROM u) SELECT * FROM t WHERE id IN (SELECT a FROM c)", "CTE"),
        (
            "WITH g AS (SELECT t_id % 7 AS k, count(*) n FROM u GROUP BY t_id % 7) SELECT * FROM t WHERE id IN "
            "(SELECT k FROM g WHERE n > 1)",
            "GROUP BY inside a subquery",
        ),
        ("WITH u AS (SELECT 1 AS t_id) SELECT * FROM t WHERE id IN (SELECT t_id FROM pv)", "rename the CTE"),
        ("SELECT t.id, (SELECT v FROM (SELECT v, t_id FROM u) s WHERE s.t_id = t.id) FROM t", "several rows"),
        (  # a derived table with a subquery of its own is not flattened yet
            "WITH big AS (SELECT id, t_id, v FROM u WHERE v > 2) "
            "SELECT id, v FROM big WHERE t_id NOT IN (SELECT t_id FROM big WHERE v > 7 AND t_id IS NOT NULL)",
            "subquery .* is not supported yet",
        ),
    ],
)
def test_refused_by_name(tmp_path, sql, words):
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for statement in SETUP:
        conn.execute(statement)
    with pytest.raises(matview.UnsupportedQuery, match=words):
        conn.execute(f"CREATE MATERIALIZED VIEW v AS {sql}")
    conn.execute("INSERT INTO u VALUES (1, 1, 5)")  # nothing left behind
    assert conn.views() == []


def test_a_plain_view_read_inside_a_subquery_redefined_by_another_client(tmp_path):
    """A plain view read only inside a subquery is a dependency too: redefined (or dropped)
    by another client, reading the materialized view says so instead of the old definition's rows."""
    import sqlite3

    path = str(tmp_path / "db.sqlite")
    conn = matview.connect(path)
    conn.execute("CREATE TABLE a(id INTEGER PRIMARY KEY, g TEXT, x INTEGER)")
    conn.execute("INSERT INTO a(g, x) VALUES ('p', 1), ('q', 2), ('p', 5)")
    conn.execute("CREATE VIEW pv AS SELECT g, x FROM a WHERE x > 1")
    conn.execute("CREATE MATERIALIZED VIEW w AS SELECT a.id FROM a WHERE a.g IN (SELECT g FROM pv WHERE x > 1)")
    stock = sqlite3.connect(path)
    stock.executescript("DROP VIEW pv; CREATE VIEW pv AS SELECT g, x FROM a WHERE x > 3;")
    stock.close()
    with pytest.raises(matview.Error, match="pv it reads was redefined"):
        conn.execute("SELECT * FROM w").fetchall()
