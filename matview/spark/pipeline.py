"""`backfill`: bulk-load tables with Spark and build their views, exactly as a local CREATE.

Phases (each timed in the returned `Summary`):

1. plan (driver): read the sources' schemas, check existing tables, compile every view
   against the loaded schema and decide where it is computed (`views.classify`);
2. load (Spark): each task writes its partition into a SQLite part file and runs the
   partitioned views' own CREATE on it, exporting their partial states (`tasks`); for
   co-partitioned joins it also splits its rows into buckets by the join key, and a task per
   bucket gathers both tables' rows of that bucket and runs the joins' CREATE there
   (`copartition`);
3. merge (Spark): partial states shuffled by (view, operator, key) and merged by the engine's
   rules, written into merged part files; beside it, the ordered states (MIN/MAX multisets)
   of the part files merged by SQLite in tasks, one key range each (`tasks.merge_ordered`);
4. write (driver): one transaction ATTACHes the part files, INSERT…SELECTs the rows, copies
   the ordered-state ranges in key order, writes the merged states through the engine's own
   `emit` (`commit`);
5. local views (driver, same transaction, timed apart): the views Spark cannot compute by
   partitions, by the engine's own CREATE. A failure anywhere leaves the file as it was.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import apsw

import matview
from matview.errors import Error
from matview.names import fold, is_internal
from matview.spark import copartition, ordered, tasks
from matview.spark.commit import MAX_ATTACHED, LoadedTable, attached_count, commit, table_exists, views_reading
from matview.spark.session import spark_call
from matview.spark.sources import Source, check_existing, read_source
from matview.spark.views import ViewJob, classify, scratch_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

MODES = ("create", "replace", "append")
MIN_PARTITIONS = "spark.sql.files.minPartitionNum"
#: file splits asked per core for the load job (each split: one task, one part file)
SPLITS_PER_CORE = 4
#: at most this many merged part files (of partial states) per loaded table
MERGED_PARTS = 8
ViewArg = str | tuple[str, str]


@dataclass
class ViewSummary:
    name: str
    where: str  # "spark (<table>)" or "local"
    reason: str
    rows: int = 0
    state_rows: int = 0
    ordered_state_rows: int = 0


@dataclass
class Summary:
    db: str
    mode: str
    tables: dict[str, int] = field(default_factory=dict)  # rows loaded per table
    views: list[ViewSummary] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)  # seconds per phase
    partitions: int = 0

    @property
    def rows_loaded(self) -> int:
        return sum(self.tables.values())

    @property
    def seconds(self) -> float:
        return sum(self.phases.values())


def _jobs(
    conn: matview.Connection, views: Iterable[ViewArg], all_views: bool, mode: str, loaded: list[str]
) -> list[ViewJob]:
    existing = {fold(v.name): v for v in conn.views()}
    wanted_existing: list[str] = []
    new: list[ViewJob] = []
    for item in views:
        if isinstance(item, str):
            if fold(item) not in existing:
                raise Error(f"no such materialized view: {item} (give NAME=SELECT to create it)")
            wanted_existing.append(existing[fold(item)].name)
        else:
            name, sql = item
            if fold(name) in existing:
                raise Error(f"materialized view {name} already exists (name it alone to backfill it)")
            taken = conn.apsw.execute(
                "SELECT type FROM main.sqlite_master WHERE name = ? COLLATE NOCASE", (name,)
            ).fetchone()
            if taken is not None or fold(name) in {fold(t) for t in loaded}:
                kind = "table" if taken is None else taken[0]
                raise Error(f"cannot create materialized view {name}: a {kind} of that name exists")
            if fold(name) in {fold(n.name) for n in new}:
                raise Error(f"materialized view {name} is given twice")
            new.append(ViewJob(name, sql.strip().rstrip(";").strip(), existing=False))
    if all_views:
        wanted_existing += [v.name for v in conn.views()]
    if mode == "append":  # existing views absorb the rows through change capture
        return [ViewJob(n.name, n.sql, existing=False, reason="append: created after the load") for n in new]
    forced = views_reading(conn, loaded)  # their table's rows are replaced: rebuilt, upstream first
    extra = [n for n in dict.fromkeys(wanted_existing) if fold(n) not in {fold(f) for f in forced}]
    rebuilt = [ViewJob(n, existing[fold(n)].sql, existing=True) for n in [*forced, *extra]]
    return [*rebuilt, *new]


def backfill(
    spark: SparkSession,
    db: str,
    tables: Mapping[str, str],
    views: Iterable[ViewArg] = (),
    format: str | None = None,
    mode: str = "create",
    all_views: bool = False,
    staging: str | None = None,
    _fail_partition: int | None = None,
) -> Summary:
    """Load `tables` ({table: path or glob}) into the SQLite file `db` with Spark, and build
    `views` (names of existing materialized views, or (name, SELECT) pairs to create).

    mode: "create" (tables absent or empty), "replace" (their rows replaced) or "append" (rows
    added through change capture; views created afterwards by the local CREATE). Every view
    reading a replaced table is rebuilt in the same transaction."""
    if mode not in MODES:
        raise Error(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if not tables:
        raise Error("backfill needs at least one table to load")
    summary = Summary(db, mode)
    started = time.perf_counter()
    previous_zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    split_set = _balance_splits(spark)
    staging_dir = tempfile.mkdtemp(prefix="matview-backfill-", dir=staging or os.path.dirname(os.path.abspath(db)))
    try:
        sources, loads, jobs = _plan(spark, db, tables, views, format, mode, all_views, staging_dir)
        summary.phases["plan"] = time.perf_counter() - started
        merged = _run_spark(spark, sources, loads, jobs, staging_dir, summary, _fail_partition)
        started = time.perf_counter()
        written = commit(db, mode, loads, jobs, merged)
        summary.phases["write"] = time.perf_counter() - started - written.local_seconds
        if written.local_seconds:
            summary.phases["local views"] = written.local_seconds
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous_zone or "UTC")
        if split_set:
            spark.conf.unset(MIN_PARTITIONS)
        shutil.rmtree(staging_dir, ignore_errors=True)
    summary.tables = {load.table: load.rows for load in loads}
    for job in jobs:
        rows, states, ordered = written.counts.get(job.name, (0, 0, 0))
        summary.views.append(ViewSummary(job.name, job.where, job.reason, rows, states, ordered))
    return summary


def _balance_splits(spark: SparkSession) -> bool:
    """Ask for `SPLITS_PER_CORE` file splits per core (unless the session sets its own
    minimum): with one split per core, a file's row groups divide unevenly (3 and 5 of 8) and
    one task ends last, alone; smaller splits keep every core busy to the end. Whether it set
    the conf (to unset it after the job)."""
    if spark.conf.get(MIN_PARTITIONS, None) is not None:
        return False
    spark.conf.set(MIN_PARTITIONS, str(SPLITS_PER_CORE * spark.sparkContext.defaultParallelism))
    return True


def _plan(
    spark: SparkSession,
    db: str,
    tables: Mapping[str, str],
    views: Iterable[ViewArg],
    fmt: str | None,
    mode: str,
    all_views: bool,
    staging_dir: str,
) -> tuple[list[Source], list[LoadedTable], list[ViewJob]]:
    conn = matview.connect(db)
    try:
        raw = conn.apsw
        try:  # (before any Spark work; the final transaction waits for the lock again)
            raw.execute("BEGIN IMMEDIATE")
            raw.execute("ROLLBACK")
        except apsw.BusyError:
            raise Error(f"{db} is locked by another connection (nothing was written): try again") from None
        sources: list[Source] = []
        loads: list[LoadedTable] = []
        loaded_ddl: dict[str, str] = {}
        named: dict[str, str] = {}
        for table, uri in tables.items():
            if is_internal(table) or table.lower().startswith("sqlite_"):
                raise Error(f"table {table}: a reserved name")
            if fold(table) in named:  # (SQLite's names ignore case: both would load one table)
                raise Error(f"table {table} is given twice ({named[fold(table)]} and {table}): one source per table")
            named[fold(table)] = table
            if any(fold(v.name) == fold(table) for v in conn.views()):
                raise Error(f"{table} is a materialized view, not a table")
            other = raw.execute(
                "SELECT type FROM main.sqlite_master WHERE name = ? COLLATE NOCASE AND type <> 'table'", (table,)
            ).fetchone()
            if other is not None:
                raise Error(f"cannot load table {table}: the file has a {other[0]} of that name")
            source = read_source(spark, table, uri, fmt)
            create_sql = source.create_sql()
            if table_exists(raw, table):
                declared = [(str(r[1]), str(r[2])) for r in raw.execute(f"PRAGMA main.table_info({_q(table)})")]
                check_existing(source, declared)
                name, create_sql = raw.execute(  # type: ignore[misc]
                    "SELECT name, sql FROM main.sqlite_master WHERE type = 'table' AND name = ? COLLATE NOCASE",
                    (table,),
                ).fetchone()
                if mode == "create" and raw.execute(f"SELECT 1 FROM main.{_q(name)} LIMIT 1").fetchone():
                    raise Error(f"table {name} already has rows: use mode replace or append")
                table = str(name)
            sources.append(source)
            loads.append(LoadedTable(table, str(create_sql), tuple(c.name for c in source.columns)))
            loaded_ddl[fold(table)] = str(create_sql)
        jobs = _jobs(conn, views, all_views, mode, [load.table for load in loads])
        if mode != "append":
            classify(scratch_schema(raw, loaded_ddl), jobs, loaded_ddl)
        return sources, loads, jobs
    finally:
        conn.close()


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _run_spark(
    spark: SparkSession,
    sources: list[Source],
    loads: list[LoadedTable],
    jobs: list[ViewJob],
    staging_dir: str,
    summary: Summary,
    fail_partition: int | None,
) -> list[str]:
    """The load and merge phases; the merged part files' paths."""

    summary.phases.setdefault("load", 0.0)
    summary.phases.setdefault("merge", 0.0)
    joins = [j for j in jobs if j.join_key is not None]
    buckets = copartition.bucket_count(spark.sparkContext.defaultParallelism) if joins else 0
    # ATTACH slots of the final transaction kept for the joins: per join key, its bucket files
    # (shared by the views it serves) and its merged part files
    reserved = len({j.join_key for j in joins}) * (buckets + MERGED_PARTS)
    cap = max(1, (96 - reserved) // len(sources))
    merged: list[str] = []
    started = time.perf_counter()
    # every table's load job at once: Spark fills the cores one job's last tasks leave idle
    with ThreadPoolExecutor(len(sources)) as pool:
        outs = list(
            pool.map(
                lambda pair: _load(pair[0], pair[1], jobs, staging_dir, cap, buckets, fail_partition),
                zip(sources, loads, strict=True),
            )
        )
    summary.phases["load"] += time.perf_counter() - started
    for load in loads:
        summary.partitions += len(load.parts)
    for index, (source, load, out) in enumerate(zip(sources, loads, outs, strict=True)):
        partitioned = [j for j in jobs if j.partitioned_on == fold(load.table)]
        if partitioned:
            started = time.perf_counter()
            plans = tuple((j.name, j.plan.to_dict()) for j in partitioned if j.plan is not None)
            # the ordered states' job runs beside the states' (each is short: run together,
            # their tasks share the cores and neither waits for the other's scheduling)
            later = len(sources) - 1 - index
            room = (
                MAX_ATTACHED
                - attached_count(loads, jobs, merged)
                - MERGED_PARTS
                - later * (MERGED_PARTS + 1)
                - reserved
            )
            limit = ordered.range_limit(room, spark.sparkContext.defaultParallelism)
            views = ordered.ordered_views(load, jobs)
            with ThreadPoolExecutor(1) as pool:
                merging = (
                    pool.submit(ordered.merge_ordered, spark, source, load, views, limit, staging_dir)
                    if views and load.parts and limit >= 1
                    else None
                )
                merged += _merge(source, out, tasks.MergeSpec(staging_dir, plans))
                if merging is not None:
                    merging.result()
            summary.phases["merge"] += time.perf_counter() - started
        out.unpersist()
    if joins:
        merged += _run_buckets(spark, sources, loads, joins, buckets, staging_dir, summary)
    return merged


def _load(
    source: Source,
    load: LoadedTable,
    jobs: list[ViewJob],
    staging_dir: str,
    cap: int,
    buckets: int,
    fail_partition: int | None,
) -> DataFrame:
    """One table's load job: its part files (set on `load`) and its views' partial states
    (the returned frame, kept for the merge)."""
    from pyspark.sql import functions as f

    partitioned = [j for j in jobs if j.partitioned_on == fold(load.table)]
    keys = (
        (j.join_key.column_of(load.table), j.join_key.collation)
        for j in jobs
        if j.join_key is not None and fold(load.table) in j.join_key.tables
    )
    spec = tasks.LoadSpec(
        load.table,
        load.create_sql,
        load.columns,
        staging_dir,
        _exported(partitioned),
        fail_partition,
        tuple(dict.fromkeys(keys)),
        buckets,
    )
    frame = source.frame
    if frame.rdd.getNumPartitions() > cap:
        frame = frame.coalesce(cap)
    load_fn = functools.partial(tasks.load_partition, spec)
    out: DataFrame = spark_call(source, functools.partial(_checkpointed, frame, load_fn))
    parts = out.where(f.col("kind") == "part").select("path", "rows", "version").collect()
    driver_version = tasks.versions()
    for part in parts:
        if part["version"] != driver_version:
            raise Error(f"a Spark worker runs {part['version']}, the driver {driver_version}: results would differ")
    load.parts = [str(p["path"]) for p in parts]
    load.rows = sum(int(p["rows"]) for p in parts)
    return out


def _exported(jobs: list[ViewJob]) -> tuple[tuple[str, str, bool], ...]:
    """The views a Spark task creates and exports (`tasks.LoadSpec.views`): only row views need
    their rows exported; an aggregate's or DISTINCT's follow from the merged state."""
    return tuple((j.name, j.sql, j.plan is not None and j.plan.kind == "rows" and not j.plan.distinct) for j in jobs)


def _run_buckets(
    spark: SparkSession,
    sources: list[Source],
    loads: list[LoadedTable],
    joins: list[ViewJob],
    buckets: int,
    staging_dir: str,
    summary: Summary,
) -> list[str]:
    """Co-partitioned join views: per join key, one task per bucket gathers both tables' rows
    of that bucket from the load part files and runs the views' CREATE there; their partial
    states merge as a load's do. The merged part files' paths."""
    by_key: dict[copartition.JoinKey, list[ViewJob]] = {}
    for job in joins:
        if job.join_key is not None:
            by_key.setdefault(job.join_key, []).append(job)
    by_table = {fold(load.table): load for load in loads}
    merged: list[str] = []
    for key, views in by_key.items():
        started = time.perf_counter()
        pairs = dict(zip(key.tables, key.columns, strict=True))  # a self-join: its table once
        tables = tuple(
            (load.table, load.create_sql, load.columns, column, tuple(load.parts))
            for load, column in ((by_table[t], c) for t, c in pairs.items())
        )
        spec = copartition.BucketSpec(
            staging_dir,
            tables,
            key.collation,
            _exported(views),
        )
        source = sources[0]
        out = spark_call(
            source,
            lambda spec=spec: (
                spark.range(buckets, numPartitions=buckets)
                .mapInArrow(functools.partial(copartition.bucket_partition, spec), tasks.LOAD_DDL)
                .localCheckpoint(eager=True)
            ),
        )
        paths = [str(row["path"]) for row in out.where("kind = 'part'").select("path").collect()]
        for job in views:
            job.bucket_parts = paths
        summary.phases["buckets"] = summary.phases.get("buckets", 0.0) + time.perf_counter() - started
        started = time.perf_counter()
        plans = tuple((j.name, j.plan.to_dict()) for j in views if j.plan is not None)
        merged += _merge(source, out, tasks.MergeSpec(staging_dir, plans))
        out.unpersist()
        summary.phases["merge"] += time.perf_counter() - started
    return merged


def _checkpointed(frame: DataFrame, load_fn: object) -> DataFrame:
    """Run the load job once: its output (part paths and partial states) kept for the merge."""
    return frame.mapInArrow(load_fn, tasks.LOAD_DDL).localCheckpoint(eager=True)  # type: ignore[arg-type]


def _merge(source: Source, out: DataFrame, spec: tasks.MergeSpec) -> list[str]:
    from pyspark.sql import functions as f

    kind = f.col("kind")
    states = (
        out.where(kind == "state")
        .groupBy("view", "op", "key")
        .agg(f.collect_list("value").alias("values"))
        .withColumn("kind", f.lit("state"))
    )
    rows = (
        out.where(kind == "rows")
        .groupBy("view", "key")
        .agg(f.sum("weight").alias("weight"))
        .where(f.col("weight") != 0)
        .withColumn("kind", f.lit("rows"))
    )
    columns = ["kind", "view", "op", "key", "values", "weight"]
    typed = {"op": "long", "values": "array<binary>", "weight": "long"}

    def shaped(frame: DataFrame) -> DataFrame:
        present = set(frame.columns)
        return frame.select(*(f.col(c) if c in present else f.lit(None).cast(typed[c]).alias(c) for c in columns))

    unified = shaped(states).unionByName(shaped(rows)).coalesce(MERGED_PARTS)
    found = spark_call(
        source, lambda: unified.mapInArrow(functools.partial(tasks.write_merged, spec), tasks.PART_DDL).collect()
    )
    return [str(row["path"]) for row in found]
