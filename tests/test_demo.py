"""The README's first command runs `examples/demo.py`: it must finish, every view equal to its
SELECT, whatever its random data (a view with no row once crashed it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parent.parent / "examples" / "demo.py"


@pytest.mark.parametrize("run", range(3))
def test_the_demo_runs_and_every_view_is_exact(tmp_path: Path, run: int) -> None:
    done = subprocess.run(
        [sys.executable, str(DEMO), str(tmp_path / f"shop{run}.db")], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "DIFFERS" not in done.stdout
    assert done.stdout.count("equals its SELECT") >= 5
