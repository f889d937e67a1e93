"""Hunt 43 (the Spark pipeline, attacked): each finding as a regression test — a wrong load or
view, or an error that was raw, unclear or came after the Spark work. The file is unchanged by
every failed backfill."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import apsw
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_view_matches
from test_spark import fingerprint

import matview
from matview.spark import backfill

pytestmark = pytest.mark.skipif(
    shutil.which("java") is None and not os.environ.get("CI"), reason="Spark needs Java 17 on PATH"
)


def parquet(path: Path, **columns: list[Any]) -> str:
    pq.write_table(pa.table(columns), path)
    return str(path)


def test_one_table_named_twice_in_two_cases_is_refused(spark: Any, tmp_path: Path) -> None:
    """`a` and `A` are one SQLite table: the second source replaced the first while a row view
    kept the rows of both (its verify() failed)."""
    db = str(tmp_path / "x.db")
    apsw.Connection(db).execute("CREATE TABLE a (g INTEGER)")
    one, two = parquet(tmp_path / "one.parquet", g=[1, 2, 3]), parquet(tmp_path / "two.parquet", g=[7])
    before = fingerprint(db)
    with pytest.raises(matview.Error, match="given twice"):
        backfill(spark, db, {"a": one, "A": two}, mode="replace", views=[("rows_v", "SELECT g FROM a")])
    assert fingerprint(db) == before


def test_csv_quotes_written_twice_are_one_quote(spark: Any, tmp_path: Path) -> None:
    """RFC 4180, as SQLite's .import reads it: a quote written twice inside a quoted field is
    one quote (Spark's default escape, a backslash, loaded the doubled quotes as they were)."""
    (tmp_path / "t.csv").write_text('name,n\n"say ""hi""",1\n"a\\",2\nplain,3\n')
    db = str(tmp_path / "c.db")
    backfill(spark, db, {"t": str(tmp_path / "t.csv")}, views=[("v", "SELECT name, n FROM t")])
    conn = matview.connect(db)
    assert sorted(conn.execute("SELECT name FROM t").fetchall()) == [("a\\",), ("plain",), ('say "hi"',)]
    assert_view_matches(conn, "v", "SELECT name, n FROM t")
    conn.close()


def test_replace_rebuilds_a_view_over_a_view_of_the_table(spark: Any, tmp_path: Path) -> None:
    """A view over a view of a loaded table made replace fail at plan time (`no such table:
    main.__dbsp_view_v1`): the scratch schema has the plain view, not the table behind it."""
    db = str(tmp_path / "v.db")
    conn = matview.connect(db)
    conn.execute("CREATE TABLE a (g INTEGER)")
    conn.execute("INSERT INTO a VALUES (1), (1), (2)")
    conn.execute("CREATE MATERIALIZED VIEW v1 AS SELECT g, count(*) AS n FROM a GROUP BY g")
    conn.execute("CREATE MATERIALIZED VIEW v2 AS SELECT g FROM v1 WHERE n > 1")
    conn.close()
    summary = backfill(spark, db, {"a": parquet(tmp_path / "a.parquet", g=[3, 3, 4, 5, 5, 5])}, mode="replace")
    assert {v.name for v in summary.views} == {"v1", "v2"}
    conn = matview.connect(db)
    assert_view_matches(conn, "v1", "SELECT g, count(*) AS n FROM a GROUP BY g")
    assert_view_matches(conn, "v2", "SELECT g FROM (SELECT g, count(*) AS n FROM a GROUP BY g) WHERE n > 1")
    conn.close()


def test_views_the_incremental_engine_refuses_are_computed_locally(spark: Any, tmp_path: Path) -> None:
    """A top N and a window are recomputed whole by a local CREATE: backfill builds them the
    same way (it refused them at plan time)."""
    db = str(tmp_path / "w.db")
    views = {
        "top": "SELECT g, x FROM a ORDER BY x DESC LIMIT 2",
        "running": "SELECT g, sum(x) OVER (ORDER BY x) AS r FROM a",
    }
    source = parquet(tmp_path / "a.parquet", g=[1, 2, 3, 4], x=[10, 40, 30, 20])
    summary = backfill(spark, db, {"a": source}, views=list(views.items()))
    assert all(v.where == "local" and "does not maintain" in v.reason for v in summary.views)
    conn = matview.connect(db)
    for name, select in views.items():
        assert "recomputed whole" in conn.view(name).explain()
        assert_view_matches(conn, name, select)
    conn.close()


def test_bad_keys_and_names_are_clear_errors_and_change_nothing(spark: Any, tmp_path: Path) -> None:
    db = str(tmp_path / "k.db")
    conn = matview.connect(db)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    conn.execute("CREATE VIEW pv AS SELECT 1")
    conn.close()
    before = fingerprint(db)
    nulls = tmp_path / "nulls"
    nulls.mkdir()
    parquet(nulls / "p0.parquet", id=[100], v=["a"])
    parquet(nulls / "p1.parquet", id=[None, 200], v=["b", "c"])
    # a NULL INTEGER PRIMARY KEY: numbered in its part (1, not 101 as a row-by-row INSERT would)
    with pytest.raises(matview.Error, match="INTEGER PRIMARY KEY and the source holds NULL"):
        backfill(spark, db, {"t": str(nulls / "*.parquet")}, mode="replace")
    twice = tmp_path / "twice"
    twice.mkdir()
    parquet(twice / "p0.parquet", id=[1, 2], v=["a", "b"])
    parquet(twice / "p1.parquet", id=[2, 3], v=["c", "d"])
    with pytest.raises(matview.Error, match=r"table t: .*UNIQUE.*the same key twice"):
        backfill(spark, db, {"t": str(twice / "*.parquet")}, mode="replace")
    good = parquet(tmp_path / "good.parquet", id=[1, 2], v=["a", "b"])
    with pytest.raises(matview.Error, match="the file has a view of that name"):
        backfill(spark, db, {"pv": good})
    with pytest.raises(matview.Error, match="a table of that name exists"):
        backfill(spark, db, {"t": good}, mode="replace", views=[("T", "SELECT v FROM t")])
    with pytest.raises(matview.Error, match="given twice"):
        backfill(spark, db, {"t": good}, mode="replace", views=[("w", "SELECT v FROM t"), ("W", "SELECT id FROM t")])
    assert fingerprint(db) == before
    locker = apsw.Connection(db)
    locker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(matview.Error, match="locked by another connection"):
            backfill(spark, db, {"t": good}, mode="replace")
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert fingerprint(db) == before


def test_a_view_whose_select_raises_is_a_matview_error(spark: Any, tmp_path: Path) -> None:
    """A SUM whose running total leaves int64 in SQLite's scan order: computed locally, the
    CREATE's error is a matview.Error naming it (it was a raw apsw.SQLError); computed by
    parts (the load split the rows), the view reads as that error, as the SELECT does."""
    db = str(tmp_path / "o.db")
    source = parquet(tmp_path / "k.parquet", k=[2**62, 2**62, -(2**62)])
    try:
        backfill(spark, db, {"t": source}, views=[("s", "SELECT sum(k) FROM t")])
    except apsw.Error:
        raise
    except matview.Error as exc:
        assert "integer overflow" in str(exc)
        return
    conn = matview.connect(db)
    with pytest.raises(apsw.SQLError, match="integer overflow"):
        conn.execute("SELECT sum(k) FROM t").fetchall()  # (SQLite's own error, as SQLite raises it)
    with pytest.raises(matview.Error):
        conn.execute("SELECT * FROM s").fetchall()
    conn.close()
