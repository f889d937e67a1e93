"""MIN/MAX inside a subquery whose argument may hold equal but different values (5 and 5.0):
the exact twins (`matview.operators.exact_extrema`) return SQLite's extreme under BINARY, and
raise, stalling the view, where the extreme is tied between an INTEGER and a REAL (SQLite's
answer would follow its scan order). Differential, both modes, random writes, rollback, reopen."""

from __future__ import annotations

import random
from pathlib import Path

import apsw
import pytest
from oracle import assert_views_match, bag, create_views_both_modes, drive_write_mix

import matview


def _value(rng: random.Random) -> object:
    """A value of any storage class; integers even and reals odd halves, so none tie."""
    return rng.choice(
        [
            None,
            rng.randrange(-20, 20, 2),
            rng.randrange(-20, 20, 2) + 1.5,
            rng.choice(["a", "B", "é", "", "10"]),
            rng.choice([b"", b"\x00", b"a"]),
        ]
    )


def test_twins_agree_with_sqlite_where_no_extreme_ties() -> None:
    conn = matview.connect(":memory:")
    conn.execute("CREATE TABLE v(x)")
    rng = random.Random(7)
    for _ in range(200):
        conn.execute("DELETE FROM v")
        for _ in range(rng.randint(0, 6)):
            conn.execute("INSERT INTO v VALUES (?)", (_value(rng),))
        want = conn.execute("SELECT max(x), min(x) FROM v").fetchall()
        got = conn.execute("SELECT __dbsp_exact_max(x), __dbsp_exact_min(x) FROM v").fetchall()
        assert bag(got) == bag(want)


@pytest.mark.parametrize("values", [(5, 5.0), (5.0, 3, 5), (-1.0, -1, 7.5)])
def test_a_tie_of_equal_but_different_extremes_raises(values: tuple[object, ...]) -> None:
    conn = matview.connect(":memory:")
    conn.execute("CREATE TABLE v(x)")
    for value in values:
        conn.execute("INSERT INTO v VALUES (?)", (value,))
    function = "__dbsp_exact_max" if values != (-1.0, -1, 7.5) else "__dbsp_exact_min"
    with pytest.raises(apsw.SQLError, match="tied"):
        conn.execute(f"SELECT {function}(x) FROM v").fetchall()


SCHEMA = [
    "CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, x)",
    "CREATE TABLE s(id INTEGER PRIMARY KEY, k INTEGER, y)",
]

VIEWS = {
    "uncorrelated": "SELECT id FROM t WHERE x = (SELECT max(y) FROM s)",
    "correlated": "SELECT id, (SELECT min(y) FROM s WHERE s.k = t.k) AS m FROM t",
    "in_aggregate": "SELECT k, count(*), (SELECT max(y) FROM s WHERE s.k = t.k) FROM t GROUP BY k",
}


def _write(conn: matview.Connection, rng: random.Random) -> None:
    table = rng.choice("ts")
    kind = rng.random()
    if kind < 0.5:
        conn.execute(
            f"INSERT INTO {table}(k, {'x' if table == 't' else 'y'}) VALUES (?, ?)", (rng.randint(1, 4), _value(rng))
        )
    elif kind < 0.75:
        conn.execute(f"DELETE FROM {table} WHERE id % 5 = ?", (rng.randint(0, 4),))
    else:
        conn.execute(f"UPDATE {table} SET k = ? WHERE id % 4 = ?", (rng.randint(1, 4), rng.randint(0, 3)))


@pytest.mark.parametrize("seed", range(2))
def test_exact_extrema_follow_every_write(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "db.sqlite"
    conn = matview.connect(str(path))
    for sql in SCHEMA:
        conn.execute(sql)
    with conn:
        for _ in range(30):
            _write(conn, rng)
    live = create_views_both_modes(conn, VIEWS)
    conn = drive_write_mix(path, conn, live, _write, rng, steps=12, rolled_back_at=3)
    conn.close()


def test_a_tie_stalls_the_view_until_it_is_gone(tmp_path: Path) -> None:
    """Shown as a column, the tied extreme stalls the view; only compared (`x = (SELECT max(y)
    …)`, reached by value with SQLite's own max: `sql.value_reach`), 5 and 5.0 compare alike,
    so no row depends on which one SQLite meets first, and the view follows the tie."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in SCHEMA:
        conn.execute(sql)
    conn.execute("INSERT INTO s VALUES (1, 1, 5), (2, 1, 3)")
    conn.execute("INSERT INTO t VALUES (1, 1, 5), (2, 1, 5.0), (3, 1, 3)")
    shown = create_views_both_modes(conn, {"shown": "SELECT id, (SELECT max(y) FROM s) AS m FROM t"})
    compared = create_views_both_modes(conn, {"compared": VIEWS["uncorrelated"]})
    assert_views_match(conn, {**shown, **compared})
    with conn:
        conn.execute("INSERT INTO s VALUES (3, 1, 5.0)")
    for view in shown:
        with pytest.raises(matview.Error, match="tied"):
            conn.execute(f"SELECT * FROM {view}").fetchall()
    assert_views_match(conn, compared)
    with conn:
        conn.execute("DELETE FROM s WHERE id = 3")
    assert_views_match(conn, {**shown, **compared})
