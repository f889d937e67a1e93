"""The statements a fold runs at every write on a view's state are prepared once, not at
every write.

SQLite (built with STAT4, as apsw's is) prepares a statement again at every binding when its
ORDER BY or GROUP BY meets ``column = ?``; the MIN/MAX lookups of the ordered state did, at
~5 µs and seven authorizer calls each (two or four per 1-row write of a MIN/MAX view). SQLite
asks the authorizer only while it prepares, so a state table the authorizer is told about while
writes repeat is read by a statement prepared again. (Statements a fold runs only now and then
may still be prepared again: apsw's statement cache keeps the last 100 statements run.) No
timing is asserted."""

from __future__ import annotations

import random
from pathlib import Path

import apsw
import pytest

import matview
from matview.storage.ddl_guard import DdlGuard

VIEWS = {
    "sums": "SELECT g, count(*), sum(x), avg(x) FROM t GROUP BY g",
    "extrema": "SELECT g, min(x), max(x) FROM t GROUP BY g",
}


@pytest.mark.parametrize("maintenance", ["immediate", "deferred"])
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_steady_writes_prepare_no_statement_on_state_again(tmp_path: Path, view: str, maintenance: str) -> None:
    conn = matview.connect(str(tmp_path / "t.db"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, g INT, x INT)")
    rnd = random.Random(7)
    with conn:
        rows = [(i, rnd.randrange(20), rnd.randrange(100)) for i in range(2000)]
        conn.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    conn.execute(f"CREATE MATERIALIZED VIEW v WITH (maintenance = '{maintenance}') AS {VIEWS[view]}")
    next_id = [10_000]

    def write(k: int) -> None:
        with conn:
            if k % 3 == 0:
                next_id[0] += 1
                conn.execute("INSERT INTO t VALUES (?, ?, ?)", (next_id[0], rnd.randrange(20), rnd.randrange(100)))
            elif k % 3 == 1:
                changed = (rnd.randrange(20), rnd.randrange(100), rnd.randrange(2000))
                conn.execute("UPDATE t SET g = ?, x = ? WHERE id = ?", changed)
            else:
                conn.execute("DELETE FROM t WHERE id = ?", (rnd.randrange(2000),))
        if maintenance == "deferred":
            conn.flush()

    raw = conn.apsw
    previous = raw.authorizer
    told: list[str] = []

    def counting(action: int, name: str | None, *rest: str | None) -> int:
        if action == apsw.SQLITE_READ and name and name.startswith(("__dbsp_state_", "__dbsp_ostate_")):
            told.append(name)
        return previous(action, name, *rest) if previous else apsw.SQLITE_OK

    # (set before the writes: SQLite expires every prepared statement when the authorizer changes)
    raw.authorizer = counting
    try:
        for k in range(12):  # (each statement's first preparation)
            write(k)
        told.clear()
        for k in range(30):
            write(k)
    finally:
        raw.authorizer = previous
    assert told == []
    assert sorted(conn.execute("SELECT * FROM v").fetchall()) == sorted(conn.execute(VIEWS[view]).fetchall())


@pytest.mark.fall_back_to_whole
def test_a_view_recomputed_whole_leaves_the_users_statements_prepared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fold of a view recomputed whole checks what its SELECT reads under an authorizer of
    its own. It set it as the connection's authorizer, and SQLite expires every prepared
    statement of a connection whose authorizer is set: the user's UPDATE (with its capture
    triggers) was prepared again at every write. The guard now asks that authorizer instead."""
    told: list[str] = []
    call = DdlGuard.__call__

    def counting(self: DdlGuard, action: int, name: str | None, *rest: str | None) -> int:
        if action == apsw.SQLITE_UPDATE and name == "t":
            told.append(name)
        return call(self, action, name, *rest)

    monkeypatch.setattr(DdlGuard, "__call__", counting)
    conn = matview.connect(str(tmp_path / "t.db"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, g INT, x INT)")
    with conn:
        conn.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i, i % 7, i) for i in range(200)])
    select = "SELECT id, sum(x) OVER (PARTITION BY g) FROM t"  # (a window: recomputed whole)
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {select}")

    def write(k: int) -> None:
        with conn:
            conn.execute("UPDATE t SET x = ? WHERE id = ?", (k, k % 200))

    for k in range(3):  # (the first folds check once what the SELECT reads: see `_check_only_reads`)
        write(k)
    told.clear()
    for k in range(3, 20):
        write(k)
    assert told == []
    assert sorted(conn.execute("SELECT * FROM v").fetchall()) == sorted(conn.execute(select).fetchall())
