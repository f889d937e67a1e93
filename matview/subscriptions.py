"""The change feed's side of a `Connection`: subscriptions, polling for other clients'
commits, and REFRESH's ΔV (new rows − old rows) for subscribers (`matview.feed` keeps and
delivers the changes)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import apsw

from matview import feed
from matview.errors import Error
from matview.fold import pending_count
from matview.names import fold, is_node
from matview.registry import Registry, View

if TYPE_CHECKING:
    from types import TracebackType


class Subscriptions:
    """`Connection`'s change-feed methods (a part of it, in a module of its own)."""

    if TYPE_CHECKING:  # (what they use of `Connection`)
        apsw: apsw.Connection
        registry: Registry
        _feed: feed.Feed
        _polled_version: int
        _depth: list[str | None]

        def _fold_views(self, views: list[View]) -> None: ...
        def __enter__(self) -> Any: ...
        def __exit__(self, exc_type: Any, exc: Any, traceback: TracebackType | None) -> None: ...

    def subscribe(self, view: str, callback: feed.Callback | None = None) -> feed.Subscription:
        """Get each committed ΔV of `view` (a `feed.Change`: rows with +/− weights) after
        COMMIT, in commit order; never for rolled-back work. With a callback it is called
        with each change; without one, iterate the subscription (or `listen()` to wait).
        Changes reach the feed when they are folded: at commit for immediate views; for
        deferred ones at flush, past pending_limit, or when a read folds them. Others'
        commits are folded at this connection's next read, write or `poll()`."""
        found = self.registry.get(view)
        if found is None or is_node(found.name):
            raise Error(f"no such materialized view: {view}")
        return self._feed.subscribe(found.name, callback)

    def poll(self) -> None:
        """Fold into the subscribed views what other connections committed, and deliver it."""
        if not self._feed.active or not self.apsw.get_autocommit() or self._depth:
            return
        self._polled_version = self.apsw.data_version()
        wanted = [view for view in self._subscribed() if pending_count(self.apsw, view)]
        if not wanted:
            return
        try:
            with self:
                self._fold_views(wanted)
        except (apsw.BusyError, apsw.ReadOnlyError):
            return  # another connection is writing, or the file is read-only: the next poll folds
        self._feed.deliver()

    def _poll_if_others_wrote(self) -> None:
        if self._feed.active and self.apsw.data_version() != self._polled_version:
            self.poll()

    def _subscribed(self, broken: bool = False) -> list[View]:
        """The views somebody subscribed to; `broken`: those a REFRESH may rebuild too (their
        stored rows are what subscribers last got)."""
        if not self._feed.active:
            return []
        wanted = self._feed.subscribed_views()
        return [
            view for key, view in self.registry.sync().items() if fold(key) in wanted and (broken or not view.broken)
        ]

    @contextlib.contextmanager
    def _rebuilds_recorded(self) -> Iterator[None]:
        """Around a REFRESH or another rebuild from scratch: each subscribed view's change is
        its stored rows after − before (broken views included: their stored rows are what
        subscribers last got; one whose table a damaged file lost is left out). Nothing is
        recorded where the block raises."""
        before = {}
        for view in self._subscribed(broken=True):
            with contextlib.suppress(apsw.SQLError):
                before[fold(view.name)] = self._feed.stored(view)
        yield
        for key, rows in before.items():
            rebuilt = self.registry.get(key)
            if rebuilt is not None and not rebuilt.broken:
                self._feed.record(rebuilt, self._feed.stored(rebuilt) - rows)
