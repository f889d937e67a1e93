"""The ordered states (MIN/MAX multisets) of the partitioned views, merged by Spark tasks in
key ranges, so that the driver only copies each range in key order (see `pipeline`, phase 3).
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING

import apsw

from matview import names
from matview.db import scalar
from matview.names import fold, quote
from matview.spark import tasks
from matview.spark.commit import LoadedTable
from matview.spark.session import spark_call
from matview.spark.sources import Source
from matview.spark.views import ViewJob

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: below this many ordered-state entries (estimated) the driver merges them itself: the job's
#: fixed cost (~1 s on the 2-core box) exceeds the driver's merge (~0.5 s per million entries)
ORDERED_MIN_ENTRIES = 500_000
#: ordered-state entries per merge task (estimated); at most this many tasks per core and view
#: (each range after the first costs the driver an ordinary INSERT instead of a whole copy)
ORDERED_RANGE_ROWS = 100_000
ORDERED_RANGES_PER_CORE = 1
MAX_ORDERED_RANGES = 16


def range_limit(room: int, cores: int) -> int:
    """Key ranges per view: one per core (at most `MAX_ORDERED_RANGES`), within the ATTACH
    slots left (`room`)."""
    return min(room, ORDERED_RANGES_PER_CORE * cores, MAX_ORDERED_RANGES)


def ordered_views(load: LoadedTable, jobs: list[ViewJob]) -> list[ViewJob]:
    """The partitioned aggregates over `load` with MIN/MAX: the views with an ordered state to
    merge (the others' is empty)."""
    table = fold(load.table)
    return [
        j
        for j in jobs
        if j.partitioned_on == table
        and j.plan is not None
        and j.plan.kind == "aggregate"
        and any(spec.func in ("min", "max") for spec in j.plan.aggs)
    ]


def merge_ordered(
    spark: SparkSession, source: Source, load: LoadedTable, views: list[ViewJob], limit: int, staging_dir: str
) -> None:
    """Merge the ordered states (MIN/MAX multisets) of `views` in Spark tasks, at most `limit`
    key ranges per view, split at quantiles of the largest part file: the driver then only
    copies them in key order (`ViewJob.ordered_parts`) instead of merging every part file's
    entries itself. Without ATTACH slots for them (`limit` 0), the driver merges."""
    largest = max(load.parts, key=os.path.getsize)
    ranges = _ordered_ranges(largest, views, len(load.parts), limit)
    specs = [tasks.OrderedSpec(staging_dir, tuple(load.parts), tuple(entries)) for entries in ranges]
    if not specs:
        return
    # one task per range, through the same Python runner as the other jobs (already warm: an
    # RDD job's first run costs ~1.5 s more here)
    found = spark_call(
        source,
        lambda: (
            spark.range(len(specs), numPartitions=len(specs))
            .mapInArrow(functools.partial(tasks.merge_ordered_ranges, specs), tasks.ORDERED_DDL)
            .collect()
        ),
    )
    paths = [str(row["path"]) for row in sorted(found, key=lambda row: int(row["index"]))]
    by_table = {names.ordered_state_table(j.name): j for j in views}
    for spec, path in zip(specs, paths, strict=True):
        for table, *_ in spec.views:
            by_table[table].ordered_parts.append(str(path))


def _ordered_ranges(
    sample: str, views: list[ViewJob], parts: int, limit: int
) -> list[list[tuple[str, str, tasks.OrderedKey | None, tasks.OrderedKey | None]]]:
    """Per task, the (table, DDL, lower, upper) key ranges it merges: each view's ordered state
    cut into up to `limit` ranges of about `ORDERED_RANGE_ROWS` entries, at the quantiles of
    its entries in the part file `sample` (which holds `1/parts` of the rows, roughly)."""
    conn = apsw.Connection(sample, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        out: list[list[tuple[str, str, tasks.OrderedKey | None, tasks.OrderedKey | None]]] = []
        for job in views:
            table = names.ordered_state_table(job.name)
            ddl = scalar(conn, "SELECT sql FROM main.sqlite_master WHERE type = 'table' AND name = ?", (table,))
            if ddl is None:
                continue
            entries = int(scalar(conn, f"SELECT count(*) FROM main.{quote(table)}"))
            if entries * parts < ORDERED_MIN_ENTRIES:
                continue
            count = max(1, min(limit, entries, entries * parts // ORDERED_RANGE_ROWS))
            cuts: list[tasks.OrderedKey | None] = [None]
            for i in range(1, count):
                cut = conn.execute(
                    f"SELECT operator_id, key, ord, kind FROM main.{quote(table)} "
                    "ORDER BY operator_id, key, ord, kind LIMIT 1 OFFSET ?",
                    (entries * i // count,),
                ).fetchone()
                cuts.append(tuple(cut))  # type: ignore[arg-type]
            cuts.append(None)
            for i in range(count):
                if len(out) <= i:
                    out.append([])
                out[i].append((table, str(ddl), cuts[i], cuts[i + 1]))
        return out
    finally:
        conn.close()
