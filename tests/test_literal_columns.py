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


def test_expressions_of_one_storage_class_have_no_variants(tmp_path):
    """`strftime(…)`, `lower(…)`, `date(…)` and `||` always give text (or NULL), so grouping,
    DISTINCT and UNION over them have no equal-but-different values (`sql.value_classes`): the
    year-over-year self-join of a grouped CTE was refused before."""
    setup = [
        "CREATE TABLE s(id INTEGER PRIMARY KEY, d TEXT, q INT)",
        "INSERT INTO s(d, q) VALUES ('2020-01-05', 1), ('2021-03-01', 2), ('2021-07-04', 3)",
    ]
    views = {
        "year_over_year": "WITH y AS (SELECT strftime('%Y', d) AS yr, sum(q) AS t FROM s GROUP BY yr) "
        "SELECT a.yr, a.t, b.t FROM y a LEFT JOIN y b ON b.yr = a.yr - 1",
        "distinct": "SELECT DISTINCT lower(d) FROM s",
        "concatenated": "SELECT substr(d, 1, 4) || '' AS y, count(*) FROM s GROUP BY 1",
        "union": "SELECT date(d) FROM s UNION SELECT date(d, '+1 day') FROM s",
    }

    def write(conn, rng: random.Random) -> None:
        if rng.random() < 0.6:
            values = (rng.choice(["2020-01-05", "2021-03-01", "2022-12-31", "X", None, 5]), rng.randint(0, 9))
            conn.execute("INSERT INTO s(d, q) VALUES (?, ?)", values)
        else:
            conn.execute("DELETE FROM s WHERE id = (SELECT id FROM s ORDER BY random() LIMIT 1)")

    check_write_mix(tmp_path, setup, views, write, seed=3, steps=10)


def test_what_has_no_one_class(tmp_path):
    """A CASE whose THEN concatenates but whose ELSE returns a column (`||` under CASE is not the
    top), and a user's function registered under a built-in's name, say nothing of the class:
    variants are tracked (review findings: the deleted row's spelling 1 stayed where SQLite shows 1.0)."""
    import matview

    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, c, a TEXT, b TEXT, d)")
    conn.execute("INSERT INTO t VALUES (1, 0, 'p', 'q', 1), (2, 0, 'p', 'q', 1.0), (3, 1, 'p', 'q', 5)")
    conn.create_scalar_function("lower", lambda value: value, 1, deterministic=True)
    selects = {
        "case_distinct": "SELECT DISTINCT CASE WHEN c THEN a || b ELSE d END AS e FROM t",
        "case_grouped": "SELECT CASE WHEN c THEN a || b ELSE d END AS e, count(*) FROM t GROUP BY e",
        "shadowed": "SELECT DISTINCT lower(d) FROM t",
    }
    for name, select in selects.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {select}")
    conn.execute("DELETE FROM t WHERE id = 1")
    for name, select in selects.items():
        assert sorted(conn.execute(f"SELECT * FROM {name}").fetchall(), key=repr) == sorted(
            conn.execute(select).fetchall(), key=repr
        )
