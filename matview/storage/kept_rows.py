"""The rows each root gave, kept for a partition-recompute view (RELATIONAL.md R4's stored
outputs): ``__dbsp_kept_<v>(root, c0 … cN, weight)``, one row per (root, stage-1 row).

The stage-1 values are stored as SQLite gave them (columns without affinity, BINARY), the
root as an exact text of its key (`exact_text`: `1` and `1.0` differ, NULL is one key, TEXT is
its bytes in hex — `quote()` stops at a NUL). Two stage-1 rows are the same row when each
column has the same storage class and is equal under BINARY — what ``GROUP BY c, typeof(c)``
groups — so ΔStage1 = (rows of the reached roots now) − (the rows they kept) is computed by
SQLite, set at a time, and Python sees only the rows that changed: a change that reaches
10,000 roots but alters the rows of one costs SQL work for the 10,000 and Python work for one.

(SQLite calls the REALs 0.0 and -0.0 equal, and `quote`, `CAST` and `printf` show both as
0.0; `atan2(x, -1)` tells them apart (π and −π), so a row that changes only from one to the
other is a change — where SQLite has its math functions, as the apsw wheels do.)
"""

from __future__ import annotations

import functools
import json
from typing import Any, NamedTuple

import apsw

from matview import names
from matview.db import column_count
from matview.errors import Error
from matview.names import quote
from matview.storage.ddl_guard import own_ddl


def table_name(view: str) -> str:
    return names.kept_rows_table(view)


def stage1_width(conn: apsw.Connection, rows_sql: str, key_width: int) -> int:
    """The number of stage-1 columns of a root query `rows_sql` (…, root key columns, weight)."""
    return column_count(conn, rows_sql) - key_width - 1


def _columns(width: int) -> list[str]:
    return [f"c{i}" for i in range(width)]


@functools.cache
def _signed_zeros() -> str:
    """The GROUP BY term that tells a column's -0.0 from 0.0 (`{c}` for the column), where
    SQLite has `atan2`; else none."""
    try:
        apsw.Connection(":memory:").execute("SELECT atan2(0.0, -1)").fetchall()
    except apsw.SQLError:
        return ""
    return ", CASE WHEN typeof({c}) = 'real' AND {c} = 0 THEN atan2({c}, -1) END"


def _identity(width: int) -> str:
    """The GROUP BY terms that tell two stage-1 rows apart exactly (see the module docstring):
    BINARY, whatever collation a column carries from the SELECT (NOCASE would merge 'a', 'A'),
    its storage class, and the sign of a REAL zero."""
    zeros = _signed_zeros()
    return ", ".join(f"c{i} COLLATE BINARY, typeof(c{i}){zeros.format(c=f'c{i}')}" for i in range(width))


def exact_text(expression: str) -> str:
    """A value as a text that tells every two values apart: `quote()`, except for TEXT, which
    `quote()` cuts at a NUL character — there the bytes in hex."""
    return f"CASE typeof({expression}) WHEN 'text' THEN 'x' || hex({expression}) ELSE quote({expression}) END"


def _root_text(key_width: int, nullable: bool) -> str:
    """The root's key as one text: a nullable key is already that text (see
    `partition.root_key`); otherwise the columns' `exact_text`s, comma-separated."""
    if nullable:
        return "k0"
    return " || ',' || ".join(exact_text(f"k{i}") for i in range(key_width))


def _named(rows_sql: str, width: int, key_width: int) -> str:
    """`rows_sql` as a CTE `__dbsp_r` whose columns are named c…, k…, w."""
    columns = ", ".join([*_columns(width), *(f"k{i}" for i in range(key_width)), "w"])
    return f"WITH __dbsp_r({columns}) AS ({rows_sql})"


def create(conn: apsw.Connection, view: str, width: int) -> None:
    """An empty kept-rows table: the old one emptied where it has these columns (a fold's
    refresh as a delta: SQLite refuses a DROP while another statement of the connection runs,
    and a DROP would make every connection reload its schema), else dropped and made anew (a
    REFRESH may change the plan)."""
    table = quote(table_name(view))
    columns = _columns(width)
    present = [str(row[1]) for row in conn.execute(f"PRAGMA main.table_info({table})")]
    if present == ["root", *columns, "weight"]:
        conn.execute(f"DELETE FROM main.{table}")
        return
    if present:
        with own_ddl(conn):
            conn.execute(f"DROP TABLE main.{table}")
    listed = "".join(f", {c}" for c in columns)
    conn.execute(f"CREATE TABLE main.{table} (root NOT NULL{listed}, weight INTEGER NOT NULL)")


def index(conn: apsw.Connection, view: str) -> None:
    """The index a fold finds a root's rows by (made after the bulk fill: faster)."""
    conn.execute(
        f"CREATE INDEX IF NOT EXISTS main.{quote(names.kept_rows_index(view))} ON {quote(table_name(view))}(root)"
    )


def fill(
    conn: apsw.Connection, view: str, rows_sql: str, key_width: int, nullable: bool, params: dict[str, Any]
) -> list[tuple[Any, ...]]:
    """The initial snapshot: every root's rows, kept; the stage-1 rows with their weights.
    `params`: the values `rows_sql` binds (`operators.scalar_values`)."""
    width = stage1_width(conn, rows_sql, key_width)
    create(conn, view, width)
    table, listed = f"main.{quote(table_name(view))}", "".join(f"{c}, " for c in _columns(width))
    group = ", ".join(filter(None, ["root", _identity(width)]))
    conn.execute(
        f"{_named(rows_sql, width, key_width)} INSERT INTO {table} (root, {listed}weight) "
        f"SELECT root, {listed}sum(w) FROM (SELECT {_root_text(key_width, nullable)} AS root, {listed}w FROM __dbsp_r) "
        f"GROUP BY {group} HAVING sum(w) <> 0",
        params,
    )
    index(conn, view)
    return list(conn.execute(f"SELECT {listed}weight FROM {table}"))


def _reached_table(key_width: int) -> str:
    return quote(f"{names.PREFIX}reached_{key_width}")


def reached_keys(key_width: int) -> str:
    """The SELECT of the reached roots' keys, as the reach query gave them, from the scratch
    table a fold fills (see `KeptRows.delta`)."""
    return f"SELECT {', '.join(f'k{i}' for i in range(key_width))} FROM temp.{_reached_table(key_width)}"


@functools.lru_cache(maxsize=256)
def _table(view: str) -> str:
    return f"main.{quote(table_name(view))}"


@functools.lru_cache(maxsize=64)
def _scratch(key_width: int, width: int) -> dict[str, str]:
    """The scratch tables of a shape: the reached roots' keys, and their rows now."""
    keys = "".join(f", k{i}" for i in range(key_width))
    listed = "".join(f", {c}" for c in _columns(width))
    return {_reached_table(key_width): f"root{keys}", quote(f"{names.PREFIX}now_{width}"): f"root{listed}, w"}


class KeptRows:
    """ΔStage1 of the reached roots, and (a fold) the kept rows replaced by the rows now."""

    def __init__(self, conn: apsw.Connection, view: str, key_width: int, nullable: bool, width: int) -> None:
        self.conn, self.key_width, self.nullable, self.width = conn, key_width, nullable, width
        self.table = _table(view)
        # scratch tables (TEMP: a reader may fill them, and they never reach the file), per shape
        self.scratch = _scratch(key_width, width)
        self.reached, self.now = (f"temp.{name}" for name in self.scratch)

    def read_delta(self, reach_sql: str | None, rows_sql: str, params: dict[str, int]) -> list[tuple[Any, ...]]:
        """ΔStage1 as `delta` computes it, in one SELECT that writes nothing (a reader's):
        `rows_sql` runs the reach query itself."""
        listed = "".join(f"{c}, " for c in _columns(self.width))
        root = _root_text(self.key_width, self.nullable)
        ctes = [f"{_named(rows_sql, self.width, self.key_width)[len('WITH ') :]}"]
        kept = f"SELECT root, {listed}-weight FROM {self.table}"
        if reach_sql is not None:
            keys = ", ".join(f"k{i}" for i in range(self.key_width))
            nothing = f"SELECT {', '.join(['NULL'] * self.key_width)} WHERE 0"  # (no root reached)
            ctes.append(f"__dbsp_k({keys}) AS MATERIALIZED ({reach_sql or nothing})")
            kept += f" WHERE root IN (SELECT {root} FROM __dbsp_k)"
        group = ", ".join(filter(None, ["root", _identity(self.width)]))
        return list(
            self.conn.execute(
                f"WITH {', '.join(ctes)} SELECT {listed}sum(w) FROM (SELECT {root} AS root, {listed}w FROM __dbsp_r "
                f"UNION ALL {kept}) GROUP BY {group} HAVING sum(w) <> 0",
                params,
            )
        )

    def delta(self, reach_sql: str | None, rows_sql: str, params: dict[str, int]) -> list[tuple[Any, ...]]:
        """ΔStage1 of the roots `reach_sql` selects (None: every root), whose rows now
        `rows_sql` gives (reading the reached roots from `reached_keys`); the kept rows of the
        roots whose rows changed become their rows now."""
        conn = self.conn
        statements = _delta_statements(
            self.table, self.reached, self.now, self.key_width, self.nullable, self.width, reach_sql, rows_sql
        )
        for name, scratch_columns in self.scratch.items():
            conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {name} ({scratch_columns})")
            conn.execute(f"DELETE FROM temp.{name}")
        if statements.reach is not None:
            conn.execute(statements.reach, params)
        conn.execute(statements.now, params)
        changed = list(conn.execute(statements.changed))
        if changed:
            roots = json.dumps(sorted({row[0] for row in changed}))
            conn.execute(statements.forget, (roots,))
            conn.execute(statements.keep, (roots,))
        return [row[1:] for row in changed]


class _DeltaStatements(NamedTuple):
    reach: str | None  # the reached roots into the scratch table (None: every root, or none)
    now: str  # the reached roots' rows now into the other scratch table
    changed: str  # ΔStage1 with its roots: rows now − rows kept
    forget: str  # the kept rows of the roots whose rows changed, deleted …
    keep: str  # … and replaced by their rows now


@functools.lru_cache(maxsize=256)
def _delta_statements(
    table: str,
    reached: str,
    now: str,
    key_width: int,
    nullable: bool,
    width: int,
    reach_sql: str | None,
    rows_sql: str,
) -> _DeltaStatements:
    """The statements of `KeptRows.delta`, built once per view shape (a fold runs them at every
    commit; the same text also lets apsw reuse its prepared statements)."""
    listed = "".join(f"{c}, " for c in _columns(width))
    root = _root_text(key_width, nullable)
    reach = None
    if reach_sql is None:
        kept = f"SELECT root, {listed}-weight FROM {table}"
    else:
        keys = ", ".join(f"k{i}" for i in range(key_width))
        if reach_sql:  # (empty: no root reached)
            reach = f"WITH __dbsp_r({keys}) AS ({reach_sql}) INSERT INTO {reached} SELECT {root}, {keys} FROM __dbsp_r"
        kept = f"SELECT root, {listed}-weight FROM {table} WHERE root IN (SELECT root FROM {reached})"
    group = ", ".join(filter(None, ["root", _identity(width)]))
    among = "root IN (SELECT value FROM json_each(?))"
    return _DeltaStatements(
        reach,
        f"{_named(rows_sql, width, key_width)} INSERT INTO {now} SELECT {root}, {listed}w FROM __dbsp_r",
        f"SELECT root, {listed}sum(w) FROM (SELECT root, {listed}w FROM {now} UNION ALL {kept}) "
        f"GROUP BY {group} HAVING sum(w) <> 0",
        f"DELETE FROM {table} WHERE {among}",
        f"INSERT INTO {table} (root, {listed}weight) SELECT root, {listed}sum(w) FROM {now} "
        f"WHERE {among} GROUP BY {group} HAVING sum(w) <> 0",
    )


def require(conn: apsw.Connection, view: str) -> None:
    """A clear error where the kept rows are missing (a file of an older format that a
    read-only connection could not upgrade, or a damaged file)."""
    found = conn.execute(
        "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = ?", (table_name(view),)
    ).fetchone()
    if found is None:
        raise Error(
            f"materialized view {view}: its table {table_name(view)} is missing (a file of an older matview "
            "opened read-only, or a damaged file): open it once with a writable matview connection, or "
            "REFRESH MATERIALIZED VIEW"
        )
