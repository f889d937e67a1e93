"""The rows each root gave, kept in `__dbsp_kept_<v>` (matview/storage/kept_rows.py): the
regressions a hostile review of that change found, each a wrong view or a failure before."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from oracle import assert_view_matches

import matview

EXISTS_VIEW = "SELECT a.g FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.aid = a.id)"


def _ab(conn: matview.Connection) -> None:
    conn.execute("CREATE TABLE a(id INTEGER PRIMARY KEY, g TEXT)")
    conn.execute("CREATE TABLE b(id INTEGER PRIMARY KEY, aid INTEGER, y INTEGER)")
    conn.execute("INSERT INTO a VALUES (1, 'p'), (2, 'q')")
    conn.execute("INSERT INTO b(aid, y) VALUES (1, 5), (2, 7), (1, 6)")


def test_text_root_keys_that_differ_after_a_nul_stay_apart(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE a(k TEXT PRIMARY KEY, x) WITHOUT ROWID")
    conn.execute("CREATE TABLE b(id INTEGER PRIMARY KEY, k TEXT, y)")
    conn.execute("INSERT INTO a VALUES ('p'||char(0)||'1', 1), ('p'||char(0)||'2', 2), ('p', 3)")
    conn.execute("INSERT INTO b(k, y) VALUES ('p'||char(0)||'1', 10), ('p'||char(0)||'2', 20), ('p', 30)")
    sql = "SELECT a.x, b.y FROM a LEFT JOIN b ON b.k = a.k LEFT JOIN b b2 ON b2.k = a.k"
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {sql}")
    conn.execute("UPDATE b SET y = 21 WHERE y = 20")
    assert_view_matches(conn, "v", sql)
    conn.execute("UPDATE a SET x = 4 WHERE x = 3")
    assert_view_matches(conn, "v", sql)


@pytest.mark.parametrize("rows", [2, 3000])
def test_values_equal_under_nocase_are_kept_apart(tmp_path: Path, rows: int) -> None:
    """At CREATE and on a write large enough to recompute, `GROUP BY` of the kept rows took the
    stage-1 column's NOCASE collation and merged 'ann' and 'Ann' of one root."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE a(id INTEGER PRIMARY KEY, k TEXT)")
    conn.execute("CREATE TABLE b(id INTEGER PRIMARY KEY, aid INTEGER, name TEXT COLLATE NOCASE)")
    conn.execute("INSERT INTO a(k) VALUES ('1'), ('2')")
    conn.execute("INSERT INTO b(aid, name) VALUES (1, 'ann'), (1, 'Ann'), (2, 'x')")
    sql = "SELECT a.k, b.name FROM a LEFT JOIN b ON b.aid = a.id LEFT JOIN b b2 ON b2.id = -1"
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {sql}")
    assert_view_matches(conn, "v", sql)
    with conn:
        conn.executemany(
            "INSERT INTO b(aid, name) VALUES (?, ?)", [(1 + i % 2, "aNN" if i % 3 else "ANN") for i in range(rows)]
        )
    assert_view_matches(conn, "v", sql)
    conn.execute("DELETE FROM b WHERE name = 'ann' COLLATE BINARY")
    assert_view_matches(conn, "v", sql)


def test_a_fold_that_raises_leaves_the_kept_rows_as_they_were(tmp_path: Path) -> None:
    """A partition view whose output raises after its kept rows were written (a user function
    in its select list) stalled with its kept rows moved on: stale reads, then a wrong view."""

    def f(x: int) -> int:
        if x == 3:
            raise ValueError("three")
        return x

    path = str(tmp_path / "db.sqlite")
    conn = matview.connect(path)
    conn.create_scalar_function("f", f, 1, deterministic=True)
    _ab(conn)
    sql = "SELECT a.g, f(count(b.y)) AS s FROM a LEFT JOIN b ON b.aid = a.id LEFT JOIN b b2 ON b2.id = -5 GROUP BY a.g"
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {sql}")
    conn.execute("INSERT INTO b(aid, y) VALUES (1, 8)")  # count 3 for 'p': f raises, the view stalls
    with pytest.raises(matview.Error, match="three"):
        conn.execute("SELECT * FROM v").fetchall()
    conn.execute("DELETE FROM b WHERE y = 8")
    assert_view_matches(conn, "v", sql)
    conn.close()
    conn = matview.connect(path)
    conn.create_scalar_function("f", f, 1, deterministic=True)
    conn.execute("INSERT INTO b(aid, y) VALUES (2, 1)")
    assert_view_matches(conn, "v", sql)


def test_views_named_x_and_root_x(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    _ab(conn)
    for name in ("root_x", "x", "keptidx_x", "idx_x"):
        conn.execute(f'CREATE MATERIALIZED VIEW "{name}" AS {EXISTS_VIEW}')
    conn.execute("INSERT INTO b(aid, y) VALUES (2, 1)")
    for name in ("root_x", "x", "keptidx_x", "idx_x"):
        assert_view_matches(conn, name, EXISTS_VIEW)


def test_a_nocase_root_key_that_changes_case_beside_another_change(tmp_path: Path) -> None:
    """Found with the review (older than the kept-rows table): the reach queries were joined by
    UNION, which took 'b' and 'B' for one key under NOCASE and left a stale row."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE r(k TEXT COLLATE NOCASE PRIMARY KEY, v) WITHOUT ROWID")
    conn.execute("CREATE TABLE b(id INTEGER PRIMARY KEY, rk TEXT COLLATE NOCASE, y INTEGER)")
    sql = "SELECT r.k, r.v, b.y FROM r LEFT JOIN b ON b.rk = r.k LEFT JOIN b b2 ON b2.id = b.id"
    sql2 = "SELECT r.k, r.v FROM r WHERE EXISTS (SELECT 1 FROM b WHERE b.rk = r.k)"
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {sql}")
    conn.execute(f"CREATE MATERIALIZED VIEW v2 AS {sql2}")
    conn.execute("INSERT INTO r VALUES ('b', 'old')")
    with conn:
        conn.execute("INSERT INTO b(rk, y) VALUES ('B', 2)")
        conn.execute("INSERT OR REPLACE INTO r VALUES ('B', 'new')")
    assert_view_matches(conn, "v", sql)
    assert_view_matches(conn, "v2", sql2)


def test_a_query_only_connection_reads_pending_changes(tmp_path: Path) -> None:
    import sqlite3

    path = str(tmp_path / "db.sqlite")
    conn = matview.connect(path)
    _ab(conn)
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {EXISTS_VIEW}")
    conn.close()
    stock = sqlite3.connect(path)
    stock.execute("INSERT INTO a(g) VALUES ('r')")
    stock.execute("INSERT INTO b(aid, y) VALUES (3, 1)")
    stock.commit()
    stock.close()
    reader = matview.connect(path)
    reader.execute("PRAGMA query_only = 1")
    assert_view_matches(reader, "v", EXISTS_VIEW)


def test_an_upstream_redefined_by_another_connection_with_other_columns(tmp_path: Path) -> None:
    """(Older than the kept rows.) A connection's temp table of an upstream's ΔV kept the old
    width after another connection DROPped and CREATEd the upstream again: every later write
    of the base table failed with a raw SQLError."""
    path = str(tmp_path / "db.sqlite")
    conn = matview.connect(path)
    _ab(conn)
    conn.execute("CREATE MATERIALIZED VIEW u AS SELECT aid, sum(y) AS s FROM b GROUP BY aid")
    conn.execute("CREATE MATERIALIZED VIEW w AS SELECT a.id, u.s FROM a JOIN u ON u.aid = a.id")
    conn.execute("INSERT INTO b(aid, y) VALUES (2, 1)")
    other = matview.connect(path)
    other.execute("DROP MATERIALIZED VIEW w")
    other.execute("DROP MATERIALIZED VIEW u")
    other.execute("CREATE MATERIALIZED VIEW u AS SELECT aid, sum(y) AS s, count(*) AS n FROM b GROUP BY aid")
    other.execute("CREATE MATERIALIZED VIEW w AS SELECT a.id, u.s FROM a JOIN u ON u.aid = a.id")
    other.close()
    conn.execute("INSERT INTO b(aid, y) VALUES (1, 2)")
    assert_view_matches(
        conn, "w", "SELECT a.id, u.s FROM a JOIN (SELECT aid, sum(y) AS s FROM b GROUP BY aid) u ON u.aid = a.id"
    )


def test_a_read_only_connection_on_a_format_2_file_says_why(tmp_path: Path) -> None:
    path = tmp_path / "f2.db"
    shutil.copyfile(Path(__file__).parent / "data" / "matview-format2-partition.db", path)
    import apsw

    raw = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    conn = matview.install(raw)
    with pytest.raises(matview.Error, match=r"older matview.*writable matview connection"):
        conn.execute("SELECT * FROM ex").fetchall()
