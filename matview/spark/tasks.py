"""What runs inside Spark tasks (Python workers): SQLite, through matview's own code.

`load_partition` writes one partition of a source into a SQLite part file with the target
table's DDL, then runs each partitioned view's own ``CREATE MATERIALIZED VIEW`` on that file
and exports the group states it left (its ordered state stays in the part file).
`write_merged` merges the partial states Spark shuffled together (with the engine's `merge`
rules) and writes them into a part file of their own. `merge_ordered` sums the weights of one
key range of the part files' ordered states with SQLite's own GROUP BY, into a file the driver
copies whole. Part files are scratch: a failed attempt's file is never read, because the driver
ATTACHes only the paths that finished tasks returned.

This module must stay importable on the workers (functions defined in ``__main__`` are
pickled by value, and apsw's module object cannot be).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import apsw
import pyarrow as pa

import matview
from matview import names
from matview.errors import Error
from matview.evaluator import Evaluator
from matview.names import fold, quote
from matview.operators.aggregate import GROUPS_OP, Aggregate
from matview.operators.distinct import DISTINCT_OP, Distinct
from matview.plan import Plan
from matview.storage.codec import pack, unpack
from matview.storage.schema import read_table

#: the rows every load task yields: one "part" row, then the partial states of its views
LOAD_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),  # part | state | rows
        ("view", pa.string()),
        ("op", pa.int64()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("weight", pa.int64()),
        ("path", pa.string()),
        ("rows", pa.int64()),
        ("version", pa.string()),
    ]
)
LOAD_DDL = (
    "kind string, view string, op long, key binary, value binary, weight long, path string, rows long, version string"
)
#: the rows every merge task yields: the part file it wrote and how many rows of each kind
PART_SCHEMA = pa.schema([("path", pa.string()), ("rows", pa.int64()), ("states", pa.int64())])
PART_DDL = "path string, rows long, states long"
CHUNK = 20_000


def versions() -> str:
    """What must be equal on every worker and the driver: SQLite's and matview's versions."""
    return f"sqlite {apsw.sqlite_lib_version()}, matview {matview.__version__}"


@dataclass(frozen=True)
class LoadSpec:
    """A load job: one table's part files and the views computed on them."""

    table: str
    create_sql: str  # the target table's DDL (its affinity and constraints apply per part)
    columns: tuple[str, ...]
    staging: str
    #: (name, SELECT, whether its rows are exported) of the partitioned views over `table`: only
    #: row views need their rows; an aggregate's or DISTINCT's follow from the merged state
    views: tuple[tuple[str, str, bool], ...]
    fail_partition: int | None = None  # tests: this partition raises after writing its part file
    #: (column, collation) join keys of co-partitioned views: the part's rows split by each into
    #: `buckets` tables (`copartition.write_buckets`)
    bucket_keys: tuple[tuple[str, str], ...] = ()
    buckets: int = 0


def part_path(staging: str, prefix: str) -> str:
    from pyspark import TaskContext

    context = TaskContext.get()
    partition = context.partitionId() if context else 0
    attempt = context.attemptNumber() if context else 0
    return os.path.join(staging, f"{prefix}-{partition}-{attempt}-{uuid.uuid4().hex[:8]}.db")


def scratch(path: str) -> apsw.Connection:
    conn = apsw.Connection(path)
    conn.execute("PRAGMA journal_mode=MEMORY; PRAGMA synchronous=OFF")  # savepoints need a journal
    return conn


def one_batch(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(rows, schema=LOAD_SCHEMA)


def load_partition(spec: LoadSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow: this partition's rows into a part file, then each view's CREATE on it."""
    path = part_path(spec.staging, f"load-{spec.table.encode().hex()}")
    conn = scratch(path)
    conn.execute(spec.create_sql)
    marks = ", ".join("?" for _ in spec.columns)
    insert = f"INSERT INTO {quote(spec.table)} ({', '.join(quote(c) for c in spec.columns)}) VALUES ({marks})"
    ipk = read_table(conn, spec.table).ipk
    at = next((i for i, c in enumerate(spec.columns) if ipk is not None and fold(c) == fold(ipk)), None)
    count = 0
    with conn:
        for batch in batches:
            columns = [column.to_pylist() for column in batch.columns]
            if at is not None and None in columns[at]:
                # (SQLite numbers it max(rowid) + 1 of the rows before it; a part knows only its own)
                raise Error(
                    f"table {spec.table}: column {ipk} is its INTEGER PRIMARY KEY and the source holds NULL "
                    "there, which a load by parts cannot number as a row-by-row INSERT would: give every row its key"
                )
            conn.executemany(insert, zip(*columns))
            count += batch.num_rows
    if spec.bucket_keys:
        from matview.spark.copartition import write_buckets

        write_buckets(conn, spec.table, spec.columns, spec.bucket_keys, spec.buckets)
    if spec.fail_partition is not None:
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is not None and context.partitionId() == spec.fail_partition:
            raise RuntimeError(f"matview test: partition {spec.fail_partition} fails after writing its part file")
    yield one_batch([{"kind": "part", "path": path, "rows": count, "version": versions()}])
    if spec.views:
        yield from export_views(conn, spec.views)
    conn.close()


def export_views(raw: apsw.Connection, views: tuple[tuple[str, str, bool], ...]) -> Iterator[pa.RecordBatch]:
    conn = matview.install(raw)
    for name, sql, with_rows in views:
        # the incremental plan's partial state, whatever this part holds: a result only SQLite's
        # scan order decides is the driver's to meet, in the merged state (`fallback`); no
        # join-key indexes (the file is scratch: the driver's CREATE makes the file's own)
        conn.execute(f"CREATE MATERIALIZED VIEW {quote(name)} WITH (recompute = 'never', indexes = 'off') AS {sql}")
        rows: list[dict[str, Any]] = []
        queries = (
            ("state", f"SELECT operator_id, key, value FROM {quote(names.state_table(name))}"),
            ("rows", f"SELECT {quote(names.KEY)}, {quote(names.WEIGHT)} FROM {quote(names.view_table(name))}"),
        )
        for kind, query in queries:
            if kind == "rows" and not with_rows:
                continue
            for row in raw.execute(query):
                if kind == "state":
                    rows.append({"kind": kind, "view": name, "op": row[0], "key": row[1], "value": row[2]})
                else:
                    rows.append({"kind": kind, "view": name, "key": row[0], "weight": row[1]})
                if len(rows) >= CHUNK:
                    yield one_batch(rows)
                    rows = []
        if rows:
            yield one_batch(rows)


@dataclass(frozen=True)
class MergeSpec:
    staging: str
    plans: tuple[tuple[str, dict[str, Any]], ...]  # (view, Plan.to_dict()) of every partitioned view


class _Mergers:
    def __init__(self, spec: MergeSpec) -> None:
        evaluator = Evaluator()
        self.aggregates: dict[str, Aggregate] = {}
        self.distincts: dict[str, Distinct] = {}
        for view, data in spec.plans:
            plan = Plan.from_dict(data)
            if plan.kind == "aggregate":
                self.aggregates[view] = Aggregate(view, plan, evaluator)
            elif plan.distinct:
                self.distincts[view] = Distinct(tuple(c.collation for c in plan.columns), plan.exact_distinct)

    def merge(self, view: str, op: int, values: list[bytes]) -> bytes:
        """The state of all partitions together, merged into an empty state (so even a lone
        partial state has its emitted row reset and MIN/MAX re-seek in the merged multiset)."""
        states = [unpack(v) for v in values]
        merged: Any
        if op == GROUPS_OP and view in self.aggregates:
            aggregate = self.aggregates[view]
            merged = aggregate.fresh_group(states[0][1])
            for state in states:
                merged = aggregate.merge(merged, state)
        elif op == DISTINCT_OP and view in self.distincts:
            merged = [0, states[0][1], None]
            for state in states:
                merged = self.distincts[view].merge(merged, state)
        else:
            raise ValueError(f"view {view}: no merge rule for operator {op}")
        return pack(merged)


_MERGED_TABLES = (
    "CREATE TABLE state (view TEXT, op INTEGER, key BLOB, value BLOB)",
    "CREATE TABLE rows (view TEXT, key BLOB, weight INTEGER)",
)


def write_merged(spec: MergeSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow over merged rows (kind, view, op, key, values, weight): merge
    each state's partial values, and write everything into one part file."""
    mergers = _Mergers(spec)
    conn: apsw.Connection | None = None
    path = ""
    count = 0
    states = 0
    for batch in batches:
        if conn is None:
            path = part_path(spec.staging, "merged")
            conn = scratch(path)
            for ddl in _MERGED_TABLES:
                conn.execute(ddl)
            conn.execute("BEGIN")
        data = batch.to_pydict()
        state_rows, view_rows = [], []
        columns = (data["kind"], data["view"], data["op"], data["key"], data["values"], data["weight"])
        for kind, view, op, key, values, weight in zip(*columns):
            if kind == "state":
                state_rows.append((view, op, key, mergers.merge(view, op, values)))
            else:
                view_rows.append((view, key, weight))
        conn.executemany("INSERT INTO state VALUES (?, ?, ?, ?)", state_rows)
        conn.executemany("INSERT INTO rows VALUES (?, ?, ?)", view_rows)
        count += len(view_rows)
        states += len(state_rows)
    if conn is not None:
        conn.execute("COMMIT")
        conn.close()
        yield pa.RecordBatch.from_pylist([{"path": path, "rows": count, "states": states}], schema=PART_SCHEMA)


#: an ordered-state key: (operator_id, key, ord, kind)
OrderedKey = tuple[int, bytes, Any, int]


@dataclass(frozen=True)
class OrderedSpec:
    """One key range of the ordered states (MIN/MAX multisets) of partitioned views: their
    entries in every load part file, weights summed, written in key order into a file of
    its own that the driver copies whole (`merge_ordered`)."""

    staging: str
    parts: tuple[str, ...]  # the load part files (each holds every view's partial ordered state)
    #: (ordered-state table, its DDL, lower bound (inclusive) or None, upper bound (exclusive) or None)
    views: tuple[tuple[str, str, OrderedKey | None, OrderedKey | None], ...]


ORDERED_SCHEMA = pa.schema([("index", pa.int64()), ("path", pa.string())])
ORDERED_DDL = "index long, path string"


def merge_ordered_ranges(specs: list[OrderedSpec], batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow over ``spark.range(len(specs))``: each id is the index of a range of `specs`
    to merge (`merge_ordered`); yields (index, path)."""
    for batch in batches:
        for index in batch.column(0).to_pylist():
            path = merge_ordered(specs[index])
            yield pa.RecordBatch.from_pylist([{"index": index, "path": path}], schema=ORDERED_SCHEMA)


def merge_ordered(spec: OrderedSpec) -> str:
    """A Spark task: one key range of each view's ordered state, merged from all load part
    files by SQLite (`populate.ordered_merge_sql`: the same statement the driver would run,
    restricted to the range) into a new file; its path."""
    from matview.spark.populate import ordered_merge_sql

    path = part_path(spec.staging, "ordered")
    conn = scratch(path)
    try:
        for i, part in enumerate(spec.parts):
            conn.execute(f"ATTACH DATABASE ? AS p{i}", (part,))
        aliases = [f"p{i}" for i in range(len(spec.parts))]
        with conn:
            for table, ddl, lower, upper in spec.views:
                conn.execute(ddl)
                sql = ordered_merge_sql(f"main.{quote(table)}", table, aliases, lower is not None, upper is not None)
                conn.execute(sql, (*(lower or ()), *(upper or ())))
    finally:
        conn.close()
    return path
