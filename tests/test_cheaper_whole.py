"""A view whose subquery does not depend on the outer row but reads a table the view reads too
would recompute every row at every write of that table, row by row: it is recomputed whole
instead, one run of its SELECT (`partition.every_root_table`, `compile_view.compile_with_nodes`;
on for users, on here by the `fall_back_to_whole` mark) — unless the subquery stands alone in a
conjunct of the WHERE (`amount > (SELECT avg(amount) FROM orders)`), where a new value reaches
only the rows whose conjunct it flips (`sql.value_reach`). Correlated subqueries, uncorrelated
ones over other tables, and `x IN (SELECT col …)` (a change reaches the rows whose x it moves in
or out) stay incremental; `recompute = 'never'` keeps the incremental plan; REFRESH keeps the
choice."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_views_match, create_views_both_modes, drive_write_mix
from stock import stock_sqlite3

import matview

pytestmark = pytest.mark.fall_back_to_whole

SETUP = [
    "CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INTEGER, amount, status TEXT)",
    "CREATE TABLE customers(id INTEGER PRIMARY KEY, region TEXT COLLATE NOCASE)",
    "INSERT INTO customers(region) VALUES ('north'), ('North'), ('south')",
    "INSERT INTO orders(customer_id, amount, status) VALUES (1, 5, 'open'), (2, 5.0, 'open'), (3, NULL, 'done'), "
    "(1, 2, 'done')",
]

WHOLE = {
    "gap_to_max": "SELECT id, amount - (SELECT max(amount) FROM orders) AS gap FROM orders",
    # (its value has the column's affinity: a bound parameter would compare otherwise)
    "first_amount": "SELECT id FROM orders WHERE amount < (SELECT amount FROM orders WHERE id = 2)",
}

GAP_TO_AVERAGE = "SELECT id, amount - (SELECT avg(amount) FROM orders) AS gap FROM orders"

INCREMENTAL = {
    # (by value: the rows whose comparison the new average flips)
    "above_avg": "SELECT id, amount FROM orders WHERE amount > (SELECT avg(amount) FROM orders)",
    "above_avg_grouped": "SELECT status, count(*), sum(amount) FROM orders "
    "WHERE amount > (SELECT avg(amount) FROM orders) GROUP BY status",
    "joined": "SELECT o.id, c.region FROM orders o JOIN customers c ON c.id = o.customer_id "
    "WHERE o.amount >= (SELECT avg(amount) FROM orders)",
    # (a change reaches the rows whose customer_id it moves in or out of the set: `sql.membership`)
    "same_table_in": "SELECT id FROM orders WHERE customer_id IN (SELECT customer_id FROM orders "
    "WHERE status = 'done')",
    "correlated": "SELECT id FROM orders o WHERE 1 < (SELECT count(*) FROM orders i "
    "WHERE i.customer_id = o.customer_id)",
    "other_table": "SELECT id FROM orders WHERE customer_id NOT IN (SELECT id FROM customers)",
    "exists": "SELECT c.id FROM customers c WHERE EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id)",
}


def _write(conn: matview.Connection, rng: random.Random) -> None:
    kind = rng.randrange(6)
    if kind < 3:
        conn.execute(
            "INSERT OR REPLACE INTO orders VALUES (?, ?, ?, ?)",
            (
                rng.randrange(12),
                rng.randrange(5),
                rng.choice([5, 5.0, 2, 9.5, None, "7"]),
                rng.choice(["open", "done"]),
            ),
        )
    elif kind == 3:
        conn.execute("UPDATE orders SET amount = amount + 1 WHERE id = ?", (rng.randrange(12),))
    elif kind == 4:
        conn.execute(
            "INSERT OR REPLACE INTO customers VALUES (?, ?)", (rng.randrange(5), rng.choice(["north", "NORTH"]))
        )
    else:
        conn.execute(f"DELETE FROM {rng.choice(['orders', 'customers'])} WHERE id = ?", (rng.randrange(12),))


@pytest.mark.parametrize("seed", range(2))
def test_a_subquery_every_row_reads_makes_the_view_recomputed_whole(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "db.sqlite"
    conn = matview.connect(str(path))
    for sql in SETUP:
        conn.execute(sql)
    live = create_views_both_modes(conn, {**WHOLE, **INCREMENTAL})
    for name in live:
        tree = conn.view(name).explain()
        whole = name.rsplit("_", 1)[0] in WHOLE
        assert ("recomputed whole" in tree) == whole, name
        if whole:
            assert "a subquery that does not depend on the outer row reads orders" in tree
    conn = drive_write_mix(path, conn, live, _write, random.Random(seed), steps=10)
    conn.close()
    stock_sqlite3(path, ["UPDATE orders SET amount = 5 WHERE amount = 5.0", "DELETE FROM orders WHERE id = 1"])
    conn = matview.connect(str(path))
    assert_views_match(conn, live)
    conn.execute("REFRESH MATERIALIZED VIEW gap_to_max_imm")
    assert "recomputed whole" in conn.view("gap_to_max_imm").explain()
    conn.execute("REFRESH MATERIALIZED VIEW above_avg_imm")
    assert "reaches by value: amount > (SELECT avg(amount) FROM" in conn.view("above_avg_imm").explain()
    assert_views_match(conn, live)
    conn.close()


def test_recompute_never_keeps_the_incremental_plan(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in SETUP:
        conn.execute(sql)
    conn.execute(f"CREATE MATERIALIZED VIEW v WITH (recompute = 'never') AS {GAP_TO_AVERAGE}")
    assert "recomputed whole" not in conn.view("v").explain()
    conn.execute("INSERT INTO orders(customer_id, amount, status) VALUES (2, 100, 'open')")
    conn.execute("REFRESH MATERIALIZED VIEW v")
    assert "recomputed whole" not in conn.view("v").explain()
    assert_views_match(conn, {"v": GAP_TO_AVERAGE})
