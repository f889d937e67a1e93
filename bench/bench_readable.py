"""What a stock client pays to read a view: a full scan of the plain view ``main.<v>``
(weights expanded in SQL) against a scan of the view's stored table itself.

    python bench/bench_readable.py [--rows 100000] [--iters 21]

A rows view over `--rows` distinct rows (every weight 1), read by a plain apsw connection
(no matview module, as any client), interleaved, medians. Two measures each: fetching every
row into Python (what a client does) and an aggregate over every column inside SQLite (the
scan alone). For context, the exact read through a matview connection's temp shadow.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import apsw

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import matview

COLUMNS = "id, g, x, s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--iters", type=int, default=21)
    args = parser.parse_args()
    path = os.path.join(tempfile.mkdtemp(), "bench.db")
    conn = matview.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, g INTEGER, x INTEGER, s TEXT)")
    rng = random.Random(7)
    with conn:
        conn.executemany(
            "INSERT INTO t VALUES (?, ?, ?, ?)",
            ((i, rng.randrange(1000), rng.randrange(10**6), f"s{rng.randrange(10**6)}") for i in range(args.rows)),
        )
    conn.execute(f"CREATE MATERIALIZED VIEW v AS SELECT {COLUMNS} FROM t")
    stock = apsw.Connection(path)  # no module: reads main.v like any client
    queries = {
        "table, fetch": (stock, f'SELECT {COLUMNS} FROM "__dbsp_view_v"'),
        "plain view, fetch": (stock, "SELECT * FROM v"),
        "table, scan in SQLite": (stock, 'SELECT max(id), max(g), max(x), max(s) FROM "__dbsp_view_v"'),
        "plain view, scan in SQLite": (stock, "SELECT max(id), max(g), max(x), max(s) FROM v"),
        "matview shadow (exact), fetch": (conn.apsw, "SELECT * FROM v"),
    }
    assert len(stock.execute("SELECT * FROM v").fetchall()) == args.rows
    times: dict[str, list[float]] = {name: [] for name in queries}
    gc.disable()
    for iteration in range(args.iters + 2):
        order = list(queries.items())
        if iteration % 2:
            order.reverse()
        for name, (connection, sql) in order:
            start = time.perf_counter()
            connection.execute(sql).fetchall()
            if iteration >= 2:  # two warm-up rounds
                times[name].append(time.perf_counter() - start)
    gc.enable()
    median = {name: statistics.median(values) for name, values in times.items()}
    print(
        f"{args.rows} rows, weight 1, {args.iters} interleaved iterations, medians (SQLite {apsw.sqlite_lib_version()})"
    )
    for name, value in median.items():
        print(f"  {name:32s} {value * 1000:8.1f} ms")
    print(f"  ratio plain view / table, fetch:          {median['plain view, fetch'] / median['table, fetch']:.2f}")
    print(
        "  ratio plain view / table, scan in SQLite: "
        f"{median['plain view, scan in SQLite'] / median['table, scan in SQLite']:.2f}"
    )
    stock.close()
    conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
