"""The child process of the resource-limit runs (``tests/big_views.py``).

Usage: python big_view_child.py measure DB VIEW...
       python big_view_child.py create|refresh DB VIEW AT

MODES
  measure     CREATE MATERIALIZED VIEW each VIEW, then REFRESH each; after every statement
              ``T <statement> <view> <seconds> <peak RSS kB> <progress reports>``
  create      CREATE VIEW; at its AT-th progress report print ``P <AT>`` and wait there for
              the parent's SIGINT; then ``OUTCOME <what>``: ``interrupted <exception>`` or
              ``finished``, and ``USABLE`` once the connection read the base table again
  refresh     the same with REFRESH
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from big_views import VIEWS  # noqa: E402

import matview  # noqa: E402
from matview.progress import Progress  # noqa: E402


def say(*words: object) -> None:
    print(*words, flush=True)


def peak_rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return -1


def reset_peak() -> None:
    """Start a new peak (Linux: 5 > clear_refs resets VmHWM to the current RSS)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass  # (the peak then counts from the start of the process)


def statement(kind: str, view: str) -> str:
    if kind == "create":
        return f"CREATE MATERIALIZED VIEW {view} AS {VIEWS[view]}"
    return f"REFRESH MATERIALIZED VIEW {view}"


def measure(conn: matview.Connection, views: list[str]) -> None:
    say("T", "start", "-", 0, peak_rss_kb(), 0)
    reports = 0

    def report(_progress: Progress) -> None:
        nonlocal reports
        reports += 1

    for kind in ("create", "refresh"):
        for view in views:
            reset_peak()
            began, reports = time.monotonic(), 0
            with conn.progress(report):
                conn.execute(statement(kind, view))
            say("T", kind, view, f"{time.monotonic() - began:.1f}", peak_rss_kb(), reports)


def interrupted(conn: matview.Connection, kind: str, view: str, at: int) -> None:
    reports = 0

    def report(_progress: Progress) -> None:
        nonlocal reports
        reports += 1
        if reports == at:
            # wait here, mid-statement, for the parent's SIGINT (a parent that read a stream
            # of reports would send it late, after a short statement had finished)
            say("P", reports)
            time.sleep(120)

    try:
        with conn.progress(report):
            conn.execute(statement(kind, view))
        say("OUTCOME", "finished")
    except KeyboardInterrupt:
        say("OUTCOME", "interrupted", "KeyboardInterrupt")
    except matview.Error as exc:
        say("OUTCOME", "interrupted", f"{type(exc).__name__}: {exc}"[:300])
    conn.execute("SELECT count(*) FROM big").fetchall()
    say("USABLE")


def main() -> None:
    # Ctrl-C raises KeyboardInterrupt here even when started by a shell that ignores SIGINT for
    # background jobs (the disposition is inherited, and Python then installs no handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    mode, db, views = sys.argv[1], sys.argv[2], sys.argv[3:]
    conn = matview.connect(db)
    say("READY")
    try:
        if mode == "measure":
            measure(conn, views)
        else:
            interrupted(conn, mode, views[0], int(views[1]))
    finally:
        conn.close()


if __name__ == "__main__":
    main()
