#!/usr/bin/env python
"""Where the time of a 1-row write goes (issue 8): capture triggers, the fold's SQL, Python.

For each view and each 1-row write of bench_core (INSERT/UPDATE/DELETE, immediate mode), five
connections on identical copies of the same file run the same write in lockstep, timed
interleaved in one process (medians):

* raw       – plain apsw, no view (no triggers): SQLite's own cost of the write;
* wrapper   – `matview.connect`, no view: bench_core's baseline (the wrapper's own cost);
* capture   – plain apsw on a file with the view: the write with the capture triggers firing,
              nothing folded (what deferred mode pays);
* replay    – plain apsw on a file with the view, replaying the exact statements a matview
              connection ran for that write (recorded by a sixth, untimed connection): every SQL
              statement of the fold, with none of matview's Python;
* matview   – `matview.connect` with the view: what users get.

The differences say what each layer costs; `replay` over `wrapper` is the ratio a fold with no
Python at all would reach. WAL frames per commit (pages written) are counted too: they are
most of a commit's cost. See bench/README.md.

    python bench/bench_breakdown.py [--rows 100000] [--iters 300] [--views V1,V2,V4]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

from bench_core import OPS, VIEWS, build_base, copy_db, gen_write_params, interleave, open_mv, open_raw  # noqa: E402


class Arm:
    """One connection of the lockstep loop (bench_core's `interleave` takes it)."""

    def __init__(self, key: str, conn: Any) -> None:
        self.key, self.conn, self.error = key, conn, None
        self.samples: dict[str, list[int]] = {op: [] for op in OPS}

    def fail(self, phase: str, exc: BaseException) -> None:
        self.error = f"{phase}: {type(exc).__name__}: {exc}"

    def median_us(self, op: str) -> float:
        return statistics.median(self.samples[op]) / 1000


def timed(run: Callable[[], Any]) -> int:
    start = time.perf_counter_ns()
    run()
    return time.perf_counter_ns() - start


def raw_write(conn: Any, sql: str, params: Any) -> None:
    conn.execute("BEGIN")
    conn.execute(sql, params)
    conn.execute("COMMIT")


def mv_write(conn: Any, sql: str, params: Any) -> None:
    with conn:
        conn.execute(sql, params)


def lockstep(recorder: Any, recorded: list[tuple[str, Any]], sql: str, ps: list[Any]) -> Callable[[Any, int], int]:
    """`interleave`'s step for write `sql` with parameters `ps[i]`: the recorder (untimed) runs
    each write first, and the replay arm replays the statements it ran."""
    done = -1

    def step(arm: Any, i: int) -> int:
        nonlocal done
        if done != i:
            recorded.clear()
            mv_write(recorder, sql, ps[i])
            done = i
        if arm.key in ("raw", "capture"):
            return timed(lambda: raw_write(arm.conn, sql, ps[i]))
        if arm.key == "replay":
            return timed(lambda: [arm.conn.execute(statement, bindings).fetchall() for statement, bindings in recorded])
        return timed(lambda: mv_write(arm.conn, sql, ps[i]))

    return step


def frames_per_commit(path: str, conn: Any, write: Callable[[int], None], commits: int = 100) -> float:
    """WAL frames one commit of `write` appends (the WAL checkpointed and truncated first)."""
    raw = getattr(conn, "apsw", conn)
    raw.wal_autocheckpoint(0)
    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page = raw.execute("PRAGMA page_size").fetchone()[0]
    for i in range(commits):
        write(i)
    frames = os.path.getsize(path + "-wal") / (page + 24) / commits
    raw.wal_autocheckpoint(1000)
    return frames


def measure_view(name: str, select: str, base: str, tmp: str, args: argparse.Namespace) -> list[str]:
    viewed = os.path.join(tmp, f"{name}.db")
    copy_db(base, viewed)
    maker = open_mv(viewed)
    maker.execute(f"CREATE MATERIALIZED VIEW v AS {select}")
    maker.close()
    paths = {
        key: copy_db(base if key in ("raw", "wrapper") else viewed, os.path.join(tmp, f"{name}_{key}.db"))
        for key in ("raw", "wrapper", "capture", "replay", "recorder", "matview")
    }
    openers = {
        "raw": open_raw,
        "wrapper": open_mv,
        "capture": open_raw,
        "replay": open_raw,
        "recorder": open_mv,
        "matview": open_mv,
    }
    conns = {key: openers[key](path) for key, path in paths.items()}
    recorded: list[tuple[str, Any]] = []
    conns["recorder"].apsw.exec_trace = lambda _cursor, sql, bindings: recorded.append((sql, bindings)) or True

    params, _ = gen_write_params(random.Random(7), args.rows, args.iters + args.warmup)
    timed_keys = ("raw", "wrapper", "capture", "replay", "matview")
    arms = [Arm(key, conns[key]) for key in timed_keys]
    lines = []
    for op, sql in OPS.items():
        interleave(arms, args.iters, args.warmup, op, lockstep(conns["recorder"], recorded, sql, params[op]))
        failed = [f"{a.key}: {a.error}" for a in arms if a.error]
        if failed:
            return [f"{name} {op}: " + "; ".join(failed)]
        m = {a.key: a.median_us(op) for a in arms}
        lines.append(
            f"{name:4} {op:6} | {m['raw']:6.1f} {m['wrapper']:7.1f} {m['capture']:7.1f} {m['replay']:6.1f} "
            f"{m['matview']:7.1f} | {m['capture'] - m['raw']:7.1f} {m['replay'] - m['capture']:8.1f} "
            f"{m['matview'] - m['replay'] - (m['wrapper'] - m['raw']):7.1f} | "
            f"{m['matview'] / m['wrapper']:5.2f}x {(m['replay'] + m['wrapper'] - m['raw']) / m['wrapper']:5.2f}x "
            f"{m['capture'] / m['raw']:5.2f}x"
        )
    insert = OPS["INSERT"]
    frames = {
        key: frames_per_commit(
            paths[key],
            conns[key],
            lambda i, key=key: (mv_write if key in ("wrapper", "matview") else raw_write)(
                conns[key], insert, (1, 3 * i, "s")
            ),
        )
        for key in ("raw", "capture", "matview")
    }
    lines.append(
        f"{name:4} WAL frames per 1-row INSERT commit: no view {frames['raw']:.1f}, "
        f"capture only {frames['capture']:.1f}, immediate fold {frames['matview']:.1f}"
    )
    for conn in conns.values():
        conn.close()
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=1000, help="untimed writes first (each WAL fills once)")
    parser.add_argument("--views", default="V1,V2,V4")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="matview-breakdown-") as tmp:
        base = os.path.join(tmp, "base.db")
        build_base(base, args.rows, seed=1)
        print(
            f"1-row write transactions, immediate mode, {args.rows} rows; medians in µs "
            f"({args.iters} interleaved iterations, load {os.getloadavg()[0]:.2f})"
        )
        print(
            "view op     |    raw wrapper capture replay matview | triggers fold-SQL  python | "
            "ratio  floor  capture/raw"
        )
        for name in args.views.split(","):
            for line in measure_view(name, VIEWS[name], base, tmp, args):
                print(line, flush=True)
    print(
        "triggers = capture - raw; fold-SQL = replay - capture (statements and the pages they write);\n"
        "python = matview - replay - (wrapper - raw); ratio = matview / wrapper (bench_core's);\n"
        "floor = the ratio with no Python in the fold: (replay + wrapper - raw) / wrapper."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
