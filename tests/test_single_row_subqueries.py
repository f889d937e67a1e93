"""A scalar subquery over one derived table that aggregates without GROUP BY (`(SELECT m FROM
best)`, best a CTE `SELECT max(t) AS m FROM s`) returns one row at most: maintained (refused
before as "may return several rows")."""

from __future__ import annotations

import random

from oracle import check_write_mix

SETUP = [
    "CREATE TABLE s(id INTEGER PRIMARY KEY, t INT, g INT)",
    "INSERT INTO s(t, g) VALUES (1, 1), (5, 2), (9, 1)",
]

VIEWS = {
    "select_list": "WITH best AS (SELECT max(t) AS m FROM s) SELECT id, t, (SELECT m FROM best) FROM s",
    "where": "WITH best AS (SELECT max(t) AS m FROM s) SELECT id FROM s WHERE t = (SELECT m FROM best)",
    "filtered": "SELECT id FROM s WHERE t = (SELECT m FROM (SELECT max(t) AS m FROM s WHERE g = 1))",
    "grouped": "SELECT g, count(*) FROM s WHERE t > (SELECT a FROM (SELECT avg(t) AS a FROM s)) GROUP BY g",
}


def _write(conn, rng: random.Random) -> None:
    action = rng.random()
    if action < 0.6:
        conn.execute("INSERT INTO s(t, g) VALUES (?, ?)", (rng.choice([1, 5, 9, None]), rng.choice([1, 2])))
    elif action < 0.8:
        conn.execute("DELETE FROM s WHERE id = (SELECT id FROM s ORDER BY random() LIMIT 1)")
    else:
        values = (rng.randint(0, 10),)
        conn.execute("UPDATE s SET t = ? WHERE id = (SELECT id FROM s ORDER BY random() LIMIT 1)", values)


def test_single_row_subqueries_follow_every_write(tmp_path):
    check_write_mix(tmp_path, SETUP, VIEWS, _write, seed=6, steps=12)
