# ruff: noqa: E501  (each view stays on one line)
"""Hunt 42 (about 580 real-world SELECTs over star, app and forum schemas, 7,000 seeded write
mixes, both modes): one wrong answer. SQLite's `x IN t` — a table name after IN, its shorthand
for `x IN (SELECT * FROM t)` — reads `t` with no subquery in the text, so the front end planned
the view over its FROM tables alone and a change of `t` never reached it. The front end now
refuses every `IN <name>` (`validate.refuse_in_table_names`), so such a view is recomputed whole;
and, as a safety net, CREATE checks with SQLite's authorizer that the plan follows every table
the SELECT reads (`whole.untracked_reads`)."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_views_match, check_write_mix

import matview

SETUP = [
    "CREATE TABLE banned(uid INTEGER)",
    "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT)",
    "CREATE TABLE comments(id INTEGER PRIMARY KEY, uid INT, post INT)",
    "CREATE VIEW banned_view AS SELECT uid FROM banned",
    "INSERT INTO users VALUES (1, 'a'), (2, 'b'), (3, 'c')",
    "INSERT INTO comments VALUES (1, 1, 10), (2, 2, 10), (3, 3, 11), (4, NULL, 11)",
    "INSERT INTO banned VALUES (1)",
]

VIEWS = {
    "in_table": "SELECT id FROM comments WHERE uid IN banned",
    "not_in_table": "SELECT id, uid FROM comments WHERE uid NOT IN main.banned",
    "in_view": "SELECT id FROM comments WHERE (uid + 0) IN banned_view",
    "in_case": "SELECT id, CASE WHEN uid IN banned THEN 'hidden' ELSE 'shown' END AS s FROM comments",
    "in_filter": "SELECT post, count(*) FILTER (WHERE uid IN banned) AS n FROM comments GROUP BY post",
    "in_on": "SELECT c.id, u.name FROM comments c LEFT JOIN users u ON u.id = c.uid AND c.uid NOT IN banned",
    "in_exists": "SELECT u.id FROM users u WHERE EXISTS (SELECT 1 FROM comments c WHERE c.uid = u.id AND c.uid IN banned)",
    "in_scalar": "SELECT u.id, (SELECT count(*) FROM comments c WHERE c.uid = u.id AND c.uid IN banned) AS n FROM users u",
}


def _write(conn: Any, rng: random.Random) -> None:
    uid = rng.choice(["1", "2", "3", "NULL"])
    kind = rng.random()
    if kind < 0.35:
        conn.execute(f"INSERT INTO banned VALUES ({uid})")
    elif kind < 0.6:
        conn.execute(f"DELETE FROM banned WHERE rowid = (SELECT min(rowid) FROM banned WHERE uid IS {uid})")
    elif kind < 0.8:
        conn.execute(f"INSERT INTO comments(uid, post) VALUES ({uid}, {rng.choice([10, 11])})")
    else:
        conn.execute(f"UPDATE comments SET uid = {uid} WHERE id = {rng.randint(1, 6)}")


@pytest.mark.fall_back_to_whole
@pytest.mark.parametrize("seed", range(2))
def test_a_table_named_after_in_reaches_the_view(tmp_path: Path, seed: int) -> None:
    conn, live = check_write_mix(tmp_path, SETUP, VIEWS, _write, seed, steps=10)
    for view in live:
        assert "recomputed whole" in conn.view(view).explain(), view
    conn.close()


@pytest.mark.fall_back_to_whole
def test_the_reason_names_the_shorthand_and_a_temp_table_is_refused(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in SETUP:
        conn.execute(sql)
    with pytest.raises(matview.UnsupportedQuery, match=r"`IN banned`: a table name after IN"):
        conn.execute(f"CREATE MATERIALIZED VIEW v WITH (recompute = 'never') AS {VIEWS['in_table']}")
    conn.execute("CREATE TEMP TABLE tt(v)")
    with pytest.raises(matview.UnsupportedQuery, match="IN tt"):  # (and whole, it reads a TEMP table)
        conn.execute("CREATE MATERIALIZED VIEW w AS SELECT id FROM comments WHERE uid IN tt")
    assert conn.views() == []
    conn.close()


@pytest.mark.fall_back_to_whole
def test_in_a_table_the_view_reads_otherwise_too(tmp_path: Path) -> None:
    """Hunt 45: `IN s` where the view also reads `s` (its root, a join, a plain view or a
    materialized view over it) passed a check of the tables read; every `IN <name>` is now
    refused by the front end (`validate.refuse_in_table_names`), so the view is recomputed whole."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE s(a INTEGER PRIMARY KEY)")
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, a INT)")
    conn.execute("CREATE VIEW pv AS SELECT a FROM s")
    conn.execute("INSERT INTO s VALUES (1)")
    conn.execute("INSERT INTO t VALUES (1, 1), (2, 2), (3, 3)")
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT a FROM s GROUP BY a")
    views = {
        "root": "SELECT a FROM s WHERE a + 1 IN s",
        "joined": "SELECT t.id FROM t LEFT JOIN s ON s.a = t.a + 100 WHERE t.a IN s",
        "plain": "SELECT t.id FROM t LEFT JOIN s ON s.a = t.a + 100 WHERE t.a IN pv",
        "upstream": "SELECT t.id, m.a FROM t LEFT JOIN m ON m.a = t.a + 100 WHERE t.a IN m",
        "cte": "WITH q AS (SELECT a FROM s) SELECT t.id FROM t LEFT JOIN s ON s.a = t.a + 100 WHERE t.a IN q",
    }
    for name, select in views.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {select}")
        assert "recomputed whole" in conn.view(name).explain(), name
    for write in ["INSERT INTO s VALUES (2)", "INSERT INTO s VALUES (3)", "DELETE FROM s WHERE a = 1"]:
        conn.execute(write)
        assert_views_match(conn, views)
    conn.close()


def test_nodes_over_a_materialized_view_stay_maintained(tmp_path: Path) -> None:
    """Hunt 45: the check of the tables a SELECT reads left out the materialized views its
    internal nodes read: views over an aggregating derived table or CTE of a materialized view
    went to whole recompute (refused under `recompute = 'never'`)."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE o(id INTEGER PRIMARY KEY, cid INTEGER, amount INTEGER)")
    conn.execute("CREATE TABLE c(id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO c VALUES (1, 'a'), (2, 'b')")
    conn.execute("INSERT INTO o VALUES (1, 1, 5), (2, 1, 7), (3, 2, 1)")
    conn.execute("CREATE MATERIALIZED VIEW m2 AS SELECT id, cid, amount FROM o WHERE amount > 0")
    conn.execute("CREATE MATERIALIZED VIEW m1 AS SELECT cid, sum(amount) AS s FROM o GROUP BY cid")
    views = {
        "distinct": "SELECT c.name FROM c JOIN (SELECT DISTINCT cid FROM m2) d ON d.cid = c.id",
        "having": "SELECT * FROM c WHERE id IN (SELECT cid FROM m2 GROUP BY cid HAVING count(*) > 1)",
        "cte": "WITH q AS (SELECT cid, count(*) AS n FROM m2 GROUP BY cid) SELECT c.name, q.n FROM c JOIN q ON q.cid = c.id",
        "left": "SELECT c.id, q.t FROM c LEFT JOIN (SELECT cid, sum(amount) AS t FROM m2 GROUP BY cid) q ON q.cid = c.id",
        "grouped": "SELECT c.id, t.x FROM c JOIN (SELECT cid, max(s) AS x FROM m1 GROUP BY cid) t ON t.cid = c.id",
    }
    for name, select in views.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} WITH (recompute = 'never') AS {select}")
        assert "recomputed whole" not in conn.view(name).explain(), name
    for write in ["INSERT INTO o VALUES (4, 2, 3)", "DELETE FROM o WHERE id = 1", "UPDATE o SET cid = 2 WHERE id = 2"]:
        conn.execute(write)
        assert_views_match(conn, views)
    conn.close()
