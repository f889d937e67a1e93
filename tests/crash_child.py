"""Child process for tests/test_crash.py: writes to a matview database until SIGKILLed.

Usage: python crash_child.py DB MODE FIRST_TXN SEED

Every transaction inserts the rows of one transaction id (column ``txn``; column ``n`` is how
many rows that transaction inserts), so the parent can tell afterwards which transactions
are in the file and whether each one is complete. It also retracts "scratch" rows (txn < 0,
extreme values, so MIN/MAX have to be recomputed) and updates an old row, so deltas carry
deletions and updates too.

Protocol on stdout (one line each, flushed):
  READY                 connected
  BEGIN <id>            about to open transaction <id>
  PRECOMMIT <id>        leaving `with conn:` (fold + COMMIT run now)
  C <id>                transaction <id> committed (the parent may rely on it)
  FLUSH / FLUSHED       around conn.flush() (folds the deferred view)
  OPEN <id>             (mode midtx) transaction <id> is open with its rows written; sleeping

MODES
  small   endless small transactions, sometimes a conn.flush()
  big     endless 20k-row transactions followed by conn.flush()
  pending endless 8k-row transactions (under the deferred view's pending_limit, so only the
          immediate view folds at commit); every third one is followed by a conn.flush() that
          folds the ~24k pending rows of the deferred view
  midtx   a few small transactions, then one left open (with conn:) while sleeping
  midsql  same but the open transaction is a SQL BEGIN and a SAVEPOINT
  create  CREATE MATERIALIZED VIEW v_late over the whole table (kill lands mid-create)
"""

from __future__ import annotations

import random
import sys
import time

import matview

V_LATE_SQL = "SELECT grp, COUNT(*) AS n, MIN(val) AS lo, MAX(note) AS hi FROM t WHERE val % 2 = 0 GROUP BY grp"


def say(*words: object) -> None:
    print(*words, flush=True)


def rows_of(rng: random.Random, txn: int, count: int) -> list[tuple]:
    return [
        (txn, count, rng.randrange(10), rng.randrange(-1000, 1001), f"n{rng.randrange(100000):05d}")
        for _ in range(count)
    ]


def write_txn(conn: matview.Connection, rng: random.Random, txn: int, count: int) -> None:
    conn.executemany("INSERT INTO t(txn, n, grp, val, note) VALUES (?, ?, ?, ?, ?)", rows_of(rng, txn, count))
    # scratch rows with extreme values: inserted now, retracted by a later transaction
    for _ in range(2):
        grp = rng.randrange(10)
        val = rng.choice([rng.randrange(5000, 10000), -rng.randrange(5000, 10000)])
        conn.execute(
            "INSERT INTO t(txn, n, grp, val, note) VALUES (?, 0, ?, ?, ?)", (-txn, grp, val, f"z{rng.randrange(999)}")
        )
    grp = rng.randrange(10)
    # retract the group's extreme scratch row (a MIN or MAX has to move)
    conn.execute(
        "DELETE FROM t WHERE id = (SELECT id FROM t WHERE txn < 0 AND grp = ? ORDER BY abs(val) DESC LIMIT 1)",
        (grp,),
    )
    # update an old committed row (its txn stays; only val/grp/note change)
    conn.execute(
        "UPDATE t SET val = ?, grp = ?, note = note || 'u' "
        "WHERE id = (SELECT max(id) FROM t WHERE txn > 0 AND id % 7 = ?)",
        (rng.randrange(-1000, 1001), rng.randrange(10), rng.randrange(7)),
    )


def main() -> None:
    path, mode, first, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(seed)
    conn = matview.connect(path)
    say("READY")
    txn = first
    if mode == "create":
        say("CREATE")
        conn.execute(f"CREATE MATERIALIZED VIEW v_late AS {V_LATE_SQL}")
        say("CREATED")
        time.sleep(60)
        return
    if mode in ("midtx", "midsql"):
        for _ in range(rng.randrange(1, 4)):
            say("BEGIN", txn)
            with conn:
                write_txn(conn, rng, txn, 1 + txn % 5)
                say("PRECOMMIT", txn)
            say("C", txn)
            txn += 1
        say("BEGIN", txn)
        if mode == "midtx":
            with conn:
                write_txn(conn, rng, txn, 50)
                # read inside the open transaction: read-your-own-writes may fold into view state
                conn.execute("SELECT count(*) FROM v_rows").fetchall()
                conn.execute("SELECT * FROM v_agg").fetchall()
                say("OPEN", txn)
                time.sleep(60)
        else:
            conn.execute("BEGIN")
            write_txn(conn, rng, txn, 30)
            conn.execute("SAVEPOINT sp")
            write_txn(conn, rng, txn, 0)
            conn.execute("SELECT * FROM v_agg").fetchall()
            conn.execute("ROLLBACK TO sp")
            conn.execute("SELECT count(*) FROM v_rows").fetchall()
            say("OPEN", txn)
            time.sleep(60)
        return
    done = 0
    while True:
        count = {"big": 20000, "pending": 8000}.get(mode, 1 + txn % 5)
        say("BEGIN", txn)
        with conn:
            write_txn(conn, rng, txn, count)
            say("PRECOMMIT", txn)
        say("C", txn)
        txn += 1
        done += 1
        if mode == "big" or (mode == "pending" and done % 3 == 0) or (mode == "small" and rng.random() < 0.2):
            say("FLUSH")
            conn.flush()
            say("FLUSHED")


if __name__ == "__main__":
    main()
