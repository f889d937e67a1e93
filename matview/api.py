"""The Python API: `connect`, `install`, and the `Connection` that keeps views maintained.

A `Connection` wraps an apsw connection. It folds pending deltas into the views inside
its own write transactions, just before they commit — SQLite has no pre-commit hook
that may write, so the wrapper does it: on `with conn:` exit, on COMMIT / END / RELEASE
issued as SQL, and around writes issued in autocommit mode. Views in *deferred* mode
skip that fold: they fold on `flush()`, when their pending log passes `pending_limit`,
or before a read issued through this connection. Reads are exact either way, because
the virtual table merges whatever is pending.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import apsw

from matview import base_ddl, feed, names, rebuild, upstream
from matview.db import Rows
from matview.errors import CatalogError, Error, SchemaChanged
from matview.fold import pending_count
from matview.fold_schedule import FoldSchedule
from matview.names import fold, is_node, quote
from matview.operators import aggregate_sql
from matview.operators.exact_extrema import register_exact_extrema
from matview.operators.exact_sums import register_exact_sums
from matview.progress import ProgressCallback
from matview.registry import Registry, View
from matview.storage import catalog, ddl_guard, readable
from matview.storage.viewstore import ROW_KEY_FUNCTION, row_key_sql
from matview.view_statements import ViewStatements
from matview.viewinfo import ViewInfo
from matview_ext import statements
from matview_ext.vtable import Module, result_error

_WRITES = {"INSERT", "UPDATE", "DELETE", "REPLACE"}
_FOLD_BEFORE = {"COMMIT", "END", "RELEASE"}
_MATERIALIZED = {"CREATE", "DROP", "REFRESH"}  # (first words of the MATERIALIZED VIEW statements)
_READS = {"SELECT", "WITH", "VALUES", "EXPLAIN", "PRAGMA"}
_DDL = {"CREATE", "DROP", "ALTER"}  # (plain DDL and the MATERIALIZED VIEW statements: they write)


_NESTED = quote("__dbsp_with")  # (the savepoint of a nested `with`: one name, see `db.savepoint`)
_SCHEMA_RETRIES = 3  # (a statement SQLite could not prepare for another process's schema change)


class Connection(ViewStatements, FoldSchedule):
    """An apsw connection with materialized views maintained. Use `matview.connect`."""

    def __init__(self, connection: apsw.Connection, *, pending_limit: int = 10_000) -> None:
        self.apsw = connection
        if type(pending_limit) is not int or pending_limit < 0:
            raise Error(f"pending_limit must be a whole number of delta rows (0 or more), not {pending_limit!r}")
        self.pending_limit = pending_limit
        self.registry = Registry(connection)
        self._guard = ddl_guard.install(connection, functools.partial(base_ddl.refusal, self.registry))
        self._depth: list[str | None] = []  # open `with` blocks: None = BEGIN, else a savepoint
        self._total_changes = connection.total_changes()
        self._changes: int | None = None  # changes() of the user's last statement, when a fold followed it
        self._commits_since_count = 0
        self._changes_at_count = self._total_changes
        self._feed = feed.Feed(connection, self.poll)
        self._progress: ProgressCallback | None = None
        self._polled_version = connection.data_version()
        self._read_version = self._polled_version  # (`_fold_before_read`)
        self._others_wrote: set[str] = set()  # immediate views another connection's commits may have left pending
        connection.create_scalar_function(
            aggregate_sql.GROUP_KEY_FUNCTION, aggregate_sql.group_key_sql, -1, deterministic=True
        )
        connection.create_scalar_function(ROW_KEY_FUNCTION, row_key_sql, -1, deterministic=True)
        register_exact_sums(connection)
        register_exact_extrema(connection)
        connection.create_scalar_function(upstream.UNREADABLE_FUNCTION, upstream.unreadable, 3)  # type: ignore[arg-type]
        connection.create_scalar_function(readable.RESULT_ERROR_FUNCTION, result_error, 2)  # type: ignore[arg-type]
        connection.create_scalar_function(readable.DAMAGED_FUNCTION, readable.damaged, 1, deterministic=True)  # type: ignore[arg-type]
        self._module = Module(connection, self.registry)
        connection.create_module("matview", self._module)  # type: ignore[arg-type]
        connection.set_rollback_hook(self.registry.invalidate)
        catalog.check_version(connection)
        catalog.upgrade(connection)
        self.registry.sync_shadows()

    # -- statements -------------------------------------------------------------------
    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> Any:
        """Run SQL (apsw style: returns an iterable cursor of row tuples)."""
        # (a refusal of a statement run past `execute`, by any guard on the connection, is not this one's)
        self._guard.refusals.last = None
        try:
            result = self._execute(sql, params)
        except apsw.AuthError as exc:
            self._raise_guard_refusal(exc)
            raise
        self._feed.deliver()
        return result

    def _raise_guard_refusal(self, exc: apsw.AuthError) -> None:
        """The DDL guard's "not authorized" (`storage.ddl_guard`), said as the statement patterns
        say a refusal: naming the views. Returns when the AuthError is another authorizer's.
        (Not a context manager around `execute`: that cost about 1 µs a statement.)"""
        reason = ddl_guard.take_refusal(self.apsw)
        if reason is not None:
            raise Error(reason) from exc

    def _execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None) -> Any:
        if self._runs_as_it_is(sql):
            self._changes = None  # (SQLite's changes() is the user's statement's again)
            return self._run(sql, params)
        self._lock_before_reading(sql)
        self._catch_up()
        script = statements.split_script(sql)
        if len(script) > 1:
            return self._execute_script(script, sql, params)
        views = self.registry.sync_shadows()
        special = statements.parse_materialized(sql)
        if special is not None:
            self._run_materialized(special)
            return Rows([])
        word = statements.first_word(sql)
        if word not in _READS:
            self._changes = None  # SQLite's changes() survives reads; only a write resets it
        index = statements.parse_create_index(sql) if word == "CREATE" else None
        if index is not None and self.registry.get(index.table) is not None:
            return self._create_index_on_view(index)
        dependents = (
            base_ddl.dependents(self.apsw, self.registry, sql)
            if word == "ALTER" and statements.adds_column(sql)
            else []
        )
        if dependents:
            return self._add_column(sql, params, dependents)
        if word in ("DROP", "ALTER"):
            base_ddl.refuse(self.apsw, self.registry, sql)
        if word in _WRITES and self.registry.lost_capture:
            self._repair_capture()
        if views and statements.changes_plans(sql) and not statements.is_temporary(sql):
            return self._replanning(sql, params)
        if word in _FOLD_BEFORE and not self.apsw.get_autocommit():
            self._fold(commit=True)
        elif word in _WRITES and self.apsw.get_autocommit() and views:
            if not self._feed.active and all(v.entry.maintenance == "deferred" for v in views.values()):
                return self._deferred_write(sql, params, views)
            return self._autocommit_write(sql, params)
        elif word in ("SELECT", "WITH") and self.apsw.get_autocommit():
            self._fold_before_read(sql, views)
            self._poll_if_others_wrote()
        if statements.changes_statistics(sql) or word == "ROLLBACK":
            # New statistics may change SQLite's plans with no schema change: views whose rows
            # follow its scan order (`scan_order`) are checked again at the next look. A
            # ROLLBACK TO may undo a fold's change of a view's plan (`fallback.heal`), and only a
            # whole rollback calls the rollback hook.
            result = Rows.drained(self._run(sql, params))
            self.registry.invalidate()
            return result
        return self._run(sql, params)

    def _runs_as_it_is(self, sql: str) -> bool:
        """A plain write inside an open transaction that reads no table but its target (the
        common `with db: db.execute("INSERT …")`) needs nothing of matview before it runs: the
        capture triggers log it, and the commit looks at the schema once, before it folds. So
        neither the write lock nor a look at the schema comes first, and the write waits for a
        busy lock as a stock client's does. The long way goes a write that may read a view (a
        subquery, `UPDATE … FROM`, `x IN v`), and one whose target is named like a view this
        connection knows (its shadow is stale where another connection made a table of that
        name since): the shadows must be current."""
        registry = self.registry
        if self.apsw.get_autocommit() or registry.lost_capture or not registry.shadows_current():
            return False
        target = statements.plain_write_target(sql)
        return target is not None and fold(target) not in registry.views  # (the views loaded: no look)

    def _run(self, sql: str, params: Any) -> Any:
        """The statement, run by SQLite. Another process may change the schema between this
        connection's look at it and the statement (its REFRESH, say): a shadow then cannot
        re-read main's schema while SQLite prepares it and says so (`SchemaChanged`) before
        anything ran — look again and retry, as SQLite retries its own statements."""
        for attempt in range(_SCHEMA_RETRIES):
            try:
                return self.apsw.execute(sql, params)
            except SchemaChanged:
                if attempt == _SCHEMA_RETRIES - 1 or not self.apsw.get_autocommit():
                    raise
                self.registry.invalidate()
                self.registry.sync_shadows()
        raise AssertionError("unreachable")

    def _execute_script(self, script: list[str], sql: str, params: Any) -> Any:
        """Several statements in one call. Statements matview handles itself (MATERIALIZED
        VIEW, an index on a view, DDL on a base table) run one by one as SQLite would run
        the script; each is checked before anything runs, so a bad one runs nothing."""
        handled = [
            statement
            for statement in script
            if statements.parse_materialized(statement) is not None
            or statements.first_word(statement) in ("DROP", "ALTER", "CREATE")
            or statements.changes_plans(statement)
        ]
        if not handled:
            try:
                rows = Rows.drained(self.apsw.execute(sql, params))
            finally:
                if any(statements.changes_statistics(statement) for statement in script):
                    self.registry.invalidate()  # (ANALYZE inside: see `_execute`)
                # its writes committed as it went (autocommit), those before a failing one too:
                # folded now, as a commit of this connection's is, so that stock readers see them
                self._catch_up()
            return rows
        if params:
            raise Error("a script with materialized view statements or DDL cannot take bound parameters")
        result: Any = Rows([])
        for statement in script:
            result = self.execute(statement)
        return result

    def executemany(self, sql: str, sequence: Iterable[Sequence[Any]]) -> Any:
        self._guard.refusals.last = None
        try:
            return self._executemany(sql, sequence)
        except apsw.AuthError as exc:
            self._raise_guard_refusal(exc)
            raise

    def _executemany(self, sql: str, sequence: Iterable[Sequence[Any]]) -> Any:
        self._changes = None
        if statements.first_word(sql) in (*_DDL, "REFRESH", *_FOLD_BEFORE, "ROLLBACK", "ANALYZE") or (
            len(statements.split_script(sql)) > 1
        ):
            # (a statement matview must see — DDL, MATERIALIZED VIEW, transaction control, a
            # script — goes the way `execute` sends it, once per set of parameters)
            result: Any = Rows([])
            for params in sequence:
                result = self._execute(sql, params)
            return result
        if self._runs_as_it_is(sql):
            return self.apsw.executemany(sql, sequence)
        self._lock_before_reading(sql)
        self._catch_up()
        views = self.registry.sync_shadows()
        word = statements.first_word(sql)
        if word in _WRITES and self.registry.lost_capture:
            self._repair_capture()
        if word in _WRITES and self.apsw.get_autocommit() and views:
            with self._as_autocommit():
                # (every row read before the commit: a RETURNING cursor in progress blocks it)
                result = Rows.drained(self.apsw.executemany(sql, sequence))
            return result
        if statements.changes_statistics(sql):
            rows = Rows.drained(self.apsw.executemany(sql, sequence))
            self.registry.invalidate()  # (see `_execute`)
            return rows
        return self.apsw.executemany(sql, sequence)

    def _lock_before_reading(self, sql: str) -> None:
        """The first statement of a transaction is a write: take the write lock now, before
        matview reads the schema. SQLite waits for a busy lock (the busy timeout) only when
        a transaction has read nothing yet; a transaction that read first and then writes
        gets "database is locked" at once, as soon as another connection writes. A stock
        client's `BEGIN; INSERT …` waits, so a matview client's must too (and so must its
        plain DDL and CREATE/DROP/REFRESH MATERIALIZED VIEW, which write)."""
        if self.apsw.get_autocommit():
            return
        word = statements.first_word(sql)
        if (
            word in _WRITES
            or (word in _DDL and not statements.is_temporary(sql))
            or (word in _MATERIALIZED and statements.parse_materialized(sql) is not None)
        ):
            self._take_write_lock()

    def _take_write_lock(self) -> None:
        """Inside an open transaction that has not touched the file yet: take the write lock."""
        if self.registry.views and self.apsw.txn_state("main") == apsw.SQLITE_TXN_NONE:
            self.apsw.execute(f"UPDATE {quote(names.META)} SET key = key WHERE 0")  # (no row: only the lock)

    def _repair_capture(self) -> None:
        """A base table's delta log is gone (a damaged file): re-create it before a write, which
        SQLite would fail (see `rebuild.repair_capture`)."""
        with self._writing():
            rebuild.repair_capture(self.apsw, self.registry)
        self.registry.sync_shadows()

    def _autocommit_write(self, sql: str, params: Any) -> Rows:
        """One write in autocommit mode: the write and its fold commit together."""
        with self._as_autocommit():
            rows = Rows.drained(self.apsw.execute(sql, params))
        return rows

    @contextlib.contextmanager
    def _as_autocommit(self) -> Iterator[None]:
        """matview's transaction around a write the user ran in autocommit mode, so that its fold
        commits with it. Where the write fails, what SQLite would have committed on its own is
        committed all the same, folded: the rows an OR FAIL statement (or a RAISE(FAIL)) changed
        before the failing one, the rows of an executemany before the failing one. SQLite has
        undone a failed ABORT statement's own changes already, and an OR ROLLBACK's transaction."""
        self._begin(immediate=False)
        try:
            yield
        except BaseException:
            if self.apsw.get_autocommit():
                self._depth.pop()  # (SQLite rolled the transaction back)
            else:
                self.__exit__(None, None, None)
            raise
        self.__exit__(None, None, None)

    def _deferred_write(self, sql: str, params: Any, views: dict[str, View]) -> Rows:
        """One write in autocommit mode when every view is deferred: SQLite's own transaction
        (the capture triggers log the change in it), no BEGIN/COMMIT of matview's — unless the
        backlog check is due (`_views_to_fold`): the views past `pending_limit` then fold in
        a transaction of their own, right after."""
        rows = Rows.drained(self._run(sql, params))
        self._total_changes = self.apsw.total_changes()  # (no catch-up fold for it at the next statement)
        check = self._backlog_check_due()
        due = [view for view in views.values() if check and pending_count(self.apsw, view) > self.pending_limit]
        if due:
            with contextlib.suppress(apsw.BusyError), self:  # (soft limit: the next commit folds them)
                self._fold_views(due)
        return rows

    # -- progress ----------------------------------------------------------------------
    @contextlib.contextmanager
    def progress(self, callback: ProgressCallback | None) -> Iterator[None]:
        """Report the progress of CREATE / REFRESH MATERIALIZED VIEW run inside the block to
        `callback` (a `matview.progress.Progress` every few milliseconds of work). Ctrl-C, or
        the callback raising, cancels the statement and leaves the file as it was."""
        previous, self._progress = self._progress, callback
        try:
            yield
        finally:
            self._progress = previous

    def refresh(self, view: str, *, progress: ProgressCallback | None = None) -> None:
        """REFRESH MATERIALIZED VIEW `view`, reporting progress to `progress`."""
        with self.progress(progress):
            self.execute(f"REFRESH MATERIALIZED VIEW {quote(view)}")

    # -- transactions -----------------------------------------------------------------
    def __enter__(self) -> Connection:
        self._begin(immediate=False)
        return self

    def _begin(self, immediate: bool) -> None:
        if self.apsw.get_autocommit():
            # (a read-only file takes no write lock: BEGIN IMMEDIATE would fail even with nothing to write)
            self.apsw.execute("BEGIN IMMEDIATE" if immediate and not self.apsw.readonly("main") else "BEGIN")
            self._depth.append(None)
        else:
            if immediate:
                self._take_write_lock()
            name = _NESTED
            self.apsw.execute(f"SAVEPOINT {name}")
            self._depth.append(name)

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """`with self` for matview's own writes (CREATE/DROP/REFRESH, flush, repairs), which
        read the catalog and pending deltas before they write: the write lock is taken first.
        SQLite waits for a busy lock (the busy timeout) only in a transaction that has read
        nothing yet; one that read and then writes fails at once with "database is locked"
        while another connection writes, where a stock client's write would have waited."""
        self._begin(immediate=True)
        try:
            yield
        except BaseException as exc:
            self.__exit__(type(exc), exc, exc.__traceback__)
            raise
        self.__exit__(None, None, None)

    def __exit__(self, exc_type: Any, exc: Any, traceback: Any) -> None:
        name = self._depth.pop()
        if name is not None:
            if exc_type is not None and self.apsw.get_autocommit():
                return  # SQLite rolled the whole transaction back (a full disk, an I/O error): say why
            if exc_type is not None:
                self.apsw.execute(f"ROLLBACK TO {name}")
            self.apsw.execute(f"RELEASE {name}")
            return
        if exc_type is not None:
            if not self.apsw.get_autocommit():
                self.apsw.execute("ROLLBACK")
            return
        try:
            self._fold(commit=True)
            self.apsw.execute("COMMIT")
        except BaseException:
            if not self.apsw.get_autocommit():
                self.apsw.execute("ROLLBACK")
            raise
        finally:
            self._total_changes = self.apsw.total_changes()
        self._feed.deliver()
        self._total_changes = self.apsw.total_changes()  # delivery empties a temp table

    # -- passthrough and introspection ------------------------------------------------
    def last_insert_rowid(self) -> int:
        return self.apsw.last_insert_rowid()

    def changes(self) -> int:
        """Rows changed by the last statement (not counting matview's own fold)."""
        return self.apsw.changes() if self._changes is None else self._changes

    def create_scalar_function(
        self, name: str, function: Callable[..., Any], numargs: int = -1, *, deterministic: bool = False
    ) -> None:
        """Register a SQL function here and on the isolated evaluator (deterministic=True
        to use it in a view)."""
        self.apsw.create_scalar_function(name, function, numargs, deterministic=deterministic)
        self.registry.evaluator.register_function(name, function, numargs, deterministic)
        self.registry.functions_changed()

    def create_collation(self, name: str, compare: Callable[[str, str], int]) -> None:
        """Register a collation here (a view whose tables declare it needs it to fold)."""
        self.apsw.create_collation(name, compare)
        for view in list(self._module.lacking):  # shadows declared without it: made again, with it
            readable.drop_shadow(self.apsw, view)
        self._module.lacking.clear()
        self.registry.functions_changed()

    def views(self) -> list[ViewInfo]:
        """The materialized views of this database."""
        return [ViewInfo(self, v) for v in self.registry.sync().values() if not is_node(v.name)]

    def view(self, name: str) -> ViewInfo:
        """The materialized view called `name` (a `ViewInfo`: its rows, plan, state, refresh)."""
        if not isinstance(name, str):
            raise Error(f"view() takes a view's name, not a {type(name).__name__}")
        found = self.registry.get(name)
        if found is None:
            damaged = self.registry.damaged.get(fold(name))
            if damaged is not None:
                raise CatalogError(f"{damaged.reason}; REFRESH MATERIALIZED VIEW it (or DROP it)")
            raise Error(f"no such materialized view: {name}")
        return ViewInfo(self, found)

    def close(self) -> None:
        if self.apsw.get_autocommit():
            self._catch_up()
        self.apsw.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.apsw, name)


#: apsw's statement cache on connections `connect` opens (apsw's default: 100). It is a ring of
#: the statements last run, not of the distinct ones: a fold runs 10–30 statements per view, so
#: with several views and writes of mixed kinds a statement came back after the ring had dropped
#: it and SQLite prepared it again (three views, four kinds of 1-row write: 715–933 µs per write
#: with 100, 520–656 µs with 512)
STATEMENT_CACHE_SIZE = 512


def install(connection: apsw.Connection, **options: Any) -> Connection:
    """Wrap an existing apsw connection so its views are maintained. (Open it with
    ``statementcachesize=512`` or more when it maintains several views: see
    `STATEMENT_CACHE_SIZE`.)"""
    return Connection(connection, **options)


def connect(path: str, **options: Any) -> Connection:
    """Open (or create) a SQLite file with materialized views maintained.

    Options: ``pending_limit`` (deferred views fold once this many delta rows wait;
    default 10,000), ``busy_timeout_ms`` (default 5,000)."""
    busy = options.pop("busy_timeout_ms", 5000)
    connection = apsw.Connection(path, statementcachesize=STATEMENT_CACHE_SIZE)
    connection.set_busy_timeout(busy)
    try:
        return Connection(connection, **options)
    except BaseException:
        connection.close()
        raise
