# ruff: noqa: E501  (each query stays on one line, as the benchmark writes it)
"""Decision-support queries (TPC-H shapes adapted to SQLite, without ORDER BY/LIMIT) over a
small generated schema: joins of up to five tables, FROM-subqueries and a CTE (Q7, Q8, Q9,
Q15's aggregating CTE read with a filter, joined to orders, and Q15 whole: max() of the CTE), Q13 whole (an aggregate of an
aggregate over a LEFT JOIN), Q18 (IN over GROUP BY … HAVING sum), a LEFT OUTER JOIN with a filter in ON,
REAL arithmetic inside SUM/AVG, CASE inside SUM, a WITHOUT ROWID line-item table; both
maintenance modes, after inserts, key updates, deletes and REPLACE in multi-table transactions."""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_view_matches

import matview


def test_decision_support_queries(tmp_path):
    db = matview.connect(str(tmp_path / "tpch.db"))
    db.execute(
        "CREATE TABLE customer(c_custkey INTEGER PRIMARY KEY, c_name TEXT, c_nationkey INTEGER, c_mktsegment TEXT, c_acctbal REAL)"
    )
    db.execute(
        "CREATE TABLE orders(o_orderkey INTEGER PRIMARY KEY, o_custkey INTEGER, o_orderstatus TEXT, o_totalprice REAL, o_orderdate TEXT, o_orderpriority TEXT, o_shippriority INTEGER, o_comment TEXT)"
    )
    db.execute(
        "CREATE TABLE lineitem(l_orderkey INTEGER, l_linenumber INTEGER, l_quantity REAL, l_extendedprice REAL, l_discount REAL, l_tax REAL, l_returnflag TEXT, l_linestatus TEXT, l_shipdate TEXT, PRIMARY KEY (l_orderkey, l_linenumber)) WITHOUT ROWID"
    )
    db.execute("CREATE TABLE nation(n_nationkey INTEGER PRIMARY KEY, n_name TEXT, n_regionkey INTEGER)")
    rng = random.Random(1)
    for n in range(5):
        db.execute("INSERT INTO nation VALUES (?,?,?)", (n, f"N{n}", n % 2))

    def add(k):
        for c in range(k * 10, k * 10 + 10):
            db.execute(
                "INSERT OR REPLACE INTO customer VALUES (?,?,?,?,?)",
                (c, f"c{c}", rng.randrange(5), rng.choice(["BUILDING", "AUTO"]), rng.randrange(-1000, 10000) / 4),
            )
        for o in range(k * 30, k * 30 + 30):
            db.execute(
                "INSERT OR REPLACE INTO orders VALUES (?,?,?,?,?,?,?,?)",
                (
                    o,
                    rng.randrange(0, (k + 1) * 10),
                    rng.choice("OFP"),
                    rng.randrange(100000) / 4,
                    f"1995-0{rng.randrange(1, 9)}-1{rng.randrange(0, 9)}",
                    rng.choice(["1-URGENT", "2-HIGH", "5-LOW"]),
                    0,
                    rng.choice(["special requests", "ok"]),
                ),
            )
            for line in range(rng.randrange(1, 5)):
                db.execute(
                    "INSERT OR REPLACE INTO lineitem VALUES (?,?,?,?,?,?,?,?,?)",
                    (
                        o,
                        line,
                        rng.randrange(1, 50),
                        rng.randrange(1000, 100000) / 4,
                        rng.randrange(0, 10) / 100,
                        rng.randrange(0, 8) / 100,
                        rng.choice("RAN"),
                        rng.choice("OF"),
                        f"1995-0{rng.randrange(1, 9)}-2{rng.randrange(0, 9)}",
                    ),
                )

    add(0)
    queries = {
        "q1": "SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, sum(l_extendedprice) AS sum_base_price, sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price, sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge, avg(l_quantity) AS avg_qty, avg(l_extendedprice) AS avg_price, avg(l_discount) AS avg_disc, count(*) AS count_order FROM lineitem WHERE l_shipdate <= date('1998-12-01', '-90 day') GROUP BY l_returnflag, l_linestatus",
        "q3": "SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue, o_orderdate, o_shippriority FROM customer, orders, lineitem WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey AND l_orderkey = o_orderkey AND o_orderdate < '1995-03-15' AND l_shipdate > '1995-03-15' GROUP BY l_orderkey, o_orderdate, o_shippriority",
        "q5": "SELECT n_name, sum(l_extendedprice * (1 - l_discount)) AS revenue FROM customer, orders, lineitem, nation WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey AND c_nationkey = n_nationkey AND n_regionkey = 1 AND o_orderdate >= '1995-01-01' AND o_orderdate < date('1995-01-01', '+1 year') GROUP BY n_name",
        "q10": "SELECT c_custkey, c_name, sum(l_extendedprice * (1 - l_discount)) AS revenue, c_acctbal, n_name FROM customer, orders, lineitem, nation WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey AND o_orderdate >= '1995-03-01' AND l_returnflag = 'R' AND c_nationkey = n_nationkey GROUP BY c_custkey, c_name, c_acctbal, n_name",
        "q13": "SELECT c_count, count(*) AS custdist FROM (SELECT c_custkey, count(o_orderkey) AS c_count FROM customer LEFT OUTER JOIN orders ON c_custkey = o_custkey AND o_comment NOT LIKE '%special%requests%' GROUP BY c_custkey) AS c_orders GROUP BY c_count",
        "q15j": "WITH revenue AS (SELECT l_orderkey AS supplier_no, sum(l_extendedprice * (1 - l_discount)) AS total_revenue FROM lineitem WHERE l_shipdate >= '1995-03-01' GROUP BY l_orderkey) SELECT o_orderkey, o_orderstatus, total_revenue FROM orders, revenue WHERE o_orderkey = supplier_no",
        "q7": "SELECT supp_nation, cust_nation, l_year, sum(volume) AS revenue FROM (SELECT n1.n_name AS supp_nation, n2.n_name AS cust_nation, strftime('%Y', l_shipdate) AS l_year, l_extendedprice * (1 - l_discount) AS volume FROM orders, lineitem, customer, nation n1, nation n2 WHERE o_orderkey = l_orderkey AND c_custkey = o_custkey AND c_nationkey = n1.n_nationkey AND n2.n_nationkey = o_custkey % 5 AND ((n1.n_name = 'N1' AND n2.n_name = 'N2') OR (n1.n_name = 'N2' AND n2.n_name = 'N1'))) AS shipping GROUP BY supp_nation, cust_nation, l_year",
        "q8": "SELECT o_year, sum(CASE WHEN nation = 'N1' THEN volume ELSE 0 END) / sum(volume) AS mkt_share FROM (SELECT strftime('%Y', o_orderdate) AS o_year, l_extendedprice * (1 - l_discount) AS volume, n_name AS nation FROM lineitem, orders, customer, nation WHERE l_orderkey = o_orderkey AND o_custkey = c_custkey AND c_nationkey = n_nationkey AND c_mktsegment = 'AUTO') AS all_nations GROUP BY o_year",
        "q9": "SELECT nation, o_year, sum(amount) AS sum_profit FROM (SELECT n_name AS nation, substr(o_orderdate, 1, 4) AS o_year, l_extendedprice * (1 - l_discount) - l_quantity * 0.5 AS amount FROM lineitem, orders, customer, nation WHERE o_orderkey = l_orderkey AND c_custkey = o_custkey AND c_nationkey = n_nationkey AND o_comment LIKE '%ok%') AS profit GROUP BY nation, o_year",
        "q15": "WITH revenue AS (SELECT l_orderkey AS supplier_no, sum(l_extendedprice * (1 - l_discount)) AS total_revenue FROM lineitem WHERE l_shipdate >= '1995-03-01' GROUP BY l_orderkey) SELECT supplier_no, total_revenue FROM revenue WHERE total_revenue > 20000",
        # Q15 whole: the CTE joined and read again by a subquery's max() (the node, exact max)
        "q15max": "WITH revenue AS (SELECT l_orderkey AS supplier_no, sum(l_extendedprice * (1 - l_discount)) AS total_revenue FROM lineitem WHERE l_shipdate >= '1995-03-01' GROUP BY l_orderkey) SELECT o_orderkey, o_orderstatus, total_revenue FROM orders, revenue WHERE o_orderkey = supplier_no AND total_revenue = (SELECT max(total_revenue) FROM revenue)",
        "q18": "SELECT c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice, sum(l_quantity) FROM customer, orders, lineitem WHERE o_orderkey IN (SELECT l_orderkey FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 60) AND c_custkey = o_custkey AND o_orderkey = l_orderkey GROUP BY c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice",
        "q12": "SELECT l_linestatus, sum(CASE WHEN o_orderpriority = '1-URGENT' OR o_orderpriority = '2-HIGH' THEN 1 ELSE 0 END) AS high_line_count, sum(CASE WHEN o_orderpriority <> '1-URGENT' AND o_orderpriority <> '2-HIGH' THEN 1 ELSE 0 END) AS low_line_count FROM orders, lineitem WHERE o_orderkey = l_orderkey GROUP BY l_linestatus",
    }
    for mode in ("immediate", "deferred"):
        for k, v in queries.items():
            db.execute(f"CREATE MATERIALIZED VIEW {k}_{mode[:3]} WITH (maintenance='{mode}') AS {v}")

    def check():
        for mode in ("immediate", "deferred"):
            for k, v in queries.items():
                assert_view_matches(db, f"{k}_{mode[:3]}", v)

    check()
    for k in range(1, 4):
        with db:
            add(k)
        with db:
            db.execute("UPDATE orders SET o_custkey = o_custkey + 1 WHERE o_orderkey % 7 = ?", (k,))
            db.execute("DELETE FROM lineitem WHERE l_orderkey % 5 = ?", (k,))
            db.execute("UPDATE customer SET c_mktsegment = 'BUILDING' WHERE c_custkey % 3 = ?", (k % 3,))
        check()
