""" "database is locked" never leaks out of matview where SQLite's busy handling would have waited.

SQLite waits for a busy write lock (the busy timeout) only while a transaction has read
nothing yet: a transaction that has read, then writes, gets SQLITE_BUSY at once. Both tests
failed before the fixes in `matview.api.Connection` (found by bench/reliability.py's
concurrent writers: 35–79 of 100 matview transactions failed against three other writers).
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import apsw

_HERE = Path(__file__).resolve().parent
for _p in (str(_HERE), str(_HERE.parent)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from oracle import assert_view_matches  # noqa: E402

import matview  # noqa: E402

VIEW = "SELECT grp, COUNT(*) AS n, SUM(val) AS s FROM t GROUP BY grp"


def make(tmp_path: Path) -> str:
    path = str(tmp_path / "locks.db")
    conn = matview.connect(path)
    conn.execute("PRAGMA journal_mode=WAL").fetchall()
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, grp INTEGER, val INTEGER)")
    conn.execute("CREATE MATERIALIZED VIEW v AS " + VIEW)
    conn.close()
    return path


def test_a_transaction_that_starts_with_a_write_waits_for_the_lock(tmp_path: Path) -> None:
    """`with conn: conn.execute("INSERT …")` while another connection holds the write lock
    for a moment: a stock `BEGIN; INSERT` waits, so must matview (its schema read came first
    and made SQLite fail at once)."""
    path = make(tmp_path)
    other = apsw.Connection(path)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO t(grp, val) VALUES (1, 10)")

    def commit_later() -> None:
        time.sleep(0.3)
        other.execute("COMMIT")

    conn = matview.connect(path)
    releaser = threading.Thread(target=commit_later)
    releaser.start()
    try:
        with conn:
            conn.execute("INSERT INTO t(grp, val) VALUES (2, 20)")
            conn.executemany("INSERT INTO t(grp, val) VALUES (?, ?)", [(1, 1), (3, 3)])
        assert_view_matches(conn, "v", VIEW)
    finally:
        releaser.join()
        conn.close()
        other.close()


def test_a_reader_is_not_failed_by_a_catch_up_fold_it_cannot_lock(tmp_path: Path) -> None:
    """A connection whose underlying apsw connection wrote in autocommit folds those writes
    before its next statement ("catch up"); while another connection holds the write lock,
    that fold cannot write, and the read must go on (it merges the pending changes)."""
    path = make(tmp_path)
    conn = matview.connect(path)
    conn.apsw.execute("INSERT INTO t(grp, val) VALUES (4, 40)")  # bypasses the wrapper: not folded
    other = apsw.Connection(path)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO t(grp, val) VALUES (5, 50)")
    try:
        conn.apsw.set_busy_timeout(100)
        assert_view_matches(conn, "v", VIEW)
    finally:
        other.execute("ROLLBACK")
        other.close()
    conn.execute("INSERT INTO t(grp, val) VALUES (6, 60)")
    assert_view_matches(conn, "v", VIEW)
    conn.close()
