"""Refresh as a delta (`matview.operators.recompute`): a fold whose changes are a large share of the
view's input recomputes the view and folds V_new − V_stored. The differential generators of
the other suites run here with every fold recomputed, and with the threshold lowered so that
small programs mix both kinds of fold; then a bulk load into tables that views already read.
Also the reach queries of partition recompute (`Plan.reach_filter`) and the old state of a
table found by its primary key (`Plan.image_keys`)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_view_matches, create_views_both_modes
from test_cross_hunt import Fuzz
from test_joins import Runner, random_program
from test_subqueries import _subquery_views

import matview
from matview.operators import recompute


@pytest.fixture(params=["always", "threshold"])
def recompute_mode(request, monkeypatch):
    if request.param == "always":
        monkeypatch.setattr(recompute, "should_recompute", lambda conn, view, pending: True)
        monkeypatch.setattr(matview.fold, "should_recompute", lambda conn, view, pending: True)
    else:
        monkeypatch.setattr(recompute, "RECOMPUTE_MIN_ROWS", 1)
    return request.param


@pytest.mark.parametrize("seed", range(4))
def test_join_programs_recomputed(tmp_path, recompute_mode, seed):
    Runner(tmp_path / "db.sqlite", random_program(random.Random(1000 + seed))).run()


@pytest.mark.parametrize("seed", range(4))
def test_subquery_programs_recomputed(tmp_path, recompute_mode, seed):
    Runner(tmp_path / "db.sqlite", random_program(random.Random(3000 + seed), _subquery_views)).run()


@pytest.mark.parametrize("seed", [3, 17, 60006])
def test_cross_feature_programs_recomputed(tmp_path, recompute_mode, seed):
    Fuzz(tmp_path / "db.sqlite", seed).run(6)


def _shop(conn: matview.Connection) -> None:
    conn.execute("CREATE TABLE customers(id INTEGER PRIMARY KEY, region TEXT, segment TEXT)")
    conn.execute(
        "CREATE TABLE orders(id INTEGER, line INTEGER, customer_id INT, amount REAL, status TEXT, "
        "PRIMARY KEY (id, line))"
    )
    conn.execute("CREATE TABLE notes(customer_id INT, body TEXT)")


BULK_VIEWS = {
    "by_region": "SELECT c.region, count(*), sum(o.amount), min(o.amount), max(o.status) FROM orders o "
    "JOIN customers c ON o.customer_id = c.id GROUP BY c.region",
    "open_orders": "SELECT o.id, o.line, o.amount, c.segment FROM orders o, customers c "
    "WHERE o.customer_id = c.id AND o.status = 'open'",
    "per_customer": "SELECT c.id, count(o.id), total(o.amount) FROM customers c LEFT JOIN orders o "
    "ON o.customer_id = c.id GROUP BY c.id",
    "with_orders": "SELECT id, region FROM customers c WHERE EXISTS (SELECT 1 FROM orders o "
    "WHERE o.customer_id = c.id AND o.status = 'open')",
    "noted": "SELECT DISTINCT c.region, n.body FROM customers c JOIN notes n ON n.customer_id = c.id",
    "big_spenders": "SELECT customer_id, sum(amount) FROM orders WHERE customer_id IN "
    "(SELECT customer_id FROM orders GROUP BY customer_id HAVING count(*) > 3) GROUP BY customer_id",
}


def _load(conn: matview.Connection, rng: random.Random, customers: range, orders: int) -> None:
    for c in customers:
        conn.execute("INSERT OR REPLACE INTO customers VALUES (?,?,?)", (c, rng.choice("NSEW"), rng.choice(["a", "b"])))
        conn.execute("INSERT INTO notes VALUES (?,?)", (c, rng.choice(["x", "y", None])))
    for _ in range(orders):
        conn.execute(
            "INSERT OR REPLACE INTO orders VALUES (?,?,?,?,?)",
            (
                rng.randrange(4000),
                rng.randrange(3),
                rng.randrange(customers.stop + 5),
                rng.randrange(1000) / 8,
                rng.choice(["open", "done"]),
            ),
        )


def test_bulk_load_into_tables_views_read(tmp_path):
    """Views created over empty tables, then thousands of rows into every table in one
    transaction (recomputed), then small transactions (incremental), then a second bulk load
    into full tables that is not a large share (incremental): exact throughout, both modes."""
    conn = matview.connect(str(tmp_path / "shop.db"))
    _shop(conn)
    live = create_views_both_modes(conn, BULK_VIEWS)
    conn.execute('CREATE MATERIALIZED VIEW over_regions AS SELECT count(*), sum("count(*)") FROM by_region_imm')
    live["over_regions"] = 'SELECT count(*), sum("count(*)") FROM by_region_imm'
    rng = random.Random(7)
    with conn:
        _load(conn, rng, range(600), 3000)
    for name, sql in live.items():
        assert_view_matches(conn, name, sql)
    for _ in range(3):
        with conn:
            conn.execute("UPDATE orders SET status = 'open' WHERE id % 97 = ?", (rng.randrange(97),))
            conn.execute("DELETE FROM customers WHERE id = ?", (rng.randrange(600),))
            _load(conn, rng, range(600, 603), 5)
    with conn:
        _load(conn, rng, range(700, 900), 1500)
    for name, sql in live.items():
        assert_view_matches(conn, name, sql)


def test_should_recompute_weighs_the_change_against_the_tables(tmp_path):
    conn = matview.connect(str(tmp_path / "shop.db"))
    _shop(conn)
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {BULK_VIEWS['by_region']}")
    view = conn.registry.get("v")
    assert view is not None
    assert not recompute.should_recompute(conn.apsw, view, recompute.RECOMPUTE_MIN_ROWS - 1)
    assert recompute.should_recompute(conn.apsw, view, recompute.RECOMPUTE_MIN_ROWS)  # tables empty
    with conn:
        _load(conn, random.Random(1), range(600), 6000)
    assert not recompute.should_recompute(conn.apsw, view, recompute.RECOMPUTE_MIN_ROWS)


def test_reach_filter_keeps_the_where_without_subqueries(tmp_path):
    """A subquery view over a comma join whose subquery names the same tables (TPC-H Q2's
    shape): the reach queries carry the WHERE's join conditions, not a cross product."""
    conn = matview.connect(str(tmp_path / "q2.db"))
    conn.execute("CREATE TABLE part(p_partkey INTEGER PRIMARY KEY, p_size INT)")
    conn.execute("CREATE TABLE supplier(s_suppkey INTEGER PRIMARY KEY, s_nation INT)")
    conn.execute(
        "CREATE TABLE partsupp(ps_partkey INT, ps_suppkey INT, ps_cost REAL, PRIMARY KEY (ps_partkey, ps_suppkey))"
    )
    sql = (
        "SELECT p_partkey, s_suppkey, ps_cost FROM part, supplier, partsupp WHERE p_partkey = ps_partkey "
        "AND s_suppkey = ps_suppkey AND p_size BETWEEN 1 AND 20 AND ps_cost = (SELECT min(ps_cost) FROM "
        "partsupp, supplier WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey AND s_nation = 1)"
    )
    live = create_views_both_modes(conn, {"q2": sql})
    view = conn.registry.get("q2_imm")
    assert view is not None
    assert "p_partkey = ps_partkey" in view.entry.plan.reach_filter
    assert "BETWEEN 1 AND 20" in view.entry.plan.reach_filter
    assert "min(" not in view.entry.plan.reach_filter
    rng = random.Random(3)
    for _step in range(12):
        with conn:
            for _ in range(rng.randrange(1, 6)):
                choice = rng.randrange(5)
                if choice == 0:
                    conn.execute("INSERT OR REPLACE INTO part VALUES (?, ?)", (rng.randrange(30), rng.randrange(25)))
                elif choice == 1:
                    conn.execute("INSERT OR REPLACE INTO supplier VALUES (?, ?)", (rng.randrange(10), rng.randrange(3)))
                elif choice == 2:
                    conn.execute(
                        "INSERT OR REPLACE INTO partsupp VALUES (?, ?, ?)",
                        (rng.randrange(30), rng.randrange(10), rng.randrange(5) / 2),
                    )
                elif choice == 3:
                    conn.execute(
                        "UPDATE supplier SET s_nation = ? WHERE s_suppkey = ?", (rng.randrange(3), rng.randrange(10))
                    )
                else:
                    conn.execute("DELETE FROM partsupp WHERE ps_partkey = ?", (rng.randrange(30),))
        for name, select in live.items():
            assert_view_matches(conn, name, select)
