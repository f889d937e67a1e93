"""An aggregating plain view (or CTE) aggregated again by a subquery in an expression — TPC-H
Q15 as its specification writes it, `CREATE VIEW revenue0 (supplier_no, total_revenue) AS …`
then `total_revenue = (SELECT max(total_revenue) FROM revenue0)` — reads a node of its own
(`nodes._subquery_node_reads`): maintained in both modes under random multi-table writes."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import run_scenario

SETUP = [
    "CREATE TABLE supplier(s_suppkey INTEGER PRIMARY KEY, s_name TEXT, s_nation INT)",
    "CREATE TABLE lineitem(l_orderkey INTEGER, l_linenumber INTEGER, l_suppkey INTEGER, "
    "l_extendedprice DECIMAL(15,2), l_discount DECIMAL(15,2), l_shipdate DATE, "
    "PRIMARY KEY (l_orderkey, l_linenumber))",
    "CREATE VIEW revenue0 (supplier_no, total_revenue) AS SELECT l_suppkey, sum(l_extendedprice * (1 - l_discount)) "
    "FROM lineitem WHERE l_shipdate >= '1996-01-01' AND l_shipdate < date('1996-01-01', '+3 month') GROUP BY l_suppkey",
    "CREATE VIEW line_counts AS SELECT l_suppkey AS supp, count(*) AS n FROM lineitem GROUP BY l_suppkey",
]

VIEWS = {
    "q15": (
        "SELECT s_suppkey, s_name, total_revenue FROM supplier, revenue0 WHERE s_suppkey = supplier_no "
        "AND total_revenue = (SELECT max(total_revenue) FROM revenue0) ORDER BY s_suppkey"
    ),
    # the subquery reads another aggregating view than the FROM clause
    "busiest": "SELECT s_suppkey, s_name FROM supplier WHERE s_suppkey IN (SELECT supp FROM line_counts) "
    "AND (SELECT max(n) FROM line_counts) >= 3",
    "above_average": ("SELECT supp, n FROM line_counts WHERE n > (SELECT avg(total_revenue) FROM revenue0) / 1000.0"),
    "per_nation": (
        "SELECT s_nation, count(*) FROM supplier WHERE s_suppkey IN (SELECT supplier_no FROM revenue0) "
        "AND (SELECT count(*) FROM line_counts WHERE n > 1) > 0 GROUP BY s_nation"
    ),
    "cte_twice": (
        "WITH r AS (SELECT l_suppkey AS k, sum(l_extendedprice) AS total FROM lineitem GROUP BY l_suppkey) "
        "SELECT s_suppkey FROM supplier WHERE s_suppkey > (SELECT min(total) FROM r) / 100"
    ),
}


def _writes(rng: random.Random) -> list[list[str]]:
    steps = []
    for _ in range(12):
        step = []
        for _ in range(rng.randrange(1, 6)):
            kind = rng.randrange(5)
            if kind == 0:
                supplier = f"{rng.randrange(8)}, 's{rng.randrange(9)}', {rng.randrange(3)}"
                step.append(f"INSERT OR REPLACE INTO supplier VALUES ({supplier})")
            elif kind in (1, 2):
                price = rng.choice(["100", "99.5", "'250.00'", "40", "NULL"])
                discount = rng.choice(["0", "0.05", "'0.10'", "0.5"])
                date = rng.choice(["'1996-01-05'", "'1996-02-20'", "'1996-05-01'", "'1995-12-31'"])
                step.append(
                    f"INSERT OR REPLACE INTO lineitem VALUES ({rng.randrange(10)}, {rng.randrange(3)}, "
                    f"{rng.randrange(8)}, {price}, {discount}, {date})"
                )
            elif kind == 3:
                step.append(f"DELETE FROM lineitem WHERE l_orderkey = {rng.randrange(10)}")
            else:
                step.append(
                    f"UPDATE lineitem SET l_suppkey = {rng.randrange(8)} WHERE l_linenumber = {rng.randrange(3)}"
                )
        steps.append(step)
    return steps


@pytest.mark.parametrize("seed", range(4))
def test_aggregates_of_aggregating_views_in_subqueries(tmp_path, seed):
    run_scenario(tmp_path, SETUP, VIEWS, _writes(random.Random(seed)))
