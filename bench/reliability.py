"""Reliability, the long run (issue 9): I/O faults, power cuts, SIGKILLs, concurrent writers.

    python bench/reliability.py [--faults 1000] [--powercuts 200] [--kills 200]
                                [--writers 4 --txns 10000] [--reader-pause-every 10]
                                [--big-rows 0] [--seed N] [--dir DIR]

Every part runs the mixed workload of ``tests/reliability_workload.py`` (single-table
aggregates, MIN/MAX, a join, a LEFT JOIN aggregate, a subquery view, views over views;
immediate and deferred) on real files:

* faults: ``tests/faultvfs.py`` injects EIO on read/write/sync/truncate/lock, short writes and
  a full disk at random points of writes, folds, CREATE/DROP, REFRESH and checkpoints, half in
  WAL and half in rollback-journal (DELETE) mode; after each, the checks of
  ``reliability_workload.check_file`` (integrity, no committed transaction lost or torn, every
  view equal to its SELECT, still writable);
* power cuts: the shim keeps unsynced writes in memory and drops them (or a random subset:
  "torn") at a random write; both journal modes; the same checks;
* kills: a child process (``tests/reliability_child.py kill``) runs the workload and is
  SIGKILLed at a random instant; the same checks;
* concurrency: ``--writers`` processes (half matview connections, half stdlib sqlite3) each
  commit ``--txns`` transactions on one WAL file while a matview reader and a stock reader
  read every view; "database is locked" must never leak out of matview, nothing deadlocks
  (each process has a deadline), and every view is exact at the end; the readers pause
  together for 1 s every ``--reader-pause-every`` seconds, so the WAL can restart (readers
  that never all pause starve SQLite's automatic checkpoints: ``ReaderPauses``);
* big views (``--big-rows N``, off by default): a table of N rows, an aggregate and a MIN/MAX
  view CREATEd then REFRESHed in a child process (seconds and peak RSS of each statement), and
  children sent SIGINT mid-CREATE and mid-REFRESH: the file must be as it was (integrity, the
  base table, no leftover objects; the old view exact after a REFRESH). See ``tests/big_views.py``.

The last line is ``faults=N powercuts=N kills=N txns=N views_checked=N lost=N wrong=N``;
the exit status is 1 when anything was lost or wrong (details above that line).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
sys.path[:0] = [str(TESTS), str(ROOT)]

import big_views  # noqa: E402
from fault_runner import Tally, fault_campaign, power_campaign  # noqa: E402
from reliability_workload import Ledger, Verdict, check_file, check_views, setup  # noqa: E402

import matview  # noqa: E402

CHILD = TESTS / "reliability_child.py"


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


class Child:
    """A child process and the lines it printed (read by a thread)."""

    def __init__(self, *args: object) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(),
            cwd=str(ROOT),
        )
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())
            if line.startswith("READY"):
                self.ready.set()
        self.ready.set()

    def finish(self, timeout: float) -> bool:
        """Wait for the child; False (and killed) when it is still running after `timeout`."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return False
        self.reader.join(timeout=10)
        return True

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.reader.join(timeout=10)

    def stderr(self) -> str:
        assert self.proc.stderr is not None
        return self.proc.stderr.read() if self.proc.poll() is not None else ""

    def numbers(self, tag: str) -> set[int]:
        return {int(line.split()[1]) for line in self.lines if line.startswith(tag + " ")}


def kill_campaign(directory: Path, kills: int, seed: int, tally: Tally) -> int:
    """SIGKILL the workload child `kills` times, alternating journal modes; the kill count."""
    rng = random.Random(seed)
    done = 0
    for journal in ("WAL", "DELETE"):
        share = kills // 2 + (kills % 2 if journal == "WAL" else 0)
        if not share:
            continue
        path = directory / f"kills-{journal.lower()}.db"
        setup(path, journal)
        ledger = Ledger()
        for number in range(share):
            first = (number + 1) * 1_000_000
            child = Child("kill", path, first, 0, rng.randrange(1 << 30))
            child.ready.wait(timeout=60)
            time.sleep(rng.uniform(0.02, 1.2))
            child.kill()
            if child.proc.returncode != -signal.SIGKILL:
                tally.problems.append(f"kill #{number}: the child died by itself: {child.stderr()[-2000:]}")
                tally.wrong += 1
                return done
            committed = child.numbers("C")
            ledger.committed |= committed
            ledger.maybe |= child.numbers("B") - committed
            ledger.next_txn = first
            verdict = check_file(path, journal, ledger, f"seed={seed} {journal} kill #{number}")
            tally.add(verdict)
            done += 1
            if verdict.problems():
                return done
    return done


class ReaderPauses(threading.Thread):
    """Readers that all pause now and then, so the WAL can restart: every `every` seconds the
    ``<db>.pause`` file exists for `length` seconds, and the readers wait between two reads while
    it does. SQLite's automatic checkpoints then complete and the next writer restarts the log.
    Readers that never all pause starve them (the WAL of 4 × 10,000 transactions grew to 38 GB):
    SQLite's checkpoint starvation, whoever the readers are. A checkpointer of the bench's own
    (`wal_checkpoint(TRUNCATE)` every 10 s) made it worse: waiting for the write lock that busy
    writers hold, it kept the checkpoint lock, and the writers' own checkpoints could not run."""

    def __init__(self, path: Path, every: float, length: float) -> None:
        super().__init__(daemon=True)
        self.path, self.every, self.length = path, every, length
        self.flag = Path(str(path) + ".pause")
        self.done = threading.Event()
        self.pauses = 0
        self.largest_wal = 0

    def run(self) -> None:
        wal = Path(str(self.path) + "-wal")
        while not self.done.wait(self.every):
            self.largest_wal = max(self.largest_wal, wal.stat().st_size if wal.exists() else 0)
            self.flag.touch()
            self.pauses += 1
            self.done.wait(self.length)
            self.flag.unlink(missing_ok=True)


def concurrency(directory: Path, writers: int, txns: int, seed: int, tally: Tally, pause_every: float = 0.0) -> int:
    """`writers` processes × `txns` transactions on one WAL file, with readers (pausing together
    for 1 s every `pause_every` seconds when set: `ReaderPauses`); the number of transactions
    committed."""
    rng = random.Random(seed)
    path = directory / "concurrent.db"
    setup(path, "WAL")
    stop = Path(str(path) + ".stop")
    stop.unlink(missing_ok=True)
    deadline = max(600.0, txns * 0.5)  # (a deadlock never ends; a loaded machine is slow)
    kinds = ["writer" if w % 2 == 0 else "stock_writer" for w in range(writers)]
    children = [Child(kind, path, (w + 1) * 10_000_000, txns, rng.randrange(1 << 30)) for w, kind in enumerate(kinds)]
    readers = [Child(kind, path, 0, 0, rng.randrange(1 << 30)) for kind in ("reader", "stock_reader")]
    pauses = ReaderPauses(path, pause_every, 1.0) if pause_every else None
    if pauses is not None:
        pauses.start()
    start = time.monotonic()
    for kind, child in zip(kinds, children, strict=True):
        if not child.finish(deadline - (time.monotonic() - start)):
            tally.problems.append(f"a {kind} did not finish within {deadline:.0f} s (deadlock?)")
            tally.wrong += 1
        elif child.proc.returncode != 0:
            tally.problems.append(f"a {kind} failed: {child.stderr()[-2000:]}")
            tally.wrong += 1
    stop.touch()
    if pauses is not None:
        pauses.done.set()
        pauses.join()
        print(f"  readers paused {pauses.pauses} times; largest WAL file seen {pauses.largest_wal / 1e6:.0f} MB")
    for reader in readers:
        if not reader.finish(120) or reader.proc.returncode != 0:
            tally.problems.append(f"a reader failed: {reader.stderr()[-2000:]}")
            tally.wrong += 1
    elapsed = time.monotonic() - start
    ledger = Ledger()
    locked = 0
    for kind, child in zip([*kinds, "reader", "stock_reader"], children + readers, strict=True):
        ledger.committed |= child.numbers("C")
        done = [line for line in child.lines if line.startswith("DONE")]
        leaked = int(done[-1].split()[2]) if done else 0
        print(f"  {kind}: {done[-1] if done else 'no DONE line'}")
        if kind in ("writer", "reader"):
            locked += leaked
    if locked:
        examples = [line for c in children + readers for line in c.lines if line.startswith("L ")]
        for line in examples[:40]:
            print("   ", line[:400])
        examples = examples[:3]
        tally.problems.append(f"'database is locked' reached a matview program {locked} times: {examples}")
        tally.wrong += locked
    verdict = check_file(path, "WAL", ledger, f"seed={seed} concurrency")
    tally.add(verdict)
    conn = matview.connect(str(path))
    try:
        extra = Verdict()
        check_views(conn, extra, "concurrency (final)")
        tally.add(extra)
    finally:
        conn.close()
    committed = len(ledger.committed)
    print(f"  concurrency: {committed} transactions in {elapsed:.1f} s ({committed / max(elapsed, 1e-9):.0f}/s)")
    return committed


def big_views_run(directory: Path, rows: int, seed: int, tally: Tally) -> None:
    """Bounded memory and Ctrl-C on views over a `rows`-row table (see the module docstring)."""
    rng = random.Random(seed)
    path, pristine = directory / "big.db", directory / "big-pristine.db"
    for leftover in [*directory.glob("big.db*"), *directory.glob("big-pristine.db*")]:
        leftover.unlink()
    began = time.monotonic()
    big_views.build(path, rows)
    shutil.copyfile(path, pristine)
    print(f"big: {rows} rows built in {time.monotonic() - began:.0f} s ({path.stat().st_size >> 20} MB)", flush=True)
    timeout = max(600.0, rows / 2000)
    steps = big_views.measure(path, timeout * 4)
    reports: dict[tuple[str, str], int] = {}
    for kind, view, seconds, peak, count in steps:
        print(f"  {kind} {view}: {seconds:.1f} s, peak RSS {peak / 1024:.0f} MB ({count} progress reports)", flush=True)
        reports[(kind, view)] = count
    print(f"  file: {path.stat().st_size >> 20} MB with the views", flush=True)
    # SIGINT at a random progress report of the statement (its count measured above)
    for kind, target, views in (("refresh", path, list(big_views.VIEWS)), ("create", pristine, [])):
        before = big_views.fingerprint(target)
        for view in big_views.VIEWS:
            at = rng.randint(1, max(1, reports.get((kind, view), 2) - 1))
            outcome, usable, err = big_views.interrupt(target, kind, view, at, timeout)
            print(f"  {kind.upper()} {view}, SIGINT at progress report {at}: {outcome}", flush=True)
            problems = [] if outcome.startswith("OUTCOME interrupted") and usable else [f"{outcome} {err[-2000:]}"]
            problems += big_views.check_unchanged(target, before, views, f"{kind.upper()} {view} interrupted")
            tally.problems += problems
            tally.wrong += len(problems)
            tally.views_checked += len(views)
    print(f"big: done in {time.monotonic() - began:.0f} s", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", type=int, default=1000)
    parser.add_argument("--powercuts", type=int, default=200)
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--txns", type=int, default=10_000)
    parser.add_argument(
        "--busy-timeout-ms",
        type=int,
        default=30_000,
        help="busy timeout of every concurrent client, matview and stock alike (SQLite gives up after it)",
    )
    parser.add_argument(
        "--reader-pause-every",
        type=float,
        default=10.0,
        help="seconds between the 1 s pauses the readers of the concurrency run take together (0: never)",
    )
    parser.add_argument("--big-rows", type=int, default=0, help="rows of the big-view run (0: skip it)")
    parser.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    parser.add_argument("--dir", type=Path, default=None, help="where the files go (default: a temp dir)")
    args = parser.parse_args()
    os.environ["RELIABILITY_BUSY_TIMEOUT_MS"] = str(args.busy_timeout_ms)  # (read by the concurrent children)
    directory = args.dir or Path(tempfile.mkdtemp(prefix="matview-reliability-"))
    directory.mkdir(parents=True, exist_ok=True)
    print(f"seed={args.seed} dir={directory}", flush=True)
    tally = Tally()
    kills = txns = 0
    started = time.monotonic()
    if args.faults:
        for index, journal in enumerate(("WAL", "DELETE")):
            share = args.faults // 2 + (args.faults % 2 if index == 0 else 0)
            if share:
                fault_campaign(directory, journal, share, args.seed + index, tally)
        print(
            f"faults: {tally.faults} in {time.monotonic() - started:.0f} s; absorbed: {dict(tally.silent)}", flush=True
        )
    if args.powercuts:
        plans = [(j, torn) for j in ("WAL", "DELETE") for torn in (False, True)]
        for index, (journal, torn) in enumerate(plans):
            share = args.powercuts // len(plans) + (1 if index < args.powercuts % len(plans) else 0)
            if share:
                power_campaign(directory, journal, share, args.seed + 10 + index, tally, torn=torn)
        print(f"power cuts: {tally.powercuts} ({time.monotonic() - started:.0f} s so far)", flush=True)
    if args.kills:
        kills = kill_campaign(directory, args.kills, args.seed + 20, tally)
        print(f"kills: {kills} ({time.monotonic() - started:.0f} s so far)", flush=True)
    if args.writers and args.txns:
        txns = concurrency(directory, args.writers, args.txns, args.seed + 30, tally, args.reader_pause_every)
    if args.big_rows:
        big_views_run(directory, args.big_rows, args.seed + 40, tally)
    for problem in tally.problems[:20]:
        print("PROBLEM:", problem[:3000])
    print(
        f"faults={tally.faults} powercuts={tally.powercuts} kills={kills} txns={txns} "
        f"views_checked={tally.views_checked} lost={tally.lost} wrong={tally.wrong}"
    )
    return 1 if tally.lost or tally.wrong or tally.problems else 0


if __name__ == "__main__":
    sys.exit(main())
