#!/usr/bin/env python
"""An application's write mix: several views over two tables, 1-row writes of four kinds in turn.

    python bench/bench_mixed.py [--orders 100000] [--customers 10000] [--iters 1500]

The other benches time one kind of write at a time, so a fold's statements stay in apsw's
statement cache. An application mixes writes: with three views a fold runs ~20 statements per
view and write, and apsw's cache (a ring of the statements last run) dropped a statement before
it came back. Three arms on copies of one file, interleaved write by write (the order rotates),
medians: views on a `matview.connect` connection (`STATEMENT_CACHE_SIZE`), the same views on an
apsw connection opened with apsw's default cache (100) and wrapped by `matview.install`, and
no views. Every view is checked against its SELECT at the end (exit status 1 if one differs).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from typing import Any

import apsw

import matview

VIEWS = {
    "by_region": "SELECT c.region, COUNT(*), SUM(o.amount) FROM orders o JOIN customers c ON o.customer_id = c.id "
    "GROUP BY c.region",
    "open_customers": "SELECT * FROM customers c WHERE EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id "
    "AND o.status = 'open')",
    "per_customer": "SELECT customer_id, count(*), sum(amount), max(amount) FROM orders GROUP BY customer_id",
}


def build(path: str, orders: int, customers: int) -> None:
    rnd = random.Random(1)
    conn = apsw.Connection(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE customers(id INTEGER PRIMARY KEY, region TEXT, segment TEXT)")
    conn.execute("CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INTEGER, amount REAL, status TEXT)")
    with conn:
        conn.executemany(
            "INSERT INTO customers VALUES (?, ?, ?)",
            ((i, rnd.choice("nesw"), rnd.choice(["retail", "corp"])) for i in range(customers)),
        )
        conn.executemany(
            "INSERT INTO orders VALUES (?, ?, ?, ?)",
            (
                (i, rnd.randrange(customers), rnd.randrange(100_000) / 100, rnd.choice(["open", "paid"]))
                for i in range(orders)
            ),
        )
    conn.close()


def writes(orders: int, customers: int, count: int) -> list[tuple[str, tuple[Any, ...]]]:
    """`count` 1-row writes, four kinds in turn: a new order, an order's amount and status, an
    order deleted, a customer's segment and region."""
    rnd = random.Random(2)
    out: list[tuple[str, tuple[Any, ...]]] = []
    for k in range(count):
        kind = k % 4
        if kind == 0:
            row = (orders + k, rnd.randrange(customers), rnd.randrange(100_000) / 100, rnd.choice(["open", "paid"]))
            out.append(("INSERT INTO orders VALUES (?, ?, ?, ?)", row))
        elif kind == 1:
            changed = (rnd.randrange(100_000) / 100, rnd.choice(["open", "paid"]), rnd.randrange(orders))
            out.append(("UPDATE orders SET amount = ?, status = ? WHERE id = ?", changed))
        elif kind == 2:
            out.append(("DELETE FROM orders WHERE id = ?", (rnd.randrange(orders),)))
        else:
            changed = (rnd.choice(["retail", "corp"]), rnd.choice("nesw"), rnd.randrange(customers))
            out.append(("UPDATE customers SET segment = ?, region = ? WHERE id = ?", changed))
    return out


def typed_bag(rows: Any) -> Counter[tuple[Any, ...]]:
    return Counter(tuple((type(v).__name__, v) for v in row) for row in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--orders", type=int, default=100_000)
    parser.add_argument("--customers", type=int, default=10_000)
    parser.add_argument("--iters", type=int, default=1500, help="writes per arm (the first 10%% untimed)")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="matview-bench-mixed-")
    try:
        base = os.path.join(work, "base.db")
        build(base, args.orders, args.customers)
        arms: dict[str, matview.Connection] = {}
        for arm in ("views", "views, apsw's cache of 100", "no views"):
            path = os.path.join(work, f"{len(arms)}.db")
            shutil.copy(base, path)
            if arm == "views, apsw's cache of 100":
                conn = matview.install(apsw.Connection(path))
            else:
                conn = matview.connect(path)
            conn.execute("PRAGMA synchronous = NORMAL")
            if arm != "no views":
                for name, select in VIEWS.items():
                    conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {select}")
            arms[arm] = conn
        times: dict[str, list[int]] = {arm: [] for arm in arms}
        order = list(arms)
        for k, (sql, params) in enumerate(writes(args.orders, args.customers, args.iters)):
            order = order[1:] + order[:1]
            for arm in order:
                conn = arms[arm]
                started = time.perf_counter_ns()
                with conn:
                    conn.execute(sql, params)
                if k >= args.iters // 10:
                    times[arm].append(time.perf_counter_ns() - started)
        base_median = statistics.median(times["no views"])
        print(f"{len(VIEWS)} views, {args.iters} 1-row writes of 4 kinds in turn, medians:")
        for arm, samples in times.items():
            median = statistics.median(samples)
            print(f"  {arm:28s} {median / 1000:8.1f} µs   {median / base_median:5.2f}× no views")
        exact = True
        for arm, conn in arms.items():
            if arm == "no views":
                continue
            for name, select in VIEWS.items():
                if typed_bag(conn.execute(f"SELECT * FROM {name}")) != typed_bag(conn.execute(select)):
                    print(f"WRONG: {arm}: view {name} differs from its SELECT")
                    exact = False
        for conn in arms.values():
            conn.close()
        print("every view equals its SELECT" if exact else "a view differs from its SELECT")
        return 0 if exact else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
