"""What hunts 37 (decision-support SQL under write mixes) and 38 (values, types, every way of
reading a view) found.

* The plain view stock clients read (`main.v`) read a CAST column as its untyped stored
  column: `CAST(c AS TEXT) = 1` matched '1' in the SELECT and nothing in the view
  (`readable._no_affinity` casts it again, which changes no value).
* A set operation whose arms' values may be of different kinds (`SELECT num … UNION ALL SELECT
  text …`) has a BLOB column in SQLite (no conversion); a read of the view compared under the
  first arm's affinity (`compound.blob_where_arms_conflict`).
* SQLite's NOCASE stops comparing at a NUL (`'a\\0b' = 'A\\0z'`, then the longer text is
  greater): GROUP BY, DISTINCT and COUNT(DISTINCT) under NOCASE kept such values apart
  (`keys.canonical`).
* A view read through the virtual table (one the stored table cannot stand for: a NOCASE
  GROUP BY) gave an expression column (`count(*)`) BLOB affinity, the only one a virtual
  table's column without a type can have: `s.a = u.n` against a TEXT column missed '1' = 1.
  Such a view is now read through a temp view that reads those columns as `+n`
  (`readable.all_rows_view_sql`). Hunt 39 (a review of these changes): a view reading such a
  column of another view stored it as a plain column, BLOB affinity (`Column.no_affinity`); and
  an aggregate view's CAST column lost its affinity for stock readers inside the CASE that
  raises stored errors.
* A lookup of a grouped derived table by its GROUP BY column `g.cid = c.id` (cid TEXT, c.id
  INTEGER) converts the keys: '1' and '01' both equal 1, so it is not one row
  (`comparison_affinity`).
* Hunt 40: a column named like matview's own (`__dbsp_weight`), of a base table or of the view,
  made CREATE fail with SQLite's "duplicate column name"; refused by name now.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from oracle import assert_refused, bag, run_scenario  # noqa: E402

import matview  # noqa: E402

CASTS = (
    "SELECT id, CAST(c AS TEXT) AS z, CAST(a AS NUMERIC) AS an, CAST(c AS INTEGER) AS i, CAST(a AS REAL) AS r FROM t"
)


def test_stock_readers_compare_a_cast_column_under_its_affinity(tmp_path: Path) -> None:
    path = str(tmp_path / "casts.db")
    conn = matview.connect(path)
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, c)")
    conn.execute("INSERT INTO t(a, c) VALUES ('1', '1'), ('x', 2), ('2.0', 2.0), (NULL, X'31')")
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {CASTS}")
    filters = ["z = 1", "an = '1'", "i = '1'", "r = '2'", "z > 1", "an IN ('1', '2')", "z = '1'", "i = 2"]
    conn.close()
    stock = sqlite3.connect(path)
    for where in filters:
        got = stock.execute(f"SELECT * FROM v WHERE {where}").fetchall()
        want = stock.execute(f"SELECT * FROM ({CASTS}) WHERE {where}").fetchall()
        assert bag(got) == bag(want), where
    stock.close()


def test_a_set_operation_whose_arms_conflict_compares_as_blob(tmp_path: Path) -> None:
    """SQLite types a set operation's column BLOB (no conversion) where another arm's values
    may be of another kind than the first arm's affinity; the view compared under the first
    arm's NUMERIC. (A `>=` pushed into the arms follows each arm's own affinity in SQLite, a
    plan-dependent answer: compared here with push-down off, `LIMIT -1`.)"""
    path = str(tmp_path / "arms.db")
    conn = matview.connect(path)
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, b NUMERIC)")
    conn.execute("INSERT INTO t(a, b) VALUES ('1', 1), ('x', 2), ('2', '2')")
    select = "SELECT b AS x FROM t UNION ALL SELECT a FROM t"
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {select}")
    conn.execute("INSERT INTO t(a, b) VALUES ('3', 3)")
    filters = ["x = 1", "x = '1'", "x = 2", "x = '2'", "x >= 1.0", "x IN (1, '3')"]
    stock = sqlite3.connect(path)
    for where in filters:
        want = conn.execute(f"SELECT * FROM ({select} LIMIT -1) WHERE {where}").fetchall()
        assert bag(conn.execute(f"SELECT * FROM v WHERE {where}").fetchall()) == bag(want), where
        assert bag(stock.execute(f"SELECT * FROM v WHERE {where}").fetchall()) == bag(want), where
    stock.close()


def test_nocase_stops_comparing_at_a_nul(tmp_path: Path) -> None:
    nul = "char(0)"
    run_scenario(
        tmp_path,
        [
            "CREATE TABLE t(id INTEGER PRIMARY KEY, f TEXT COLLATE NOCASE, a TEXT)",
            f"INSERT INTO t(f, a) VALUES ('a'||{nul}||'b', 'x'||{nul}||'1'), ('a'||{nul}||'c', 'X'||{nul}||'2')",
        ],
        {
            "grouped": "SELECT f, count(*) AS n FROM t GROUP BY f",
            "distinct": "SELECT DISTINCT f FROM t",
            "counted": "SELECT count(DISTINCT a COLLATE NOCASE) AS n FROM t",
            "extremes": "SELECT min(f) AS lo, max(a COLLATE NOCASE) AS hi FROM t",
        },
        [
            [f"INSERT INTO t(f, a) VALUES ('A'||{nul}||'z', 'x'||{nul}||'3')"],
            [f"INSERT INTO t(f, a) VALUES ('a'||{nul}||'zz', 'x'||{nul}||'33'), ('ab', 'x')"],
            ["DELETE FROM t WHERE id = 1"],
        ],
    )


def test_an_expression_column_read_through_the_virtual_table_has_no_affinity(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "expressions.db"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, f TEXT COLLATE NOCASE)")
    conn.execute("CREATE TABLE s(id INTEGER PRIMARY KEY, a TEXT)")
    conn.execute("INSERT INTO t(f) VALUES ('x'), ('X'), ('y')")
    conn.execute("INSERT INTO s(a) VALUES ('1'), ('2'), ('zz')")
    select = "SELECT f, count(*) AS n, count(*) + 0.5 AS h FROM t GROUP BY f"
    for mode in ("immediate", "deferred"):
        conn.execute(f"CREATE MATERIALIZED VIEW u_{mode} WITH (maintenance = '{mode}') AS {select}")
    reads = [
        "SELECT s.id, u.n FROM s JOIN {u} u ON s.a = u.n",
        "SELECT n FROM {u} WHERE n = CAST('1' AS TEXT)",
        "SELECT n FROM {u} WHERE n IN (SELECT a FROM s)",
        "SELECT n, f FROM {u} WHERE n > CAST('1' AS TEXT)",
        "SELECT f FROM {u} WHERE f = 'X'",
    ]
    for step in ["", "INSERT INTO t(f) VALUES ('y')", "DELETE FROM t WHERE f = 'x'"]:
        if step:
            conn.execute(step)
        for mode in ("immediate", "deferred"):
            for read in reads:
                got = conn.execute(read.format(u=f"u_{mode}")).fetchall()
                want = conn.execute(read.format(u=f"({select})")).fetchall()
                assert bag(got) == bag(want), (mode, read)


GROUPED = [
    "CREATE TABLE c(id INTEGER PRIMARY KEY, code TEXT, num INTEGER)",
    "CREATE TABLE o(id INTEGER PRIMARY KEY, cid TEXT, k INTEGER, amt INTEGER)",
    "INSERT INTO c VALUES (1, '1', 1), (2, '01', 2), (3, 'x', NULL)",
    "INSERT INTO o VALUES (1, '1', 1, 10), (2, '01', 1, 20), (3, '01', 2, 30), (4, 'x', NULL, 5)",
]
_G = "WITH g AS (SELECT cid, count(*) AS n, sum(amt) AS s FROM o GROUP BY cid) "


def test_a_grouped_lookup_whose_comparison_converts_the_key_is_not_one_row(tmp_path: Path) -> None:
    """`g.cid = c.id` with cid TEXT and c.id INTEGER: SQLite compares the numbers, so the groups
    '1' and '01' both match 1, and which one the scalar subquery returns follows SQLite's plan
    (review of session 27; `comparison_affinity.may_convert_key`)."""
    assert "may return several rows" in assert_refused(
        tmp_path, GROUPED, _G + "SELECT c.id, (SELECT s FROM g WHERE g.cid = c.id) AS s FROM c"
    )


def test_grouped_lookups_that_convert_nothing_are_maintained(tmp_path: Path) -> None:
    run_scenario(
        tmp_path,
        GROUPED,
        {
            "text_key": _G + "SELECT c.id, (SELECT s FROM g WHERE g.cid = c.code) AS s FROM c",
            "literal": _G + "SELECT c.id, (SELECT n FROM g WHERE g.cid = '01') AS n FROM c",
            "expression": _G + "SELECT c.id, (SELECT n FROM g WHERE g.cid = c.num || '') AS n FROM c",
        },
        [["INSERT INTO o VALUES (5, '1', 3, 1)"], ["UPDATE o SET cid = '1' WHERE id = 2"], ["DELETE FROM o"]],
    )


def test_a_view_reading_another_views_expression_column_reads_it_without_affinity(tmp_path: Path) -> None:
    """v's `n` (count(*)) has no affinity, as in its SELECT; so has w's copy of it (hunt 39)."""
    path = str(tmp_path / "vv.db")
    conn = matview.connect(path)
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT COLLATE NOCASE, s TEXT)")
    conn.execute("INSERT INTO t VALUES (1, 'a', '2'), (2, 'A', 'x'), (3, 'b', '1')")
    inner = "SELECT a, count(*) AS n FROM t GROUP BY a"
    outer = "SELECT t.id, v.n, t.s FROM t JOIN v ON v.a = t.a"
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {inner}")
    conn.execute(f"CREATE MATERIALIZED VIEW w AS {outer}")
    conn.execute("INSERT INTO t VALUES (4, 'c', '1')")
    stock = sqlite3.connect(path)
    for read in ["SELECT * FROM {w} WHERE n = s", "SELECT * FROM {w} WHERE n IN (SELECT s FROM t)"]:
        want = bag(conn.execute(read.format(w=f"(SELECT * FROM ({outer}) LIMIT -1)")).fetchall())
        assert bag(conn.execute(read.format(w="w")).fetchall()) == want, read
        assert bag(stock.execute(read.format(w="w")).fetchall()) == want, read
    stock.close()


def test_stock_readers_compare_a_grouped_cast_column_under_its_affinity(tmp_path: Path) -> None:
    """An aggregate view's columns are read through a CASE that raises a stored error; the CAST
    that gives the column its affinity goes outside it (a CASE has none; hunt 39)."""
    path = str(tmp_path / "grouped_casts.db")
    conn = matview.connect(path)
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT)")
    conn.execute("INSERT INTO t(a) VALUES ('1'), ('2'), ('2')")
    selects = {
        "g_int": "SELECT CAST(a AS INTEGER) AS x, count(*) AS n FROM t GROUP BY 1",
        "g_text": "SELECT CAST(a AS TEXT) AS x, count(*) AS n FROM t GROUP BY 1",
    }
    for name, select in selects.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {select}")
    conn.close()
    stock = sqlite3.connect(path)
    for name, select in selects.items():
        for where in ["x = '1'", "x = 2", "x > '1'"]:
            want = stock.execute(f"SELECT * FROM ({select}) WHERE {where}").fetchall()
            assert bag(stock.execute(f"SELECT * FROM {name} WHERE {where}").fetchall()) == bag(want), (name, where)
    stock.close()


def test_names_matview_keeps_for_its_own_columns_are_refused_by_name(tmp_path: Path) -> None:
    """A base column or a view column named like matview's own (`__dbsp_weight`) made CREATE fail
    with SQLite's "duplicate column name" (hunt 40)."""
    conn = matview.connect(str(tmp_path / "reserved.db"))
    conn.execute('CREATE TABLE l("__dbsp_weight" INTEGER, ok INTEGER, x INTEGER)')
    conn.execute("CREATE TABLE c(id INTEGER PRIMARY KEY, v INTEGER)")
    with pytest.raises(matview.Error, match="__dbsp_weight has a name matview keeps"):
        conn.execute("CREATE MATERIALIZED VIEW v AS SELECT ok, x FROM l")
    with pytest.raises(matview.Error, match="__dbsp_key has a name matview keeps"):
        conn.execute('CREATE MATERIALIZED VIEW w AS SELECT v AS "__dbsp_key", count(*) FROM c GROUP BY v')
    conn.execute("INSERT INTO l VALUES (1, 2, 3)")  # (nothing left behind: the table is written as before)
    conn.execute("CREATE MATERIALIZED VIEW w AS SELECT v, count(*) AS n FROM c GROUP BY v")
    assert conn.views()[0].name == "w"


def test_a_scalar_subquery_of_a_column_compares_under_that_columns_affinity(tmp_path: Path) -> None:
    """`(SELECT u.amt FROM u WHERE u.id = c.uid)` has amt's affinity in SQLite: Datasette's text
    parameter `'6'` equals 6 there. The plain view read its untyped stored column without
    affinity; such a column is now stored typed (its values passed that type already)."""
    path = str(tmp_path / "scalar.db")
    conn = matview.connect(path)
    conn.execute("CREATE TABLE u(id INTEGER PRIMARY KEY, name TEXT, amt INTEGER, r REAL, n NUMERIC, x)")
    conn.execute("CREATE TABLE c(id INTEGER PRIMARY KEY, uid INTEGER)")
    conn.execute(
        "INSERT INTO u VALUES (1, '5', 5, 2.0, '7', '5'), (2, 'bob', 2.5, 3, 1.0, 5), (3, X'35', 'x', 'y', 'z', X'35')"
    )
    conn.execute("INSERT INTO c VALUES (1, 1), (2, 2), (3, 3), (4, 9)")
    select = (
        "SELECT c.id, (SELECT u.name FROM u WHERE u.id = c.uid) AS nm, (SELECT amt FROM u WHERE u.id = c.uid) AS a, "
        "(SELECT r FROM u WHERE u.id = c.uid) AS r, (SELECT n FROM u WHERE u.id = c.uid) AS n, "
        "(SELECT x FROM u WHERE u.id = c.uid) AS x FROM c"
    )
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {select}")
    conn.execute("UPDATE u SET amt = 6 WHERE id = 1")
    conn.close()
    stock = sqlite3.connect(path)
    for where in ["nm = 5", "a = '6'", "a = 6", "r = '3'", "n = '7'", "x = 5", "x = '5'", "a > '1'", "nm IS NULL"]:
        want = bag(stock.execute(f"SELECT * FROM ({select}) WHERE {where}").fetchall())
        assert bag(stock.execute(f"SELECT * FROM v WHERE {where}").fetchall()) == want, where
    assert bag(stock.execute("SELECT * FROM v").fetchall()) == bag(stock.execute(select).fetchall())
    stock.close()


@pytest.mark.fall_back_to_whole
def test_a_set_operation_of_text_columns_under_nocase_keeps_text_affinity_for_stock_readers(tmp_path: Path) -> None:
    """Both arms TEXT, the first NOCASE: SQLite compares the column under TEXT affinity (`a = 1`
    matches '1'). The plain view read it as `+a` (no affinity) — incrementally (UNION ALL) and
    recomputed whole (UNION) alike (hunt 41; `compound._converted_alike`,
    `whole._arms_keep_their_types`)."""
    path = str(tmp_path / "arms.db")
    conn = matview.connect(path)
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT COLLATE NOCASE, i INTEGER)")
    conn.execute("CREATE TABLE u(id INTEGER PRIMARY KEY, s TEXT, r REAL)")
    conn.execute("INSERT INTO t VALUES (1, '1', 3), (2, 'Q', 4)")
    conn.execute("INSERT INTO u VALUES (1, 'x', 2.0), (2, '2', 4.5)")
    selects = {
        "all_arms": "SELECT a FROM t UNION ALL SELECT s FROM u",
        "distinct_arms": "SELECT a FROM t UNION SELECT s FROM u",
        # (INTEGER and REAL arms: SQLite compares under INTEGER affinity values that did not pass
        # it, which no stored column shows a stock reader — README; stored untyped, 2.0 stays REAL)
        "numbers": "SELECT i FROM t UNION SELECT r FROM u",
    }
    for name, select in selects.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {select}")
    conn.execute("INSERT INTO u VALUES (3, 'q', 3.0)")
    conn.close()
    stock = sqlite3.connect(path)
    for name, select in selects.items():
        wheres = [] if name == "numbers" else ["a = 1", "a = '2'", "a = 'q'", "a > 1", "a = 3"]
        for where in wheres:
            want = bag(stock.execute(f"SELECT * FROM ({select} LIMIT -1) WHERE {where}").fetchall())
            assert bag(stock.execute(f"SELECT * FROM {name} WHERE {where}").fetchall()) == want, (name, where)
        assert bag(stock.execute(f"SELECT * FROM {name}").fetchall()) == bag(stock.execute(select).fetchall())
    stock.close()
