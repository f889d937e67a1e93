"""The driver's one final transaction: the only time the target file changes.

Part files are ATTACHed (never rows collected on the driver) and INSERT…SELECTed into the
tables; views are then rebuilt or created, partitioned ones from their merged states
(`populate`), the others by the engine's own CREATE over the loaded tables. Any error rolls
everything back: the file is as it was.

Create/replace bypass change capture: a loaded table's capture (triggers and delta log) is
dropped before its rows are replaced and installed again after, and every view reading the
table is rebuilt in the same transaction (so no view keeps progress in the old log). Append
inserts through capture: the views absorb the rows as a delta when the transaction commits.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import apsw

import matview
from matview import lifecycle, names, rebuild
from matview.db import describe, scalar
from matview.errors import Error
from matview.names import fold, quote
from matview.spark.populate import merged_populate
from matview.spark.views import ViewJob
from matview.storage.capture import capture_installed, install_capture, remove_capture
from matview.storage.schema import read_table

#: ATTACH slots left for part files (apsw's SQLite allows 125 attached databases)
MAX_ATTACHED = 120
#: the driver connection's page cache in the final transaction (KiB): a constant, so the driver's
#: memory does not grow with the rows loaded. SQLite's sorter (the join-key index, GROUP BYs)
#: holds up to as much again in memory before it spills a sorted run to a temp file. Measured at
#: 6M rows: 16 MiB and no sorter threads wrote as fast as 128 MiB with two (join 3.0 s against
#: 3.4 s) and the driver grew by 38 MB instead of 321 (1M rows: 36 MB)
WRITE_CACHE_KIB = 16 * 1024
#: each ATTACHed part file's page cache (KiB): they are read once, in order, so a small one costs
#: nothing, and SQLite's default (2 MiB each) would let the driver's memory grow with the number
#: of part files
PART_CACHE_KIB = 256


@dataclass
class LoadedTable:
    table: str
    create_sql: str
    columns: tuple[str, ...]
    parts: list[str] = field(default_factory=list)
    rows: int = 0


@dataclass
class Written:
    """What the transaction wrote, per view: (view rows, state rows, ordered-state rows), and
    the seconds spent computing the views Spark could not (the engine's CREATE on the driver)."""

    counts: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    local_seconds: float = 0.0


def table_exists(conn: apsw.Connection, table: str) -> bool:
    return bool(
        scalar(
            conn, "SELECT count(*) FROM main.sqlite_master WHERE type = 'table' AND name = ? COLLATE NOCASE", (table,)
        )
    )


def attached_count(loads: list[LoadedTable], jobs: list[ViewJob], merged: list[str]) -> int:
    """How many files the final transaction ATTACHes."""
    ordered = {p for job in jobs for p in [*job.ordered_parts, *job.bucket_parts]}
    return sum(len(load.parts) for load in loads) + len(merged) + len(ordered)


def commit(db: str, mode: str, loads: list[LoadedTable], jobs: list[ViewJob], merged: list[str]) -> Written:
    """The write phase: one transaction over the part files (`_write`); SQLite's errors as a
    matview.Error — the transaction rolled back, nothing written."""
    try:
        return _write(db, mode, loads, jobs, merged)
    except apsw.BusyError:
        raise Error(f"{db} is locked by another connection (nothing was written): try again") from None
    except apsw.Error as exc:
        raise Error(f"the write into {db} failed (nothing was written): {describe(exc)}") from None


def _write(db: str, mode: str, loads: list[LoadedTable], jobs: list[ViewJob], merged: list[str]) -> Written:
    if attached_count(loads, jobs, merged) > MAX_ATTACHED:
        raise Error(f"more than {MAX_ATTACHED} part files: use fewer Spark partitions")
    conn = matview.connect(db)
    raw = conn.apsw
    aliases: list[str] = []

    def attach(path: str) -> str:
        alias = f"__dbsp_part{len(aliases)}"
        raw.execute(f"ATTACH DATABASE ? AS {alias}", (path,))
        raw.execute(f"PRAGMA {alias}.cache_size = -{PART_CACHE_KIB}")
        aliases.append(alias)
        return alias

    written = Written()
    try:
        # a fixed page cache, not growing with the rows; no sorter helper threads (each would
        # hold a sort buffer of its own)
        raw.execute(f"PRAGMA cache_size = -{WRITE_CACHE_KIB}")
        raw.execute("BEGIN IMMEDIATE")
        try:
            registry = conn.registry
            loaded: dict[str, list[str]] = {}
            for load in loads:
                loaded[fold(load.table)] = [attach(p) for p in load.parts]
                _load_table(raw, registry, mode, load, loaded[fold(load.table)])
            merged_aliases = [attach(p) for p in merged]
            ordered_aliases = {
                p: attach(p) for p in dict.fromkeys(p for job in jobs for p in [*job.ordered_parts, *job.bucket_parts])
            }
            registry.invalidate()
            for job in jobs:
                started = time.perf_counter()
                populate = None
                if job.partitioned_on:
                    ordered = [ordered_aliases[p] for p in job.ordered_parts]
                    populate = merged_populate(merged_aliases, loaded[job.partitioned_on], job.name, ordered)
                elif job.join_key is not None:  # its ordered state: in the bucket files
                    buckets = [ordered_aliases[p] for p in job.bucket_parts]
                    populate = merged_populate(merged_aliases, buckets, job.name)
                if job.existing:
                    rebuild.rebuild_view(raw, registry, job.name, populate)
                else:
                    lifecycle.create_view(raw, registry, job.name, job.sql, populate=populate)
                if populate is None:
                    written.local_seconds += time.perf_counter() - started
            for job in jobs:
                written.counts[job.name] = _counts(raw, job.name)
            conn.execute("COMMIT")  # through matview: an append's deltas fold into the views first
        except BaseException:
            if not raw.get_autocommit():
                raw.execute("ROLLBACK")
            raise
    finally:
        for alias in aliases:
            try:
                raw.execute(f"DETACH DATABASE {alias}")
            except apsw.Error:
                pass
        conn.close()
    return written


def _load_table(raw: apsw.Connection, registry: object, mode: str, load: LoadedTable, parts: list[str]) -> None:
    table = quote(load.table)
    cols = ", ".join(quote(c) for c in load.columns)
    exists = table_exists(raw, load.table)
    captured = exists and capture_installed(raw, load.table)
    if mode == "append" and exists:
        for alias in parts:  # through capture: the views absorb the rows as an ordinary delta
            raw.execute(f"INSERT INTO main.{table} ({cols}) SELECT {cols} FROM {alias}.{table}")
        return
    if exists:
        if mode == "create" and raw.execute(f"SELECT 1 FROM main.{table} LIMIT 1").fetchone():
            raise Error(f"table {load.table} already has rows: use mode replace or append")
        if captured:
            remove_capture(raw, load.table)
        raw.execute(f"DELETE FROM main.{table}")
    else:
        raw.execute(load.create_sql)
    # The part files' table has this table's own DDL: with every column stored and listed,
    # ``INSERT INTO t SELECT * FROM part.t`` is the same statement, and SQLite copies the records
    # as they are (its transfer optimization: no decoding, no new records; rowids as the
    # column list would give them). A table with generated or hidden columns keeps the list.
    xinfo = list(raw.execute(f"PRAGMA main.table_xinfo({table})"))
    whole = all(r[6] == 0 for r in xinfo) and [fold(str(r[1])) for r in xinfo] == [fold(c) for c in load.columns]
    try:
        for alias in parts:
            if whole:
                raw.execute(f"INSERT INTO main.{table} SELECT * FROM {alias}.{table}")
            else:
                raw.execute(f"INSERT INTO main.{table} ({cols}) SELECT {cols} FROM {alias}.{table}")
    except apsw.ConstraintError as exc:
        # each task writes its rows into a part file of its own: a key two parts both hold,
        # or a NULL INTEGER PRIMARY KEY (numbered in its part), meets the other part's row here
        raise Error(
            f"table {load.table}: {describe(exc)} (its source holds the same key twice, or a NULL "
            "INTEGER PRIMARY KEY, which a load by parts cannot number as a row-by-row INSERT would: "
            "give every row its key)"
        ) from None
    if captured:
        install_capture(raw, read_table(raw, load.table))


def _counts(raw: apsw.Connection, view: str) -> tuple[int, int, int]:
    return (
        int(scalar(raw, f"SELECT count(*) FROM {quote(names.view_table(view))}")),
        int(scalar(raw, f"SELECT count(*) FROM {quote(names.state_table(view))}")),
        int(scalar(raw, f"SELECT count(*) FROM {quote(names.ordered_state_table(view))}")),
    )


def views_reading(conn: matview.Connection, tables: list[str]) -> list[str]:
    """Names of the existing views that read any of `tables` (directly or through other
    views), upstream first."""
    registry = conn.registry
    direct = {fold(v.name): v for t in tables for v in registry.views_on(t)}
    ordered = registry.upstream_first(list(direct.values()))
    downstream = [v for v in registry.downstream_order(ordered) if fold(v.name) not in direct]
    return [v.name for v in [*ordered, *downstream]]
