"""Progress of long statements (CREATE and REFRESH of large views), and cancelling them.

SQLite calls a progress handler every `EVERY` virtual-machine instructions; matview turns
those calls into `Progress` reports for a callback. SQLite cannot say how much work a
statement has left, so a report counts work done (instructions) and time, not a fraction.
Cancelling — Ctrl-C (KeyboardInterrupt) or the callback raising — interrupts the running
statement; the statement's transaction rolls back, so the file is left as it was.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import apsw

#: SQLite instructions between two reports (a few milliseconds of work)
EVERY = 50_000


@dataclass(frozen=True)
class Progress:
    """How far a statement got: `what` it is doing, instructions run, seconds since it began."""

    what: str
    steps: int
    elapsed: float


ProgressCallback = Callable[[Progress], object]
_HANDLER_ID = "matview.progress"


@contextmanager
def reporting(conn: apsw.Connection, what: str, callback: ProgressCallback | None) -> Iterator[None]:
    """Report the progress of the statements run inside the block to `callback` (None: no
    reports, but Ctrl-C still interrupts a long statement at once)."""
    start = time.monotonic()
    calls = 0

    def handler() -> bool:
        nonlocal calls
        calls += 1
        if callback is not None:
            callback(Progress(what, calls * EVERY, time.monotonic() - start))
        return False  # go on; an exception raised here (KeyboardInterrupt too) interrupts

    # (under an id of matview's own: an application's progress handler stays, and is not removed)
    conn.set_progress_handler(handler, EVERY, id=_HANDLER_ID)
    try:
        yield
        if callback is not None:
            callback(Progress(what, calls * EVERY, time.monotonic() - start))
    finally:
        conn.set_progress_handler(None, id=_HANDLER_ID)
