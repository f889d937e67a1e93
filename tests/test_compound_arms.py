"""Set operations whose arms aggregate, are DISTINCT, read subqueries or outer joins, or read
the query's CTEs (issue 6): each such arm is an internal node (`nodes._arm_nodes`), and the
set operation combines the nodes' rows. A set operation as a derived table, a CTE or under
IN is a node as well, read as a materialized view (its columns converted alike). Differential, both modes, several
tables per transaction, rollback, reopen, a stock `sqlite3` writer; DROP leaves nothing behind."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest
from oracle import assert_recomputed_whole, assert_views_match, column_names, create_views_both_modes, drive_write_mix

import matview

SCHEMA = [
    "CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INTEGER, amount INTEGER, status TEXT)",
    "CREATE TABLE refunds(id INTEGER PRIMARY KEY, order_id INTEGER, amount INTEGER)",
    "CREATE TABLE customers(id INTEGER PRIMARY KEY, region TEXT)",
]

VIEWS = {
    "report": (
        "SELECT 'orders' AS kind, count(*) AS n, total(amount) AS amount FROM orders "
        "UNION ALL SELECT 'refunds', count(*), total(amount) FROM refunds"
    ),
    "per_region": (
        "SELECT c.region, sum(o.amount) AS amount FROM orders o JOIN customers c ON c.id = o.customer_id "
        "GROUP BY c.region UNION ALL SELECT 'refunded', sum(amount) FROM refunds ORDER BY 2"
    ),
    "distinct_arm": "SELECT DISTINCT status FROM orders UNION ALL SELECT region FROM customers",
    "subquery_arm": (
        "SELECT id FROM orders WHERE EXISTS (SELECT 1 FROM refunds WHERE refunds.order_id = orders.id) "
        "UNION SELECT id FROM customers WHERE region = 'eu'"
    ),
    "outer_arm": (
        "SELECT o.id, r.amount FROM orders o LEFT JOIN refunds r ON r.order_id = o.id "
        "UNION ALL SELECT id, NULL FROM customers"
    ),
    "with_arms": (
        "WITH open AS (SELECT id, customer_id FROM orders WHERE status = 'open') "
        "SELECT customer_id FROM open UNION ALL SELECT id FROM customers WHERE id NOT IN (SELECT customer_id FROM open)"
    ),
    "except_aggregates": (
        "SELECT customer_id FROM orders GROUP BY customer_id HAVING count(*) > 1 "
        "EXCEPT SELECT id FROM customers WHERE region = 'us'"
    ),
    # a set operation as a derived table, a CTE, or under IN: a node too
    "derived_union_grouped": (
        "SELECT status, count(*) AS n FROM (SELECT status FROM orders UNION ALL SELECT region FROM customers) "
        "GROUP BY status"
    ),
    "cte_union_joined": (
        "WITH ids AS (SELECT customer_id AS id FROM orders UNION SELECT id FROM customers WHERE region = 'eu') "
        "SELECT c.id, c.region FROM customers c JOIN ids ON ids.id = c.id"
    ),
    "in_union_all": (
        "SELECT id FROM customers WHERE id IN (SELECT customer_id FROM orders WHERE status = 'open' "
        "UNION ALL SELECT order_id FROM refunds)"
    ),
    "not_in_except": (
        "SELECT id, region FROM customers "
        "WHERE id NOT IN (SELECT customer_id FROM orders EXCEPT SELECT order_id FROM refunds)"
    ),
    # unaliased: the column is named by the user's text, not by the node's rewrite
    "in_intersect_unaliased": (
        "SELECT id, customer_id IN (SELECT order_id FROM refunds INTERSECT SELECT id FROM customers) FROM orders"
    ),
    "in_max_unaliased": "SELECT id, customer_id IN (SELECT max(order_id) FROM refunds) FROM orders",
    # `SELECT *` straight over a set operation in a CTE or FROM-subquery: that set operation
    "star_over_cte_union": (
        "WITH ids AS (SELECT customer_id FROM orders UNION SELECT id FROM customers) SELECT * FROM ids"
    ),
    "star_over_derived_except": (
        "SELECT * FROM (SELECT customer_id AS c, amount FROM orders EXCEPT SELECT order_id, amount FROM refunds) AS e"
    ),
    "star_over_cte_reading_a_cte": (
        "WITH open AS (SELECT customer_id FROM orders WHERE status = 'open'), "
        "both AS (SELECT customer_id FROM open INTERSECT SELECT id FROM customers) SELECT * FROM both"
    ),
    "intersect_subquery": (
        "SELECT customer_id FROM orders WHERE amount > (SELECT avg(amount) FROM orders) "
        "INTERSECT SELECT id FROM customers"
    ),
}


def _setup(path: Path, rng: random.Random) -> tuple[matview.Connection, dict[str, str]]:
    conn = matview.connect(str(path))
    for sql in SCHEMA:
        conn.execute(sql)
    with conn:
        for i in range(1, 16):
            conn.execute("INSERT INTO customers VALUES (?, ?)", (i, rng.choice(["eu", "us", "apac", None])))
        for _ in range(60):
            _order(conn, rng)
        for _ in range(20):
            _refund(conn, rng)
    return conn, create_views_both_modes(conn, VIEWS)


def _order(conn: matview.Connection, rng: random.Random) -> None:
    conn.execute(
        "INSERT INTO orders(customer_id, amount, status) VALUES (?, ?, ?)",
        (rng.randint(1, 18), rng.choice([rng.randint(1, 100), None]), rng.choice(["open", "paid", "eu"])),
    )


def _refund(conn: matview.Connection, rng: random.Random) -> None:
    conn.execute("INSERT INTO refunds(order_id, amount) VALUES (?, ?)", (rng.randint(1, 90), rng.randint(1, 50)))


def _write(conn: matview.Connection, rng: random.Random) -> None:
    kind = rng.random()
    if kind < 0.25:
        _order(conn, rng)
    elif kind < 0.4:
        _refund(conn, rng)
    elif kind < 0.55:
        conn.execute("DELETE FROM orders WHERE id = ?", (rng.randint(1, 90),))
    elif kind < 0.65:
        conn.execute("DELETE FROM refunds WHERE order_id = ?", (rng.randint(1, 90),))
    elif kind < 0.8:
        conn.execute(
            "UPDATE orders SET status = ?, amount = ? WHERE id = ?",
            (rng.choice(["open", "paid"]), rng.randint(1, 100), rng.randint(1, 90)),
        )
    elif kind < 0.9:
        conn.execute(
            "UPDATE customers SET region = ? WHERE id = ?", (rng.choice(["eu", "us", None]), rng.randint(1, 15))
        )
    else:
        conn.execute(
            "UPDATE orders SET customer_id = ? WHERE customer_id = ?", (rng.randint(1, 18), rng.randint(1, 18))
        )


@pytest.mark.parametrize("seed", range(3))
def test_set_operations_over_complex_arms_follow_every_write(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "db.sqlite"
    conn, live = _setup(path, rng)
    conn = drive_write_mix(path, conn, live, _write, rng, steps=14, rolled_back_at=5)
    with conn:  # every arm empties, then fills again
        for table in ("refunds", "orders"):
            conn.execute(f"DELETE FROM {table}")
    assert_views_match(conn, live)
    with conn:
        for _ in range(30):
            _order(conn, rng)
            _refund(conn, rng)
    assert_views_match(conn, live)
    stock = sqlite3.connect(path)
    stock.execute("UPDATE orders SET amount = amount + 1 WHERE id % 2 = 0")
    stock.execute("DELETE FROM refunds WHERE id % 3 = 0")
    stock.commit()
    stock.close()
    assert_views_match(conn, live)
    conn.close()


def test_names_and_drop(tmp_path: Path) -> None:
    conn, live = _setup(tmp_path / "db.sqlite", random.Random(1))
    for view, sql in live.items():
        assert column_names(conn.execute(f'SELECT * FROM "{view}"')) == column_names(conn.execute(sql))
    for view in live:
        conn.execute(f"DROP MATERIALIZED VIEW {view}")
    assert conn.views() == []
    left = conn.execute("SELECT name FROM sqlite_master WHERE name LIKE '__dbsp%' AND name NOT LIKE '__dbsp_catalog%'")
    assert [n for (n,) in left if "node" in n or "view" in n] == []


def test_a_limit_on_the_set_operation_is_recomputed_whole(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in SCHEMA:
        conn.execute(sql)
    assert_recomputed_whole(
        conn,
        "SELECT customer_id, count(*) FROM orders GROUP BY customer_id "
        "UNION ALL SELECT id, 0 FROM customers ORDER BY 2 LIMIT 3",
    )


MIXED = {
    "union_except": "SELECT customer_id FROM orders UNION SELECT id FROM customers EXCEPT SELECT order_id FROM refunds",
    "intersect_union_all": (
        "SELECT customer_id FROM orders INTERSECT SELECT id FROM customers UNION ALL SELECT order_id FROM refunds"
    ),
    "union_union_all": (
        "SELECT customer_id FROM orders UNION SELECT id FROM customers UNION ALL SELECT order_id FROM refunds"
    ),
    "except_intersect_union": (
        "SELECT id FROM customers EXCEPT SELECT order_id FROM refunds INTERSECT SELECT customer_id FROM orders "
        "UNION SELECT amount FROM refunds WHERE amount < 5"
    ),
    "with_mixed": (
        "WITH big AS (SELECT customer_id FROM orders WHERE amount > 50) "
        "SELECT customer_id FROM big UNION SELECT id FROM customers EXCEPT SELECT customer_id FROM big"
    ),
}


@pytest.mark.parametrize("seed", range(2))
def test_mixed_chains_associate_to_the_left(tmp_path: Path, seed: int) -> None:
    """`A op1 B op2 C` is `(A op1 B) op2 C`: everything before the last run of one operator is
    a node, the left operand of that run."""
    rng = random.Random(seed)
    path = tmp_path / "db.sqlite"
    conn, _ = _setup(path, rng)
    live = create_views_both_modes(conn, MIXED)
    assert_views_match(conn, live)
    for step in range(10):
        with conn:
            for _ in range(rng.randint(1, 5)):
                _write(conn, rng)
        if step == 6:
            conn.close()
            conn = matview.connect(str(path))
        assert_views_match(conn, live)
    for view in live:
        conn.execute(f"DROP MATERIALIZED VIEW {view}")
    for view in VIEWS:
        for mode in ("imm", "def"):
            conn.execute(f"DROP MATERIALIZED VIEW {view}_{mode}")
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name LIKE '__dbsp_node%'").fetchone() == (0,)
