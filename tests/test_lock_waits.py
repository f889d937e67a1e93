""" "database is locked" never leaks out of matview where SQLite's busy handling would have waited.

SQLite waits for a busy write lock (the busy timeout) only while a transaction has read
nothing yet: a transaction that has read, then writes, gets SQLITE_BUSY at once. Both tests
failed before the fixes in `matview.api.Connection` (found by bench/reliability.py's
concurrent writers: 35–79 of 100 matview transactions failed against three other writers).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import apsw
import pytest

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


#: a stock sqlite3 program that holds the write lock for a moment (its own process)
HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("INSERT INTO t(grp, val) VALUES (7, 70)")
print("LOCKED", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
"""


def _refresh_in_a_transaction(conn: matview.Connection) -> None:
    with conn:
        conn.execute("REFRESH MATERIALIZED VIEW v")


@pytest.mark.parametrize(
    "action",
    [
        lambda conn: conn.execute("REFRESH MATERIALIZED VIEW v"),
        lambda conn: conn.execute("REFRESH MATERIALIZED VIEW d"),
        lambda conn: conn.flush(),
        lambda conn: conn.execute("CREATE MATERIALIZED VIEW w AS SELECT grp, MAX(val) AS hi FROM t GROUP BY grp"),
        lambda conn: conn.execute("DROP MATERIALIZED VIEW d"),
        _refresh_in_a_transaction,
    ],
    ids=["refresh", "refresh-deferred", "flush", "create", "drop", "refresh-in-with"],
)
def test_matviews_own_writes_wait_for_a_lock_another_process_holds(
    tmp_path: Path, action: Callable[[matview.Connection], object]
) -> None:
    """Regression: CREATE/DROP/REFRESH MATERIALIZED VIEW and flush() read the catalog and the
    pending deltas before writing, so while another process held the write lock they failed
    at once with "database is locked" where a stock writer waits (found diagnosing the
    concurrency run's lock errors). They now take the write lock first and wait for it."""
    path = make(tmp_path)
    conn = matview.connect(path)
    conn.execute(
        "CREATE MATERIALIZED VIEW d WITH (maintenance = 'deferred') AS SELECT grp, MIN(val) AS lo FROM t GROUP BY grp"
    )
    conn.execute("INSERT INTO t(grp, val) VALUES (1, 10), (2, 20)")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, path, "0.5"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "LOCKED"
        action(conn)  # waits for the holder's COMMIT (the busy timeout is 5 s)
    finally:
        assert holder.wait(timeout=60) == 0
    assert_view_matches(conn, "v", VIEW)
    for name, sql in (
        ("d", "SELECT grp, MIN(val) AS lo FROM t GROUP BY grp"),
        ("w", "SELECT grp, MAX(val) AS hi FROM t GROUP BY grp"),
    ):
        if conn.execute("SELECT 1 FROM __dbsp_catalog WHERE name = ?", (name,)).fetchone():
            assert_view_matches(conn, name, sql)
    conn.close()


@pytest.mark.parametrize(
    "ddl",
    [
        "CREATE TABLE extra(a)",
        "CREATE INDEX t_val ON t(val)",
        "ALTER TABLE gone ADD COLUMN note TEXT",
        "DROP TABLE gone",
    ],
)
def test_a_transaction_that_starts_with_ddl_waits_for_the_lock(tmp_path: Path, ddl: str) -> None:
    """`with conn: conn.execute("CREATE TABLE …")` (plain DDL first) while another connection
    holds the write lock for a moment: a stock `BEGIN; CREATE TABLE` waits, so must matview
    (it read the schema first, and SQLite failed it at once)."""
    path = make(tmp_path)
    setup = apsw.Connection(path)
    setup.execute("CREATE TABLE gone(a)")
    setup.close()
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
            conn.execute(ddl)
            conn.execute("INSERT INTO t(grp, val) VALUES (2, 20)")
        assert_view_matches(conn, "v", VIEW)
    finally:
        releaser.join()
        conn.close()
        other.close()


def test_a_read_that_meets_another_connections_schema_change_is_retried(tmp_path: Path) -> None:
    """Found by the 4 × 10,000 concurrency run: a matview reader's `SELECT * FROM v` failed
    with SchemaChanged ("run the statement again through the matview connection" — it was one)
    when another process changed the schema (its REFRESH) between this connection's look at
    the schema and SQLite preparing the statement (the virtual-table read path of then). The
    statement is now retried (`Connection._run`); with today's shadow views SQLite re-reads
    the schema itself, and this test pins that the read is exact either way."""
    path = make(tmp_path)
    conn = matview.connect(path)
    conn.execute("INSERT INTO t(grp, val) VALUES (1, 1)")
    other = matview.connect(path)
    original = conn.registry.sync_shadows
    changes = iter(range(1))

    def then_another_connection_changes_the_schema():  # type: ignore[no-untyped-def]
        views = original()
        if next(changes, None) is not None:
            other.execute("REFRESH MATERIALIZED VIEW v")  # DDL in the file, by another connection
            other.execute("INSERT INTO t(grp, val) VALUES (2, 2)")
        return views

    conn.registry.sync_shadows = then_another_connection_changes_the_schema  # type: ignore[method-assign]
    try:
        assert_view_matches(conn, "v", VIEW)
    finally:
        conn.close()
        other.close()
