"""Child processes of bench/reliability.py (and tests/test_reliability_bench.py).

Usage: python reliability_child.py MODE DB FIRST_TXN COUNT SEED

MODES
  kill          the mixed workload of `reliability_workload` (writes, flushes, CREATE/DROP,
                REFRESH, checkpoints, reads) through matview, endlessly, until SIGKILLed;
                prints ``B <txn>`` before a write transaction and ``C <txn>`` once it committed
  writer        COUNT write transactions through matview (a flush every 100th, a REFRESH every
                500th), then ``DONE <committed> <locked>``
  stock_writer  COUNT write transactions through stdlib sqlite3 (matview never imported), the
                same rows, retrying a transaction SQLite reports busy, as a stock program would
  reader        reads every view through matview until DB.stop exists; ``DONE <reads> <locked>``
  stock_reader  reads every view's plain view through stdlib sqlite3 the same way

Writers print ``C <txn>`` for every committed transaction. ``locked`` counts "database is
locked" errors that reached the program (through matview: a failure of the guarantee; a
stock writer retries its transaction). Writers and readers of both kinds wait for a busy
lock for the same time: $RELIABILITY_BUSY_TIMEOUT_MS (default 30,000 ms; SQLite gives up
after it, whoever the client).
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent


BUSY_TIMEOUT_MS = int(os.environ.get("RELIABILITY_BUSY_TIMEOUT_MS", "30000"))


def say(*words: object) -> None:
    print(*words, flush=True)


def where(exc: BaseException) -> str:
    """The innermost frames of `exc`, on one line (where a lock error came from)."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)[-12:]
    return " <- ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(frames))


def stock_rows(rng: random.Random, txn: int) -> list[tuple[object, ...]]:
    count = rng.choice([1, 2, 3, 5])
    return [
        (txn, count, rng.randrange(12), rng.randrange(-1000, 1001), f"s{rng.randrange(100000):05d}")
        for _ in range(count)
    ]


def stock_writer(db: str, first: int, count: int, seed: int) -> None:
    import sqlite3

    rng = random.Random(seed)
    conn = sqlite3.connect(db, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    committed = locked = 0
    for txn in range(first, first + count):
        rows = stock_rows(rng, txn)
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany("INSERT INTO t(txn, n, grp, val, note) VALUES (?, ?, ?, ?, ?)", rows)
                conn.execute(
                    "UPDATE t SET val = val + 1 WHERE id = (SELECT max(id) FROM t WHERE id % 5 = ?)", (txn % 5,)
                )
                conn.execute("COMMIT")
                break
            except sqlite3.OperationalError as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                locked += 1
        committed += 1
        say("C", txn)
    say("DONE", committed, locked)


#: seconds a reader rests after each round of reads. Readers that never rest keep some WAL frame
#: in use at every instant, so no checkpoint can restart the log: in the 4 × 10,000 run it grew
#: to 38 GB in 50 minutes (SQLite's checkpoint starvation, whoever the readers are). Resting
#: alone was not enough (4 GB after 38 minutes): the readers also wait while the bench's
#: ``<db>.pause`` file exists (`bench/reliability.py` `ReaderPauses`), all at once.
READER_REST = 0.05


def wait_while_paused(db: str) -> None:
    """Between two reads (no read transaction open): wait while the readers are asked to pause."""
    flag = Path(db + ".pause")
    while flag.exists():
        time.sleep(0.01)


def stock_reader(db: str, seed: int) -> None:
    import sqlite3

    sys.path.insert(0, str(HERE))
    from reliability_workload import VIEWS  # (plain data: no apsw, no matview)

    conn = sqlite3.connect(db, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    reads = locked = 0
    while not Path(db + ".stop").exists():
        for name in VIEWS:
            wait_while_paused(db)
            try:
                conn.execute(f"SELECT * FROM main.{name}").fetchall()
                reads += 1
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc):
                    raise
                locked += 1
        time.sleep(READER_REST)
    say("DONE", reads, locked)


def lock_error(what: object, step: Callable[[], object]) -> bool:
    """Run `step`; True (and an ``L`` line: how long it waited, SQLite's extended code, where)
    when "database is locked" reached the program."""
    import apsw

    import matview

    began = time.monotonic()
    try:
        step()
    except (apsw.BusyError, matview.Error) as exc:
        if "locked" not in str(exc) and not isinstance(exc, apsw.BusyError):
            raise
        # the busy timeout expiring (SQLite's own limit) or a BUSY that skipped the busy handler
        waited = time.monotonic() - began
        code = getattr(exc, "extendedresult", None)
        say("L", what, f"after {waited:.2f} s (extended code {code})", repr(exc)[:200], where(exc))
        return True
    return False


def matview_child(mode: str, db: str, first: int, count: int, seed: int) -> None:
    sys.path[:0] = [str(HERE), str(HERE.parent)]
    import apsw
    from reliability_workload import STEPS, VIEWS, Ledger, open_connection, run_step, write_txn

    import matview

    rng = random.Random(seed)
    conn = open_connection(Path(db))
    if mode != "kill":
        conn.apsw.set_busy_timeout(BUSY_TIMEOUT_MS)
    journal = str(conn.execute("PRAGMA journal_mode").fetchone()[0])
    say("READY")
    if mode == "kill":
        ledger = Ledger(next_txn=first)
        while True:
            step = rng.choice(STEPS)
            if step == "write":
                say("B", ledger.next_txn)
            run_step(conn, step, rng, ledger, journal)
            if step == "write":
                say("C", ledger.next_txn - 1)
    committed = locked = 0
    if mode == "writer":
        for txn in range(first, first + count):
            if lock_error(txn, lambda txn=txn: write_txn(conn, rng, txn)):
                locked += 1
                continue
            committed += 1
            say("C", txn)
            # now and then matview's own writes, which read before they write: a flush, a
            # REFRESH (rebuilding a view holds the lock a while: the other writers wait)
            if txn % 100 == 99:
                locked += lock_error(f"flush after {txn}", conn.flush)
            if txn % 500 == 499:
                refresh = f"REFRESH MATERIALIZED VIEW {rng.choice(['v_agg', 'v_minmax', 'v_left'])}"
                locked += lock_error(f"{refresh} after {txn}", lambda sql=refresh: conn.execute(sql))
        say("DONE", committed, locked)
        return
    reads = 0
    while not Path(db + ".stop").exists():
        for name in VIEWS:
            wait_while_paused(db)
            try:
                conn.execute(f"SELECT * FROM {name}").fetchall()
                reads += 1
            except (apsw.BusyError, matview.Error) as exc:
                if "locked" not in str(exc) and not isinstance(exc, apsw.BusyError):
                    raise
                locked += 1
                say("L", name, repr(exc)[:200], where(exc))
        time.sleep(READER_REST)
    say("DONE", reads, locked)


def main() -> None:
    mode, db, first, count, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    os.environ.setdefault("PYTHONHASHSEED", "0")
    if mode == "stock_writer":
        stock_writer(db, first, count, seed)
    elif mode == "stock_reader":
        stock_reader(db, seed)
    else:
        matview_child(mode, db, first, count, seed)


if __name__ == "__main__":
    main()
