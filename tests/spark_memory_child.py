"""Child process for tests/test_spark_memory.py: one backfill in a fresh driver process, and
how much the driver's resident set grew while it ran.

Usage: python spark_memory_child.py WARM_PARQUET PARQUET WORKDIR

It builds a `local[2]` session, backfills a warm-up table (tiny: the imports, the JVM's first
jobs, the engine's compiled plans — one-time costs), resets the peak resident set
(``/proc/self/clear_refs``), then backfills the measured table into a new file. Prints one JSON
line: rows loaded, the resident set before the measured backfill, and the peak (VmHWM) at its
end, in bytes. The final transaction's page cache is set to 2 MiB (`commit.WRITE_CACHE_KIB`, a
constant whatever the rows), so its bound is reached at test sizes too: whatever else grows
with the rows shows.
"""

from __future__ import annotations

import json
import os
import sys

from matview.spark import backfill, build_session, commit

VIEWS = [
    ("extremes", "SELECT g, min(x) AS lo, max(x) AS hi, count(*) AS n, sum(q) AS sq FROM t GROUP BY g"),
    ("some_rows", "SELECT id, x * 2 AS x2 FROM t WHERE q > 30"),
]


def status() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as lines:
        for line in lines:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                out[name] = int(value.split()[0]) * 1024
    return out


def main() -> None:
    warm, parquet, work = sys.argv[1:4]
    commit.WRITE_CACHE_KIB = 2 * 1024
    spark = build_session(
        "local[2]", conf={"spark.sql.shuffle.partitions": "2", "spark.driver.memory": "1g"}, fast_start=True
    )
    backfill(spark, os.path.join(work, "warm.db"), {"t": warm}, views=VIEWS)
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")  # VmHWM := VmRSS
    except OSError:
        pass  # then the peak also covers the warm-up (tiny), which only narrows the growth
    before = status()
    summary = backfill(spark, os.path.join(work, "measured.db"), {"t": parquet}, views=VIEWS)
    after = status()
    print(json.dumps({"rows": summary.rows_loaded, "rss_before": before["VmRSS"], "peak": after["VmHWM"]}), flush=True)


if __name__ == "__main__":
    main()
