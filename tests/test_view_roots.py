"""An aggregating or DISTINCT FROM-subquery, CTE or materialized view as the *first* table of a
LEFT JOIN (or the right table of a RIGHT JOIN chain): its rows never repeat, so all its columns
are its key, and the view is maintained per row of it (`operators.partition`), as over a base
table (issue 5; refused before: "put a base table first")."""

from __future__ import annotations

import random

import pytest
from oracle import assert_refused, check_write_mix

SETUP = [
    "CREATE TABLE sales(id INTEGER PRIMARY KEY, region TEXT, qty INT)",
    "CREATE TABLE regions(code TEXT PRIMARY KEY, name TEXT)",
    "CREATE TABLE notes(id INTEGER PRIMARY KEY, region TEXT, note TEXT)",
    "CREATE MATERIALIZED VIEW tot AS SELECT region, sum(qty) AS total FROM sales GROUP BY region",
    "INSERT INTO sales(region, qty) VALUES ('n', 3), ('s', 4), (NULL, 1)",
    "INSERT INTO regions VALUES ('n', 'North'), ('w', 'West')",
]

VIEWS = {
    "subquery": "SELECT x.region, x.total, r.name FROM (SELECT region, sum(qty) AS total FROM sales GROUP BY region) x "
    "LEFT JOIN regions r ON r.code = x.region",
    "view": "SELECT t.region, t.total, r.name FROM tot t LEFT JOIN regions r ON r.code = t.region",
    "chain": "SELECT t.region, r.name, n.note FROM tot t LEFT JOIN regions r ON r.code = t.region "
    "LEFT JOIN notes n ON n.region = r.code",
    "distinct_cte": "WITH d AS (SELECT DISTINCT region FROM sales) SELECT d.region, count(n.id) FROM d "
    "LEFT JOIN notes n ON n.region = d.region GROUP BY d.region",
    "anti_join": "SELECT t.region, t.total FROM tot t LEFT JOIN regions r ON r.code = t.region WHERE r.code IS NULL",
    "right_root": "SELECT r.name, t.total FROM regions r RIGHT JOIN tot t ON t.region = r.code",
}


def _write(conn, rng: random.Random) -> None:
    action = rng.random()
    if action < 0.35:
        conn.execute(
            "INSERT INTO sales(region, qty) VALUES (?, ?)", (rng.choice(["n", "s", "e", None]), rng.randint(-3, 9))
        )
    elif action < 0.5:
        conn.execute("DELETE FROM sales WHERE id = (SELECT id FROM sales ORDER BY random() LIMIT 1)")
    elif action < 0.65:
        conn.execute(
            "INSERT OR REPLACE INTO regions VALUES (?, ?)", (rng.choice("nsew"), rng.choice(["North", "South", None]))
        )
    elif action < 0.75:
        conn.execute("DELETE FROM regions WHERE code = ?", (rng.choice("nsew"),))
    elif action < 0.9:
        conn.execute("INSERT INTO notes(region, note) VALUES (?, ?)", (rng.choice(["n", "s", None]), "x"))
    else:
        conn.execute("DELETE FROM notes WHERE id = (SELECT id FROM notes ORDER BY random() LIMIT 1)")


@pytest.mark.parametrize("seed", range(3))
def test_a_view_whose_rows_never_repeat_as_the_root(tmp_path, seed):
    check_write_mix(tmp_path, SETUP, VIEWS, _write, seed, steps=12)


def test_a_root_whose_rows_may_repeat_stays_refused(tmp_path):
    setup = [*SETUP, "CREATE MATERIALIZED VIEW amounts AS SELECT region, qty FROM sales"]
    select = "SELECT a.qty, r.name FROM amounts a LEFT JOIN regions r ON r.code = a.region"
    assert_refused(tmp_path, setup, select, match="put a base table first")


def test_the_latest_row_per_group_through_in(tmp_path):
    """`id IN (SELECT max(id) FROM ledger GROUP BY acct)`: the IN subquery's node keeps its GROUP
    BY terms as columns too, so its rows never repeat and the view is maintained per row of its
    first table (refused before: "rows may repeat")."""
    setup = [
        "CREATE TABLE ledger(id INTEGER PRIMARY KEY, acct INT, amount INT)",
        "CREATE TABLE acc(id INTEGER PRIMARY KEY, name TEXT)",
        "INSERT INTO ledger(acct, amount) VALUES (1, 5), (1, 7), (2, 3), (NULL, 1)",
        "INSERT INTO acc VALUES (1, 'x'), (2, 'y')",
    ]
    views = {
        "latest": "SELECT * FROM ledger WHERE id IN (SELECT max(id) FROM ledger GROUP BY acct)",
        "joined": "SELECT a.name, l.amount FROM acc a JOIN ledger l ON l.acct = a.id "
        "WHERE l.id IN (SELECT max(id) FROM ledger GROUP BY acct)",
        "having": "SELECT count(*) FROM ledger WHERE amount IN (SELECT max(amount) AS m FROM ledger GROUP BY acct "
        "HAVING count(*) > 1)",
    }

    def write(conn, rng: random.Random) -> None:
        action = rng.random()
        if action < 0.5:
            values = (rng.choice([1, 2, 3, None]), rng.randint(-3, 5))
            conn.execute("INSERT INTO ledger(acct, amount) VALUES (?, ?)", values)
        elif action < 0.7:
            conn.execute("DELETE FROM ledger WHERE id = (SELECT id FROM ledger ORDER BY random() LIMIT 1)")
        elif action < 0.85:
            conn.execute(
                "UPDATE ledger SET acct = ? WHERE id = (SELECT id FROM ledger ORDER BY random() LIMIT 1)",
                (rng.choice([1, 2, 3]),),
            )
        else:
            conn.execute("INSERT OR REPLACE INTO acc VALUES (?, ?)", (rng.randint(1, 3), rng.choice(["x", "y"])))

    check_write_mix(tmp_path, setup, views, write, seed=5, steps=12)


def test_a_right_join_to_a_materialized_view_read_on_a_matview_connection(tmp_path):
    """SQLite's RIGHT JOIN marks the right table's matched rows by rowid in one scan and skips
    them in another: the virtual table's rowids must be the same in every scan (they were each
    scan's positions: a row lost, another twice — a review finding on the read path)."""
    import sqlite3

    import matview

    path = str(tmp_path / "db.sqlite")
    conn = matview.connect(path)
    conn.execute("CREATE TABLE s(id INTEGER PRIMARY KEY, g, v)")
    conn.execute("CREATE TABLE r(code PRIMARY KEY, name)")
    conn.execute("INSERT INTO s(g, v) VALUES (1, 1), (2, 2), (3, 3)")
    conn.execute("INSERT INTO r VALUES (3, 'x')")
    conn.execute("CREATE MATERIALIZED VIEW mv AS SELECT g, sum(v) AS tot FROM s GROUP BY g")
    deferred = "WITH (maintenance = 'deferred') AS SELECT g, sum(v) AS tot FROM s GROUP BY g"
    conn.execute(f"CREATE MATERIALIZED VIEW mvd {deferred}")
    conn.execute("INSERT INTO s(g, v) VALUES (4, 3), (1, 1)")  # (pending for mvd)
    for join in ("RIGHT", "FULL"):
        for view in ("mv", "mvd"):
            select = f"SELECT r.name, m.g, m.tot FROM r {join} JOIN {view} m ON r.code = m.tot"
            derived = select.replace(f"{view} m", "(SELECT g, sum(v) AS tot FROM s GROUP BY g) m")
            assert sorted(conn.execute(select).fetchall(), key=repr) == sorted(
                sqlite3.connect(path).execute(derived).fetchall(), key=repr
            )


def test_a_materialized_view_that_keeps_its_tables_key_never_repeats(tmp_path):
    """`CREATE MATERIALIZED VIEW open_orders AS SELECT * FROM orders WHERE status = 'open'` keeps the
    INTEGER PRIMARY KEY: its rows never repeat, so it may be read in subqueries and outer joins
    (refused before as a view "whose rows may repeat"; `sql/row_keys.py`)."""
    setup = [
        "CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INT, status TEXT, amount INT)",
        "CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT)",
        "CREATE MATERIALIZED VIEW open_orders AS SELECT * FROM orders WHERE status = 'open'",
        "INSERT INTO customers VALUES (1, 'a'), (2, 'b')",
        "INSERT INTO orders(customer_id, status, amount) VALUES (1, 'open', 3), (1, 'done', 4), (2, 'open', 5)",
    ]
    views = {
        "exists": "SELECT c.id FROM customers c WHERE EXISTS (SELECT 1 FROM open_orders o WHERE o.customer_id = c.id)",
        "left_join": "SELECT c.id, count(o.id) FROM customers c LEFT JOIN open_orders o ON o.customer_id = c.id "
        "GROUP BY c.id",
        "as_root": "SELECT o.id, c.name FROM open_orders o LEFT JOIN customers c ON c.id = o.customer_id",
        "scalar": "SELECT c.id, (SELECT sum(amount) FROM open_orders o WHERE o.customer_id = c.id) FROM customers c",
    }

    def write(conn, rng: random.Random) -> None:
        action = rng.random()
        if action < 0.4:
            values = (rng.randint(1, 4), rng.choice(["open", "done"]), rng.randint(1, 9))
            conn.execute("INSERT INTO orders(customer_id, status, amount) VALUES (?, ?, ?)", values)
        elif action < 0.6:
            conn.execute(
                "UPDATE orders SET status = ? WHERE id = (SELECT id FROM orders ORDER BY random() LIMIT 1)",
                (rng.choice(["open", "done"]),),
            )
        elif action < 0.75:
            conn.execute("DELETE FROM orders WHERE id = (SELECT id FROM orders ORDER BY random() LIMIT 1)")
        else:
            conn.execute("INSERT OR REPLACE INTO customers VALUES (?, 'n')", (rng.randint(1, 5),))

    check_write_mix(tmp_path, setup, views, write, seed=9, steps=12)
