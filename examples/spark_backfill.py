"""End to end: Parquet + CSV → Spark backfill → incremental maintenance in the SQLite file.

pip install -e '.[spark]'   # and Java 17: apt install openjdk-17-jre-headless
python examples/spark_backfill.py [workdir]
"""

from __future__ import annotations

import os
import random
import sys
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq

import matview
from matview.spark import backfill, build_session
from matview.spark.cli import print_summary


def main() -> None:
    work = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="matview-spark-demo-")
    rnd = random.Random(1)
    os.makedirs(os.path.join(work, "orders"), exist_ok=True)
    for part in range(3):
        n = 50_000
        pq.write_table(
            pa.table(
                {
                    "id": range(part * n, (part + 1) * n),
                    "region": [rnd.choice(["north", "south", "east", "west"]) for _ in range(n)],
                    "cust": [rnd.randint(1, 500) for _ in range(n)],
                    "amount": pa.array([rnd.randint(100, 99_999) / 100 for _ in range(n)], pa.float64()),
                }
            ),
            os.path.join(work, "orders", f"part-{part}.parquet"),
        )
    with open(os.path.join(work, "customers.csv"), "w") as out:
        out.write("cust,name\n" + "".join(f"{c},customer {c}\n" for c in range(1, 501)))
    db = os.path.join(work, "shop.db")
    spark = build_session("local[*]", {"spark.ui.enabled": "false"})
    summary = backfill(
        spark,
        db,
        tables={"orders": os.path.join(work, "orders", "*.parquet"), "customers": os.path.join(work, "customers.csv")},
        views=[
            (
                "revenue",
                "SELECT region, COUNT(*) AS n, SUM(amount) AS total, MIN(amount) AS lo, MAX(amount) AS hi "
                "FROM orders GROUP BY region",
            ),
            ("big", "SELECT id, region, amount FROM orders WHERE amount > 990"),
            (
                "by_customer",
                "SELECT c.name, SUM(o.amount) AS total FROM orders AS o JOIN customers AS c "
                "ON o.cust = c.cust GROUP BY c.name",
            ),
        ],
    )
    print_summary(summary)
    conn = matview.connect(db)
    with conn:  # from here on the views are maintained incrementally, no REFRESH
        conn.execute("INSERT INTO orders VALUES (10000000, 'north', 1, 1000.0)")
        conn.execute("DELETE FROM orders WHERE id < 100")
    print(conn.execute("SELECT * FROM revenue ORDER BY region").fetchall())
    print({v.name: v.verify() for v in conn.views()})
    conn.close()


if __name__ == "__main__":
    main()
