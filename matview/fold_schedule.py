"""When a `Connection` folds pending deltas into its views (the schedule, not the fold itself).

Immediate views fold inside the transaction that wrote, just before it commits; deferred
views fold on `flush()`, when their backlog passes `pending_limit` (counted only now and
then: `_backlog_check_due`), or before a read that names them. Writes another client
committed are folded by the next read or commit (`_catch_up`, `_fold_before_read`), and
another client's index or ANALYZE is repaired by a read (`_repair_replanned`). The fold of
one view is `owner_heal.fold_healing_owners` → `fold`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import apsw

from matview import fallback, feed, owner_heal, replan
from matview.db import scalar
from matview.errors import Error
from matview.fold import pending_count
from matview.registry import Registry, View


class FoldSchedule:
    """`Connection`'s decisions of when to fold (a part of it, in a module of its own)."""

    if TYPE_CHECKING:  # (what they use of `Connection`)
        apsw: apsw.Connection
        registry: Registry
        pending_limit: int
        _feed: feed.Feed
        _depth: list[str | None]
        _total_changes: int
        _changes: int | None
        _commits_since_count: int
        _changes_at_count: int
        _read_version: int
        _others_wrote: set[str]

        def _writing(self) -> contextlib.AbstractContextManager[None]: ...
        def _rebuilds_recorded(self) -> contextlib.AbstractContextManager[None]: ...
        def __enter__(self) -> Any: ...
        def __exit__(self, exc_type: Any, exc: Any, traceback: Any) -> None: ...

    def flush(self) -> None:
        """Fold every pending delta of every view now (deferred views included)."""
        if self.apsw.get_autocommit():
            with self._writing():
                self._fold(commit=False)
        else:
            self._fold(commit=False)

    def _views_to_fold(self, commit: bool) -> list[View]:
        views = list(self.registry.sync().values())
        if not commit:
            return views
        check = self._backlog_check_due()
        return [
            view
            for view in views
            if view.entry.maintenance == "immediate" or (check and pending_count(self.apsw, view) > self.pending_limit)
        ]

    def _backlog_check_due(self) -> bool:
        """Count a commit; whether deferred views' backlogs are counted at this one. Deferred
        views fold past pending_limit. Counting their backlog costs a query per view, so it
        is counted only after enough of this connection's own writes or commits (others'
        writes are caught by the commit count): the limit is soft."""
        self._commits_since_count += 1
        written = self.apsw.total_changes() - self._changes_at_count
        check = written >= self.pending_limit // 2 or self._commits_since_count >= 64
        if check:
            self._commits_since_count, self._changes_at_count = 0, self.apsw.total_changes()
        return check

    def _fold(self, commit: bool) -> None:
        """Fold inside the open transaction: before commit (immediate views, and deferred
        ones past their limit), or everything (flush)."""
        self._fold_views(self._views_to_fold(commit))

    def _fold_views(self, views: list[View]) -> None:
        if not views:
            return
        # The fold writes on the user's connection; keep what the user's statement reported.
        last_rowid = self.apsw.last_insert_rowid()
        if self._changes is None:
            self._changes = self.apsw.changes()
        if self.registry.replan_due and fallback.FALL_BACK_TO_WHOLE:  # (another client's index, ANALYZE)
            with self._rebuilds_recorded():
                replan.keep_views_readable(self.apsw, self.registry)
            views = [found for view in views if (found := self.registry.get(view.name)) is not None]
        listener = self._feed.record if self._feed.active else None
        try:
            owner_heal.fold_healing_owners(self.apsw, self.registry, views, listener)
        except apsw.ConstraintError as exc:
            # (the one constraint a view table has that its SELECT may not keep: a user's index)
            raise Error(
                f"the change would break a UNIQUE index a user made on a materialized view ({exc}): its SELECT "
                "gives rows the index forbids; DROP INDEX it, or make it a plain index"
            ) from None
        self.apsw.set_last_insert_rowid(last_rowid)

    def _catch_up(self) -> None:
        """Fold, in a transaction of their own, writes committed in autocommit mode that
        bypassed the wrapper (multi-statement scripts, the underlying apsw connection)."""
        changes = self.apsw.total_changes()
        if changes != self._total_changes and self.apsw.get_autocommit() and not self._depth:
            if self.registry.sync():
                try:
                    with self:
                        pass
                except (apsw.BusyError, apsw.ReadOnlyError):
                    # only an optimization, like the fold before a read: the changes stay
                    # pending (reads merge them, the next commit folds them), and a reader
                    # must not fail because another connection is writing (the fold reads
                    # before it writes, so SQLite cannot wait for the lock)
                    pass
            self._total_changes = self.apsw.total_changes()

    def _fold_before_read(self, sql: str, views: dict[str, View]) -> None:
        """Before a read in autocommit mode, fold the views it names that have pending changes:
        deferred ones, and immediate ones when another connection committed since this one last
        looked (a stock client's writes, which the next matview commit would fold). The read
        merges pending changes itself either way; folded, a view may also heal (`fallback`)."""
        version = self.apsw.data_version()
        if version != self._read_version:  # another connection committed: immediate views may wait
            self._read_version = version
            self._others_wrote = {k for k, v in views.items() if v.entry.maintenance == "immediate"}
        lowered = sql.lower()
        wanted = [
            v
            for k, v in views.items()
            if (v.entry.maintenance == "deferred" or k in self._others_wrote) and k in lowered and not v.broken
        ]  # (a broken view is not folded: its read says why)
        self._others_wrote.difference_update(k for k in views if k in lowered)
        if self.apsw.readonly("main"):
            return
        if self.registry.replan_due and fallback.FALL_BACK_TO_WHOLE:
            self._repair_replanned()
        elif wanted and any(pending_count(self.apsw, v) for v in wanted):
            immediate = any(v.entry.maintenance == "immediate" for v in wanted)  # (folds for others)
            with self._not_waiting(immediate), contextlib.suppress(apsw.BusyError, apsw.ReadOnlyError), self:
                self._fold_views(wanted)  # (only an optimization: the read merges the pending deltas itself)

    def _repair_replanned(self) -> None:
        """Another client's CREATE/DROP INDEX or ANALYZE left views reading as broken (`replan`):
        a read repairs them first, as this connection's next write would, and reads them. Unlike
        a fold for others, the repair waits for the write lock (the busy timeout): a reader
        that finds another reader repairing would read an error otherwise, and waits a moment
        instead (then finds nothing left to repair). Where the lock stays busy past the
        timeout, those views read as broken, saying why, until a later read or write repairs."""
        with contextlib.suppress(apsw.BusyError, apsw.ReadOnlyError):
            with self._writing(), self._rebuilds_recorded():
                replan.keep_views_readable(self.apsw, self.registry)
            self.registry.sync_shadows()

    @contextlib.contextmanager
    def _not_waiting(self, applies: bool) -> Iterator[None]:
        """A read never waits for another writer so as to fold for others: a writer may hold the
        lock for long (the read merges pending changes instead)."""
        waits = int(scalar(self.apsw, "PRAGMA busy_timeout")) if applies else 0
        if waits:
            self.apsw.set_busy_timeout(0)
        try:
            yield
        finally:
            if waits:
                self.apsw.set_busy_timeout(waits)
