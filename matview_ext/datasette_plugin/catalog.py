"""matview's catalog as a client without matview reads it: stdlib ``sqlite3``, no apsw.

Datasette opens files with Python's ``sqlite3`` and never loads matview's engine (nor should
its plugin: importing the engine costs half a second and brings apsw into Datasette's
process), so this module reads the catalog tables directly. The names here are those of
`matview.names`, written out so that this module imports nothing of the engine; a test
checks they agree.

The pending count is `matview.fold.pending_count`'s: for each base table of a view, the
change-log entries past the view's progress mark.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

import msgpack

#: the prefix of every object matview creates in a file (`matview.names.PREFIX`)
PREFIX = "__dbsp_"
CATALOG = "__dbsp_catalog"
META = "__dbsp_meta"
PROGRESS = "__dbsp_progress"
SEQ = "__dbsp_seq"
#: the names of internal nodes, hidden materialized views (`matview.sql.nodes.NODE_PREFIX`)
NODE_PREFIX = "__dbsp_node_"
#: the catalog formats this reader knows; 1 kept views as virtual tables only matview reads
READABLE_FORMAT = 2


def quote(name: str) -> str:
    """Quote an identifier for SQLite."""
    return '"' + name.replace('"', '""') + '"'


def is_internal(name: str) -> bool:
    """Whether `name` is one of matview's internal objects (tables, indexes, triggers, nodes)."""
    return name.lower().startswith(PREFIX)


def delta_table(table: str) -> str:
    """The change log of base table `table` (`matview.names.delta_table`)."""
    return f"{PREFIX}delta_{table}"


@dataclass(frozen=True)
class MaterializedView:
    """One materialized view as the catalog describes it."""

    name: str
    sql: str
    maintenance: str  # "immediate" | "deferred"
    base_tables: list[str]
    columns: list[str]
    #: change-log entries not folded yet; None when they cannot be counted (a base table or
    #: its change log was dropped by a client without matview: matview reports SchemaChanged)
    pending: int | None
    created_at: str
    refreshed_at: str


@dataclass(frozen=True)
class FileCatalog:
    """The materialized views of one file."""

    #: 0 when the file has no matview catalog
    format_version: int
    views: list[MaterializedView] = field(default_factory=list)

    @property
    def readable(self) -> bool:
        """Whether clients without matview can read the views (catalog format 2 and later;
        format 1 files are upgraded by the first matview connection that writes)."""
        return self.format_version >= READABLE_FORMAT


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    row = conn.execute("SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone()
    return row is not None


def format_version(conn: sqlite3.Connection) -> int:
    """The file's catalog format, 0 when matview never wrote to it."""
    if not _has_table(conn, META):
        return 0
    row = conn.execute(f"SELECT value FROM {quote(META)} WHERE key = 'format_version'").fetchone()
    return int(row[0]) if row is not None and isinstance(row[0], int) else 0


def pending(conn: sqlite3.Connection, view: str, base_tables: list[str]) -> int | None:
    """How many change-log entries wait to be folded into `view`."""
    total = 0
    for table in base_tables:
        try:
            row = conn.execute(
                f"SELECT (SELECT seq FROM {quote(PROGRESS)} WHERE view = ? AND base_table = ?), "
                f"(SELECT max({quote(SEQ)}) FROM {quote(delta_table(table))})",
                (view, table),
            ).fetchone()
        except sqlite3.OperationalError:
            return None
        done, last = (row[0] or 0), row[1]
        if last is not None and last > done:
            total += last - done
    return total


def _columns(conn: sqlite3.Connection, view: str) -> list[str]:
    try:
        return [str(row[1]) for row in conn.execute(f"PRAGMA main.table_info({quote(view)})")]
    except sqlite3.OperationalError:  # format 1: a virtual table of a module this client lacks
        return []


def read_catalog(conn: sqlite3.Connection) -> FileCatalog:
    """The materialized views of the file open on `conn` (internal nodes left out), by name."""
    version = format_version(conn)
    if version == 0 or not _has_table(conn, CATALOG):
        return FileCatalog(version)
    views = []
    rows = conn.execute(
        f"SELECT name, sql, maintenance, base_tables, created_at, refreshed_at FROM {quote(CATALOG)} "
        "ORDER BY name COLLATE NOCASE"
    ).fetchall()
    for name, sql, maintenance, base_blob, created_at, refreshed_at in rows:
        if str(name).lower().startswith(NODE_PREFIX):
            continue
        base_tables = [str(t) for t in msgpack.unpackb(base_blob, raw=False)]
        views.append(
            MaterializedView(
                name=str(name),
                sql=str(sql),
                maintenance=str(maintenance),
                base_tables=base_tables,
                columns=_columns(conn, str(name)),
                pending=pending(conn, str(name), base_tables),
                created_at=str(created_at),
                refreshed_at=str(refreshed_at),
            )
        )
    return FileCatalog(version, views)


def table_definition(conn: sqlite3.Connection, table: str) -> str | None:
    """CREATE TABLE and the CREATE INDEX statements of `table`, without matview's own indexes
    (Datasette's table page shows this instead of its own listing, which includes them)."""
    row = conn.execute("SELECT sql FROM main.sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    if row is None or row[0] is None:
        return None
    statements = [str(row[0]) + ";"]
    for name, sql in conn.execute(
        "SELECT name, sql FROM main.sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL",
        (table,),
    ):
        if not is_internal(str(name)):
            statements.append(str(sql) + ";")
    return "\n".join(statements)
