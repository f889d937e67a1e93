"""Two-table join views computed by Spark: both inputs co-partitioned by the join key.

A join's rows pair a row of each table whose keys SQLite calls equal. Cut both tables into
buckets by a function of the key that gives equal keys the same bucket, and every pair lies
within one bucket: the view over the union of the buckets is the sum of the view over each
bucket (the join distributes over ⊎ when no pair crosses buckets; Thm 3.3 for the linear part
above it, the engine's `merge` rules for aggregates and DISTINCT). An outer join keeps that:
a preserved row's matches all share its bucket, so it is NULL-padded in its bucket exactly
when it is NULL-padded in the whole.

"SQLite calls equal" is the whole difficulty, so the key must be a plain column of each table
compared by `=` (an ON or inner-join WHERE conjunct, or USING), under a built-in collation,
with no affinity conversion at the comparison (both columns numeric, both TEXT, or both
untyped): `bucket_of` then normalizes exactly as the comparison does — 1 and 1.0 meet, NOCASE
folds ASCII letters, RTRIM drops trailing spaces, text never meets a number or a blob. Any
other join is computed by the local CREATE, never approximately.

Load tasks write each part's rows into one table per bucket (`write_buckets`); a bucket task
gathers bucket k of every part of both tables into one file and runs the views' own CREATE
on it (`bucket_partition`), exporting partial states as a load task does.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import apsw
import pyarrow as pa
from sqlglot import exp

from matview.db import scalar
from matview.keys import BUILTIN_COLLATIONS
from matview.names import fold, quote
from matview.sql.frontend import Compiled
from matview.storage.schema import affinity

BUCKET_FUNCTION = "__dbsp_bucket"
#: buckets per core: a few more tasks than cores keep every core busy to the end
BUCKETS_PER_CORE = 2
MAX_BUCKETS = 16
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_INT64 = 1 << 63


@dataclass(frozen=True)
class JoinKey:
    """The column of each of two loaded tables (folded names) a view joins by `=`, and the
    collation of that comparison."""

    tables: tuple[str, str]
    columns: tuple[str, str]
    collation: str

    def column_of(self, table: str) -> str:
        return self.columns[self.tables.index(fold(table))]

    def describe(self) -> str:
        return (
            f"{self.tables[0]} ⋈ {self.tables[1]}" if self.tables[0] != self.tables[1] else f"{self.tables[0]} ⋈ itself"
        )


def bucket_count(cores: int) -> int:
    return max(2, min(MAX_BUCKETS, BUCKETS_PER_CORE * cores))


def bucket_table(column: str, collation: str, bucket: int) -> str:
    """The part file's table of the rows whose `column` falls in `bucket`."""
    digest = hashlib.sha1(f"{fold(column)}:{collation.upper()}".encode()).hexdigest()[:10]
    return f"__dbsp_bucket_{digest}_{bucket}"


def bucket_of(value: Any, collation: str, buckets: int) -> int:
    """The bucket of a join key value: equal under SQLite's `=` (no affinity conversion, the
    built-in `collation`) means the same bucket. NULL equals nothing: bucket 0."""
    if value is None:
        return 0
    if isinstance(value, float):
        if value.is_integer() and -_INT64 <= value < _INT64:
            value = int(value)  # 1.0 = 1 (an integer and a real compare by value, exactly)
        else:
            return zlib.crc32(b"r" + struct.pack("<d", value)) % buckets
    if isinstance(value, int):
        return value % buckets
    if isinstance(value, str):
        upper = collation.upper()
        if upper == "NOCASE":
            value = value.translate(_ASCII_LOWER)  # SQLite's NOCASE folds ASCII letters only
        elif upper == "RTRIM":
            value = value.rstrip(" ")
        return zlib.crc32(b"t" + value.encode("utf-8", "surrogatepass")) % buckets
    return zlib.crc32(b"b" + bytes(value)) % buckets


def _numeric(decltype: str) -> str:
    kind = affinity(decltype)
    return "NUMERIC" if kind in ("INTEGER", "REAL", "NUMERIC") else kind


def join_key(compiled: Compiled, loaded: dict[str, str]) -> JoinKey | str:
    """The key a two-table join view can be co-partitioned by, or why it cannot be."""
    source, tree = compiled.source, compiled.tree
    if len(source.occurrences) != 2 or source.root_recompute:
        return "a join of more than two inputs"
    names = [fold(o.table.name) for o in source.occurrences]
    if any(name not in loaded for name in names) or any(o.table.materialized for o in source.occurrences):
        return "a join whose tables are not all being loaded"
    candidates: list[tuple[str, str, str]] = []  # (column of occurrence 0, of 1, collation)
    conditions: list[Any] = [j.args["on"] for j in tree.args.get("joins") or [] if j.args.get("on")]
    if not source.outer_on and tree.args.get("where") is not None:
        conditions.append(tree.args["where"].this)  # inner joins: WHERE conjuncts join too
    for condition in conditions:
        for conjunct in condition.flatten() if isinstance(condition, exp.And) else [condition]:
            pair = _column_pair(conjunct, compiled)
            if pair is not None:
                candidates.append(pair)
    for name in source.hidden[1]:  # USING / NATURAL: first.k = second.k, the first one's collation
        first, second = (o.table.column(name) for o in source.occurrences)
        if first is not None and second is not None:
            candidates.append((first.name, second.name, first.collation))
    for left, right, collation in candidates:
        columns = [source.occurrences[i].table.column(c) for i, c in enumerate((left, right))]
        if any(c is None for c in columns) or collation.upper() not in BUILTIN_COLLATIONS:
            continue
        kinds = {_numeric(c.decltype) for c in columns if c is not None}
        if names[0] == names[1] and fold(left) != fold(right):
            continue  # a self-join by two columns: the table would need bucketing twice
        if len(kinds) == 1:
            return JoinKey((names[0], names[1]), (left, right), collation.upper())
    if names[0] == names[1]:
        return "a self-join with no key column = the same column"
    if candidates:
        return "a join whose key columns differ in affinity or collation (SQLite converts at the comparison)"
    return "a join with no column = column key"


def _column_pair(conjunct: Any, compiled: Compiled) -> tuple[str, str, str] | None:
    """(column of occurrence 0, column of occurrence 1, the comparison's collation) of a
    conjunct `a.x = b.y` between the two occurrences, plain columns on both sides."""
    if not isinstance(conjunct, exp.EQ):
        return None
    refs = []
    for side in (conjunct.left, conjunct.right):
        if not isinstance(side, exp.Column) or not isinstance(side.this, exp.Identifier):
            return None
        found = compiled.source.resolve(side.table or None, side.name)
        if found is None or found.column is None:
            return None
        refs.append(found)
    if {r.occurrence for r in refs} != {0, 1}:
        return None
    collation = refs[0].column.collation if refs[0].column is not None else "BINARY"  # the left operand's
    by_occurrence = sorted(refs, key=lambda r: r.occurrence)
    return by_occurrence[0].name, by_occurrence[1].name, collation


def write_buckets(
    conn: apsw.Connection, table: str, columns: tuple[str, ...], keys: tuple[tuple[str, str], ...], buckets: int
) -> None:
    """In a load task's part file: for each (column, collation) in `keys`, the part's rows
    split into `buckets` tables (`bucket_table`)."""
    conn.create_scalar_function(BUCKET_FUNCTION, bucket_of, 3, deterministic=True)  # type: ignore[arg-type]
    cols = ", ".join(quote(c) for c in columns)
    declared = {fold(str(r[1])): str(r[2]) for r in conn.execute(f"PRAGMA main.table_info({quote(table)})")}
    for column, collation in keys:
        key = quote(column)
        # an INTEGER key's bucket in SQL, as `bucket_of` computes it (Python's % is never
        # negative); any other value (an integral REAL meets its INTEGER there) in Python
        bucket = (
            f"CASE WHEN typeof({key}) = 'integer' THEN ({key} % ?2 + ?2) % ?2 ELSE {BUCKET_FUNCTION}({key}, ?1, ?2) END"
        )
        names = [(b, quote(bucket_table(column, collation, b))) for b in range(buckets)]
        if _numeric(declared.get(fold(column), "")) == "NUMERIC":
            # numbers: the bucket is SQL's, recomputed by each bucket's scan (cheaper than a copy)
            for b, name in names:
                conn.execute(
                    f"CREATE TABLE main.{name} AS SELECT {cols} FROM main.{quote(table)} WHERE {bucket} = ?3",
                    (collation, buckets, b),
                )
            continue
        # text and untyped keys: each bucket computed once, by Python, into a scratch table
        conn.execute(
            f"CREATE TEMP TABLE __dbsp_hashed AS SELECT {bucket} AS __dbsp_b, {cols} FROM main.{quote(table)}",
            (collation, buckets),
        )
        for b, name in names:
            conn.execute(f"CREATE TABLE main.{name} AS SELECT {cols} FROM temp.__dbsp_hashed WHERE __dbsp_b = ?", (b,))
        conn.execute("DROP TABLE temp.__dbsp_hashed")


@dataclass(frozen=True)
class BucketSpec:
    """A bucket job: for each of two tables, its DDL, columns, key and load part files; the
    co-partitioned views computed on each bucket."""

    staging: str
    #: per table: (name, DDL, columns, key column, load part files)
    tables: tuple[tuple[str, str, tuple[str, ...], str, tuple[str, ...]], ...]  # one for a self-join
    collation: str
    views: tuple[tuple[str, str, bool], ...]  # as `LoadSpec.views`


def bucket_partition(spec: BucketSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow over ``spark.range(buckets)``: each id a bucket, whose rows of both tables
    are gathered from every load part file into one file, where each view's CREATE runs."""
    from matview.spark import tasks

    for batch in batches:
        for bucket in batch.column(0).to_pylist():
            path = tasks.part_path(spec.staging, f"bucket-{bucket}")
            conn = tasks.scratch(path)
            rows = 0
            for table, ddl, columns, key, parts in spec.tables:
                conn.execute(ddl)
                cols = ", ".join(quote(c) for c in columns)
                source = quote(bucket_table(key, spec.collation, bucket))
                for part in parts:  # one at a time (DETACH needs no open transaction)
                    conn.execute("ATTACH DATABASE ? AS part", (part,))
                    conn.execute(f"INSERT INTO main.{quote(table)} ({cols}) SELECT {cols} FROM part.{source}")
                    conn.execute("DETACH DATABASE part")
                rows += int(scalar(conn, f"SELECT count(*) FROM main.{quote(table)}"))
            yield tasks.one_batch([{"kind": "part", "path": path, "rows": rows, "version": tasks.versions()}])
            yield from tasks.export_views(conn, spec.views)
            conn.close()
