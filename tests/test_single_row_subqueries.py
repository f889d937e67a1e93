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


def test_distinct_inside_a_subquery_over_typed_columns(tmp_path):
    """DISTINCT over plain typed BINARY columns inside a subquery keeps one variant per class
    whatever the scan order (`WITH buyers AS (SELECT DISTINCT customer_id FROM orders) … NOT IN
    (SELECT customer_id FROM buyers)`; refused before)."""
    setup = [
        "CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT)",
        "CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INT)",
        "INSERT INTO customers(name) VALUES ('a'), ('b'), ('c')",
        "INSERT INTO orders(customer_id) VALUES (1), (1), (3)",
    ]
    views = {
        "never_bought": "WITH buyers AS (SELECT DISTINCT customer_id FROM orders) "
        "SELECT id FROM customers WHERE id NOT IN (SELECT customer_id FROM buyers)",
        "counted": "SELECT id, (SELECT count(*) FROM (SELECT DISTINCT customer_id FROM orders)) FROM customers",
    }

    def write(conn, rng: random.Random) -> None:
        if rng.random() < 0.6:
            conn.execute("INSERT INTO orders(customer_id) VALUES (?)", (rng.randint(1, 5),))
        else:
            conn.execute("DELETE FROM orders WHERE id = (SELECT id FROM orders ORDER BY random() LIMIT 1)")

    check_write_mix(tmp_path, setup, views, write, seed=2, steps=10)


def test_a_lookup_of_a_keyed_materialized_view_by_its_key(tmp_path):
    """`(SELECT mt.y FROM mt WHERE mt.id = u.k)` over `mt AS SELECT * FROM t WHERE x > 0`: mt keeps
    t's INTEGER PRIMARY KEY, so the lookup returns one row at most (refused before)."""
    setup = [
        "CREATE TABLE t(id INTEGER PRIMARY KEY, x INT, y TEXT)",
        "CREATE TABLE u(id INTEGER PRIMARY KEY, k INT)",
        "CREATE MATERIALIZED VIEW mt AS SELECT * FROM t WHERE x > 0",
        "INSERT INTO t(x, y) VALUES (1, 'a'), (-1, 'b'), (2, 'c')",
        "INSERT INTO u(k) VALUES (1), (2), (3), (9)",
    ]
    views = {"lookup": "SELECT u.id, (SELECT mt.y FROM mt WHERE mt.id = u.k) FROM u"}

    def write(conn, rng: random.Random) -> None:
        action = rng.random()
        if action < 0.3:
            conn.execute("INSERT INTO t(x, y) VALUES (?, ?)", (rng.randint(-2, 3), rng.choice("abc")))
        elif action < 0.5:
            conn.execute("UPDATE t SET x = ? WHERE id = ?", (rng.randint(-2, 3), rng.randint(1, 12)))
        elif action < 0.8:
            conn.execute("INSERT INTO u(k) VALUES (?)", (rng.randint(1, 14),))
        else:
            conn.execute("DELETE FROM t WHERE id = ?", (rng.randint(1, 12),))

    check_write_mix(tmp_path, setup, views, write, seed=3, steps=10)
