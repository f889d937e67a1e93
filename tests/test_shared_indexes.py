"""A join-key index matview made for one view and another view's delta terms read is that
view's too: dropping the first keeps it (it was dropped, and the other's terms scanned; hunt 29)."""

from __future__ import annotations

from pathlib import Path

from oracle import assert_view_matches

import matview

J1 = "SELECT o.id, c.region FROM orders o JOIN customers c ON o.customer_id = c.id"
J2 = "SELECT c.region, sum(o.amount) AS s FROM orders o JOIN customers c ON o.customer_id = c.id GROUP BY c.region"


def test_an_index_two_views_read_outlives_the_first(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "ix.db"))
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, region TEXT)")
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INT, amount INT)")
    conn.execute("INSERT INTO customers VALUES (1, 'n'), (2, 's')")
    conn.execute("INSERT INTO orders (customer_id, amount) VALUES (1, 5), (2, 7), (1, 1)")
    conn.execute(f"CREATE MATERIALIZED VIEW j1 AS {J1}")
    conn.execute(f"CREATE MATERIALIZED VIEW j2 AS {J2}")
    made = conn.registry.get("j1").entry.plan.indexes
    assert made and conn.registry.get("j2").entry.plan.indexes == made
    conn.execute("DROP MATERIALIZED VIEW j1")
    indexes = "SELECT name FROM sqlite_master WHERE type = 'index' AND name = ?"
    assert conn.execute(indexes, (made[0],)).fetchall()
    assert "scans" not in conn.view("j2").explain()
    conn.execute("INSERT INTO customers VALUES (3, 'e')")
    conn.execute("INSERT INTO orders (customer_id, amount) VALUES (3, 2)")
    assert_view_matches(conn, "j2", J2)
    conn.execute("DROP MATERIALIZED VIEW j2")
    assert not conn.execute(indexes, (made[0],)).fetchall()
