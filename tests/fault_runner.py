"""Fault and power-cut campaigns over the reliability workload (tests and bench/reliability.py).

A campaign runs the workload of `reliability_workload` through a `FaultVFS`, one step at a
time. Before a step it arms one fault at a random point of the operations that step was
measured to perform (its first run is a clean measurement), runs the step, and when the
fault fired checks: the step raised; the same connection still reads every view exactly;
after reopening (default VFS) the file passes `reliability_workload.check_file`.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import apsw
from faultvfs import FAULT_KINDS, FaultVFS
from reliability_workload import STEPS, Ledger, Verdict, check_file, check_views, open_connection, run_step, setup

import matview

IO_FAULTS = tuple(kind for kind in FAULT_KINDS if kind != "power")
_names = itertools.count()


@dataclass
class Tally:
    """What campaigns did and found; `problems` must stay empty."""

    faults: int = 0
    powercuts: int = 0
    views_checked: int = 0
    lost: int = 0
    wrong: int = 0
    silent: Counter[str] = field(default_factory=Counter)  # fired, yet the step returned normally
    problems: list[str] = field(default_factory=list)

    def add(self, verdict: Verdict) -> None:
        self.views_checked += verdict.views_checked
        self.lost += len(verdict.lost)
        self.wrong += len(verdict.wrong)
        self.problems += verdict.problems()


def _close(conn: matview.Connection) -> None:
    try:
        conn.apsw.close(True)  # (forced: after a fault or a power cut, close may report errors)
    except apsw.Error:
        pass


def _counts_of(vfs: FaultVFS) -> dict[str, int]:
    return dict(vfs.counts)


def fault_campaign(directory: Path, journal: str, faults: int, seed: int, tally: Tally) -> None:
    """Inject `faults` I/O faults (EIO, short writes, full disk) into the workload."""
    rng = random.Random(seed)
    path = directory / f"faults-{journal.lower()}-{seed}.db"
    setup(path, journal)
    vfs = FaultVFS(f"faultvfs{next(_names)}")
    ledger = Ledger()
    span: dict[tuple[str, str], int] = {}  # (step, operation): how many the step did when measured
    conn = open_connection(path, vfs.name)
    injected = 0
    try:
        while injected < faults:
            step = rng.choice(STEPS)
            kind = rng.choice(IO_FAULTS)
            op = FAULT_KINDS[kind]
            known = span.get((step, op), 0)
            if known:
                vfs.arm(kind, rng.randint(1, known))
            before = _counts_of(vfs)
            raised: BaseException | None = None
            try:
                run_step(conn, step, rng, ledger, journal)
            except (apsw.Error, matview.Error) as exc:
                raised = exc
            fired, where = vfs.fired, vfs.injected[-1] if vfs.injected else ""
            vfs.disarm()
            for name, count in vfs.counts.items():
                span[(step, name)] = max(span.get((step, name), 0), count - before[name])
            context = f"seed={seed} {journal} fault #{injected} {kind} in {step} ({where})"
            if not fired:
                if raised is not None:
                    tally.problems.append(f"{context}: raised with no fault: {raised!r}")
                continue
            injected += 1
            tally.faults += 1
            if raised is None:
                tally.silent[f"{kind} in {step}"] += 1
            same = Verdict()
            try:
                if not conn.apsw.get_autocommit():
                    tally.problems.append(f"{context}: a transaction was left open after {raised!r}")
                    conn.apsw.execute("ROLLBACK")
                check_views(conn, same, f"{context} (same connection)")
            except (apsw.Error, matview.Error) as exc:
                same.wrong.append(f"{context}: the connection is unusable: {exc!r}")
            tally.add(same)
            _close(conn)
            verdict = check_file(path, journal, ledger, context)
            tally.add(verdict)
            if verdict.problems():
                return
            conn = open_connection(path, vfs.name)
    finally:
        _close(conn)
        vfs.unregister()


def power_campaign(
    directory: Path, journal: str, cuts: int, seed: int, tally: Tally, *, torn: bool = False, synchronous: str = "FULL"
) -> None:
    """Cut the power `cuts` times at a random write of the workload: unsynced writes are
    dropped (with `torn`, a random subset of them survives). (`synchronous=OFF` shows that
    the harness can see a loss: SQLite then promises nothing.)"""
    rng = random.Random(seed)
    path = directory / f"power-{journal.lower()}-{'torn' if torn else 'clean'}-{seed}.db"
    setup(path, journal)
    vfs = FaultVFS(f"powervfs{next(_names)}", volatile=True)
    vfs.torn_rng = random.Random(seed + 1) if torn else None
    ledger = Ledger()
    writes_per_round = 0
    try:
        done = 0
        while done < cuts:
            steps = [rng.choice(STEPS) for _ in range(rng.randint(1, 6))]
            conn = open_connection(path, vfs.name, synchronous)
            before = vfs.counts["write"]
            if writes_per_round:
                vfs.arm("power", rng.randint(1, writes_per_round))
            try:
                for step in steps:
                    run_step(conn, step, rng, ledger, journal)
            except (apsw.Error, matview.Error) as exc:
                if not vfs.powered_off:
                    tally.problems.append(f"seed={seed} {journal}: {steps} raised without a power cut: {exc!r}")
            writes_per_round = max(writes_per_round, vfs.counts["write"] - before)
            cut = vfs.powered_off
            if not cut and vfs.fault is not None:  # the round wrote less than the aim: cut now
                vfs.power_cut(vfs.torn_rng)
                cut = True
            vfs.disarm()
            _close(conn)
            if not cut:
                continue
            vfs.power_on()
            done += 1
            tally.powercuts += 1
            verdict = check_file(path, journal, ledger, f"seed={seed} {journal} power cut #{done} in {steps}")
            tally.add(verdict)
            if verdict.problems():
                return  # (the file is damaged: going on would only repeat the finding)
    finally:
        vfs.unregister()
