"""The change feed: committed ΔVs delivered after COMMIT, in commit order, never rolled-back work."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import matview
from matview.feed import Change


def _open(tmp_path: Path, mode: str) -> matview.Connection:
    conn = matview.connect(str(tmp_path / "feed.db"))
    conn.execute("CREATE TABLE t(g TEXT, x INTEGER)")
    conn.execute(
        f"CREATE MATERIALIZED VIEW totals WITH (maintenance = '{mode}') AS SELECT g, sum(x) AS s FROM t GROUP BY g"
    )
    return conn


def _replay(changes: list[Change]) -> Counter[tuple[Any, ...]]:
    rows: Counter[tuple[Any, ...]] = Counter()
    for change in changes:
        for row, weight in change.rows:
            rows[row] += weight
    return +rows


def _rows(conn: matview.Connection) -> Counter[tuple[Any, ...]]:
    return Counter(conn.execute("SELECT * FROM totals").fetchall())


@pytest.mark.parametrize("mode", ["immediate", "deferred"])
def test_changes_replay_to_the_view(tmp_path: Path, mode: str) -> None:
    conn = _open(tmp_path, mode)
    got: list[Change] = []
    conn.subscribe("totals", got.append)
    conn.execute("INSERT INTO t VALUES ('a', 1)")
    with conn:
        conn.execute("INSERT INTO t VALUES ('a', 2)")
        conn.execute("INSERT INTO t VALUES ('b', 5)")
    conn.execute("UPDATE t SET x = 10 WHERE g = 'b'")
    conn.execute("DELETE FROM t WHERE x = 1")
    if mode == "deferred":
        assert got == []  # nothing folded yet: nothing delivered
        conn.flush()
    assert _replay(got) == _rows(conn) == Counter({("a", 2): 1, ("b", 10): 1})
    if mode == "immediate":
        assert got[0] == Change("totals", ((("a", 1), 1),))
        assert [len(c.rows) for c in got] == [1, 3, 2, 2]  # one change per commit, in commit order
        assert got[2].deleted == [("b", 5)] and got[2].inserted == [("b", 10)]


@pytest.mark.parametrize("mode", ["immediate", "deferred"])
def test_rolled_back_work_is_never_delivered(tmp_path: Path, mode: str) -> None:
    conn = _open(tmp_path, mode)
    subscription = conn.subscribe("totals")
    with pytest.raises(KeyError), conn:
        conn.execute("INSERT INTO t VALUES ('gone', 1)")
        conn.flush()  # folded inside the transaction, then rolled back
        raise KeyError
    # folded under a savepoint (RELEASE folds first), the savepoint's parent rolled back
    conn.execute("BEGIN")
    conn.execute("SAVEPOINT outer_sp")
    conn.execute("SAVEPOINT inner_sp")
    conn.execute("INSERT INTO t VALUES ('gone too', 1)")
    conn.execute("RELEASE inner_sp")
    conn.flush()
    conn.execute("ROLLBACK TO outer_sp")
    conn.execute("INSERT INTO t VALUES ('kept', 3)")
    conn.execute("COMMIT")
    if mode == "deferred":
        assert list(subscription) == []
    conn.flush()
    changes = list(subscription)
    assert _replay(changes) == _rows(conn) == Counter({("kept", 3): 1})
    # nothing delivered while the transaction is open
    conn.execute("BEGIN")
    conn.execute("INSERT INTO t VALUES ('later', 1)")
    conn.flush()
    assert list(subscription) == []
    conn.execute("COMMIT")
    assert [c.inserted for c in subscription] == [[("later", 1)]]


@pytest.mark.parametrize("mode", ["immediate", "deferred"])
def test_other_clients_commits_are_delivered(tmp_path: Path, mode: str) -> None:
    """A stock sqlite3 writer in another process; the matview connection folds its commits
    when it next reads (immediate views) or polls, and delivers them."""
    conn = _open(tmp_path, mode)
    subscription = conn.subscribe("totals")
    script = (
        "import sqlite3, sys\n"
        "db = sqlite3.connect(sys.argv[1])\n"
        "for i in range(3):\n"
        "    db.execute('INSERT INTO t VALUES (?, ?)', ('w', i + 1)); db.commit()\n"
    )
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "feed.db")], check=True)
    if mode == "immediate":
        conn.execute("SELECT count(*) FROM t").fetchall()  # a read folds what others committed
    changes = list(subscription.listen(timeout=0.3))
    assert _replay(changes) == Counter({("w", 6): 1}) == _rows(conn)


def test_views_over_views_refresh_and_unsubscribe(tmp_path: Path) -> None:
    conn = _open(tmp_path, "immediate")
    conn.execute("CREATE MATERIALIZED VIEW big AS SELECT g FROM totals WHERE s > 5")
    upper, lower = conn.subscribe("big"), conn.subscribe("totals")
    conn.execute("INSERT INTO t VALUES ('a', 3), ('b', 9)")
    assert [c.inserted for c in upper] == [[("b",)]]
    assert _replay(list(lower)) == _rows(conn)
    # a REFRESH delivers new rows − old rows (nothing, when the view was right)
    conn.execute("REFRESH MATERIALIZED VIEW totals")
    assert list(lower) == []
    lower.close()
    conn.execute("INSERT INTO t VALUES ('c', 1)")
    assert list(lower) == [] and list(upper) == []
    with pytest.raises(matview.Error):
        conn.subscribe("no_such_view")


def test_callback_may_write_and_order_holds(tmp_path: Path) -> None:
    """A callback that writes commits a new transaction; its change comes after the one being delivered."""
    conn = _open(tmp_path, "immediate")
    conn.execute("CREATE TABLE log(n INTEGER)")
    seen: list[list[tuple[Any, ...]]] = []

    def react(change: Change) -> None:
        seen.append(change.inserted)
        if change.inserted == [("a", 1)]:
            conn.execute("INSERT INTO t VALUES ('a', 1)")

    conn.subscribe("totals", react)
    conn.execute("INSERT INTO t VALUES ('a', 1)")
    assert seen == [[("a", 1)], [("a", 2)]]
