"""A mixed workload over a mix of views, and the checks a file must pass after any failure.

Shared by the fault, power-loss and schema-change tests (``tests/test_faults.py``,
``tests/test_power_loss.py``) and by ``bench/reliability.py``. Every transaction of the
workload inserts the rows of one transaction id (column ``txn``; column ``n`` says how many),
so after a failure the checker can tell which transactions are in the file and whether each
is whole; the ledger knows which ones were reported committed.
"""

from __future__ import annotations

import random
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw
from oracle import assert_view_matches

import matview

SCHEMA = (
    "CREATE TABLE t(id INTEGER PRIMARY KEY, txn INTEGER NOT NULL, n INTEGER NOT NULL, grp INTEGER, "
    "val INTEGER, note TEXT)",
    "CREATE TABLE u(grp INTEGER PRIMARY KEY, label TEXT, w INTEGER)",
)

#: name: (maintenance, SELECT) — single-table aggregates, MIN/MAX, a join, a LEFT JOIN
#: aggregate, a subquery view, views over views; immediate and deferred
VIEWS: dict[str, tuple[str, str]] = {
    "v_agg": (
        "immediate",
        "SELECT grp, COUNT(*) AS n, SUM(val) AS s, TOTAL(val) AS tot, AVG(val) AS a FROM t GROUP BY grp",
    ),
    "v_minmax": ("deferred", "SELECT grp, MIN(val) AS lo, MAX(val) AS hi, MIN(note) AS first_note FROM t GROUP BY grp"),
    "v_join": ("immediate", "SELECT t.id, t.val, u.label FROM t JOIN u ON u.grp = t.grp WHERE t.val > 0"),
    "v_left": (
        "deferred",
        "SELECT u.grp, u.label, COUNT(t.id) AS n, SUM(t.val) AS s FROM u LEFT JOIN t ON t.grp = u.grp "
        "GROUP BY u.grp, u.label",
    ),
    "v_sub": ("immediate", "SELECT id, val FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.grp = t.grp AND u.w > 2)"),
    "v_over": ("immediate", "SELECT grp, s FROM v_agg WHERE n > 3"),
    "v_over_def": ("deferred", "SELECT label, n FROM v_left WHERE n > 0"),
}
LATE_VIEW = "v_late"
LATE_SQL = "SELECT grp, COUNT(*) AS n, MAX(note) AS hi FROM t WHERE val % 2 = 0 GROUP BY grp"

STEPS = ("write", "write", "write", "flush", "create", "refresh", "checkpoint", "read")


def setup(path: Path, journal: str) -> None:
    """A new file: the tables, a few rows, every view of `VIEWS`."""
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA journal_mode={journal}")
    for sql in SCHEMA:
        raw.execute(sql)
    raw.executemany("INSERT INTO u VALUES (?, ?, ?)", [(g, f"g{g}", g % 5) for g in range(12)])
    raw.commit()
    raw.close()
    conn = matview.connect(str(path))
    for name, (mode, sql) in VIEWS.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} WITH (maintenance = '{mode}') AS {sql}")
    conn.close()


def open_connection(path: Path, vfs: str | None = None, synchronous: str = "FULL") -> matview.Connection:
    """A matview connection through `vfs` (the shim) or the default VFS."""
    raw = apsw.Connection(str(path), vfs=vfs) if vfs else apsw.Connection(str(path))
    raw.set_busy_timeout(5000)
    raw.execute(f"PRAGMA synchronous={synchronous}")
    try:
        return matview.install(raw, pending_limit=200)
    except BaseException:
        raw.close()
        raise


@dataclass
class Ledger:
    """Transactions reported committed, ones that must be absent, ones that may be either."""

    next_txn: int = 1
    committed: set[int] = field(default_factory=set)
    absent: set[int] = field(default_factory=set)
    maybe: set[int] = field(default_factory=set)


def write_txn(conn: matview.Connection, rng: random.Random, txn: int) -> None:
    """One transaction: rows of `txn`, scratch rows in and out (MIN/MAX move), an update of
    an old row, sometimes of a row of `u` (the join, LEFT JOIN and subquery move)."""
    count = rng.choice([1, 2, 3, 5, 8, 150])  # (150 rows spill the page cache: journal writes mid-transaction)
    rows = [
        (txn, count, rng.randrange(12), rng.randrange(-1000, 1001), f"n{rng.randrange(100000):05d}")
        for _ in range(count)
    ]
    with conn:
        conn.executemany("INSERT INTO t(txn, n, grp, val, note) VALUES (?, ?, ?, ?, ?)", rows)
        for _ in range(2):
            val = rng.choice([rng.randrange(5000, 10000), -rng.randrange(5000, 10000)])
            conn.execute(
                "INSERT INTO t(txn, n, grp, val, note) VALUES (?, 0, ?, ?, ?)",
                (-txn, rng.randrange(12), val, f"z{rng.randrange(999)}"),
            )
        conn.execute(
            "DELETE FROM t WHERE id = (SELECT id FROM t WHERE txn < 0 AND grp = ? ORDER BY abs(val) DESC LIMIT 1)",
            (rng.randrange(12),),
        )
        conn.execute(
            "UPDATE t SET val = ?, grp = ?, note = note || 'u' WHERE id = (SELECT max(id) FROM t WHERE txn > 0 "
            "AND id % 7 = ?)",
            (rng.randrange(-1000, 1001), rng.randrange(12), rng.randrange(7)),
        )
        if rng.random() < 0.3:
            conn.execute(
                "UPDATE u SET w = ?, label = ? WHERE grp = ?", (rng.randrange(5), f"L{txn}", rng.randrange(12))
            )


def run_step(conn: matview.Connection, step: str, rng: random.Random, ledger: Ledger, journal: str) -> None:
    """One step of the workload; the ledger learns of a write before it runs."""
    if step == "write":
        txn = ledger.next_txn
        ledger.next_txn += 1
        ledger.maybe.add(txn)
        write_txn(conn, rng, txn)
        ledger.maybe.discard(txn)
        ledger.committed.add(txn)
    elif step == "flush":
        conn.flush()
    elif step == "create":
        if conn.execute("SELECT 1 FROM __dbsp_catalog WHERE name = ?", (LATE_VIEW,)).fetchone():
            conn.execute(f"DROP MATERIALIZED VIEW {LATE_VIEW}")
        else:
            conn.execute(f"CREATE MATERIALIZED VIEW {LATE_VIEW} WITH (maintenance = 'deferred') AS {LATE_SQL}")
    elif step == "refresh":
        conn.execute(f"REFRESH MATERIALIZED VIEW {rng.choice(['v_minmax', 'v_agg', 'v_left', 'v_sub'])}")
    elif step == "checkpoint":
        if journal.upper() == "WAL":
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        else:
            conn.execute("SELECT count(*) FROM v_join").fetchall()
    elif step == "read":
        name = rng.choice(list(VIEWS))
        conn.execute(f"SELECT * FROM {name}").fetchall()
    else:
        raise ValueError(step)


@dataclass
class Verdict:
    views_checked: int = 0
    lost: list[int] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        return ([f"committed transactions lost: {self.lost[:10]}"] if self.lost else []) + self.wrong


def check_views(conn: Any, verdict: Verdict, context: str) -> None:
    """Every view (v_late too when it exists) equals its SELECT on `conn`."""
    live = {name: sql for name, (_, sql) in VIEWS.items()}
    if conn.execute("SELECT 1 FROM __dbsp_catalog WHERE name = ?", (LATE_VIEW,)).fetchone():
        live[LATE_VIEW] = LATE_SQL
    for name, sql in live.items():
        try:
            assert_view_matches(conn, name, sql)
        except AssertionError as exc:
            verdict.wrong.append(f"{context}: {exc}")
        except (apsw.Error, matview.Error) as exc:
            verdict.wrong.append(f"{context}: reading {name} raised {type(exc).__name__}: {exc}")
        verdict.views_checked += 1


def check_file(path: Path, journal: str, ledger: Ledger, context: str) -> Verdict:
    """Reopen `path` with the default VFS: integrity, every committed transaction there and
    whole, nothing uncommitted there, no leftovers of a view that is not in the catalog, every
    view equal to its SELECT, and a write still folds. The ledger learns the fate of the
    transactions it was unsure of."""
    verdict = Verdict()
    try:
        _check_file(path, journal, ledger, context, verdict)
    except (apsw.Error, matview.Error) as exc:
        verdict.wrong.append(f"{context}: checking the file raised {type(exc).__name__}: {exc}")
    return verdict


def _check_file(path: Path, journal: str, ledger: Ledger, context: str, verdict: Verdict) -> None:
    raw = apsw.Connection(str(path))
    try:
        result = raw.execute("PRAGMA integrity_check").fetchall()
        if result != [("ok",)]:
            verdict.wrong.append(f"{context}: integrity_check: {result[:5]}")
            return
        mode = raw.execute("PRAGMA journal_mode").fetchone()
        if mode is None or str(mode[0]).lower() != journal.lower():
            verdict.wrong.append(f"{context}: journal mode is now {mode}")
        late = raw.execute("SELECT 1 FROM __dbsp_catalog WHERE name = ?", (LATE_VIEW,)).fetchone()
        leftovers = [n for (n,) in raw.execute("SELECT name FROM sqlite_master") if LATE_VIEW in n]
        if not late and leftovers:
            verdict.wrong.append(f"{context}: {LATE_VIEW} is not in the catalog but left {leftovers}")
    finally:
        raw.close()
    conn = matview.connect(str(path))
    try:
        check_views(conn, verdict, context)
        present = {
            txn: (n, count)
            for txn, n, count in conn.execute("SELECT txn, min(n), count(*) FROM t WHERE txn > 0 GROUP BY txn")
        }
        verdict.lost = sorted(ledger.committed - present.keys())
        torn = {txn: v for txn, v in present.items() if v[0] != v[1]}
        if torn:
            verdict.wrong.append(f"{context}: partially applied transactions (txn: (n, rows)): {torn}")
        back = sorted(ledger.absent & present.keys())
        if back:
            verdict.wrong.append(f"{context}: transactions that failed are present: {back}")
        ledger.committed |= ledger.maybe & present.keys()
        ledger.absent |= ledger.maybe - present.keys()
        ledger.maybe.clear()
        ledger.committed -= set(verdict.lost)  # (reported once)
        with conn:
            conn.execute("INSERT INTO t(txn, n, grp, val, note) VALUES (0, 0, 3, 7, 'after')")
        conn.execute("DELETE FROM t WHERE note = 'after'")
        check_views(conn, verdict, f"{context} (after a write)")
    finally:
        conn.close()
