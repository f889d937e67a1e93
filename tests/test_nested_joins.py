"""A parenthesized join that starts the FROM clause (`FROM ((a JOIN b ON …) JOIN c ON …) JOIN d
ON …`, as Microsoft Access and query builders write every join) is the same join without its
parentheses (`matview.sql.nested_joins`): maintained, not recomputed whole. Checked against
SQLite under random writes of every table, both modes; the other parenthesized joins stay
refused by name."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from oracle import assert_refused, check_write_mix

import matview
from matview.sql.nested_joins import unnest_leading_joins

SETUP = [
    "CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT, region TEXT)",
    "CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INT, status TEXT)",
    "CREATE TABLE items(id INTEGER PRIMARY KEY, order_id INT, product_id INT, qty INT)",
    "CREATE TABLE products(id INTEGER PRIMARY KEY, name TEXT, price REAL)",
]

VIEWS = {
    "access": "SELECT customers.name, products.name AS product, items.qty FROM ((customers INNER JOIN orders "
    "ON customers.id = orders.customer_id) INNER JOIN items ON orders.id = items.order_id) INNER JOIN products "
    "ON items.product_id = products.id",
    "access_grouped": "SELECT c.region, sum(i.qty * p.price) AS revenue, count(*) FROM ((customers AS c "
    "INNER JOIN orders AS o ON c.id = o.customer_id) INNER JOIN items AS i ON o.id = i.order_id) "
    "INNER JOIN products AS p ON i.product_id = p.id WHERE o.status <> 'void' GROUP BY c.region",
    "access_left": "SELECT c.id, o.id, count(i.id) FROM (customers c LEFT JOIN orders o ON o.customer_id = c.id) "
    "LEFT JOIN items i ON i.order_id = o.id GROUP BY c.id, o.id",
    "star": "SELECT * FROM (orders JOIN customers ON customers.id = orders.customer_id)",
    "single": "SELECT id, name FROM (products) WHERE price > 2",
    "in_subquery": "SELECT id FROM customers c WHERE EXISTS (SELECT 1 FROM (orders o JOIN items i "
    "ON i.order_id = o.id) WHERE o.customer_id = c.id AND i.qty > 2)",
}


def _write(conn: matview.Connection, rng: random.Random) -> None:
    kind = rng.random()
    if kind < 0.2:
        conn.execute(
            "INSERT OR REPLACE INTO customers VALUES (?, ?, ?)", (rng.randint(1, 5), rng.choice("ab"), rng.choice("xy"))
        )
    elif kind < 0.4:
        conn.execute(
            "INSERT OR REPLACE INTO orders VALUES (?, ?, ?)",
            (rng.randint(1, 8), rng.randint(1, 5), rng.choice(["open", "void"])),
        )
    elif kind < 0.65:
        conn.execute(
            "INSERT INTO items(order_id, product_id, qty) VALUES (?, ?, ?)",
            (rng.randint(1, 8), rng.randint(1, 4), rng.randint(1, 4)),
        )
    elif kind < 0.75:
        conn.execute("INSERT OR REPLACE INTO products VALUES (?, ?, ?)", (rng.randint(1, 4), rng.choice("pq"), 1.5))
    elif kind < 0.85:
        conn.execute("DELETE FROM items WHERE id % 3 = ?", (rng.randint(0, 2),))
    else:
        conn.execute("DELETE FROM orders WHERE id = ?", (rng.randint(1, 8),))


@pytest.mark.parametrize("seed", range(3))
def test_leading_parenthesized_joins_maintained(tmp_path: Path, seed: int) -> None:
    conn, live = check_write_mix(tmp_path, SETUP, VIEWS, _write, seed, steps=14)
    for view in live:
        assert "recomputed whole" not in conn.view(view).explain()
    conn.close()


def test_the_view_keeps_its_select_as_written(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in SETUP:
        conn.execute(sql)
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {VIEWS['access']}")
    assert "((customers INNER JOIN orders" in conn.view("v").sql
    conn.close()


@pytest.mark.parametrize(
    "select",
    [
        # nested to the right
        "SELECT customers.id FROM customers JOIN (orders JOIN items ON items.order_id = orders.id) "
        "ON orders.customer_id = customers.id",
        # columns merged inside: SQLite resolves them within the parentheses
        "SELECT orders.id FROM (orders JOIN items USING (id)) JOIN customers ON customers.id = orders.customer_id",
        # an alias of its own
        "SELECT j.id FROM (orders JOIN items ON items.order_id = orders.id) AS j",
    ],
)
def test_other_parenthesized_joins_stay_refused(tmp_path: Path, select: str) -> None:
    assert "parenthesized join" in assert_refused(tmp_path, SETUP, select)


def test_unnesting_is_textual_and_local() -> None:
    assert unnest_leading_joins("SELECT * FROM(a LEFT JOIN b ON x)") == "SELECT * FROM a LEFT JOIN b ON x "
    assert unnest_leading_joins("SELECT * FROM (SELECT 1) JOIN c") == "SELECT * FROM (SELECT 1) JOIN c"
    nested = "SELECT * FROM ((a JOIN b ON 1) JOIN c ON 2) JOIN d ON 3"
    assert " ".join(unnest_leading_joins(nested).split()) == "SELECT * FROM a JOIN b ON 1 JOIN c ON 2 JOIN d ON 3"
