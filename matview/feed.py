"""The change feed: each committed ΔV of a view, delivered to its subscribers after COMMIT.

A fold that produces a ΔV for a subscribed view writes it to a TEMP table inside the
fold's own transaction. SQLite's temp database takes part in every transaction and
savepoint, so a ROLLBACK (or a ROLLBACK TO a savepoint the fold ran under) erases the
recorded ΔV together with the fold itself: only committed work is ever seen. Once the
connection is back in autocommit mode (the COMMIT went through), the wrapper reads the
recorded changes in the order they were folded, empties the table and hands them out.
Nothing is recorded, and no statement runs, for views nobody subscribed to.

Delivery is in-process and at most once: a crash between COMMIT and delivery loses the
notification (never the view's rows); a subscriber that must not miss anything re-reads
the view when it (re)subscribes.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import apsw

from matview import names
from matview.keys import row_of
from matview.names import fold, quote
from matview.registry import View
from matview.zset import ZSet

#: the temp table holding recorded ΔVs until their transaction commits
FEED_TABLE = f"{names.PREFIX}feed"
_TABLE = f"temp.{quote(FEED_TABLE)}"


@dataclass(frozen=True)
class Change:
    """One view's ΔV from one fold (or REFRESH): each row with its weight, +n added, −n removed."""

    view: str
    rows: tuple[tuple[tuple[Any, ...], int], ...]

    @property
    def inserted(self) -> list[tuple[Any, ...]]:
        """The rows added (a row of weight n listed n times)."""
        return [row for row, weight in self.rows for _ in range(weight)]

    @property
    def deleted(self) -> list[tuple[Any, ...]]:
        """The rows removed (a row of weight −n listed n times)."""
        return [row for row, weight in self.rows for _ in range(-weight)]


Callback = Callable[[Change], object]


class Subscription:
    """A view's subscription: calls `callback` with each Change, or (without one) queues
    them for iteration. `close()` ends it."""

    def __init__(self, feed: Feed, view: str, callback: Callback | None) -> None:
        self.view = view
        self._feed, self._callback = feed, callback
        self._queue: deque[Change] = deque()
        self.closed = False

    def _receive(self, change: Change) -> None:
        if self._callback is not None:
            self._callback(change)
        else:
            self._queue.append(change)

    def __iter__(self) -> Iterator[Change]:
        """The changes delivered so far and not yet taken, oldest first (does not wait)."""
        while self._queue:
            yield self._queue.popleft()

    def listen(self, timeout: float | None = None, interval: float = 0.05) -> Iterator[Change]:
        """Changes as they come, waiting for them: between two looks the connection folds
        what other clients committed (`Connection.poll`). Stops after `timeout` seconds
        without a change (None: never), or when the subscription is closed."""
        quiet_since = time.monotonic()
        while not self.closed:
            if self._queue:
                yield self._queue.popleft()
                quiet_since = time.monotonic()
                continue
            if timeout is not None and time.monotonic() - quiet_since >= timeout:
                return
            self._feed.poll()
            if not self._queue:
                time.sleep(interval)

    def close(self) -> None:
        self.closed = True
        self._feed.unsubscribe(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class Feed:
    """The subscriptions of one connection, and the changes recorded for them."""

    def __init__(self, conn: apsw.Connection, poll: Callable[[], None]) -> None:
        self._conn = conn
        self.poll = poll
        self._subscribers: dict[str, list[Subscription]] = {}  # per view (folded name)
        self._recorded = False  # a hint: a transaction may have recorded something
        self._delivering = False
        self._batches = 0

    @property
    def active(self) -> bool:
        return bool(self._subscribers)

    def subscribed_views(self) -> set[str]:
        """The (folded) names of the views somebody subscribed to."""
        return set(self._subscribers)

    def subscribe(self, view: str, callback: Callback | None) -> Subscription:
        subscription = Subscription(self, view, callback)
        self._create_table()
        self._subscribers.setdefault(fold(view), []).append(subscription)
        return subscription

    def _create_table(self) -> None:
        self._conn.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS {quote(FEED_TABLE)} "
            "(id INTEGER PRIMARY KEY, batch INTEGER, view TEXT, key BLOB, weight INTEGER)"
        )

    def unsubscribe(self, subscription: Subscription) -> None:
        listeners = self._subscribers.get(fold(subscription.view), [])
        if subscription in listeners:
            listeners.remove(subscription)
        if not listeners:
            self._subscribers.pop(fold(subscription.view), None)

    def record(self, view: View, delta: ZSet[bytes]) -> None:
        """Inside the fold's transaction: keep `view`'s ΔV if somebody wants it."""
        if not delta or fold(view.name) not in self._subscribers:
            return
        self._batches += 1
        self._create_table()  # subscribed inside a transaction that rolled back: the table went with it
        self._conn.executemany(
            f"INSERT INTO {_TABLE} (batch, view, key, weight) VALUES (?, ?, ?, ?)",
            ((self._batches, view.name, key, weight) for key, weight in delta.items()),
        )
        self._recorded = True

    def stored(self, view: View) -> ZSet[bytes]:
        """The view's stored rows as a Z-set (REFRESH's ΔV is after − before)."""
        table = view.table
        return ZSet(self._conn.execute(f"SELECT {quote(names.KEY)}, {quote(names.WEIGHT)} FROM {table.table}"))

    def deliver(self) -> None:
        """After COMMIT: hand the recorded changes out, in fold order. A callback's
        exception reaches the caller once every change is delivered (the commit stands)."""
        if not self._recorded or self._delivering or not self._conn.get_autocommit():
            return
        self._delivering = True
        failure: BaseException | None = None
        try:
            while True:
                rows = self._conn.execute(f"SELECT batch, view, key, weight FROM {_TABLE} ORDER BY id").fetchall()
                self._recorded = False
                if not rows:
                    break
                self._conn.execute(f"DELETE FROM {_TABLE}")
                for change in _changes(rows):
                    for subscription in list(self._subscribers.get(fold(change.view), [])):
                        try:
                            subscription._receive(change)
                        except Exception as exc:  # delivered to the others first
                            failure = failure or exc
        finally:
            self._delivering = False
        if failure is not None:
            raise failure


def _changes(rows: list[tuple[Any, ...]]) -> Iterator[Change]:
    """Group recorded rows (batch, view, key, weight) into one Change per batch."""
    current: list[tuple[tuple[Any, ...], int]] = []
    batch, view = None, ""
    for row_batch, row_view, key, weight in rows:
        if row_batch != batch and current:
            yield Change(view, tuple(current))
            current = []
        batch, view = row_batch, row_view
        current.append((row_of(key), weight))
    if current:
        yield Change(view, tuple(current))
