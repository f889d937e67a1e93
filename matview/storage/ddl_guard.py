"""The DDL guard: SQLite's authorizer refuses DROP and ALTER of what materialized views stand on.

`matview.base_ddl` reads a DROP/ALTER statement before it runs and refuses it with a message
naming the views. That reading is matview's; this guard is SQLite's own: an authorizer on the
connection, consulted while SQLite prepares any statement — however it is spelled, and whether
it comes through `execute`, a script, `executemany` or a cursor of the apsw connection. It
refuses, in main:

- DROP/ALTER of a materialized view's table or plain view (DROP MATERIALIZED VIEW drops them);
- DROP/ALTER of matview's own tables, indexes and triggers (state, change logs, capture);
- DROP/ALTER of a base table a view reads, but for the `ALTER TABLE … ADD COLUMN` the API
  maintains (`allowing_alter`).

matview's own DDL runs inside `own_ddl`. SQLite forbids an authorizer to run SQL on its
connection, so the guard asks a function of what matview holds in memory (the registry's views,
read again before every statement the API runs).
"""

from __future__ import annotations

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


class DdlGuard:
    """The authorizer (see the module's docstring). `refused` keeps the reason of the last
    refusal, for the error the API raises in place of SQLite's "not authorized"."""

    def __init__(self, refusal: Refusal, then: Authorizer | None = None) -> None:
        self._refusal = refusal
        self._then = then  # (an authorizer the user had set: asked after the guard allows)
        self.own = 0  # depth of `own_ddl`
        self.altered: str | None = None  # (folded) the table `allowing_alter` lets ALTER
        self.refused: str | None = None

    def __call__(
        self, action: int, arg1: str | None, arg2: str | None, database: str | None, trigger_or_view: str | None
    ) -> int:
        if action in _DROPS:
            where, name = database, arg1
        elif action == apsw.SQLITE_ALTER_TABLE:
            where, name = arg1, arg2
        else:
            where, name = None, None
        reason = None if name is None or self.own or where != "main" else self._refusal_of(action, name)
        if reason is not None:
            self.refused = reason
            return apsw.SQLITE_DENY
        return apsw.SQLITE_OK if self._then is None else self._then(action, arg1, arg2, database, trigger_or_view)

    def _refusal_of(self, action: int, name: str) -> str | None:
        if action == apsw.SQLITE_ALTER_TABLE and self.altered == fold(name):
            return None
        return self._refusal(action, name)

    def take_refusal(self) -> str | None:
        """The reason of the last refusal, once."""
        reason, self.refused = self.refused, None
        return reason

    @contextmanager
    def allowing_alter(self, table: str) -> Iterator[None]:
        """Let the user's ALTER TABLE of `table` run (an ADD COLUMN the API then maintains)."""
        saved, self.altered = self.altered, fold(table)
        try:
            yield
        finally:
            self.altered = saved


def install(conn: apsw.Connection, refusal: Refusal) -> DdlGuard:
    """Put a guard on the connection as its authorizer (one it had goes on, asked after it)."""
    previous = conn.authorizer
    guard = DdlGuard(refusal, None if isinstance(previous, DdlGuard) else previous)
    conn.authorizer = guard
    return guard


@contextmanager
def own_ddl(conn: apsw.Connection) -> Iterator[None]:
    """matview's own DDL: the guard (when the connection has one) lets it run."""
    guard = conn.authorizer
    if not isinstance(guard, DdlGuard):
        yield
        return
    guard.own += 1
    try:
        yield
    finally:
        guard.own -= 1
