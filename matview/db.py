"""Small helpers over apsw connections."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import apsw
import apsw.ext

from matview.storage.ddl_guard import authorizing_instead

#: the name of matview's savepoints: nested ones share it (ROLLBACK TO and RELEASE act on the
#: innermost of a name), and one text lets apsw reuse its prepared statements — a fold takes one
#: per view that writes as it computes, at every commit
_SAVEPOINT = '"__dbsp_sp"'

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


_CALLBACK_WORDS = frozenset({"scalar", "aggregate", "window", "step", "final", "value", "inverse"})


def raising_user_function(exc: BaseException) -> str | None:
    """What of the user's raised `exc` inside SQLite ("SQL function f", "a collation"), or None:
    apsw adds a frame (file ``src/…c``) named ``user-defined-scalar-f``, ``…-aggregate-step-f``,
    or ``Collation_callback`` where it called the user's Python."""
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename.startswith("src/"):
            if code.co_name == "Collation_callback":
                return "a collation"
            if code.co_name.startswith("user-defined-"):
                words = code.co_name.removeprefix("user-defined-").split("-")
                while len(words) > 1 and words[0] in _CALLBACK_WORDS:
                    words.pop(0)
                return f"SQL function {'-'.join(words)}"
        tb = tb.tb_next
    return None


@contextmanager
def own_statements(conn: apsw.Connection) -> Iterator[None]:
    """matview's own statements, run while SQLite prepares or runs a user's statement under an
    authorizer (a view recomputed whole that reads a materialized view's virtual table,
    `sql.whole`): the authorizer judges what the user's statement reads, not these."""
    if conn.authorizer is None:
        yield
        return
    with authorizing_instead(conn, None):
        yield


@contextmanager
def savepoint(conn: apsw.Connection) -> Iterator[None]:
    """A savepoint: released on success, rolled back to (and released) on any exception."""
    name = _SAVEPOINT
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


class Rows:
    """Rows a wrapped write returned (RETURNING), with apsw's cursor surface: an iterator, with
    `fetchone`/`fetchall` and the statement's description."""

    def __init__(self, rows: list[tuple[Any, ...]], description: tuple[tuple[str, str | None], ...] = ()) -> None:
        self._rows, self._at, self._description = rows, 0, description

    @classmethod
    def drained(cls, cursor: Any) -> Rows:
        """Every row of an apsw cursor, read now (matview commits after it), with its description."""
        try:
            description = tuple(cursor.getdescription())
        except apsw.ExecutionCompleteError:  # (a statement without rows: apsw has none to give)
            description = ()
        return cls(list(cursor), description)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return self

    def __next__(self) -> tuple[Any, ...]:
        if self._at >= len(self._rows):
            raise StopIteration
        self._at += 1
        return self._rows[self._at - 1]

    def fetchall(self) -> list[tuple[Any, ...]]:
        rest = self._rows[self._at :]
        self._at = len(self._rows)
        return rest

    def fetchone(self) -> tuple[Any, ...] | None:
        return next(self, None)

    def getdescription(self) -> tuple[tuple[str, str | None], ...]:
        """(name, declared type) of each column, as apsw's `Cursor.getdescription`."""
        if not self._description:
            raise apsw.ExecutionCompleteError("the statement returned no rows")
        return self._description

    @property
    def description(self) -> tuple[tuple[str, str | None, None, None, None, None, None], ...]:
        """DB-API's description, as apsw's `Cursor.description`."""
        return tuple((name, decltype, None, None, None, None, None) for name, decltype in self._description)
