"""Two-table join views backfilled by Spark through co-partitioned buckets (matview/spark/
copartition.py): the file equals a local CREATE's, and maintenance continues from it."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import apsw
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from oracle import assert_view_matches
from test_spark import assert_same_state, local_twin, pytestmark, write_orders  # noqa: F401

import matview
from matview.spark import backfill
from matview.spark.copartition import bucket_of

JOINS = {
    "j_rows": "SELECT o.id, o.price, c.region FROM orders o JOIN customers c ON o.cust = c.cust "
    "WHERE o.status = 'open'",
    "j_agg": "SELECT c.region, count(*) AS n, sum(o.price) AS s, avg(o.qty) AS aq, min(o.price) AS lo, "
    "max(o.status) AS hi FROM orders o JOIN customers c ON o.cust = c.cust GROUP BY c.region",
    "j_left": "SELECT c.cust, count(o.id) AS n, sum(o.qty) AS q FROM customers c LEFT JOIN orders o ON o.cust = c.cust "
    "GROUP BY c.cust",
    "j_left_rows": "SELECT c.region, o.id FROM customers c LEFT JOIN orders o ON c.cust = o.cust AND o.qty > 10",
    "j_full": "SELECT c.region, o.g FROM orders o FULL JOIN customers c ON o.cust = c.cust",
    "j_distinct": "SELECT DISTINCT c.region, o.status FROM orders o, customers c WHERE o.cust = c.cust AND o.qty > 5",
    "j_using": "SELECT region, count(*) AS n FROM orders JOIN customers USING (cust) GROUP BY region",
    # the comparison's collation is its left operand's: NOCASE, so 'north' meets 'NORTH'
    "j_nocase": "SELECT c.cust, r.boss FROM customers c JOIN regions r ON r.name = c.region",
}
#: computed locally: `o.cust = c.code` compares an INTEGER column with a TEXT one (SQLite converts
#: the text at the comparison, which no bucket of stored values can follow)
LOCAL = {"j_mixed": "SELECT o.id, c.code FROM orders o JOIN customers c ON o.cust = c.code"}


def write_sources(tmp: Path) -> dict[str, str]:
    rnd = random.Random(11)
    custs = [float(c) for c in range(1, 22)] + [2.5, None, 3.0, 7.0]  # 1.0 meets 1; 3 and 7 twice
    customers = pa.table(
        {
            "cust": pa.array(custs, pa.float64()),
            "region": pa.array([rnd.choice(["north", "North", "SOUTH", "east", None]) for _ in custs]),
            "code": pa.array([None if c is None else str(int(c)) for c in custs]),
        }
    )
    pq.write_table(customers, tmp / "customers.parquet", row_group_size=7)
    regions = pa.table({"name": ["NORTH", "south", "East", "west", None], "boss": ["a", "b", "c", "d", "e"]})
    pq.write_table(regions, tmp / "regions.parquet")
    return {
        "orders": write_orders(tmp / "orders", files=3, n=800),
        "customers": str(tmp / "customers.parquet"),
        "regions": str(tmp / "regions.parquet"),
    }


def test_bucket_of_meets_where_sqlite_equals() -> None:
    conn = apsw.Connection(":memory:")
    values = [1, 1.0, -0.0, 0, 2**53, 2.0**53, 2**53 + 1, 9.3e18, 1.5, "a", "A", "a ", "1", b"1", b"a", None]
    for collation in ("BINARY", "NOCASE", "RTRIM"):
        for x in values:
            for y in values:
                equal = conn.execute(f"SELECT ? = ? COLLATE {collation}", (x, y)).fetchone()[0]
                if equal:
                    assert bucket_of(x, collation, 7) == bucket_of(y, collation, 7), (x, y, collation)


def test_join_views_backfilled_by_buckets(spark: Any, tmp_path: Path) -> None:
    sources = write_sources(tmp_path)
    db = str(tmp_path / "shop.db")
    conn = apsw.Connection(db)
    conn.execute("CREATE TABLE customers (cust REAL, region TEXT, code TEXT)")
    conn.execute("CREATE TABLE regions (name TEXT COLLATE NOCASE, boss TEXT)")
    conn.close()
    views = {**JOINS, **LOCAL}
    summary = backfill(spark, db, sources, views=list(views.items()))
    where = {v.name: (v.where, v.reason) for v in summary.views}
    assert where["j_nocase"][0] == "spark (customers ⋈ regions)", where
    pair = ("spark (orders ⋈ customers)", "spark (customers ⋈ orders)")
    assert all(where[name][0] in pair for name in JOINS if name != "j_nocase"), where
    assert where["j_mixed"][0] == "local"
    assert "buckets" in summary.phases
    twin = str(tmp_path / "local.db")
    local_twin(db, twin, ["orders", "customers", "regions"], views)
    assert_same_state(db, twin, list(views))
    schema = "SELECT type, name FROM sqlite_master ORDER BY 1, 2"
    assert apsw.Connection(db).execute(schema).fetchall() == apsw.Connection(twin).execute(schema).fetchall()
    assert apsw.Connection(db).execute("SELECT count(*) FROM j_nocase").fetchone()[0] > 0
    # a re-run replacing the tables rebuilds the existing join views by buckets again: same file
    again = backfill(spark, db, sources, mode="replace")
    assert {v.name: v.where for v in again.views} == {name: place for name, (place, _) in where.items()}
    assert_same_state(db, twin, list(views))

    rnd = random.Random(5)
    mine = matview.connect(db)
    for _ in range(25):
        with mine:
            mine.execute(
                "INSERT INTO orders (id, g, cust, price, qty, status) VALUES (?, ?, ?, ?, ?, ?)",
                (rnd.randint(0, 10**6), rnd.randint(0, 5), rnd.choice([1, 3.0, 7, 30, None]), 1.5, 12, "open"),
            )
            mine.execute("DELETE FROM orders WHERE rowid IN (SELECT rowid FROM orders ORDER BY random() LIMIT 5)")
            if rnd.random() < 0.5:
                mine.execute(
                    "UPDATE customers SET region = ? WHERE rowid = ?",
                    (rnd.choice(["West", "north"]), rnd.randint(1, 25)),
                )
            else:
                mine.execute("INSERT INTO customers VALUES (?, 'EAST', '9')", (rnd.choice([3, 30, 1.0]),))
            mine.execute("INSERT INTO regions VALUES (?, 'f')", (rnd.choice(["north", "EAST", "x"]),))
    for name, sql in views.items():
        assert_view_matches(mine, name, sql)
        assert mine.view(name).verify()
    mine.close()


def test_a_join_of_a_table_not_loaded_is_local(spark: Any, tmp_path: Path) -> None:
    sources = write_sources(tmp_path)
    db = str(tmp_path / "x.db")
    conn = matview.connect(db)
    conn.execute("CREATE TABLE regions (name TEXT, boss TEXT)")
    conn.execute("INSERT INTO regions VALUES ('north', 'z')")
    conn.close()
    views = {"j": "SELECT c.cust, r.boss FROM customers c JOIN regions r ON c.region = r.name"}
    summary = backfill(spark, db, {"customers": sources["customers"]}, views=list(views.items()))
    assert summary.views[0].where == "local" and "not all being loaded" in summary.views[0].reason
    assert matview.connect(db).view("j").verify()


def test_a_self_join_by_one_column_is_bucketed_once(spark: Any, tmp_path: Path) -> None:
    sources = write_sources(tmp_path)
    db = str(tmp_path / "s.db")
    views = {
        "pairs": "SELECT a.id, b.id AS other FROM orders a JOIN orders b ON a.cust = b.cust AND a.g = 1 AND b.g = 2",
        "fan": "SELECT a.cust, count(*) AS n FROM orders a LEFT JOIN orders b ON b.cust = a.cust AND b.qty > 30 "
        "GROUP BY a.cust",
    }
    summary = backfill(spark, db, {"orders": sources["orders"]}, views=list(views.items()))
    assert all(v.where == "spark (orders ⋈ itself)" for v in summary.views), summary.views
    twin = str(tmp_path / "twin.db")
    local_twin(db, twin, ["orders"], views)
    assert_same_state(db, twin, list(views))


@pytest.mark.parametrize("shape", ["self", "three"])
def test_other_joins_stay_local(spark: Any, tmp_path: Path, shape: str) -> None:
    sources = write_sources(tmp_path)
    db = str(tmp_path / "y.db")
    sql = {
        "self": "SELECT a.id, b.id FROM orders a JOIN orders b ON a.cust = b.g",
        "three": "SELECT o.id, r.boss FROM orders o JOIN customers c ON o.cust = c.cust "
        "JOIN regions r ON c.region = r.name",
    }[shape]
    summary = backfill(spark, db, sources, views=[("v", sql)])
    assert summary.views[0].where == "local", summary.views[0]
    assert matview.connect(db).view("v").verify()


@pytest.mark.fall_back_to_whole
def test_a_result_only_the_merged_state_decides_is_recomputed_whole(spark: Any, tmp_path: Path) -> None:
    """A REAL sum that overflows in some row orders only, its terms in different load parts
    and join buckets: no part meets it, the merged state does. The driver's CREATE then
    recomputes the view whole — it was committed empty (its merged rows read as a row view's)
    — and a part that does meet it no longer heals there (the merge had no rule for the whole
    plan's state; hunt 29)."""
    big = [1e308, 1e308, -1e308]
    (tmp_path / "t").mkdir()
    for i in range(3):  # one big value per file: per load part
        groups = [0] + [1 + j % 3 for j in range(99)]
        values = [big[i]] + [0.5] * 99
        pq.write_table(
            pa.table({"g": pa.array(groups, pa.int64()), "r": pa.array(values, pa.float64())}),
            tmp_path / "t" / f"part-{i}.parquet",
        )
    left = pa.table({"k": pa.array([1, 2, 3] + [4 + j % 20 for j in range(200)]), "r": pa.array(big + [0.5] * 200)})
    right = pa.table({"k": pa.array(list(range(1, 24))), "name": pa.array(["a"] * 3 + ["b"] * 20)})
    pq.write_table(left, tmp_path / "l.parquet", row_group_size=40)
    pq.write_table(right, tmp_path / "r.parquet")
    one = pa.table({"g": pa.array([0, 0, 0] + [1] * 97), "r": pa.array(big + [0.5] * 97)})  # all in one part
    pq.write_table(one, tmp_path / "one.parquet", row_group_size=500)
    views = {
        "v": "SELECT g, sum(r) AS s, count(*) AS n FROM t GROUP BY g",
        "j": "SELECT r.name, sum(l.r) AS s, count(*) AS n FROM l JOIN r ON l.k = r.k GROUP BY r.name",
        "o": "SELECT g, sum(r) AS s, count(*) AS n FROM one GROUP BY g",
    }
    db = str(tmp_path / "s.db")
    sources = {"t": str(tmp_path / "t" / "*.parquet"), "l": str(tmp_path / "l.parquet")}
    backfill(
        spark,
        db,
        {**sources, "r": str(tmp_path / "r.parquet"), "one": str(tmp_path / "one.parquet")},
        views=list(views.items()),
    )
    conn = matview.connect(db)
    for name, sql in views.items():
        assert_view_matches(conn, name, sql)
    assert conn.execute("SELECT count(*) FROM v").fetchone()[0] == 4
