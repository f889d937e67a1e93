"""I/O faults and power loss: nothing committed is lost and no view is wrong, whatever fails.

The fast CI version of ``bench/reliability.py``. The shim (`faultvfs.FaultVFS`) injects, at
random points of a mixed workload (writes, folds, flushes, CREATE/DROP, REFRESH, checkpoints,
reads), EIO on read/write/sync/truncate/lock, short writes and a full disk; or it drops the
writes not yet synced at a simulated power cut. After each: the error reached the caller,
the same connection still reads every view exactly, and the reopened file passes
`reliability_workload.check_file` (integrity, no committed transaction lost or torn, every
view equal to its SELECT, a write still folds). Seeded: a failure prints its seed.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import apsw
import pytest

_HERE = Path(__file__).resolve().parent
for _p in (str(_HERE), str(_HERE.parent)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from fault_runner import Tally, fault_campaign, power_campaign  # noqa: E402
from faultvfs import FaultVFS  # noqa: E402
from reliability_workload import VIEWS, open_connection, setup  # noqa: E402

import matview  # noqa: E402

#: MATVIEW_FAULT_SEED=n replays one run
SEED = int(os.environ.get("MATVIEW_FAULT_SEED", random.randrange(1 << 30)))


def assert_clean(tally: Tally, seed: int) -> None:
    assert not tally.problems, f"seed={seed}: {len(tally.problems)} problems, first:\n" + "\n".join(
        p[:2000] for p in tally.problems[:3]
    )
    assert tally.lost == 0 and tally.wrong == 0


@pytest.mark.parametrize("journal", ["WAL", "DELETE"])
def test_io_faults_lose_nothing_and_leave_no_view_wrong(tmp_path: Path, journal: str) -> None:
    tally = Tally()
    fault_campaign(tmp_path, journal, 100, SEED, tally)
    assert_clean(tally, SEED)
    assert tally.faults == 100
    # a fault the workload absorbed without an exception is SQLite's to absorb (a failed
    # checkpoint is retried later): never one of a write transaction
    assert not [what for what in tally.silent if what.endswith("in write")], (SEED, tally.silent)


@pytest.mark.parametrize("torn", [False, True], ids=["clean", "torn"])
@pytest.mark.parametrize("journal", ["WAL", "DELETE"])
def test_power_cut_loses_nothing_committed(tmp_path: Path, journal: str, torn: bool) -> None:
    tally = Tally()
    power_campaign(tmp_path, journal, 30, SEED, tally, torn=torn)
    assert_clean(tally, SEED)
    assert tally.powercuts == 30


def test_the_harness_sees_damage_when_sqlite_promises_nothing(tmp_path: Path) -> None:
    """With synchronous=OFF SQLite never syncs: a torn power cut must be seen to damage the
    file or lose commits, or the harness could not see it either when it matters."""
    tally = Tally()
    power_campaign(tmp_path, "DELETE", 40, SEED, tally, torn=True, synchronous="OFF")
    assert tally.problems, f"seed={SEED}: 40 torn power cuts without sync did no visible harm"


def _refresh_under(kind: str, after: int, path: Path) -> tuple[bool, BaseException | None]:
    vfs = FaultVFS(f"regress{kind}{after}")
    conn = open_connection(path, vfs.name)
    try:
        conn.execute("INSERT INTO t(txn, n, grp, val, note) VALUES (1, 1, 2, 3, 'x')")
        vfs.arm(kind, after)
        raised: BaseException | None = None
        try:
            conn.execute("REFRESH MATERIALIZED VIEW v_agg")
        except (apsw.Error, matview.Error) as exc:
            raised = exc
        return vfs.disarm(), raised
    finally:
        conn.apsw.close(True)
        vfs.unregister()


@pytest.mark.parametrize("kind", ["full", "write"])
def test_refresh_that_hits_a_full_disk_reports_it_and_marks_no_view(tmp_path: Path, kind: str) -> None:
    """Regression: SQLite rolls the whole transaction back on SQLITE_FULL (and some I/O
    errors), so the `ROLLBACK TO` of matview's savepoint failed with "no such savepoint",
    which hid the full disk; REFRESH took that for a view that cannot be rebuilt and wrote
    "needs refresh" into the catalog of a dependent view (v_over), in autocommit: a view
    broken for good by a transient full disk."""
    path = tmp_path / "refresh.db"
    setup(path, "WAL")
    for after in range(1, 400, 5):  # (every 5th write of the REFRESH: enough to hit each phase)
        fired, raised = _refresh_under(kind, after, path)
        if not fired:
            break
        assert raised is not None, f"{kind} at write {after}: REFRESH returned normally"
        assert "savepoint" not in str(raised), f"{kind} at write {after}: {raised!r}"
        conn = matview.connect(str(path))
        try:
            broken = [v.name for v in conn.registry.sync().values() if v.broken]
            assert not broken, f"{kind} at write {after}: views marked broken: {broken}"
            for name in VIEWS:
                conn.execute(f"SELECT * FROM {name}").fetchall()
        finally:
            conn.close()
