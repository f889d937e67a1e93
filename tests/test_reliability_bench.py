"""bench/reliability.py runs end to end (tiny numbers) and prints its summary line last."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


ARGS = "--faults 2 --powercuts 1 --kills 1 --writers 2 --txns 10 --seed 7"


def test_reliability_script_smoke(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "reliability.py"), *ARGS.split(), "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(ROOT),
    )
    last = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    match = re.fullmatch(
        r"faults=(\d+) powercuts=(\d+) kills=(\d+) txns=(\d+) views_checked=(\d+) lost=(\d+) wrong=(\d+)", last
    )
    assert match, last
    faults, powercuts, kills, txns, checked, lost, wrong = map(int, match.groups())
    assert (faults, powercuts, kills, txns, lost, wrong) == (2, 1, 1, 20, 0, 0), last
    assert checked > 0
