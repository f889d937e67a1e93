"""The change feed's cost: autocommit writes to a table under an immediate aggregate view,
with nobody subscribed and with one subscriber (each write delivers one change).

    python bench/bench_feed.py [ROWS]      (run it with another checkout on PYTHONPATH to compare)
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import matview


def run(rows: int, subscribe: bool) -> float:
    with tempfile.TemporaryDirectory() as directory:
        conn = matview.connect(str(Path(directory) / "feed.db"))
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("CREATE TABLE t(g INTEGER, x INTEGER)")
        conn.execute("CREATE MATERIALIZED VIEW v AS SELECT g, sum(x) AS s, count(*) AS n FROM t GROUP BY g")
        received: list[object] = []
        if subscribe:
            conn.subscribe("v", received.append)
        start = time.perf_counter()
        for i in range(rows):
            conn.execute("INSERT INTO t VALUES (?, ?)", (i % 10, i))
        elapsed = time.perf_counter() - start
        assert not subscribe or len(received) == rows
        conn.close()
        return elapsed


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    subscribed = hasattr(matview.Connection, "subscribe")
    for label, subscribe in (("no subscriber", False), ("one subscriber", True)):
        if subscribe and not subscribed:
            continue
        times = [run(rows, subscribe) for _ in range(5)]
        per_write = statistics.median(times) / rows * 1e6
        print(f"{matview.__file__}: {label}: {per_write:.0f} µs per autocommit write (median of 5, {rows} writes)")


if __name__ == "__main__":
    main()
