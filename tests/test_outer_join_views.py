"""A plain view, CTE or FROM-subquery whose own FROM clause has an outer join, read by a view
(the "summary view" habit: `CREATE VIEW cust_summary AS SELECT c.id, count(o.id) … FROM customers c
LEFT JOIN orders o … GROUP BY c.id`, then `SELECT * FROM cust_summary WHERE orders >= 2`). The
inline pass joins by WHERE and cannot flatten an outer join, so it is an internal node over its
own FROM clause (a plain view's body as written, which breaks the view when redefined). Refused
before (issue 5; six of a real-world hunt's queries)."""

from __future__ import annotations

import random

import pytest
from oracle import check_write_mix

import matview

SETUP = [
    "CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT)",
    "CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INT, amount REAL)",
    "CREATE VIEW cust_summary AS SELECT c.id, c.name, count(o.id) AS orders, sum(o.amount) AS total "
    "FROM customers c LEFT JOIN orders o ON o.customer_id = c.id GROUP BY c.id",
    "CREATE VIEW cust_orders AS SELECT c.name, o.amount FROM customers c LEFT JOIN orders o ON o.customer_id = c.id",
    "INSERT INTO customers(name) VALUES ('a'), ('b'), (NULL)",
    "INSERT INTO orders(customer_id, amount) VALUES (1, 2.5), (1, 3), (2, NULL)",
]

VIEWS = {
    "filtered": "SELECT * FROM cust_summary WHERE orders >= 2",
    "star": "SELECT * FROM cust_summary",
    "columns": "SELECT name, orders FROM cust_summary",
    "joined": "SELECT s.name, s.total, o.amount FROM cust_summary s JOIN orders o ON o.customer_id = s.id",
    "subquery": "SELECT * FROM (SELECT c.id, count(o.id) AS n FROM customers c LEFT JOIN orders o "
    "ON o.customer_id = c.id GROUP BY c.id) WHERE n > 0",
    "cte": "WITH x AS (SELECT c.id, count(o.id) AS n FROM customers c LEFT JOIN orders o ON o.customer_id = c.id "
    "GROUP BY c.id) SELECT n, count(*) FROM x GROUP BY n",
    "regrouped": "SELECT name, sum(amount) FROM cust_orders GROUP BY name",
    "rows": "SELECT * FROM cust_orders WHERE amount > 1",
    # the view's body reads the file's tables, not the query's CTE of the same name
    "shadowing_cte": "WITH customers AS (SELECT 1 AS id, 2 AS name) SELECT * FROM cust_summary",
}


def _write(conn, rng: random.Random) -> None:
    action = rng.random()
    if action < 0.3:
        conn.execute("INSERT INTO customers(name) VALUES (?)", (rng.choice(["a", "b", None]),))
    elif action < 0.4:
        conn.execute("DELETE FROM customers WHERE id = (SELECT id FROM customers ORDER BY random() LIMIT 1)")
    elif action < 0.75:
        values = (rng.randint(1, 8), rng.choice([1.5, 2, None]))
        conn.execute("INSERT INTO orders(customer_id, amount) VALUES (?, ?)", values)
    else:
        conn.execute("DELETE FROM orders WHERE id = (SELECT id FROM orders ORDER BY random() LIMIT 1)")


@pytest.mark.parametrize("seed", range(3))
def test_outer_joins_inside_derived_tables_follow_every_write(tmp_path, seed):
    check_write_mix(tmp_path, SETUP, VIEWS, _write, seed, steps=10)


def test_redefining_the_plain_view_breaks_the_view(tmp_path):
    conn, _live = check_write_mix(tmp_path, SETUP, {"v": VIEWS["filtered"]}, _write, seed=1, steps=2)
    conn.execute("DROP VIEW cust_summary")
    conn.execute("CREATE VIEW cust_summary AS SELECT id, name, 0 AS orders, 0 AS total FROM customers")
    with pytest.raises(matview.Error, match="cust_summary it reads was redefined"):
        conn.execute("SELECT * FROM v_imm").fetchall()
