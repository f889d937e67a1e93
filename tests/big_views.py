"""Views over a big table (issue 9, resource limits): the file, its fingerprint, and the checks
after an interrupted CREATE or REFRESH.

Shared by ``tests/test_resource_limits.py`` (200k rows) and ``bench/reliability.py --big-rows``
(10M rows); the child process that runs the statements is ``tests/big_view_child.py``.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from oracle import assert_view_matches

import matview

#: an aggregate view (state: one accumulator row per group) and a MIN/MAX view (ordered
#: state: one row per distinct value of each group, as many as the table has rows)
VIEWS: dict[str, str] = {
    "big_agg": "SELECT grp, COUNT(*) AS n, SUM(val) AS s, AVG(val) AS a FROM big GROUP BY grp",
    "big_minmax": "SELECT grp, MIN(val) AS lo, MAX(val) AS hi, MAX(note) AS last_note FROM big GROUP BY grp",
}


def build(path: Path, rows: int, chunk: int = 1_000_000) -> None:
    """A table of `rows` deterministic rows (1,000 groups), inserted by SQLite in chunks."""
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE big(id INTEGER PRIMARY KEY, grp INTEGER NOT NULL, val INTEGER, note TEXT)")
    for start in range(0, rows, chunk):
        end = min(start + chunk, rows)
        raw.execute(
            "INSERT INTO big(id, grp, val, note) WITH RECURSIVE i(x) AS (SELECT ? UNION ALL SELECT x + 1 FROM i "
            "WHERE x < ?) SELECT x, (x * 7919) % 1000, (x * 2654435761) % 1000003 - 500000, "
            "printf('n%07d', (x * 40503) % 9999991) FROM i",
            (start + 1, end),
        )
        raw.commit()
    raw.close()


def fingerprint(path: Path) -> tuple[Any, ...]:
    """What must not change: the base table's rows (checksums) and every object of the file."""
    raw = sqlite3.connect(path)
    try:
        sums = raw.execute(
            "SELECT count(*), max(id), sum(grp), sum(val), sum(length(note)), sum(id * (val % 1000)) FROM big"
        ).fetchone()
        objects = raw.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name").fetchall()
        return (sums, tuple(objects))
    finally:
        raw.close()


def check_unchanged(path: Path, before: tuple[Any, ...], views: list[str], context: str) -> list[str]:
    """The problems of a file that should be as it was: integrity, the same base rows and
    objects (no leftover ``__dbsp_*`` table, trigger or index), `views` equal to their SELECT."""
    problems: list[str] = []
    raw = sqlite3.connect(path)
    try:
        result = raw.execute("PRAGMA integrity_check").fetchall()
        if result != [("ok",)]:
            problems.append(f"{context}: integrity_check: {result[:5]}")
    finally:
        raw.close()
    after = fingerprint(path)
    if after[0] != before[0]:
        problems.append(f"{context}: the base table changed: {before[0]} -> {after[0]}")
    if after[1] != before[1]:
        gone = sorted({o[1] for o in before[1]} - {o[1] for o in after[1]})
        new = sorted({o[1] for o in after[1]} - {o[1] for o in before[1]})
        problems.append(f"{context}: objects changed: new {new[:10]}, gone {gone[:10]}")
    conn = matview.connect(str(path))
    try:
        for name in views:
            try:
                assert_view_matches(conn, name, VIEWS[name])
            except (AssertionError, matview.Error) as exc:
                problems.append(f"{context}: {name}: {str(exc)[:500]}")
    finally:
        conn.close()
    return problems


CHILD = Path(__file__).resolve().parent / "big_view_child.py"


def _child(*args: str) -> subprocess.Popen[str]:
    env = dict(os.environ)
    root = str(CHILD.parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return subprocess.Popen(
        [sys.executable, str(CHILD), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def measure(path: Path, timeout: float) -> list[tuple[str, str, float, int, int]]:
    """CREATE then REFRESH every view in a child: (statement, view, seconds, peak RSS kB,
    progress reports) each, the first row the child's RSS before any statement."""
    child = _child("measure", str(path), *VIEWS)
    out, err = child.communicate(timeout=timeout)
    if child.returncode != 0:
        raise RuntimeError(f"the measuring child failed: {err[-3000:]}")
    return [
        (words[1], words[2], float(words[3]), int(words[4]), int(words[5]))
        for words in (line.split() for line in out.splitlines())
        if words and words[0] == "T"
    ]


def interrupt(path: Path, kind: str, view: str, after_reports: int, timeout: float) -> tuple[str, bool, str]:
    """Run `kind` ("create" or "refresh") of `view` in a child and send it SIGINT at its
    `after_reports`-th progress report (where it waits for it): (its outcome line, whether
    it read the file again afterwards, its stderr)."""
    child = _child(kind, str(path), view, str(after_reports))
    assert child.stdout is not None and child.stderr is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    for line in child.stdout:
        lines.append(line.strip())
        if line.startswith("P ") and int(line.split()[1]) == after_reports:
            child.send_signal(signal.SIGINT)
        if time.monotonic() > deadline:
            child.kill()
            break
    child.wait(timeout=60)
    err = child.stderr.read()
    outcome = next((line for line in lines if line.startswith("OUTCOME")), f"no outcome (exit {child.returncode})")
    return outcome, "USABLE" in lines, err
