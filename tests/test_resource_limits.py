"""Ctrl-C during CREATE or REFRESH of a view over a big table (issue 9, resource limits; the
10M-row run with peak memory is ``bench/reliability.py --big-rows``): SIGINT to a real child
process mid-statement surfaces as KeyboardInterrupt (or a matview.Error), the connection
stays usable, and the file is as it was: integrity ok, the base table unchanged, no view
created and no ``__dbsp_*`` object left behind; after an interrupted REFRESH the old view is
still exact."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
for _p in (str(_HERE), str(_HERE.parent)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from big_views import VIEWS, build, check_unchanged, fingerprint, interrupt  # noqa: E402

import matview  # noqa: E402

ROWS = 200_000


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("big") / "big.db"
    build(path, ROWS)
    return path


def copy_of(source: Path, tmp_path: Path) -> Path:
    path = tmp_path / "big.db"
    path.write_bytes(source.read_bytes())
    return path


@pytest.mark.parametrize("view", list(VIEWS))
def test_ctrl_c_during_create_leaves_the_file_as_it_was(big_file: Path, tmp_path: Path, view: str) -> None:
    path = copy_of(big_file, tmp_path)
    before = fingerprint(path)
    at = random.randint(1, 3)
    outcome, usable, err = interrupt(path, "create", view, at, timeout=300)
    assert outcome.startswith("OUTCOME interrupted"), f"(SIGINT at report {at}) {outcome}: {err[-2000:]}"
    assert usable, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    assert check_unchanged(path, before, [], f"CREATE {view} interrupted at report {at}") == []


@pytest.mark.parametrize("view", list(VIEWS))
def test_ctrl_c_during_refresh_leaves_the_old_view(big_file: Path, tmp_path: Path, view: str) -> None:
    path = copy_of(big_file, tmp_path)
    conn = matview.connect(str(path))
    conn.execute(f"CREATE MATERIALIZED VIEW {view} AS {VIEWS[view]}")
    conn.close()
    before = fingerprint(path)
    at = random.randint(1, 3)
    outcome, usable, err = interrupt(path, "refresh", view, at, timeout=300)
    assert outcome.startswith("OUTCOME interrupted"), f"(SIGINT at report {at}) {outcome}: {err[-2000:]}"
    assert usable, err[-2000:]
    assert check_unchanged(path, before, [view], f"REFRESH {view} interrupted at report {at}") == []
    conn = matview.connect(str(path))  # and the view is still maintained
    conn.execute("UPDATE big SET val = val + 1 WHERE id % 1000 = 7")
    conn.execute("DELETE FROM big WHERE id % 997 = 0")
    conn.close()
    assert check_unchanged(path, fingerprint(path), [view], "after a write") == []
