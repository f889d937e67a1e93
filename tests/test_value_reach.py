"""An uncorrelated scalar subquery alone in a conjunct of the WHERE reaches the rows whose
conjunct its new value flips (`sql.value_reach`, `operators.scalar_values`): the views equal
their SELECT under every kind of value (integers, REALs, text, NULL from an empty table, ties
of 5 and 5.0), in both modes, through rollbacks, reopen and a stock writer; a write reaches a
few rows, not every row; a value the state lost reaches every row once; and, with the flip
reach disabled, the differential check fails (so it can see that bug)."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import apsw
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_views_match, check_write_mix, create_views_both_modes
from stock import stock_sqlite3

import matview
from matview.operators import scalar_values
from matview.storage.codec import pack

SETUP = [
    "CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INTEGER, amount, status TEXT COLLATE NOCASE)",
    "CREATE TABLE customers(id INTEGER PRIMARY KEY, region TEXT, credit REAL)",
    "INSERT INTO customers(region, credit) VALUES ('north', 5), ('south', 2.5), ('east', NULL)",
    "INSERT INTO orders(customer_id, amount, status) VALUES (1, 5, 'open'), (2, 5.0, 'OPEN'), (3, NULL, 'done'), "
    "(1, 2, 'done'), (2, '7', 'open'), (9, 9.5, 'x')",
]

BY_VALUE = {
    "above_avg": "SELECT id, amount FROM orders WHERE amount > (SELECT avg(amount) FROM orders)",
    "at_max": "SELECT id, customer_id FROM orders WHERE amount = (SELECT max(amount) FROM orders)",
    "left_operand": "SELECT id FROM orders WHERE (SELECT min(amount) FROM orders) >= amount - 1 AND id > 1",
    "other_table": "SELECT id, amount FROM orders WHERE amount * 2 < (SELECT total(credit) FROM customers)",
    "count_between": "SELECT id FROM orders WHERE (SELECT count(*) FROM customers WHERE credit > 1) "
    "BETWEEN customer_id AND customer_id + 1",
    "text_max": "SELECT id FROM orders WHERE status >= (SELECT max(region) FROM customers)",
    "grouped": "SELECT customer_id, count(*), sum(amount) FROM orders WHERE amount <= "
    "(SELECT avg(amount) + 1 FROM orders WHERE status = 'open') GROUP BY customer_id",
    "joined": "SELECT o.id, c.region FROM orders o LEFT JOIN customers c ON c.id = o.customer_id "
    "WHERE coalesce(c.credit, o.amount) < (SELECT avg(credit) * 2 FROM customers) AND o.id % 2 = 1",
    "two_values": "SELECT id FROM orders WHERE amount > (SELECT min(amount) FROM orders) "
    "AND customer_id < (SELECT count(*) FROM customers)",
    "distinct_rows": "SELECT DISTINCT customer_id FROM orders WHERE amount < (SELECT avg(amount) FROM orders)",
}

#: not by value, beside them: a conjunct that reads no outer column flips every row at once (the
#: SELECT is run whole instead), a value with the column's affinity
NOT_BY_VALUE = {
    "is_null": "SELECT id, status FROM orders WHERE (SELECT max(credit) FROM customers) IS NULL",
    "affinity": "SELECT id FROM orders WHERE amount < (SELECT credit FROM customers WHERE id = 1)",
}


def write_orders_and_customers(conn: Any, rng: random.Random) -> None:
    """One random write of `SETUP`'s tables (columns named: a column added later is left NULL)."""
    kind = rng.randrange(8)
    value = rng.choice([5, 5.0, 2, 9.5, None, "7", -3, 100])
    if kind < 3:
        conn.execute(
            "INSERT OR REPLACE INTO orders(id, customer_id, amount, status) VALUES (?, ?, ?, ?)",
            (rng.randrange(14), rng.randrange(5), value, rng.choice(["open", "OPEN", "done", "zz"])),
        )
    elif kind == 3:
        conn.execute("UPDATE orders SET amount = amount + 1 WHERE id = ?", (rng.randrange(14),))
    elif kind == 4:
        conn.execute(
            "INSERT OR REPLACE INTO customers(id, region, credit) VALUES (?, ?, ?)",
            (rng.randrange(5), rng.choice(["north", "west", "a"]), rng.choice([1, 2.5, None, 9])),
        )
    elif kind == 5:
        conn.execute("UPDATE customers SET credit = ? WHERE id = ?", (value, rng.randrange(5)))
    elif kind == 6:
        conn.execute(f"DELETE FROM {rng.choice(['orders', 'customers'])} WHERE id = ?", (rng.randrange(14),))
    else:
        conn.execute(f"DELETE FROM {rng.choice(['orders', 'customers'])} WHERE id % 3 = ?", (rng.randrange(3),))


def test_the_shapes_are_reached_by_value(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in SETUP:
        conn.execute(sql)
    for name, select in {**BY_VALUE, **NOT_BY_VALUE}.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {select}")
        assert ("reaches by value" in conn.view(name).explain()) == (name in BY_VALUE), name


@pytest.mark.parametrize("seed", range(4))
def test_views_equal_their_select_under_random_writes(tmp_path: Path, seed: int) -> None:
    conn, live = check_write_mix(
        tmp_path, SETUP, {**BY_VALUE, **NOT_BY_VALUE}, write_orders_and_customers, seed, steps=12
    )
    conn.close()
    path = tmp_path / "db.sqlite"
    stock_sqlite3(path, ["UPDATE orders SET amount = 1000 WHERE id = 1", "DELETE FROM customers WHERE id = 2"])
    conn = matview.connect(str(path))
    assert_views_match(conn, live)
    conn.execute("REFRESH MATERIALIZED VIEW above_avg_imm")
    write_orders_and_customers(conn, random.Random(seed))
    assert_views_match(conn, live)
    conn.close()


def test_emptied_and_refilled_tables_and_savepoints(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in SETUP:
        conn.execute(sql)
    live = create_views_both_modes(conn, {**BY_VALUE, **NOT_BY_VALUE})
    for statements in [
        ["DELETE FROM customers"],  # (total 0.0, max NULL, avg NULL)
        ["DELETE FROM orders"],
        ["INSERT INTO orders(customer_id, amount) VALUES (1, 5), (1, 5.0)"],
        ["SAVEPOINT a", "INSERT INTO customers(region, credit) VALUES ('z', 100)", "ROLLBACK TO a", "RELEASE a"],
        ["INSERT INTO customers(region, credit) VALUES ('z', 100)", "UPDATE orders SET amount = 50.5 WHERE id = 1"],
        # (an index and a VACUUM change the order SQLite reads rows in: a value kept is computed again)
        ["CREATE INDEX orders_amount ON orders(amount DESC)", "UPDATE customers SET region = 'q' WHERE id = 1"],
        ["INSERT INTO orders(customer_id, amount) VALUES (2, 50.5), (3, 50.5)"],
        ["VACUUM"],
        ["DROP INDEX orders_amount", "UPDATE customers SET credit = 3 WHERE id = 1"],
    ]:
        if statements == ["VACUUM"]:
            conn.execute("VACUUM")
        else:
            with conn:
                for sql in statements:
                    conn.execute(sql)
        assert_views_match(conn, live)


def test_a_write_reaches_the_rows_it_flips_not_every_row(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, x INTEGER)")
    conn.executemany("INSERT INTO t(x) VALUES (?)", [(i % 1000,) for i in range(5000)])
    conn.execute("CREATE MATERIALIZED VIEW v AS SELECT id, x FROM t WHERE x > (SELECT avg(x) FROM t)")
    reached = 'temp."__dbsp_reached_1"'
    conn.execute("UPDATE t SET x = x + 1 WHERE id = 7")  # (the average moves by 1/5000: no row flips)
    assert conn.execute(f"SELECT count(DISTINCT root) FROM {reached}").fetchone()[0] == 1  # (the changed row)
    conn.execute("INSERT INTO t(x) VALUES (99999)")  # (the average crosses 499.5 → 519.4: x in 500..519 flip)
    assert 0 < conn.execute(f"SELECT count(DISTINCT root) FROM {reached}").fetchone()[0] <= 5 * 20 + 1
    assert conn.view("v").verify()


@pytest.mark.parametrize("damage", ["deleted", "not a list"])
def test_a_value_the_state_lost_reaches_every_row_once(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "db.sqlite"
    conn = matview.connect(str(path))
    for sql in SETUP:
        conn.execute(sql)
    live = create_views_both_modes(conn, {"above_avg": BY_VALUE["above_avg"]})
    conn.close()
    raw = apsw.Connection(str(path))
    for view in live:
        if damage == "deleted":
            raw.execute(f'DELETE FROM "__dbsp_state_{view}" WHERE operator_id = ?', (scalar_values.VALUE_OP,))
        else:
            raw.execute(
                f'UPDATE "__dbsp_state_{view}" SET value = ? WHERE operator_id = ?', (pack(7), scalar_values.VALUE_OP)
            )
    raw.close()
    conn = matview.connect(str(path))
    conn.execute("INSERT INTO customers(region) VALUES ('w')")  # (no table of the view: nothing to fold)
    conn.execute("UPDATE orders SET status = 'done' WHERE id = 4")
    assert_views_match(conn, live)


def test_sensitivity_flip_reach_disabled_makes_the_differential_fail(tmp_path: Path, monkeypatch: Any) -> None:
    """With the roots whose conjunct the value flips never reached, the check must fail."""
    original = scalar_values.reach_query

    def blind(k: int, value: Any, key: str, outer: str, also: str, sources: dict[str, str]) -> str:
        return original(k, value, key, outer, also, sources).replace(":__dbsp_value", "0 AND :__dbsp_value", 1)

    monkeypatch.setattr(scalar_values, "reach_query", blind)
    failures = 0
    for seed in range(3):
        try:
            (tmp_path / str(seed)).mkdir()
            check_write_mix(tmp_path / str(seed), SETUP, BY_VALUE, write_orders_and_customers, seed, steps=6)
        except AssertionError:
            failures += 1
    assert failures > 0
