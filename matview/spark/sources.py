"""Sources: Spark reads each one; its columns are mapped onto SQLite declared types.

The mapping is fixed, so a Spark load and a local load of the same data store the same values:

=====================  ===========  ===================================================
Spark type             SQLite type  value
=====================  ===========  ===================================================
byte/short/int/long    INTEGER      the integer
float/double           REAL         the double (a float widens exactly)
decimal                REAL         Spark's cast (Java ``BigDecimal.doubleValue``, correctly
                                    rounded; pyarrow's decimal→float64 cast is not)
date                   TEXT         'YYYY-MM-DD'
timestamp              TEXT         UTC, 'YYYY-MM-DDTHH:MM:SS.ffffffZ'
timestamp_ntz          TEXT         'YYYY-MM-DDTHH:MM:SS.ffffff'
boolean                INTEGER      0 / 1
binary                 BLOB         the bytes
string                 TEXT         the text
=====================  ===========  ===================================================

Arrays, maps and structs are refused. CSV is read as strings (no type inference) and, like
``sqlite3 .import``, lands in TEXT columns of a new table, or goes through the declared types
(the affinity) of an existing one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from matview.errors import Error
from matview.names import fold, quote
from matview.spark.session import spark_failure
from matview.storage.schema import affinity

if TYPE_CHECKING:
    from pyspark.sql import Column as SparkColumn
    from pyspark.sql import DataFrame, SparkSession

FORMATS = ("parquet", "csv", "json")


@dataclass(frozen=True)
class SourceColumn:
    name: str
    decltype: str  # the SQLite declared type of a new table's column


@dataclass(frozen=True)
class Source:
    table: str
    uri: str
    format: str
    frame: DataFrame  # columns already converted to the values SQLite will store
    columns: tuple[SourceColumn, ...]

    def create_sql(self, name: str | None = None) -> str:
        cols = ", ".join(f"{quote(c.name)} {c.decltype}" for c in self.columns)
        return f"CREATE TABLE {quote(name or self.table)} ({cols})"


def guess_format(uri: str) -> str:
    lowered = uri.lower().rstrip("/*")
    for fmt in FORMATS:
        if lowered.endswith(f".{fmt}") or lowered.endswith(f".{fmt}.gz"):
            return fmt
    if lowered.endswith(".jsonl") or lowered.endswith(".ndjson"):
        return "json"
    if os.path.isdir(uri):
        return "parquet"
    raise Error(f"source {uri}: cannot tell its format from its name; pass --format parquet|csv|json")


def read_source(spark: SparkSession, table: str, uri: str, fmt: str | None) -> Source:
    """Spark's reader over `uri`, its columns converted per the mapping above."""
    fmt = fmt or guess_format(uri)
    if fmt not in FORMATS:
        raise Error(f"format {fmt!r}: one of {', '.join(FORMATS)}")
    reader = spark.read.format(fmt)
    if fmt == "csv":
        # RFC 4180 (and SQLite's .import): a quote inside a quoted field is written twice
        reader = reader.option("header", "true").option("inferSchema", "false").option("mode", "FAILFAST")
        reader = reader.option("escape", '"')
    else:
        reader = reader.option("mode", "FAILFAST")
    if fmt == "parquet":  # files of one glob with other columns: their union (a column a file lacks is NULL there)
        reader = reader.option("mergeSchema", "true")
    try:
        frame = reader.load(uri)
        schema = frame.schema
    except Exception as exc:  # pyspark's AnalysisException & co.: a missing path, an unreadable file
        raise Error(f"source {table}={uri}: Spark cannot read it as {fmt}: {spark_failure(exc)}") from None
    if not schema.fields:
        raise Error(f"source {table}={uri}: no columns")
    columns: list[SourceColumn] = []
    converted: list[SparkColumn] = []
    seen: set[str] = set()
    for field in schema.fields:
        if fold(field.name) in seen:
            raise Error(f"source {table}={uri}: column {field.name} appears twice")
        seen.add(fold(field.name))
        decltype, column = _convert(table, uri, field.name, field.dataType, fmt)
        columns.append(SourceColumn(field.name, decltype))
        converted.append(column.alias(field.name))
    return Source(table, uri, fmt, frame.select(*converted), tuple(columns))


def _convert(table: str, uri: str, name: str, data_type: object, fmt: str) -> tuple[str, SparkColumn]:
    from pyspark.sql import functions as f
    from pyspark.sql import types as t

    column = f.col(f"`{name.replace('`', '``')}`")
    if fmt == "csv" or isinstance(data_type, (t.StringType, t.VarcharType, t.CharType)):
        return "TEXT", column.cast("string")
    if isinstance(data_type, t.BooleanType):
        return "INTEGER", column.cast("long")
    if isinstance(data_type, (t.ByteType, t.ShortType, t.IntegerType, t.LongType)):
        return "INTEGER", column.cast("long")
    if isinstance(data_type, (t.FloatType, t.DoubleType, t.DecimalType)):
        return "REAL", column.cast("double")
    if isinstance(data_type, t.DateType):
        return "TEXT", f.date_format(column, "yyyy-MM-dd")
    if isinstance(data_type, t.TimestampNTZType):
        return "TEXT", f.date_format(column, "yyyy-MM-dd'T'HH:mm:ss.SSSSSS")
    if isinstance(data_type, t.TimestampType):
        # rendered in the session time zone, which `backfill` sets to UTC for the job
        return "TEXT", f.date_format(column, "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'")
    if isinstance(data_type, t.BinaryType):
        return "BLOB", column.cast("binary")
    if isinstance(data_type, t.NullType):
        return "", column.cast("string")
    raise Error(
        f"source {table}={uri}: column {name} has type {data_type}, which has no SQLite counterpart "
        "(nested and other complex types are refused: flatten them first)"
    )


def check_existing(source: Source, declared: list[tuple[str, str]]) -> None:
    """An existing table must have the source's columns, in any order (a JSON source's come
    sorted by name; rows are written by column name), with the same affinity (CSV sources: the
    same names; their values go through the table's affinity)."""
    want = [c.name for c in source.columns]
    have = [name for name, _ in declared]
    if sorted(fold(n) for n in want) != sorted(fold(n) for n in have):
        raise Error(
            f"table {source.table} exists with columns ({', '.join(have)}) but source {source.uri} has "
            f"({', '.join(want)}): nothing was written"
        )
    if source.format == "csv":
        return
    types = {fold(name): decltype for name, decltype in declared}
    for column in source.columns:
        name, decltype = column.name, types[fold(column.name)]
        if column.decltype and affinity(column.decltype) != affinity(decltype):
            raise Error(
                f"table {source.table}: column {name} is declared {decltype or 'without a type'} "
                f"({affinity(decltype)} affinity) but source {source.uri} holds {column.decltype} values: "
                "nothing was written"
            )
