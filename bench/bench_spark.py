#!/usr/bin/env python
"""The Spark pipeline vs the local path, on generated lineitem-like data.

    python bench/bench_spark.py                  # 1M rows, local[2]
    python bench/bench_spark.py --rows 6000000   # or --big (6M rows)
    python bench/bench_spark.py --master 'local[*]' --tmpdir /data/tmp --keep

For each view: (a) the local path a user would pick instead — pyarrow → apsw load (decimals
converted correctly rounded, through text) plus `CREATE MATERIALIZED VIEW`; (b) `backfill` on
Spark: load + view in one job, then the driver's write. Prints rows/s per phase, the ratio
Spark / local, the driver's peak RSS during the backfill (sampled every 20 ms; the JVM and the
Python workers are other processes), and checks that both files hold the same view, state and
ordered state. The `join` view reads lineitem and orders (rows / 4 orders): Spark loads both,
each load task also splits its rows into buckets by the join key, and a task per bucket runs
the view's CREATE over both tables' rows of that bucket ("view s": the bucket phase).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if REPO not in sys.path:
    sys.path.insert(0, REPO)

import apsw  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

import matview  # noqa: E402

VIEWS = {
    "real_sum": "SELECT l_returnflag, l_linestatus, SUM(l_quantity) AS sq, SUM(l_extendedprice * (1 - l_discount)) "
    "AS revenue, AVG(l_discount) AS ad, COUNT(*) AS n FROM lineitem WHERE l_shipdate <= '1998-09-02' "
    "GROUP BY l_returnflag, l_linestatus",
    "min_max": "SELECT l_shipmode, MIN(l_extendedprice) AS lo, MAX(l_shipdate) AS last, COUNT(*) AS n, "
    "SUM(l_quantity / 3) AS q3 FROM lineitem GROUP BY l_shipmode",
    "join": "SELECT o_orderpriority, COUNT(*) AS n, SUM(l_extendedprice) AS rev, MAX(o_orderdate) AS last "
    "FROM lineitem JOIN orders ON l_orderkey = o_orderkey WHERE l_shipmode <> 'AIR' GROUP BY o_orderpriority",
}
DDL = {
    "lineitem": "CREATE TABLE lineitem (l_orderkey INTEGER, l_quantity REAL, l_extendedprice REAL, l_discount REAL, "
    "l_returnflag TEXT, l_linestatus TEXT, l_shipdate TEXT, l_shipmode TEXT)",
    "orders": "CREATE TABLE orders (o_orderkey INTEGER, o_orderpriority TEXT, o_orderdate TEXT)",
}
MODES = ["AIR", "FOB", "MAIL", "RAIL", "REG AIR", "SHIP", "TRUCK"]
PRIORITIES = ["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"]
console = Console(width=150)


def generate(path: str, rows: int, seed: int = 42) -> None:
    """lineitem-like Parquet: decimals(12,2), a date, low-cardinality text; 8 row groups per 1M;
    four line items per order key."""
    import datetime
    from decimal import Decimal

    rnd = random.Random(seed)
    writer = None
    start = datetime.date(1992, 1, 1)
    chunk = 125_000
    for offset in range(0, rows, chunk):
        n = min(chunk, rows - offset)
        quantity = [Decimal(rnd.randint(1, 50)) for _ in range(n)]
        price = [Decimal(rnd.randint(90_000, 10_500_000)) / 100 for _ in range(n)]
        discount = [Decimal(rnd.randint(0, 10)) / 100 for _ in range(n)]
        days = [rnd.randint(0, 2526) for _ in range(n)]
        batch = pa.table(
            {
                "l_orderkey": pa.array([k // 4 for k in range(offset, offset + n)], pa.int64()),
                "l_quantity": pa.array(quantity, pa.decimal128(12, 2)),
                "l_extendedprice": pa.array(price, pa.decimal128(12, 2)),
                "l_discount": pa.array(discount, pa.decimal128(12, 2)),
                "l_returnflag": pa.array([rnd.choice("ANR") for _ in range(n)]),
                "l_linestatus": pa.array([rnd.choice("FO") for _ in range(n)]),
                "l_shipdate": pa.array([start + datetime.timedelta(days=d) for d in days], pa.date32()),
                "l_shipmode": pa.array([rnd.choice(MODES) for _ in range(n)]),
            }
        )
        if writer is None:
            writer = pq.ParquetWriter(path, batch.schema)
        writer.write_table(batch)
    assert writer is not None
    writer.close()


def generate_orders(path: str, rows: int, seed: int = 7) -> None:
    """orders-like Parquet: one order per four line items (`rows` line items), a date, a priority."""
    import datetime

    rnd = random.Random(seed)
    n = (rows + 3) // 4
    start = datetime.date(1992, 1, 1)
    table = pa.table(
        {
            "o_orderkey": pa.array(range(n), pa.int64()),
            "o_orderpriority": pa.array([rnd.choice(PRIORITIES) for _ in range(n)]),
            "o_orderdate": pa.array(
                [start + datetime.timedelta(days=rnd.randint(0, 2400)) for _ in range(n)], pa.date32()
            ),
        }
    )
    pq.write_table(table, path, row_group_size=125_000)


def local_load(parquet: str, db: str, table: str = "lineitem") -> int:
    """pyarrow → apsw, one transaction; decimals through text (pyarrow's direct cast is 1 ulp off)."""
    conn = apsw.Connection(db)
    conn.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL")
    conn.execute(DDL[table])
    count = 0
    with conn:
        marks = ", ".join("?" * len(pq.ParquetFile(parquet).schema_arrow))
        for batch in pq.ParquetFile(parquet).iter_batches(batch_size=65_536):
            columns = []
            for column in batch.columns:
                if pa.types.is_decimal(column.type):
                    column = pc.cast(pc.cast(column, pa.string()), pa.float64())
                elif pa.types.is_date(column.type):
                    column = pc.cast(column, pa.string())
                columns.append(column.to_pylist())
            conn.executemany(f"INSERT INTO {table} VALUES ({marks})", zip(*columns))
            count += batch.num_rows
    conn.close()
    return count


class PeakRSS:
    """The peak resident set of this process while the block runs, sampled by a thread."""

    def __init__(self, interval: float = 0.02) -> None:
        self.interval = interval
        self.start = self.peak = rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def describe(self) -> str:
        """'peak (+growth during the block)', MB."""
        return f"{self.peak / 2**20:,.0f} (+{(self.peak - self.start) / 2**20:,.0f})"

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, rss())

    def __enter__(self) -> PeakRSS:
        self.start = self.peak = rss()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss())


def rss() -> int:
    """This process's resident set, bytes (Linux /proc)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def same_state(a: str, b: str, view: str) -> bool:
    conn = apsw.Connection(a)
    conn.execute("ATTACH ? AS b", (b,))
    for prefix in ("view", "state", "ostate"):
        table = f'"__dbsp_{prefix}_{view}"'
        cols = ", ".join(f'"{r[1]}"' for r in conn.execute(f"PRAGMA main.table_info({table})") if r[1] != "__dbsp_id")
        for x, y in (("main", "b"), ("b", "main")):
            query = f"SELECT count(*) FROM (SELECT {cols} FROM {x}.{table} EXCEPT SELECT {cols} FROM {y}.{table})"
            if conn.execute(query).fetchone()[0]:
                return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--big", action="store_true", help="6M rows")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--views", default=",".join(VIEWS))
    parser.add_argument("--tmpdir")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--spark-conf", action="append", default=[], metavar="K=V", help="extra Spark settings")
    args = parser.parse_args()
    rows = 6_000_000 if args.big else args.rows
    work = tempfile.mkdtemp(prefix="matview-bench-spark-", dir=args.tmpdir)
    try:
        parquet = os.path.join(work, "lineitem.parquet")
        started = time.perf_counter()
        generate(parquet, rows)
        orders = os.path.join(work, "orders.parquet")
        generate_orders(orders, rows)
        console.print(f"generated {rows:,} rows in {time.perf_counter() - started:.1f} s ({work})")

        from matview.spark import backfill, build_session

        started = time.perf_counter()
        extra = dict(item.split("=", 1) for item in args.spark_conf)
        spark = build_session(args.master, {"spark.ui.enabled": "false", "spark.driver.memory": "2g", **extra})
        spark.range(1).count()
        session_start = time.perf_counter() - started

        table = Table(
            "view",
            "path",
            "load s",
            "view s",
            "merge s",
            "write s",
            "total s",
            "rows/s",
            "Spark/local",
            "write rows/s",
            "driver RSS MB",
        )
        for name in args.views.split(","):
            sql = VIEWS[name]
            sources = {"lineitem": parquet, **({"orders": orders} if name == "join" else {})}
            local_db = os.path.join(work, f"local-{name}.db")
            started = time.perf_counter()
            for source_table, path in sources.items():
                local_load(path, local_db, source_table)
            load_s = time.perf_counter() - started
            conn = matview.connect(local_db)
            started = time.perf_counter()
            conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
            create_s = time.perf_counter() - started
            conn.close()
            local_total = load_s + create_s
            table.add_row(
                name,
                "local",
                f"{load_s:.1f}",
                f"{create_s:.1f}",
                "",
                "",
                f"{local_total:.1f}",
                f"{rows / local_total:,.0f}",
                "",
            )
            spark_db = os.path.join(work, f"spark-{name}.db")
            with PeakRSS() as memory:
                summary = backfill(spark, spark_db, sources, views=[(name, sql)])
            phases = summary.phases
            loaded = summary.rows_loaded
            spark_total = summary.seconds
            table.add_row(
                name,
                f"spark {args.master}",
                f"{phases['plan'] + phases['load']:.1f}",
                f"{phases['buckets']:.1f} (buckets)" if "buckets" in phases else "(in load)",
                f"{phases['merge']:.1f}",
                f"{phases['write']:.1f}"
                + (f" + {phases['local views']:.1f} local view" if "local views" in phases else ""),
                f"{spark_total:.1f}",
                f"{rows / spark_total:,.0f}",
                f"{spark_total / local_total:.2f}×",
                f"{loaded / phases['write']:,.0f}",
                memory.describe(),
            )
            ok = same_state(spark_db, local_db, name)
            console.print(
                f"{name}: Spark file {'equals' if ok else 'DIFFERS from'} the local CREATE; "
                f"driver write {loaded / phases['write']:,.0f} rows/s ({loaded:,} rows); "
                f"{summary.partitions} partitions; {summary.views[0].where}; "
                f"driver peak RSS {memory.peak / 2**20:,.0f} MB"
            )
            if not ok:
                return 1
            for path in (local_db, spark_db):
                os.remove(path)
        console.print(table)
        console.print(f"Spark session start (not in the totals): {session_start:.1f} s; rows: {rows:,}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
