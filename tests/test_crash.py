"""Crash safety: a writer SIGKILLed at random moments never leaves a view that differs from its
SELECT, and never loses a committed transaction.

A real child process (tests/crash_child.py) writes to a real file through matview; the parent
kills it with SIGKILL while it commits small transactions, while a transaction is open, and
while a 20k-row transaction is being folded and committed. After every kill the parent reopens
the file with matview.connect and checks every view against its SELECT, the atomicity of every
transaction found in the file, and that every transaction the child reported committed is there.
"""

from __future__ import annotations

import os
import queue
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
for _p in (str(_HERE), str(_HERE.parent)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from oracle import assert_view_matches  # noqa: E402

import matview  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CHILD = HERE / "crash_child.py"

V_ROWS_SQL = "SELECT id, txn, val * 2 AS v2, note FROM t WHERE val % 3 <> 0"
V_AGG_SQL = (
    "SELECT grp, COUNT(*) AS n, SUM(val) AS s, MIN(val) AS lo, MAX(val) AS hi, MIN(note) AS first_note "
    "FROM t GROUP BY grp"
)
VIEWS = {"v_rows": V_ROWS_SQL, "v_agg": V_AGG_SQL}
V_LATE_SQL = "SELECT grp, COUNT(*) AS n, MIN(val) AS lo, MAX(note) AS hi FROM t WHERE val % 2 = 0 GROUP BY grp"


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


class Child:
    """The writer process, its stdout lines (with arrival times) read by a thread."""

    def __init__(self, db: Path, mode: str, first_txn: int, seed: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(db), mode, str(first_txn), str(seed)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(),
            cwd=str(ROOT),
        )
        self.lines: queue.Queue[tuple[float, str]] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put((time.monotonic(), line.strip()))

    def wait_for(self, prefix: str, timeout: float = 20.0) -> str:
        """Block until a stdout line starting with `prefix`; fail if the child dies first."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                pytest.fail(f"child never printed {prefix!r}; saw {self.seen[-5:]}; stderr:\n{self.stderr()}")
            try:
                _, line = self.lines.get(timeout=min(left, 0.05))
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    self.reader.join(timeout=5)
                    while not self.lines.empty():
                        self.seen.append(self.lines.get()[1])
                    if any(s.startswith(prefix) for s in self.seen[-1:]):
                        return self.seen[-1]
                    pytest.fail(
                        f"child exited ({self.proc.returncode}) before {prefix!r}; saw {self.seen[-5:]}; "
                        f"stderr:\n{self.stderr()}"
                    )
                continue
            self.seen.append(line)
            if line.startswith(prefix):
                return line

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.reader.join(timeout=10)
        while not self.lines.empty():
            self.seen.append(self.lines.get()[1])

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        assert self.proc.stderr is not None
        return self.proc.stderr.read()

    def assert_killed(self) -> None:
        """The child died of our SIGKILL, not of an exception of its own."""
        assert self.proc.returncode == -signal.SIGKILL, (
            f"child exited with {self.proc.returncode} before the kill; stderr:\n{self.stderr()}"
        )

    def committed(self) -> set[int]:
        return {int(s.split()[1]) for s in self.seen if s.startswith("C ")}

    def begun(self) -> list[int]:
        return [int(s.split()[1]) for s in self.seen if s.startswith("BEGIN ")]

    def opened(self) -> set[int]:
        return {int(s.split()[1]) for s in self.seen if s.startswith("OPEN ")}


def setup_db(db: Path, journal: str) -> None:
    raw = sqlite3.connect(db)
    raw.execute(f"PRAGMA journal_mode={journal}")
    raw.execute(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, txn INTEGER NOT NULL, n INTEGER NOT NULL, grp INTEGER, "
        "val INTEGER, note TEXT)"
    )
    raw.commit()
    raw.close()
    conn = matview.connect(str(db))
    conn.execute(f"CREATE MATERIALIZED VIEW v_rows WITH (maintenance = 'immediate') AS {V_ROWS_SQL}")
    conn.execute(f"CREATE MATERIALIZED VIEW v_agg WITH (maintenance = 'deferred') AS {V_AGG_SQL}")
    conn.close()


class Ledger:
    """What the parent knows: transactions reported committed, and ones that must be absent."""

    def __init__(self) -> None:
        self.committed: set[int] = set()
        self.absent: set[int] = set()
        self.maybe: set[int] = set()  # begun, not reported: may have committed before the kill


def check_after_crash(db: Path, journal: str, ledger: Ledger, context: str) -> None:
    """Reopen with matview; views equal their SELECTs; committed transactions all there, whole."""
    raw = sqlite3.connect(db)
    try:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok", context
        assert raw.execute("PRAGMA journal_mode").fetchone()[0].lower() == journal.lower(), context
    finally:
        raw.close()
    conn = matview.connect(str(db))
    try:
        for view, sql in VIEWS.items():
            try:
                assert_view_matches(conn, view, sql)
            except AssertionError as exc:
                raise AssertionError(f"{context}: {exc}") from None
        present = {
            txn: (n, count)
            for txn, n, count in conn.execute("SELECT txn, min(n), count(*) FROM t WHERE txn > 0 GROUP BY txn")
        }
        lost = sorted(ledger.committed - present.keys())
        assert not lost, f"{context}: committed transactions lost: {lost[:10]}"
        torn = {txn: v for txn, v in present.items() if v[0] != v[1]}
        assert not torn, f"{context}: partially applied transactions (txn: (n, rows)): {torn}"
        resurrected = sorted(ledger.absent & present.keys())
        assert not resurrected, f"{context}: uncommitted (open at kill) transactions present: {resurrected}"
        unexpected = sorted(present.keys() - ledger.committed - ledger.maybe)
        assert not unexpected, f"{context}: transactions present that were never begun: {unexpected}"
        # a transaction that committed just before the kill (but was not yet reported) is now known
        ledger.committed |= ledger.maybe & present.keys()
        ledger.absent |= ledger.maybe - present.keys()
        ledger.maybe.clear()
        # still writable through matview after recovery, and the views follow
        with conn:
            conn.execute("INSERT INTO t(txn, n, grp, val, note) VALUES (-1, 0, 3, 7, 'after-crash')")
        conn.execute("DELETE FROM t WHERE note = 'after-crash'")
        for view, sql in VIEWS.items():
            assert_view_matches(conn, view, sql)
    finally:
        conn.close()


def run_round(db: Path, journal: str, ledger: Ledger, mode: str, first: int, rng: random.Random) -> str:
    child = Child(db, mode, first, rng.randrange(1 << 30))
    try:
        child.wait_for("READY")
        if mode == "small":
            time.sleep(rng.uniform(0.1, 0.8))
        elif mode in ("midtx", "midsql"):
            child.wait_for("OPEN")
            time.sleep(rng.uniform(0.0, 0.2))
        elif mode == "big":
            # kill somewhere in the first or second big transaction: while the 20k rows are
            # inserted, while they are folded / committed (after PRECOMMIT), or in the flush
            # of the deferred view
            child.wait_for("PRECOMMIT")
            time.sleep(rng.uniform(0.02, 0.5))
        elif mode == "pending":
            # kill while conn.flush() folds ~24k pending rows into the deferred view
            child.wait_for("FLUSH", timeout=40)
            time.sleep(rng.uniform(0.0, 0.15))
        elif mode == "create":
            child.wait_for("CREATE")
            time.sleep(rng.uniform(0.0, 0.6))
        child.kill()
        child.assert_killed()
    finally:
        if child.proc.poll() is None:
            child.kill()
    committed = child.committed()
    ledger.committed |= committed
    begun = child.begun()
    opened = child.opened()
    ledger.absent |= opened
    ledger.maybe |= set(begun) - committed - opened
    summary = f"{journal} round mode={mode} first={first} last lines={child.seen[-4:]}"
    print(summary)
    return summary


@pytest.mark.parametrize("journal", ["WAL", "DELETE"])
def test_sigkill_never_loses_commits_or_corrupts_views(tmp_path: Path, journal: str) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    db = tmp_path / "crash.db"
    setup_db(db, journal)
    ledger = Ledger()
    schedule = ["small", "midtx", "big", "pending", "small", "midsql", "big", "pending", "small"]
    for number, mode in enumerate(schedule, start=1):
        context = run_round(db, journal, ledger, mode, number * 1_000_000 + 1, rng)
        check_after_crash(db, journal, ledger, f"seed={seed} round {number}: {context}")
    assert ledger.committed, "no transaction ever committed: the kills came too early to test anything"


@pytest.mark.parametrize("journal", ["WAL", "DELETE"])
def test_sigkill_during_create_materialized_view(tmp_path: Path, journal: str) -> None:
    """Killed while CREATE MATERIALIZED VIEW populates a view: afterwards the view either exists
    and equals its SELECT, or does not exist at all and leaves nothing behind."""
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    db = tmp_path / "create.db"
    setup_db(db, journal)
    raw = sqlite3.connect(db)
    raw.executemany(
        "INSERT INTO t(txn, n, grp, val, note) VALUES (?, 1, ?, ?, ?)",
        [(-5, i % 50, (i * 7919) % 2001 - 1000, f"x{i:06d}") for i in range(40000)],
    )
    raw.commit()
    before = set(r[0] for r in raw.execute("SELECT name FROM sqlite_master"))
    raw.close()
    for attempt in range(3):
        child = Child(db, "create", 1, rng.randrange(1 << 30))
        try:
            child.wait_for("CREATE")
            time.sleep(rng.uniform(0.0, 0.5) * (attempt + 1))
            child.kill()
            child.assert_killed()
        finally:
            if child.proc.poll() is None:
                child.kill()
        conn = matview.connect(str(db))
        try:
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            exists = "v_late" in names
            if exists:
                assert_view_matches(conn, "v_late", V_LATE_SQL)
                conn.execute("DROP MATERIALIZED VIEW v_late")
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            assert names == before, (
                f"seed={seed} attempt {attempt} (view existed: {exists}): leftovers {sorted(names - before)}, "
                f"missing {sorted(before - names)}"
            )
            for view, sql in VIEWS.items():
                assert_view_matches(conn, view, sql)
            conn.execute(f"CREATE MATERIALIZED VIEW v_late AS {V_LATE_SQL}")
            assert_view_matches(conn, "v_late", V_LATE_SQL)
            conn.execute("DROP MATERIALIZED VIEW v_late")
        finally:
            conn.close()
