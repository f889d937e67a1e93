"""Small helpers over apsw connections."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import apsw
import apsw.ext

_savepoints = itertools.count()

#: errors of the environment (locks, I/O, space, interrupts), never of one view's SQL: they
#: reach the caller as they are, where any other error of a view's fold only stalls that view
ENVIRONMENT_ERRORS: tuple[type[BaseException], ...] = (
    apsw.BusyError,
    apsw.LockedError,
    apsw.FullError,
    apsw.IOError,
    apsw.CorruptError,
    apsw.NotADBError,
    apsw.ReadOnlyError,
    apsw.InterruptError,
    apsw.NoMemError,
    apsw.CantOpenError,
    apsw.ProtocolError,
    apsw.ConnectionClosedError,
    apsw.ThreadingViolationError,
)


def scalar(conn: apsw.Connection, sql: str, params: Any = ()) -> Any:
    """The first column of the first row of `sql`, or None when there is no row."""
    row = conn.execute(sql, params).fetchone()
    return None if row is None else row[0]


def describe(exc: BaseException) -> str:
    """An exception as a message: SQLite's own text, or the Python exception's name and text."""
    if isinstance(exc, apsw.Error):
        text = str(exc)
        prefix = f"{type(exc).__name__}: "
        return text[len(prefix) :] if text.startswith(prefix) else text
    return f"{type(exc).__name__}: {exc}"


@contextmanager
def own_statements(conn: apsw.Connection) -> Iterator[None]:
    """matview's own statements, run while SQLite prepares or runs a user's statement under an
    authorizer (a view recomputed whole that reads a materialized view's virtual table,
    `sql.whole`): the authorizer judges what the user's statement reads, not these."""
    previous = conn.authorizer
    if previous is None:
        yield
        return
    conn.authorizer = None
    try:
        yield
    finally:
        conn.authorizer = previous


@contextmanager
def savepoint(conn: apsw.Connection) -> Iterator[None]:
    """A savepoint: released on success, rolled back to (and released) on any exception."""
    name = f'"__dbsp_sp_{next(_savepoints)}"'
    conn.execute(f"SAVEPOINT {name}")
    try:
        yield
    except BaseException:
        # After some errors (SQLITE_FULL, an I/O error, out of memory) SQLite has already rolled
        # the whole transaction back: no savepoint is left, and the error to report is this one
        if not conn.get_autocommit():
            conn.execute(f"ROLLBACK TO {name}")
            conn.execute(f"RELEASE {name}")
        raise
    conn.execute(f"RELEASE {name}")


def column_count(conn: apsw.Connection, sql: str) -> int:
    """How many columns the SELECT `sql` gives, as SQLite prepares it (nothing is run)."""
    return len(apsw.ext.query_info(conn, sql).description or ())
