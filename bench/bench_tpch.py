# ruff: noqa: E501  (each TPC-H query stays on one line)
"""TPC-H's 22 queries as SQLite runs them, over `tpchgen-cli` data: which matview maintains,
what CREATE costs against the SELECT, and what a fold costs after a refresh-function-like
transaction (orders with their line items deleted and inserted, updates of partsupp, customer,
supplier and part, in one transaction) and after a bulk load into tables the view already reads.
Every maintained view is checked against its SELECT after every step (exit status 1 if one
differs).

    pip install tpchgen-cli
    python bench/bench_tpch.py [--scale 0.01] [--queries 1,3,18] [--mode immediate|deferred] [--as-written]
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import apsw

import matview

TABLES = ["nation", "region", "part", "supplier", "partsupp", "customer", "orders", "lineitem"]

SCHEMA = """
CREATE TABLE nation(n_nationkey INTEGER PRIMARY KEY, n_name CHAR(25), n_regionkey INTEGER, n_comment VARCHAR(152));
CREATE TABLE region(r_regionkey INTEGER PRIMARY KEY, r_name CHAR(25), r_comment VARCHAR(152));
CREATE TABLE part(p_partkey INTEGER PRIMARY KEY, p_name VARCHAR(55), p_mfgr CHAR(25), p_brand CHAR(10), p_type VARCHAR(25), p_size INTEGER, p_container CHAR(10), p_retailprice DECIMAL(15,2), p_comment VARCHAR(23));
CREATE TABLE supplier(s_suppkey INTEGER PRIMARY KEY, s_name CHAR(25), s_address VARCHAR(40), s_nationkey INTEGER, s_phone CHAR(15), s_acctbal DECIMAL(15,2), s_comment VARCHAR(101));
CREATE TABLE partsupp(ps_partkey INTEGER, ps_suppkey INTEGER, ps_availqty INTEGER, ps_supplycost DECIMAL(15,2), ps_comment VARCHAR(199), PRIMARY KEY (ps_partkey, ps_suppkey));
CREATE TABLE customer(c_custkey INTEGER PRIMARY KEY, c_name VARCHAR(25), c_address VARCHAR(40), c_nationkey INTEGER, c_phone CHAR(15), c_acctbal DECIMAL(15,2), c_mktsegment CHAR(10), c_comment VARCHAR(117));
CREATE TABLE orders(o_orderkey INTEGER PRIMARY KEY, o_custkey INTEGER, o_orderstatus CHAR(1), o_totalprice DECIMAL(15,2), o_orderdate DATE, o_orderpriority CHAR(15), o_clerk CHAR(15), o_shippriority INTEGER, o_comment VARCHAR(79));
CREATE TABLE lineitem(l_orderkey INTEGER, l_partkey INTEGER, l_suppkey INTEGER, l_linenumber INTEGER, l_quantity DECIMAL(15,2), l_extendedprice DECIMAL(15,2), l_discount DECIMAL(15,2), l_tax DECIMAL(15,2), l_returnflag CHAR(1), l_linestatus CHAR(1), l_shipdate DATE, l_commitdate DATE, l_receiptdate DATE, l_shipinstruct CHAR(25), l_shipmode CHAR(10), l_comment VARCHAR(44), PRIMARY KEY (l_orderkey, l_linenumber));
"""
Q = {}
Q[1] = (
    """SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, sum(l_extendedprice) AS sum_base_price, sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price, sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge, avg(l_quantity) AS avg_qty, avg(l_extendedprice) AS avg_price, avg(l_discount) AS avg_disc, count(*) AS count_order FROM lineitem WHERE l_shipdate <= date('1998-12-01', '-90 day') GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus"""
)
Q[2] = (
    """SELECT s_acctbal, s_name, n_name, p_partkey, p_mfgr, s_address, s_phone, s_comment FROM part, supplier, partsupp, nation, region WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey AND p_size = 15 AND p_type LIKE '%BRASS' AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey AND r_name = 'EUROPE' AND ps_supplycost = (SELECT min(ps_supplycost) FROM partsupp, supplier, nation, region WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey AND r_name = 'EUROPE') ORDER BY s_acctbal DESC, n_name, s_name, p_partkey LIMIT 100"""
)
Q[3] = (
    """SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue, o_orderdate, o_shippriority FROM customer, orders, lineitem WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey AND l_orderkey = o_orderkey AND o_orderdate < '1995-03-15' AND l_shipdate > '1995-03-15' GROUP BY l_orderkey, o_orderdate, o_shippriority ORDER BY revenue DESC, o_orderdate LIMIT 10"""
)
Q[4] = (
    """SELECT o_orderpriority, count(*) AS order_count FROM orders WHERE o_orderdate >= '1993-07-01' AND o_orderdate < date('1993-07-01', '+3 months') AND EXISTS (SELECT * FROM lineitem WHERE l_orderkey = o_orderkey AND l_commitdate < l_receiptdate) GROUP BY o_orderpriority ORDER BY o_orderpriority"""
)
Q[5] = (
    """SELECT n_name, sum(l_extendedprice * (1 - l_discount)) AS revenue FROM customer, orders, lineitem, supplier, nation, region WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey AND l_suppkey = s_suppkey AND c_nationkey = s_nationkey AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey AND r_name = 'ASIA' AND o_orderdate >= '1994-01-01' AND o_orderdate < date('1994-01-01', '+1 year') GROUP BY n_name ORDER BY revenue DESC"""
)
Q[6] = (
    """SELECT sum(l_extendedprice * l_discount) AS revenue FROM lineitem WHERE l_shipdate >= '1994-01-01' AND l_shipdate < date('1994-01-01', '+1 year') AND l_discount BETWEEN 0.06 - 0.01 AND 0.06 + 0.01 AND l_quantity < 24"""
)
Q[7] = (
    """SELECT supp_nation, cust_nation, l_year, sum(volume) AS revenue FROM (SELECT n1.n_name AS supp_nation, n2.n_name AS cust_nation, strftime('%Y', l_shipdate) AS l_year, l_extendedprice * (1 - l_discount) AS volume FROM supplier, lineitem, orders, customer, nation n1, nation n2 WHERE s_suppkey = l_suppkey AND o_orderkey = l_orderkey AND c_custkey = o_custkey AND s_nationkey = n1.n_nationkey AND c_nationkey = n2.n_nationkey AND ((n1.n_name = 'FRANCE' AND n2.n_name = 'GERMANY') OR (n1.n_name = 'GERMANY' AND n2.n_name = 'FRANCE')) AND l_shipdate BETWEEN '1995-01-01' AND '1996-12-31') AS shipping GROUP BY supp_nation, cust_nation, l_year ORDER BY supp_nation, cust_nation, l_year"""
)
Q[8] = (
    """SELECT o_year, sum(CASE WHEN nation = 'BRAZIL' THEN volume ELSE 0 END) / sum(volume) AS mkt_share FROM (SELECT strftime('%Y', o_orderdate) AS o_year, l_extendedprice * (1 - l_discount) AS volume, n2.n_name AS nation FROM part, supplier, lineitem, orders, customer, nation n1, nation n2, region WHERE p_partkey = l_partkey AND s_suppkey = l_suppkey AND l_orderkey = o_orderkey AND o_custkey = c_custkey AND c_nationkey = n1.n_nationkey AND n1.n_regionkey = r_regionkey AND r_name = 'AMERICA' AND s_nationkey = n2.n_nationkey AND o_orderdate BETWEEN '1995-01-01' AND '1996-12-31' AND p_type = 'ECONOMY ANODIZED STEEL') AS all_nations GROUP BY o_year ORDER BY o_year"""
)
Q[9] = (
    """SELECT nation, o_year, sum(amount) AS sum_profit FROM (SELECT n_name AS nation, strftime('%Y', o_orderdate) AS o_year, l_extendedprice * (1 - l_discount) - ps_supplycost * l_quantity AS amount FROM part, supplier, lineitem, partsupp, orders, nation WHERE s_suppkey = l_suppkey AND ps_suppkey = l_suppkey AND ps_partkey = l_partkey AND p_partkey = l_partkey AND o_orderkey = l_orderkey AND s_nationkey = n_nationkey AND p_name LIKE '%green%') AS profit GROUP BY nation, o_year ORDER BY nation, o_year DESC"""
)
Q[10] = (
    """SELECT c_custkey, c_name, sum(l_extendedprice * (1 - l_discount)) AS revenue, c_acctbal, n_name, c_address, c_phone, c_comment FROM customer, orders, lineitem, nation WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey AND o_orderdate >= '1993-10-01' AND o_orderdate < date('1993-10-01', '+3 months') AND l_returnflag = 'R' AND c_nationkey = n_nationkey GROUP BY c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment ORDER BY revenue DESC LIMIT 20"""
)
Q[11] = (
    """SELECT ps_partkey, sum(ps_supplycost * ps_availqty) AS value FROM partsupp, supplier, nation WHERE ps_suppkey = s_suppkey AND s_nationkey = n_nationkey AND n_name = 'GERMANY' GROUP BY ps_partkey HAVING sum(ps_supplycost * ps_availqty) > (SELECT sum(ps_supplycost * ps_availqty) * 0.0001 FROM partsupp, supplier, nation WHERE ps_suppkey = s_suppkey AND s_nationkey = n_nationkey AND n_name = 'GERMANY') ORDER BY value DESC"""
)
Q[12] = (
    """SELECT l_shipmode, sum(CASE WHEN o_orderpriority = '1-URGENT' OR o_orderpriority = '2-HIGH' THEN 1 ELSE 0 END) AS high_line_count, sum(CASE WHEN o_orderpriority <> '1-URGENT' AND o_orderpriority <> '2-HIGH' THEN 1 ELSE 0 END) AS low_line_count FROM orders, lineitem WHERE o_orderkey = l_orderkey AND l_shipmode IN ('MAIL', 'SHIP') AND l_commitdate < l_receiptdate AND l_shipdate < l_commitdate AND l_receiptdate >= '1994-01-01' AND l_receiptdate < date('1994-01-01', '+1 year') GROUP BY l_shipmode ORDER BY l_shipmode"""
)
Q[13] = (
    """SELECT c_count, count(*) AS custdist FROM (SELECT c_custkey, count(o_orderkey) AS c_count FROM customer LEFT OUTER JOIN orders ON c_custkey = o_custkey AND o_comment NOT LIKE '%special%requests%' GROUP BY c_custkey) AS c_orders GROUP BY c_count ORDER BY custdist DESC, c_count DESC"""
)
Q[14] = (
    """SELECT 100.00 * sum(CASE WHEN p_type LIKE 'PROMO%' THEN l_extendedprice * (1 - l_discount) ELSE 0 END) / sum(l_extendedprice * (1 - l_discount)) AS promo_revenue FROM lineitem, part WHERE l_partkey = p_partkey AND l_shipdate >= '1995-09-01' AND l_shipdate < date('1995-09-01', '+1 month')"""
)
Q[15] = (
    """WITH revenue0 AS (SELECT l_suppkey AS supplier_no, sum(l_extendedprice * (1 - l_discount)) AS total_revenue FROM lineitem WHERE l_shipdate >= '1996-01-01' AND l_shipdate < date('1996-01-01', '+3 months') GROUP BY l_suppkey) SELECT s_suppkey, s_name, s_address, s_phone, total_revenue FROM supplier, revenue0 WHERE s_suppkey = supplier_no AND total_revenue = (SELECT max(total_revenue) FROM revenue0) ORDER BY s_suppkey"""
)
Q[16] = (
    """SELECT p_brand, p_type, p_size, count(DISTINCT ps_suppkey) AS supplier_cnt FROM partsupp, part WHERE p_partkey = ps_partkey AND p_brand <> 'Brand#45' AND p_type NOT LIKE 'MEDIUM POLISHED%' AND p_size IN (49, 14, 23, 45, 19, 3, 36, 9) AND ps_suppkey NOT IN (SELECT s_suppkey FROM supplier WHERE s_comment LIKE '%Customer%Complaints%') GROUP BY p_brand, p_type, p_size ORDER BY supplier_cnt DESC, p_brand, p_type, p_size"""
)
Q[17] = (
    """SELECT sum(l_extendedprice) / 7.0 AS avg_yearly FROM lineitem, part WHERE p_partkey = l_partkey AND p_brand = 'Brand#23' AND p_container = 'MED BOX' AND l_quantity < (SELECT 0.2 * avg(l_quantity) FROM lineitem WHERE l_partkey = p_partkey)"""
)
Q[18] = (
    """SELECT c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice, sum(l_quantity) FROM customer, orders, lineitem WHERE o_orderkey IN (SELECT l_orderkey FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 300) AND c_custkey = o_custkey AND o_orderkey = l_orderkey GROUP BY c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice ORDER BY o_totalprice DESC, o_orderdate LIMIT 100"""
)
Q[19] = (
    """SELECT sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem, part WHERE (p_partkey = l_partkey AND p_brand = 'Brand#12' AND p_container IN ('SM CASE', 'SM BOX', 'SM PACK', 'SM PKG') AND l_quantity >= 1 AND l_quantity <= 1 + 10 AND p_size BETWEEN 1 AND 5 AND l_shipmode IN ('AIR', 'AIR REG') AND l_shipinstruct = 'DELIVER IN PERSON') OR (p_partkey = l_partkey AND p_brand = 'Brand#23' AND p_container IN ('MED BAG', 'MED BOX', 'MED PKG', 'MED PACK') AND l_quantity >= 10 AND l_quantity <= 10 + 10 AND p_size BETWEEN 1 AND 10 AND l_shipmode IN ('AIR', 'AIR REG') AND l_shipinstruct = 'DELIVER IN PERSON') OR (p_partkey = l_partkey AND p_brand = 'Brand#34' AND p_container IN ('LG CASE', 'LG BOX', 'LG PACK', 'LG PKG') AND l_quantity >= 20 AND l_quantity <= 20 + 10 AND p_size BETWEEN 1 AND 15 AND l_shipmode IN ('AIR', 'AIR REG') AND l_shipinstruct = 'DELIVER IN PERSON')"""
)
Q[20] = (
    """SELECT s_name, s_address FROM supplier, nation WHERE s_suppkey IN (SELECT ps_suppkey FROM partsupp WHERE ps_partkey IN (SELECT p_partkey FROM part WHERE p_name LIKE 'forest%') AND ps_availqty > (SELECT 0.5 * sum(l_quantity) FROM lineitem WHERE l_partkey = ps_partkey AND l_suppkey = ps_suppkey AND l_shipdate >= '1994-01-01' AND l_shipdate < date('1994-01-01', '+1 year'))) AND s_nationkey = n_nationkey AND n_name = 'CANADA' ORDER BY s_name"""
)
Q[21] = (
    """SELECT s_name, count(*) AS numwait FROM supplier, lineitem l1, orders, nation WHERE s_suppkey = l1.l_suppkey AND o_orderkey = l1.l_orderkey AND o_orderstatus = 'F' AND l1.l_receiptdate > l1.l_commitdate AND EXISTS (SELECT * FROM lineitem l2 WHERE l2.l_orderkey = l1.l_orderkey AND l2.l_suppkey <> l1.l_suppkey) AND NOT EXISTS (SELECT * FROM lineitem l3 WHERE l3.l_orderkey = l1.l_orderkey AND l3.l_suppkey <> l1.l_suppkey AND l3.l_receiptdate > l3.l_commitdate) AND s_nationkey = n_nationkey AND n_name = 'SAUDI ARABIA' GROUP BY s_name ORDER BY numwait DESC, s_name LIMIT 100"""
)
Q[22] = (
    """SELECT cntrycode, count(*) AS numcust, sum(c_acctbal) AS totacctbal FROM (SELECT substr(c_phone, 1, 2) AS cntrycode, c_acctbal FROM customer WHERE substr(c_phone, 1, 2) IN ('13', '31', '23', '29', '30', '18', '17') AND c_acctbal > (SELECT avg(c_acctbal) FROM customer WHERE c_acctbal > 0.00 AND substr(c_phone, 1, 2) IN ('13', '31', '23', '29', '30', '18', '17')) AND NOT EXISTS (SELECT * FROM orders WHERE o_custkey = c_custkey)) AS custsale GROUP BY cntrycode ORDER BY cntrycode"""
)


def without_order(sql: str) -> str:
    """The query without its trailing ORDER BY … [LIMIT n] (a view's rows have no order)."""
    return re.sub(r"\s+ORDER BY [^()]*?(LIMIT \d+)?$", "", sql)


def bag(rows: object) -> Counter:
    return Counter(tuple((type(v).__name__, v) for v in row) for row in rows)  # type: ignore[attr-defined]


def generate(scale: float, directory: Path) -> None:
    beside = Path(sys.executable).parent / "tpchgen-cli"  # a venv's scripts, activated or not
    program = str(beside) if beside.exists() else (shutil.which("tpchgen-cli") or "tpchgen-cli")
    subprocess.run([program, "csv", "-s", str(scale), f"--output-dir={directory}"], check=True)


def load(conn: apsw.Connection | matview.Connection, directory: Path) -> None:
    for table in TABLES:
        with open(directory / f"{table}.csv", newline="") as handle:
            rows = list(csv.reader(handle))[1:]
        conn.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})", rows)


def refresh_transaction(db: matview.Connection, step: int, rng: random.Random) -> None:
    """Delete 20 orders with their line items, insert 20 copies, update four other tables."""
    keys = [r[0] for r in db.execute("SELECT o_orderkey FROM orders WHERE o_orderkey % 101 = ? LIMIT 20", (step,))]
    for key in keys:
        db.execute("DELETE FROM lineitem WHERE l_orderkey = ?", (key,))
        db.execute("DELETE FROM orders WHERE o_orderkey = ?", (key,))
    top = db.execute("SELECT max(o_orderkey) FROM orders").fetchone()[0]
    for i in range(20):
        key, source = top + 1 + i, rng.randrange(1, 60000)
        db.execute(
            "INSERT INTO orders SELECT ?, o_custkey, o_orderstatus, o_totalprice, o_orderdate, o_orderpriority, o_clerk, o_shippriority, o_comment FROM orders WHERE o_orderkey = (SELECT min(o_orderkey) FROM orders WHERE o_orderkey >= ?)",
            (key, source),
        )
        db.execute(
            "INSERT INTO lineitem SELECT ?, l_partkey, l_suppkey, l_linenumber, l_quantity * 2, l_extendedprice, l_discount, l_tax, l_returnflag, l_linestatus, l_shipdate, l_commitdate, l_receiptdate, l_shipinstruct, l_shipmode, l_comment FROM lineitem WHERE l_orderkey = (SELECT min(l_orderkey) FROM lineitem WHERE l_orderkey >= ?)",
            (key, source),
        )
    db.execute("UPDATE partsupp SET ps_supplycost = ps_supplycost + 1 WHERE ps_partkey % 97 = ?", (step,))
    db.execute("UPDATE customer SET c_acctbal = c_acctbal - 100 WHERE c_custkey % 53 = ?", (step,))
    db.execute("UPDATE supplier SET s_nationkey = (s_nationkey + 1) % 25 WHERE s_suppkey % 31 = ?", (step,))
    db.execute("UPDATE part SET p_size = 15 WHERE p_partkey % 89 = ?", (step,))


def exact(db: matview.Connection, sql: str) -> bool:
    return bag(db.execute("SELECT * FROM v")) == bag(db.execute(sql))


def run_query(number: int, data: Path, base: Path, work: Path, mode: str, as_written: bool = False) -> tuple[str, ...]:
    sql = Q[number] if as_written else without_order(Q[number])
    path = work / f"q{number}.db"
    shutil.copy(base, path)
    db = matview.connect(str(path))
    started = time.perf_counter()
    db.execute(sql).fetchall()
    select = time.perf_counter() - started
    started = time.perf_counter()
    try:
        db.execute(f"CREATE MATERIALIZED VIEW v WITH (maintenance = '{mode}') AS {sql}")
    except matview.UnsupportedQuery as exc:
        db.close()
        return (f"Q{number}", "refused", str(exc)[:70], "", "", "", "")
    create = time.perf_counter() - started
    ok = exact(db, sql)
    folds = []
    rng = random.Random(number)
    for step in range(2):
        started = time.perf_counter()
        with db:
            refresh_transaction(db, step, rng)
        db.flush()
        folds.append(time.perf_counter() - started)
        ok = ok and exact(db, sql)
    db.close()
    # a bulk load into tables the view already reads
    path.unlink()
    db = matview.connect(str(path))
    db.execute(SCHEMA)
    db.execute(f"CREATE MATERIALIZED VIEW v WITH (maintenance = '{mode}') AS {sql}")
    started = time.perf_counter()
    with db:
        load(db, data)
    db.flush()
    bulk = time.perf_counter() - started
    ok = ok and exact(db, sql)
    db.close()
    return (
        f"Q{number}",
        "exact" if ok else "WRONG",
        f"{select:.3f}",
        f"{create:.2f} ({create / max(select, 1e-4):.0f}x)",
        f"{folds[0]:.2f}",
        f"{folds[1]:.2f}",
        f"{bulk:.2f}",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=0.01)
    parser.add_argument("--queries", default=",".join(str(n) for n in sorted(Q)))
    parser.add_argument("--mode", default="immediate", choices=["immediate", "deferred"])
    parser.add_argument(
        "--as-written",
        action="store_true",
        help="keep each query's ORDER BY … LIMIT (top-N views are recomputed whole) instead of dropping it",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tpch-"))
    try:
        data = work / "data"
        generate(args.scale, data)
        base = work / "base.db"
        conn = apsw.Connection(str(base))
        conn.execute(SCHEMA)
        with conn:
            load(conn, data)
        conn.close()
        header = ("query", "result", "SELECT s", "CREATE s", "txn 1 s", "txn 2 s", "bulk load s")
        print(" | ".join(header))
        wrong = False
        for number in (int(n) for n in args.queries.split(",")):
            row = run_query(number, data, base, work, args.mode, args.as_written)
            wrong = wrong or row[1] == "WRONG"
            print(" | ".join(row), flush=True)
        return 1 if wrong else 0
    finally:
        if not os.environ.get("TPCH_KEEP"):
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
