"""Join views: write overhead, CREATE, fan-out and many-table transactions, side by side.

    python bench/bench_joins.py [--orders 100000] [--customers 10000] [--iters 200] [--big]

Schema (issue 5): customers(id INTEGER PRIMARY KEY, region, segment) with --customers rows,
orders(id INTEGER PRIMARY KEY, customer_id, amount, status) with --orders rows, WAL and
synchronous=NORMAL. Each view is measured on its own copy of the database against an identical
copy without views; the two are timed alternately, operation by operation, and the script prints
medians and the ratio of medians (the machine is shared and noisy: trust ratios, not absolutes).
With --big, per-write cost at 10× the orders is compared with the base size.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import apsw

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import matview

VIEWS = {
    "J1": "SELECT o.id, o.amount, c.region FROM orders o JOIN customers c ON o.customer_id = c.id "
    "WHERE o.status = 'open'",
    "J2": "SELECT c.region, COUNT(*), SUM(o.amount) FROM orders o JOIN customers c ON o.customer_id = c.id "
    "GROUP BY c.region",
    "J3": "SELECT c.id, COUNT(o.id) FROM customers c LEFT JOIN orders o ON o.customer_id = c.id GROUP BY c.id",
}
VIEWS["J4"] = 'SELECT region, "SUM(o.amount)" / "COUNT(*)" AS mean FROM J2 WHERE "COUNT(*)" > 1'
#: views a view reads (created first, in the same mode): J4 is a view over J2
UPSTREAMS = {"J4": ["J2"]}
REGIONS = ["north", "south", "east", "west", "center"]
STATUSES = ["open", "closed", "shipped"]


def build(path: str, orders: int, customers: int, seed: int) -> None:
    rng = random.Random(seed)
    conn = apsw.Connection(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE customers(id INTEGER PRIMARY KEY, region TEXT, segment TEXT)")
    conn.execute("CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INT, amount INT, status TEXT)")
    with conn:
        conn.executemany(
            "INSERT INTO customers VALUES (?, ?, ?)",
            ((i, rng.choice(REGIONS), rng.choice(["retail", "corp"])) for i in range(1, customers + 1)),
        )
        conn.executemany(
            "INSERT INTO orders VALUES (?, ?, ?, ?)",
            ((i, rng.randint(1, customers), rng.randint(1, 1000), rng.choice(STATUSES)) for i in range(1, orders + 1)),
        )
    conn.close()


def copy(src: str, dst: str) -> str:
    shutil.copyfile(src, dst)
    return dst


def open_db(path: str, wrapped: bool) -> Any:
    conn = matview.connect(path) if wrapped else apsw.Connection(path)
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def timed(fn: Callable[[], Any]) -> int:
    start = time.perf_counter_ns()
    fn()
    return time.perf_counter_ns() - start


def pair(a: Callable[[], Any], b: Callable[[], Any], iters: int) -> tuple[float, float]:
    """Median ns of a and of b, run alternately (order flipped every iteration)."""
    ta: list[int] = []
    tb: list[int] = []
    gc.disable()
    try:
        for i in range(iters):
            if i % 2:
                ta.append(timed(a))
                tb.append(timed(b))
            else:
                tb.append(timed(b))
                ta.append(timed(a))
    finally:
        gc.enable()
    return statistics.median(ta), statistics.median(tb)


def txn(conn: Any, sql: str, params: Any) -> None:
    with conn:
        conn.execute(sql, params)


def row(label: str, view: str, a: float, b: float, target: str) -> None:
    print(f"| {label} | {view} | {a / 1e3:.1f} µs | {b / 1e3:.1f} µs | {a / b:.2f}× | {target} |", flush=True)


def bench_view(base: str, tmp: str, name: str, select: str, mode: str, iters: int, rng: random.Random) -> None:
    mv = open_db(copy(base, os.path.join(tmp, f"{name}_{mode}.db")), True)
    raw = open_db(copy(base, os.path.join(tmp, f"{name}_{mode}_raw.db")), True)
    for upstream in UPSTREAMS.get(name, []):
        mv.execute(f"CREATE MATERIALIZED VIEW {upstream} WITH (maintenance = '{mode}') AS {VIEWS[upstream]}")
    mv.execute(f"CREATE MATERIALIZED VIEW {name} WITH (maintenance = '{mode}') AS {select}")
    customers = mv.execute("SELECT max(id) FROM customers").fetchone()[0]
    target = ("≤ 4×" if name == "J3" else "≤ 3×") if mode == "immediate" else "≤ 1.3×"
    next_id = [10**9]

    def insert_order(conn: Any) -> Callable[[], None]:
        def run() -> None:
            next_id[0] += 1
            txn(conn, "INSERT INTO orders VALUES (?, ?, ?, 'open')", (next_id[0], rng.randint(1, customers), 5))

        return run

    ops = {
        "INSERT order": insert_order,
        "UPDATE order amount": lambda c: (
            lambda: txn(c, "UPDATE orders SET amount = amount + 1 WHERE id = ?", (rng.randint(1, 1000),))
        ),
        "UPDATE order customer": lambda c: (
            lambda: txn(
                c, "UPDATE orders SET customer_id = ? WHERE id = ?", (rng.randint(1, customers), rng.randint(1, 1000))
            )
        ),
        "INSERT customer": lambda c: (
            lambda: txn(c, "INSERT INTO customers(region, segment) VALUES (?, 'retail')", (rng.choice(REGIONS),))
        ),
        "UPDATE customer region (fan-out ~10)": lambda c: (
            lambda: txn(
                c, "UPDATE customers SET region = ? WHERE id = ?", (rng.choice(REGIONS), rng.randint(1, customers))
            )
        ),
    }
    for label, make in ops.items():
        a, b = pair(make(mv), make(raw), iters)
        fanout = "≤ 5×" if "fan-out" in label and mode == "immediate" else target
        row(label, f"{name} {mode}", a, b, fanout)

    def big_txn(conn: Any) -> Callable[[], None]:
        def run() -> None:
            with conn:
                conn.executemany(
                    "INSERT INTO orders(customer_id, amount, status) VALUES (?, ?, 'open')",
                    [(rng.randint(1, customers), rng.randint(1, 9)) for _ in range(10_000)],
                )

        return run

    a, b = pair(big_txn(mv), big_txn(raw), 3)
    row("10k-row transaction", f"{name} {mode}", a, b, "≤ 3×")
    mv.flush()
    for view in [*UPSTREAMS.get(name, []), name]:
        assert mv.view(view).verify(), f"{view} differs from its SELECT"
    mv.close()
    raw.close()


def bench_create(base: str, tmp: str, name: str, select: str) -> None:
    times: list[tuple[int, int]] = []
    for i in range(3):
        mv = open_db(copy(base, os.path.join(tmp, f"c{i}.db")), True)
        raw = open_db(copy(base, os.path.join(tmp, f"r{i}.db")), False)
        for upstream in UPSTREAMS.get(name, []):  # read by both: a view, and a table of its rows
            mv.execute(f"CREATE MATERIALIZED VIEW {upstream} AS {VIEWS[upstream]}")
            raw.execute(f"CREATE TABLE {upstream} AS {VIEWS[upstream]}")
        a = timed(lambda mv=mv: mv.execute(f"CREATE MATERIALIZED VIEW {name} AS {select}"))
        b = timed(lambda raw=raw: raw.execute(f"CREATE TABLE p AS {select}"))
        times.append((a, b))
        mv.close()
        raw.close()
    a = statistics.median(t[0] for t in times)
    b = statistics.median(t[1] for t in times)
    row("CREATE vs CREATE TABLE AS", name, a, b, "≤ 2×")


def bench_wide(tmp: str, iters: int) -> None:
    """A 12-way comma join with 8 tables written in one transaction, against a full recompute."""
    path = os.path.join(tmp, "wide.db")
    conn = open_db(path, True)
    tables = [f"w{i}" for i in range(8)]
    for t in tables:  # 10,000 rows each, a key shared by two rows: every row joins a handful
        conn.execute(f"CREATE TABLE {t}(id INTEGER PRIMARY KEY, k INTEGER, v INTEGER)")
        with conn:
            conn.executemany(f"INSERT INTO {t}(k, v) VALUES (?, ?)", [(i // 2, i % 100) for i in range(10_000)])
    refs = [*tables, "w0 AS x0", "w1 AS x1", "w2 AS x2", "w3 AS x3"]
    aliases = [*tables, "x0", "x1", "x2", "x3"]
    where = " AND ".join(f"{a}.k = {b}.k" for a, b in itertools.pairwise(aliases))
    select = f"SELECT w0.v % 10, count(*), sum(w7.v) FROM {', '.join(refs)} WHERE {where} GROUP BY w0.v % 10"
    conn.execute(f"CREATE MATERIALIZED VIEW wide AS {select}")
    rng = random.Random(5)

    def write() -> None:
        with conn:
            for t in tables:
                conn.execute(f"INSERT INTO {t}(k, v) VALUES (?, ?)", (rng.randint(0, 4999), rng.randint(0, 99)))

    def recompute() -> None:
        conn.execute(select).fetchall()

    a, b = pair(write, recompute, max(5, iters // 20))
    row("12-way join, 8 tables written in one transaction, vs full recompute", "wide", a, b, "≤ 1.5×")
    assert conn.view("wide").verify()
    conn.close()


def bench_growth(tmp: str, orders: int, customers: int, iters: int, rng: random.Random) -> None:
    small = os.path.join(tmp, "small.db")
    big = os.path.join(tmp, "big.db")
    build(small, orders, customers, 1)
    build(big, orders * 10, customers, 1)
    conns = [open_db(p, True) for p in (small, big)]
    for conn in conns:
        conn.execute(f"CREATE MATERIALIZED VIEW J2 AS {VIEWS['J2']}")

    def insert(conn: Any) -> Callable[[], None]:
        return lambda: txn(
            conn, "INSERT INTO orders(customer_id, amount, status) VALUES (?, 5, 'open')", (rng.randint(1, customers),)
        )

    b, a = pair(insert(conns[0]), insert(conns[1]), iters)
    row(f"1-row INSERT at {orders * 10:,} vs {orders:,} orders", "J2 immediate", a, b, "≤ 1.3×")
    for conn in conns:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--orders", type=int, default=100_000)
    parser.add_argument("--customers", type=int, default=10_000)
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--big", action="store_true", help="also compare per-write cost at 10× the orders")
    args = parser.parse_args(argv)
    rng = random.Random(7)
    tmp = tempfile.mkdtemp(prefix="matview-bench-joins-")
    try:
        base = os.path.join(tmp, "base.db")
        build(base, args.orders, args.customers, 1)
        sizes = f"orders={args.orders:,} customers={args.customers:,} iters={args.iters}"
        print(f"{sizes} (medians; ratio = view / no view)")
        print("| measure | view | with view | without | ratio | target |\n|---|---|---|---|---|---|")
        for name, select in VIEWS.items():
            bench_create(base, tmp, name, select)
            for mode in ("immediate", "deferred"):
                bench_view(base, tmp, name, select, mode, args.iters, rng)
        bench_wide(tmp, args.iters)
        if args.big:
            bench_growth(tmp, args.orders, args.customers, args.iters, rng)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
