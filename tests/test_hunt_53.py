"""Hunt 53: hostile tests of two changes — a LEFT JOIN to a select-project-join derived table
over one table inlined as a LEFT JOIN of that table (`matview.sql.inline`), and MIN/MAX keeping
-0.0 apart from 0.0 (F6: `storage_kind` 5, a tie at the extreme heals as 1 vs 1.0).

Its four wrong answers are fixed, each test failing before its fix: a set-at-a-time fold (64
changed rows or more) missed a -0.0/0.0 tie (its tie check counted `typeof`, not storage kinds);
MIN/MAX(DISTINCT u) kept a deleted zero's sign (now MIN/MAX(u), which SQLite means); a collated
MIN/MAX beside another kept an updated row's old number (1 → 1.0: `state.identical`). The other
tests are regression checks of shapes that held. oracle.bag cannot tell -0.0 from 0.0, so signs are compared with
math.copysign (`signed`)."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest
from oracle import assert_views_match, check_write_mix, column_names, create_views_both_modes

import matview


def signed(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows with each REAL tagged by its sign and each value by its type."""
    return sorted(
        (
            tuple((type(v).__name__, v, math.copysign(1.0, v) if isinstance(v, float) else None) for v in row)
            for row in rows
        ),
        key=repr,
    )


def _view_matches_or_refuses(conn: matview.Connection, view: str, select: str) -> None:
    """The view reads as its SELECT (signs of zeros included), or reading it raises
    matview.Error (a tie it does not guess, with recompute = 'never')."""
    try:
        got = conn.execute(f"SELECT * FROM {view}").fetchall()
    except matview.Error:
        return
    want = conn.execute(select).fetchall()
    assert signed(got) == signed(want), f"{view}: {got} != {want}"


# --- Change 2: -0.0 in MIN/MAX ------------------------------------------------------------


@pytest.mark.parametrize("mode", ["immediate", "deferred"])
def test_set_at_a_time_fold_misses_signed_zero_tie(tmp_path: Path, mode: str) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, g INT, u)")
    select = "SELECT g, MIN(u), MAX(u) FROM t GROUP BY g"
    conn.execute(f"CREATE MATERIALIZED VIEW v WITH (maintenance = '{mode}', recompute = 'never') AS {select}")
    with conn:
        conn.execute("INSERT INTO t VALUES (2, 1, -0.0)")  # logged first, but second in rowid order
        conn.execute("INSERT INTO t VALUES (1, 1, 0.0)")
        # 62 more rows of another group: 64 delta rows take the set-at-a-time path
        conn.execute(
            "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 62) "
            "INSERT INTO t (g, u) SELECT 2, i FROM s"
        )
    # SQLite: group 1's MIN and MAX are 0.0 (row 1, met first); matview shows -0.0 and raises nothing
    _view_matches_or_refuses(conn, "v", select)
    conn.close()


def test_deferred_backlog_misses_signed_zero_tie(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, g INT, u)")
    select = "SELECT g, MIN(u) FROM t GROUP BY g"
    conn.execute(f"CREATE MATERIALIZED VIEW v WITH (maintenance = 'deferred', recompute = 'never') AS {select}")
    conn.execute("INSERT INTO t VALUES (2, 1, -0.0)")
    conn.execute("INSERT INTO t VALUES (1, 1, 0.0)")
    for i in range(62):
        conn.execute("INSERT INTO t (g, u) VALUES (2, ?)", (i,))
    _view_matches_or_refuses(conn, "v", select)  # SQLite (1, 0.0); matview (1, -0.0)
    conn.close()


@pytest.mark.fall_back_to_whole
def test_set_at_a_time_signed_zero_tie_over_inlined_left_join_default_config(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE s (id INTEGER PRIMARY KEY)")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, g INT, u)")
    conn.execute("INSERT INTO s VALUES (1), (2)")
    select = (
        "SELECT s.id, MIN(x.u), MAX(x.u) FROM s LEFT JOIN (SELECT g, u FROM t WHERE u < 100) x ON x.g = s.id "
        "GROUP BY s.id"
    )
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {select}")
    assert "recomputed whole" not in conn.view("v").explain()
    with conn:
        conn.execute("INSERT INTO t VALUES (200, 1, 0.0)")  # logged first, second in rowid order
        conn.execute("INSERT INTO t VALUES (100, 1, -0.0)")
        conn.execute(
            "WITH RECURSIVE q(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM q WHERE i < 62) "
            "INSERT INTO t (id, g, u) SELECT 1000 + i, 2, i FROM q"
        )
    # SQLite: s.id 1 shows -0.0 (row 100 met first); matview shows 0.0, and a later write keeps it
    conn.execute("INSERT INTO t VALUES (5000, 2, 7)")
    got = conn.execute("SELECT * FROM v").fetchall()
    assert signed(got) == signed(conn.execute(select).fetchall())
    conn.close()


@pytest.mark.parametrize("mode", ["immediate", "deferred"])
def test_min_distinct_shows_deleted_zero_sign(tmp_path: Path, mode: str) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, u)")
    select = "SELECT MIN(DISTINCT u), MAX(DISTINCT u) FROM t"
    conn.execute(f"CREATE MATERIALIZED VIEW v WITH (maintenance = '{mode}') AS {select}")
    conn.execute("INSERT INTO t VALUES (1, 0.0)")
    conn.execute("INSERT INTO t VALUES (2, -0.0)")
    conn.execute("DELETE FROM t WHERE id = 1")
    # one row left, -0.0: SQLite says (-0.0, -0.0); matview says (0.0, 0.0)
    _view_matches_or_refuses(conn, "v", select)
    conn.close()


@pytest.mark.parametrize(("before", "after"), [(-0.0, 0.0), (1, 1.0)])
@pytest.mark.parametrize(
    ("column", "select"),
    [
        ("u COLLATE NOCASE", "SELECT MIN(u), MAX(u) FROM t"),
        ("u", "SELECT MIN(u), MAX(u COLLATE NOCASE) FROM t"),
    ],
)
def test_collated_min_max_keep_updated_rows_old_number(
    tmp_path: Path, column: str, select: str, before: Any, after: Any
) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute(f"CREATE TABLE t (id INTEGER PRIMARY KEY, {column})")
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {select}")
    conn.execute("INSERT INTO t VALUES (1, ?)", (before,))
    conn.execute("UPDATE t SET u = ?", (after,))  # one row: no tie, SQLite shows `after`
    assert "recomputed whole" not in conn.view("v").explain()
    _view_matches_or_refuses(conn, "v", select)
    conn.close()


def test_signed_zero_ties_small_folds_and_create(tmp_path: Path) -> None:
    """Regression: per-row folds and CREATE over existing rows, untyped/REAL/NUMERIC columns,
    bare columns, negated REALs — every read equals SQLite's, signs included, or raises."""
    for typ in ("", "REAL", "NUMERIC", "TEXT"):
        for number, agg in enumerate(("MIN(u), MAX(u)", "MIN(u), id", "MAX(u), id", "MIN(-u), MAX(-u)")):
            for populated in (False, True):
                conn = matview.connect(str(tmp_path / f"{typ}-{number}-{populated}.sqlite"))
                conn.execute(f"CREATE TABLE t (id INTEGER PRIMARY KEY, g INT, u {typ})")
                select = f"SELECT g, {agg} FROM t GROUP BY g"
                steps = [
                    "INSERT INTO t VALUES (1, 1, -0.0)",
                    "INSERT INTO t VALUES (2, 2, -0.0)",
                    "INSERT INTO t VALUES (3, 2, 0.0)",
                    "DELETE FROM t WHERE id = 2",
                    "INSERT INTO t VALUES (4, 3, 0.0)",
                    "INSERT INTO t VALUES (5, 3, -0.0)",
                    "DELETE FROM t WHERE id = 4",
                    "UPDATE t SET u = -u",
                    "UPDATE t SET u = 0 WHERE id = 5",
                ]
                if populated:
                    for sql in steps[:3]:
                        conn.execute(sql)
                conn.execute(f"CREATE MATERIALIZED VIEW v AS {select}")
                for sql in steps[3 if populated else 0 :]:
                    conn.execute(sql)
                    _view_matches_or_refuses(conn, "v", select)
                conn.close()


# --- Change 1: LEFT JOIN to a derived table, inlined --------------------------------------

SETUP = [
    "CREATE TABLE c(id INTEGER PRIMARY KEY, name TEXT, city TEXT COLLATE NOCASE, amount INT, u)",
    "CREATE TABLE o(id INTEGER PRIMARY KEY, cid INT, amount REAL, day TEXT, u, name TEXT, k TEXT COLLATE NOCASE)",
    "CREATE TABLE w(a INT NOT NULL, b TEXT COLLATE NOCASE NOT NULL, v, PRIMARY KEY (a, b)) WITHOUT ROWID",
    "CREATE TABLE nk(x, y TEXT, z INT)",
    "CREATE VIEW recent AS SELECT cid, amount, u FROM o WHERE day >= 'd2'",
    "CREATE VIEW recent2 AS SELECT cid, u FROM recent WHERE amount > 1",
]

VIEWS = {
    # unqualified outer and inner names the inlined table shares with c (id, amount, name, u)
    "ambiguous": "SELECT id, amount, name, x.cid FROM c LEFT JOIN (SELECT cid FROM o WHERE name = 'a' AND id > 1) x "
    "ON x.cid = c.id",
    # aliases swapped against the table's own names, read unqualified in ON and WHERE
    "swapped": "SELECT c.id, day, cid FROM c LEFT JOIN (SELECT cid AS day, day AS cid FROM o WHERE cid > 1) x "
    "ON day = c.id WHERE cid IS NULL OR cid <> 'd1'",
    "using_unqualified": "SELECT id, day FROM c LEFT JOIN (SELECT cid AS id, day FROM o) x USING (id)",
    "natural_star": "SELECT * FROM c NATURAL LEFT JOIN (SELECT cid AS id, name, u FROM o)",
    "nested_views": "SELECT c.id, r.u FROM c LEFT JOIN recent2 r ON r.cid = c.id WHERE r.u IS NULL OR r.u <> 2",
    "chain": "SELECT c.id, x.amount, y.b, z.y FROM c LEFT JOIN (SELECT cid, amount FROM o WHERE amount > 1) x "
    "ON x.cid = c.id LEFT JOIN (SELECT a, b FROM w WHERE b <> 'q') y ON y.a = c.id "
    "LEFT JOIN (SELECT y, z FROM nk WHERE y IS NOT NULL) z ON z.z = c.id",
    "inner_after_padded": "SELECT c.id, x.amount, w.b FROM c LEFT JOIN (SELECT cid, amount, u FROM o) x "
    "ON x.cid = c.id JOIN w ON w.v = x.u",
    "aggregates": "SELECT c.name, count(x.u), count(*), sum(x.amount), min(x.amount), max(x.amount), "
    "count(DISTINCT x.day) FROM c LEFT JOIN (SELECT cid, amount, u, day FROM o WHERE day <> 'd2') x "
    "ON x.cid = c.id GROUP BY c.name",
    "padded_case": "SELECT c.id, coalesce(x.amount, -1), CASE WHEN x.u IS NULL THEN 'pad' ELSE typeof(x.u) END "
    "FROM c LEFT JOIN (SELECT cid, amount, u FROM o WHERE amount < 7) x ON x.cid = c.id",
    "nocase_on": "SELECT c.id, x.k FROM c LEFT JOIN (SELECT k, cid FROM o) x ON c.city = x.k",
    "untyped_on": "SELECT c.id, x.u FROM c LEFT JOIN (SELECT u, cid FROM o) x ON x.u = c.u",
    "cte_twice": "WITH b AS (SELECT cid, u FROM o WHERE amount >= 5) SELECT c.id, b1.u, b2.cid FROM c "
    "LEFT JOIN b b1 ON b1.cid = c.id JOIN b b2 ON b2.cid = c.id",
    "no_key_star": "SELECT * FROM c LEFT JOIN (SELECT * FROM nk) x ON x.z = c.id",
}


def _write(conn: matview.Connection, rng: random.Random) -> None:
    u = rng.choice([1, 1.0, "1", None, 2, "a"])
    kind = rng.random()
    if kind < 0.3:
        conn.execute(
            "INSERT INTO o(cid, amount, day, u, name, k) VALUES (?, ?, ?, ?, ?, ?)",
            (
                rng.choice([1, 2, 3, "1", 2.0, None]),
                rng.choice([1, 5, 7.5, None]),
                rng.choice(["d1", "d2", "d3"]),
                u,
                rng.choice(["a", "b", None]),
                rng.choice(["x", "X", "y"]),
            ),
        )
    elif kind < 0.45:
        conn.execute(
            "INSERT OR REPLACE INTO c VALUES (?, ?, ?, ?, ?)",
            (rng.randint(1, 4), rng.choice("ab"), rng.choice(["x", "X", "y"]), rng.choice([1, 5, None]), u),
        )
    elif kind < 0.52:
        conn.execute("DELETE FROM c WHERE id = ?", (rng.randint(1, 4),))
    elif kind < 0.65:
        conn.execute(
            "UPDATE o SET cid = ?, amount = ?, u = ?, day = ? WHERE id % 4 = ?",
            (rng.randint(1, 4), rng.choice([1, 5, 7.5]), u, rng.choice(["d1", "d2", "d3"]), rng.randint(0, 3)),
        )
    elif kind < 0.73:
        conn.execute("DELETE FROM o WHERE id % 5 = ?", (rng.randint(0, 4),))
    elif kind < 0.83:
        conn.execute("INSERT OR REPLACE INTO w VALUES (?, ?, ?)", (rng.randint(1, 4), rng.choice("pPq"), u))
    elif kind < 0.92:
        conn.execute(
            "INSERT INTO nk VALUES (?, ?, ?)",
            (rng.choice([1, 1.0, "1", None]), rng.choice(["1", "a", None]), rng.randint(1, 4)),
        )
    else:
        conn.execute("DELETE FROM nk WHERE rowid % 3 = ?", (rng.randint(0, 2),))


@pytest.mark.parametrize("seed", range(2))
def test_left_join_derived_shapes_hold(tmp_path: Path, seed: int) -> None:
    check_write_mix(tmp_path, SETUP, VIEWS, _write, seed, steps=12)


def test_left_join_derived_shapes_stay_incremental_and_named(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in SETUP:
        conn.execute(sql)
    conn.execute("INSERT INTO c VALUES (1, 'a', 'x', 1, 1), (2, 'b', 'X', 5, '1')")
    rng = random.Random(7)
    for _ in range(12):
        _write(conn, rng)
    live = create_views_both_modes(conn, VIEWS)
    for name in live:
        assert "recomputed whole" not in conn.view(name).explain(), name
    assert_views_match(conn, live)
    for name in ("using_unqualified_imm", "natural_star_imm", "no_key_star_imm"):
        view_cursor = conn.execute(f"SELECT * FROM {name}")
        view_names = column_names(view_cursor)
        view_cursor.fetchall()
        select_cursor = conn.execute(live[name])
        assert view_names == column_names(select_cursor), name
        select_cursor.fetchall()
    conn.close()
