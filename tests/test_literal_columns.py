"""A literal column has one value, so no two of its values are equal but different: `SELECT
DISTINCT 0 FROM t`, `GROUP BY 'x'`, and the reporting union `SELECT name, 'customer' FROM c UNION
SELECT name, 'supplier' FROM s` are exact (refused before as untyped: "equal values can differ").
A literal of another class than the other arms' column (1.0 beside an INTEGER) stays refused."""

from __future__ import annotations

import random

import pytest
from oracle import assert_refused, check_write_mix

SETUP = [
    "CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT, score INTEGER)",
    "CREATE TABLE suppliers(id INTEGER PRIMARY KEY, name TEXT, score INTEGER)",
    "CREATE UNIQUE INDEX customer_names ON customers(name)",
    "INSERT INTO customers(name, score) VALUES ('a', 1), ('b', 2)",
    "INSERT INTO suppliers(name, score) VALUES ('a', 1), ('c', NULL)",
]

VIEWS = {
    "tagged": "SELECT name, 'customer' AS kind FROM customers UNION SELECT name, 'supplier' FROM suppliers",
    "numbered": "SELECT name, 1 AS k, NULL AS empty FROM customers UNION SELECT name, 2, NULL FROM suppliers",
    "same_class": "SELECT score, 7 FROM customers UNION SELECT score, 7 FROM suppliers",
    "distinct": "SELECT DISTINCT 0, 'x' FROM customers",
    "grouped": "SELECT 'all' AS g, count(*) FROM customers GROUP BY 'all'",
}


def _write(conn, rng: random.Random) -> None:
    table = rng.choice(["customers", "suppliers"])
    if rng.random() < 0.6:
        values = (rng.choice(["a", "b", "c", "customer"]) + str(rng.randint(0, 3)), rng.choice([1, 2, None]))
        conn.execute(f"INSERT OR IGNORE INTO {table}(name, score) VALUES (?, ?)", values)
    else:
        conn.execute(f"DELETE FROM {table} WHERE id = (SELECT id FROM {table} ORDER BY random() LIMIT 1)")


@pytest.mark.parametrize("seed", range(2))
def test_literal_columns_are_exact(tmp_path, seed):
    check_write_mix(tmp_path, SETUP, VIEWS, _write, seed, steps=10)


def test_a_literal_of_another_class_than_the_column_stays_refused(tmp_path):
    select = "SELECT score FROM customers UNION SELECT 1.0 FROM suppliers"
    assert_refused(tmp_path, SETUP, select, match="equal values can differ")
