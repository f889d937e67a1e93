"""The REAL-sum view of issue 8: CREATE against `CREATE TABLE AS`, and a 10,000-row transaction
against the same transaction without the view (medians of interleaved repetitions).

    python bench/bench_real_sums.py [--rows 200000] [--reps 3]

Table `t(id INTEGER PRIMARY KEY, g INT, x INT, s TEXT, r REAL, disc REAL, st TEXT)`: r a price
with two decimals, disc in 0.00..0.10, s and st short text. The view is checked against its
SELECT after CREATE and after the transactions; exit status 1 if it differs.
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
from typing import Any

import apsw

import matview

SQL = "SELECT s, st, SUM(r), SUM(r * (1 - disc)), AVG(r), AVG(disc), COUNT(*) FROM t GROUP BY s, st"


def _rows(rng: random.Random, start: int, count: int) -> list[tuple[Any, ...]]:
    return [
        (
            start + i,
            rng.randrange(1000),
            rng.randrange(10**6),
            rng.choice("ANR"),
            round(rng.uniform(900, 100000), 2),
            rng.randrange(11) / 100,
            rng.choice("OF"),
        )
        for i in range(count)
    ]


def _same(conn: matview.Connection) -> bool:
    got = sorted(conn.execute("SELECT * FROM v").fetchall(), key=repr)
    return got == sorted(conn.execute(SQL).fetchall(), key=repr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(7)
    folder = tempfile.mkdtemp()
    try:
        base = os.path.join(folder, "base.db")
        raw = apsw.Connection(base)
        raw.execute("PRAGMA journal_mode=WAL").fetchall()
        raw.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, g INT, x INT, s TEXT, r REAL, disc REAL, st TEXT)")
        with raw:
            raw.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?)", _rows(rng, 0, args.rows))
        raw.close()
        create, ctas, txn, plain = [], [], [], []
        ok = True
        for rep in range(args.reps):
            paths = [os.path.join(folder, f"{name}{rep}.db") for name in ("view", "plain")]
            for path in paths:
                shutil.copy(base, path)
            view, without = (matview.connect(path) for path in paths)
            for conn in (view, without):
                conn.execute("PRAGMA synchronous=NORMAL")
            started = time.perf_counter()
            without.execute(f"CREATE TABLE ctas AS {SQL}")
            ctas.append(time.perf_counter() - started)
            started = time.perf_counter()
            view.execute(f"CREATE MATERIALIZED VIEW v AS {SQL}")
            create.append(time.perf_counter() - started)
            ok = ok and _same(view)
            batch = _rows(rng, 10 * args.rows + rep * 10_000, 10_000)
            for conn, times in ((without, plain), (view, txn)):
                started = time.perf_counter()
                with conn:
                    conn.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?)", batch)
                times.append(time.perf_counter() - started)
            ok = ok and _same(view)
            view.close()
            without.close()
        for what, with_view, without_view in (("CREATE vs CTAS", create, ctas), ("10k-row txn", txn, plain)):
            a, b = statistics.median(with_view), statistics.median(without_view)
            print(f"{what}: {a * 1e3:.0f} ms vs {b * 1e3:.0f} ms: {a / b:.1f}x")
        print("view == SELECT:", "ok" if ok else "WRONG")
        return 0 if ok else 1
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
