"""The DDL guard: SQLite's authorizer refuses DROP and ALTER of what materialized views stand on.

`matview.base_ddl` reads a DROP/ALTER statement before it runs and refuses it with a message
naming the views. That reading is matview's; this guard is SQLite's own: an authorizer on the
connection, consulted while SQLite prepares any statement — however it is spelled, and whether
it comes through `execute`, a script, `executemany` or a cursor of the apsw connection. It
refuses, in main (or main's own file attached under another name, `aliases_main`):

- DROP/ALTER of a materialized view's table or plain view (DROP MATERIALIZED VIEW drops them);
- DROP/ALTER of matview's own tables, indexes and triggers (state, change logs, capture);
- DROP/ALTER of a base table a view reads, but for the `ALTER TABLE … ADD COLUMN` the API
  maintains (`allowing_alter`).

matview's own DDL runs inside `own_ddl`. SQLite forbids an authorizer to run SQL on its
connection, so the guard asks a function of what matview holds in memory (the registry's views,
read again before every statement the API runs).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import apsw

from matview.names import fold

#: the actions the guard looks at: their other arguments name the object (ALTER: its database first)
_DROPS = {
    apsw.SQLITE_DROP_TABLE,
    apsw.SQLITE_DROP_VTABLE,  # (a view of catalog format 1 is a virtual table in main)
    apsw.SQLITE_DROP_VIEW,
    apsw.SQLITE_DROP_INDEX,
    apsw.SQLITE_DROP_TRIGGER,
}

#: why an action on a main-schema object is refused (None: allowed): (action, name) → reason
Refusal = Callable[[int, str], "str | None"]
Authorizer = Callable[[int, "str | None", "str | None", "str | None", "str | None"], int]


class _Refusals:
    """The reason of the last refusal of a chain of guards (`DdlGuard.refusals`)."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last: str | None = None


class DdlGuard:
    """The authorizer (see the module's docstring). `refused` keeps the reason of the last
    refusal, for the error the API raises in place of SQLite's "not authorized" (`take_refusal`)."""

    def __init__(self, refusal: Refusal, then: Authorizer | None = None, conn: apsw.Connection | None = None) -> None:
        self._refusal = refusal
        # (an authorizer set before: the application's, or another matview Connection's guard on
        # the same apsw connection; asked after this one allows)
        self._then = then
        self._conn = conn  # (its file names: no SQL runs in an authorizer, sqlite3_db_filename is no SQL)
        self.own = 0  # depth of `own_ddl`
        self.altered: str | None = None  # (folded) the table `allowing_alter` lets ALTER
        # the last refusal of this guard or of the guards chained with it: one slot they share,
        # so that a statement of any Connection of the chain forgets them all with one store
        self.refusals: _Refusals = then.refusals if isinstance(then, DdlGuard) else _Refusals()
        self.instead: Authorizer | None = None  # asked alone while set (`authorizing_instead`)

    def __call__(
        self, action: int, arg1: str | None, arg2: str | None, database: str | None, trigger_or_view: str | None
    ) -> int:
        if self.instead is not None:
            return self.instead(action, arg1, arg2, database, trigger_or_view)
        if action in _DROPS:
            where, name = database, arg1
        elif action == apsw.SQLITE_ALTER_TABLE:
            where, name = arg1, arg2
        else:
            where, name = None, None
        reason = None if name is None or self.own or not self._in_main(where) else self._refusal_of(action, name)
        if reason is not None:
            self.refusals.last = reason
            return apsw.SQLITE_DENY
        return apsw.SQLITE_OK if self._then is None else self._then(action, arg1, arg2, database, trigger_or_view)

    def _in_main(self, database: str | None) -> bool:
        """main, or an attached name of main's own file (`ATTACH 'this.db' AS x`)."""
        if database == "main":
            return True
        if database in (None, "temp") or self._conn is None:
            return False
        return aliases_main(self._conn, database)

    def _refusal_of(self, action: int, name: str) -> str | None:
        if action == apsw.SQLITE_ALTER_TABLE and self.altered == fold(name):
            return None
        return self._refusal(action, name)

    def chain(self) -> list[DdlGuard]:
        """This guard and the guards it asks after it (several matview Connections on one apsw
        connection): each must let matview's own DDL and a maintained ALTER through."""
        guards = [self]
        while isinstance(guards[-1]._then, DdlGuard):
            guards.append(guards[-1]._then)
        return guards


def install(conn: apsw.Connection, refusal: Refusal) -> DdlGuard:
    """Put a guard on the connection as its authorizer (one it had, the application's or another
    Connection's guard, goes on: asked after it)."""
    guard = DdlGuard(refusal, conn.authorizer, conn)
    conn.authorizer = guard
    return guard


def aliases_main(conn: apsw.Connection, schema: str) -> bool:
    """Whether the attached `schema` is main's own file (`ATTACH 'this.db' AS x`), by name or,
    for a hard link, by inode (no SQL runs: an authorizer may ask)."""
    try:
        main, other = conn.db_filename("main"), conn.db_filename(schema)
    except (apsw.SQLError, ValueError):  # (no such schema: SQLite says so when it runs)
        return False
    if not main or not other:  # (in memory, or a temporary file: never main's)
        return False
    try:
        return main == other or os.path.samefile(main, other)
    except OSError:
        return False


def _guards(conn: apsw.Connection) -> list[DdlGuard]:
    guard = conn.authorizer
    return guard.chain() if isinstance(guard, DdlGuard) else []


@contextmanager
def own_ddl(conn: apsw.Connection) -> Iterator[None]:
    """matview's own DDL: the guards (when the connection has any) let it run."""
    guards = _guards(conn)
    for guard in guards:
        guard.own += 1
    try:
        yield
    finally:
        for guard in guards:
            guard.own -= 1


@contextmanager
def allowing_alter(conn: apsw.Connection, table: str) -> Iterator[None]:
    """Let the user's ALTER TABLE of `table` run (an ADD COLUMN the API then maintains)."""
    guards = _guards(conn)
    saved = [guard.altered for guard in guards]
    for guard in guards:
        guard.altered = fold(table)
    try:
        yield
    finally:
        for guard, altered in zip(guards, saved):
            guard.altered = altered


def _allow(action: int, *_names: str | None) -> int:
    return apsw.SQLITE_OK


@contextmanager
def authorizing_instead(conn: apsw.Connection, authorizer: Authorizer | None) -> Iterator[None]:
    """Let `authorizer` alone authorize the statements prepared in the block (None: allow
    everything): matview's checks of what a SELECT reads, and its own statements run inside a
    user's (`db.own_statements`).

    Through the guard when the connection has one, and the connection's authorizer is set again
    at the end only when a statement was prepared in the block. Setting it makes SQLite expire
    every prepared statement of the connection: done around each check, it had the user's own
    statements with their capture triggers prepared again after every fold of a view recomputed
    whole, and after every read of a view through its virtual table. It is still needed once
    something was prepared here: apsw may have cached that statement, and SQLite would run it
    again unasked (a user function's SQL, a DROP the guard refuses)."""
    guard = conn.authorizer
    if isinstance(guard, DdlGuard):
        inner = authorizer or _allow
        asked = False

        def noting(action: int, arg1: str | None, arg2: str | None, database: str | None, via: str | None) -> int:
            nonlocal asked
            asked = True
            return inner(action, arg1, arg2, database, via)

        saved = guard.instead
        guard.instead = noting
        try:
            yield
        finally:
            guard.instead = saved
            if asked:
                conn.authorizer = guard  # (expires what the block prepared: see above)
        return
    conn.authorizer = authorizer
    try:
        yield
    finally:
        conn.authorizer = guard


def take_refusal(conn: apsw.Connection) -> str | None:
    """The reason of the guards' last refusal, once (None: SQLite's AuthError is another's).
    (The guards of a chain share one slot: the top guard's is theirs.)"""
    guard = conn.authorizer
    if not isinstance(guard, DdlGuard):
        return None
    reason, guard.refusals.last = guard.refusals.last, None
    return reason
