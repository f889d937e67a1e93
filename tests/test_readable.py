"""Views are readable by clients that never load matview, and exact on matview connections.

Every stock reader runs in its own process (stock.py): stdlib sqlite3 and apsw must never
have one file open in one process. A stock read is exact whenever nothing is pending and
"as of the last fold" otherwise; a matview connection reads through its temp shadow and
merges pending changes.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import apsw
import pytest

_HERE = Path(__file__).resolve().parent
for _p in (str(_HERE), str(_HERE.parent)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from oracle import assert_view_matches, bag  # noqa: E402
from stock import StockError, stock_python, stock_read, stock_reads, stock_sqlite3  # noqa: E402

import matview  # noqa: E402
from matview.storage import catalog, readable  # noqa: E402


def qi(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def exact(conn: matview.Connection, sql: str) -> Counter[Any]:
    return bag(conn.execute(sql).fetchall())


def stock_bag(path: Path, sql: str) -> Counter[Any]:
    return bag(stock_read(path, sql))


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "db.sqlite"


def make_base(conn: matview.Connection) -> None:
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, g TEXT COLLATE NOCASE, a INTEGER, r REAL, b BLOB)")
    conn.executemany(
        "INSERT INTO t(g, a, r, b) VALUES (?, ?, ?, ?)",
        [
            (["x", "y", "z", None][i % 4], i % 5 if i % 7 else None, i * 0.5, bytes([i % 3]) if i % 2 else None)
            for i in range(60)
        ],
    )


AGG = (
    "SELECT g, COUNT(*) AS n, SUM(a) AS s, TOTAL(r) AS tot, AVG(a) AS av, MIN(a) AS lo, MAX(r) AS hi, "
    "GROUP_CONCAT(a, '|') AS gc FROM t GROUP BY g"
)
ROWS = "SELECT a, b FROM t WHERE a IS NOT NULL"  # few distinct rows: weights up to ~10
DISTINCT = "SELECT DISTINCT a, g FROM t"


def test_stock_reader_reads_aggregate_rows_and_distinct_views(path: Path) -> None:
    conn = matview.connect(str(path))
    make_base(conn)
    views = {"agg": AGG, "rows": ROWS, "dist": DISTINCT}
    for name, sql in views.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
    heavy = conn.execute(f"SELECT max({qi('__dbsp_weight')}) FROM {qi('__dbsp_view_rows')}").fetchone()[0]
    assert heavy > 1  # the rows view really stores rows of weight > 1
    with conn:
        conn.execute("DELETE FROM t WHERE id % 6 = 0")
        conn.execute("UPDATE t SET a = a + 1 WHERE id % 4 = 1")
    for name, sql in views.items():
        assert_view_matches(conn, name, sql)
        assert stock_bag(path, f"SELECT * FROM {name}") == exact(conn, sql), name
    # the plain views carry the view's column names (stock clients see the same header)
    for result, name in zip(stock_reads(path, [f"SELECT * FROM {n}" for n in views]), views):
        assert result["columns"] == conn.view(name).columns
    # and the collation of a NOCASE group column, as the defining SELECT compares it
    assert stock_bag(path, "SELECT n FROM agg WHERE g = 'X'") == exact(conn, f"SELECT n FROM ({AGG}) WHERE g = 'X'")
    conn.close()


def test_stock_reader_sees_weights_of_duplicate_rows(path: Path) -> None:
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT)")
    conn.executemany("INSERT INTO t(v) VALUES (?)", [(f"v{i % 3}",) for i in range(1000)] + [("one",)])
    conn.execute("CREATE MATERIALIZED VIEW dup AS SELECT v FROM t")
    assert stock_read(path, "SELECT v, count(*) FROM dup GROUP BY v ORDER BY v") == [
        ("one", 1),
        ("v0", 334),
        ("v1", 333),
        ("v2", 333),
    ]
    conn.execute("DELETE FROM t WHERE k % 2 = 0")
    assert stock_bag(path, "SELECT * FROM dup") == exact(conn, "SELECT v FROM t")
    conn.close()


NAMES = ["my view", 'dq"inside', "with 'apostrophe'", "Ünïcødé_表", "select", "1digit"]


@pytest.mark.parametrize("name", NAMES)
def test_names_that_need_quoting(path: Path, name: str) -> None:
    conn = matview.connect(str(path))
    conn.execute('CREATE TABLE "base tbl"("the ""col""" INTEGER, "ü" TEXT)')
    conn.executemany('INSERT INTO "base tbl" VALUES (?, ?)', [(i % 4, f"s{i % 2}") for i in range(20)])
    sql = 'SELECT "ü", COUNT(*) AS "n ""quoted""", SUM("the ""col""") AS "Σ" FROM "base tbl" GROUP BY "ü"'
    conn.execute(f"CREATE MATERIALIZED VIEW {qi(name)} AS {sql}")
    conn.execute(f'CREATE MATERIALIZED VIEW {qi(name + " rows")} AS SELECT * FROM "base tbl"')
    result = stock_reads(path, [f"SELECT * FROM {qi(name)}", f"SELECT * FROM {qi(name + ' rows')}"])
    assert result[0]["columns"] == ["ü", 'n "quoted"', "Σ"]
    assert bag(result[0]["rows"]) == exact(conn, sql)
    assert bag(result[1]["rows"]) == exact(conn, 'SELECT * FROM "base tbl"')
    conn.execute(f"DROP MATERIALIZED VIEW {qi(name)}")
    assert "no such table" in stock_reads(path, [f"SELECT * FROM {qi(name)}"])[0]["error"]
    conn.close()


def test_stock_write_then_read_is_as_of_the_last_fold(path: Path) -> None:
    conn = matview.connect(str(path))
    make_base(conn)
    conn.execute(f"CREATE MATERIALIZED VIEW agg AS {AGG}")
    conn.execute(f"CREATE MATERIALIZED VIEW deferred_rows WITH (maintenance = 'deferred') AS {ROWS}")
    before = exact(conn, AGG)
    before_rows = exact(conn, ROWS)
    assert (
        stock_sqlite3(path, ["INSERT INTO t(g, a, r) VALUES ('z', 100, 1.5)", "DELETE FROM t WHERE id < 5"])["errors"]
        == []
    )
    # stock: the state of the last fold; matview (temp shadow): exact, merging the pending deltas
    assert stock_bag(path, "SELECT * FROM agg") == before
    assert stock_bag(path, "SELECT * FROM deferred_rows") == before_rows
    assert exact(conn, "SELECT * FROM agg") == exact(conn, AGG) != before
    # main is what stock clients read: that read through matview folded the view it names (another
    # connection had committed), so main is current too; the deferred view waits
    assert exact(conn, "SELECT * FROM main.agg") == exact(conn, AGG)
    assert stock_bag(path, "SELECT * FROM agg") == exact(conn, AGG)
    # a commit on a matview connection folds immediate views; flush folds deferred ones too
    conn.execute("INSERT INTO t(g, a) VALUES ('w', 1)")
    assert stock_bag(path, "SELECT * FROM agg") == exact(conn, AGG)
    assert stock_bag(path, "SELECT * FROM deferred_rows") == before_rows
    conn.flush()
    assert stock_bag(path, "SELECT * FROM deferred_rows") == exact(conn, ROWS)
    conn.close()


def test_stock_clients_cannot_write_a_view(path: Path) -> None:
    conn = matview.connect(str(path))
    make_base(conn)
    conn.execute(f"CREATE MATERIALIZED VIEW rows_v AS {ROWS}")
    result = stock_sqlite3(path, ["DELETE FROM rows_v", "INSERT INTO rows_v VALUES (1, NULL)"])
    assert len(result["errors"]) == 2 and all("view" in e for e in result["errors"]), result
    assert_view_matches(conn, "rows_v", ROWS)
    conn.close()


def test_integer_overflow_is_an_error_for_stock_readers(path: Path) -> None:
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, g TEXT, a INTEGER)")
    conn.execute("INSERT INTO t(g, a) VALUES ('x', 9223372036854775807), ('y', 1)")
    conn.execute("CREATE MATERIALIZED VIEW s AS SELECT g, SUM(a) AS total FROM t GROUP BY g")
    conn.execute("INSERT INTO t(g, a) VALUES ('x', 1)")
    with pytest.raises(matview.Error, match="overflow"):
        conn.execute("SELECT * FROM s").fetchall()
    results = stock_reads(path, ["SELECT * FROM s", "SELECT total FROM s WHERE g = 'y'"])
    assert "integer overflow" in results[0]["error"]
    assert results[1]["rows"] == [[1]]
    conn.execute("DELETE FROM t WHERE a = 1 AND g = 'x'")
    assert stock_bag(path, "SELECT * FROM s") == exact(conn, "SELECT g, SUM(a) FROM t GROUP BY g")
    conn.close()


def test_second_connection_sees_views_created_by_the_first(path: Path) -> None:
    first = matview.connect(str(path))
    make_base(first)
    second = matview.connect(str(path))  # opened before the view exists
    first.execute(f"CREATE MATERIALIZED VIEW later WITH (maintenance = 'deferred') AS {AGG}")
    stock_sqlite3(path, ["INSERT INTO t(g, a) VALUES ('new', 7)"])
    # exact (pending merged) only through the temp shadow, which `second` made for itself
    assert exact(second, "SELECT * FROM later") == exact(second, AGG)
    assert "later" in [r[0] for r in second.execute("SELECT name FROM temp.sqlite_master")]
    assert second.view("later").verify()
    first.close()
    second.close()


def test_drop_by_one_connection_is_clean_on_the_other(path: Path) -> None:
    first = matview.connect(str(path))
    make_base(first)
    first.execute("PRAGMA journal_mode = WAL")  # a reader in flight does not block the writer
    first.execute(f"CREATE MATERIALIZED VIEW gone AS {ROWS}")
    second = matview.connect(str(path))
    raw = second.apsw.execute("SELECT * FROM gone")  # a read in flight while the view is dropped
    assert raw.fetchone() is not None
    first.execute("DROP MATERIALIZED VIEW gone")
    # the open cursor holds `second`'s read snapshot (WAL), in which the view still exists
    assert exact(second, "SELECT * FROM gone") == exact(second, ROWS)
    raw.close()
    with pytest.raises(apsw.SQLError, match="no such table: gone"):
        second.execute("SELECT * FROM gone").fetchall()
    with pytest.raises(matview.Error, match="no such materialized view"):
        second.view("gone")
    with pytest.raises(matview.Error, match="no such materialized view"):
        second.execute("DROP MATERIALIZED VIEW gone")
    assert not second.execute("SELECT name FROM temp.sqlite_master").fetchall()
    # the name is free again, on either connection
    second.execute(f"CREATE MATERIALIZED VIEW gone AS {AGG}")
    assert exact(first, "SELECT * FROM gone") == exact(first, AGG)
    assert stock_bag(path, "SELECT * FROM gone") == exact(first, AGG)
    first.close()
    second.close()


def test_stale_shadow_read_through_raw_apsw_says_no_such_view(path: Path) -> None:
    first = matview.connect(str(path))
    make_base(first)
    first.execute(f"CREATE MATERIALIZED VIEW gone AS {ROWS}")
    second = matview.connect(str(path))
    first.execute("DROP MATERIALIZED VIEW gone")
    # bypassing the wrapper, the shadow is still there until the next statement through it,
    # and SQLite cannot re-read main's schema while preparing a statement on temp only
    # (a shadow view names the dropped stored table: SQLite refuses it when it prepares the
    # statement again; a shadow virtual table refuses in its callback)
    with pytest.raises((matview.SchemaChanged, apsw.SQLError), match=r"another connection changed|no such table"):
        second.apsw.execute("SELECT * FROM temp.gone").fetchall()
    second.execute("SELECT 1").fetchall()
    assert not second.apsw.execute("SELECT name FROM temp.sqlite_master").fetchall()
    with pytest.raises(apsw.SQLError, match="no such table"):
        second.apsw.execute("SELECT * FROM temp.gone").fetchall()
    first.close()
    second.close()


def test_read_only_matview_connection(path: Path) -> None:
    conn = matview.connect(str(path))
    make_base(conn)
    conn.execute(f"CREATE MATERIALIZED VIEW agg AS {AGG}")
    conn.close()
    stock_sqlite3(path, ["INSERT INTO t(g, a) VALUES ('ro', 3)"])  # pending, folded by nobody
    ro = matview.install(apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY))
    assert exact(ro, "SELECT * FROM agg") == exact(ro, AGG)
    assert ro.view("agg").pending() > 0
    with pytest.raises(apsw.ReadOnlyError):
        ro.execute("INSERT INTO t(g) VALUES ('no')")
    ro.close()


def test_rollback_keeps_shadows_right(path: Path) -> None:
    conn = matview.connect(str(path))
    make_base(conn)
    conn.execute(f"CREATE MATERIALIZED VIEW keep AS {ROWS}")
    conn.execute("BEGIN")
    conn.execute("DROP MATERIALIZED VIEW keep")
    conn.execute(f"CREATE MATERIALIZED VIEW fresh AS {AGG}")
    conn.execute("ROLLBACK")
    assert_view_matches(conn, "keep", ROWS)
    # (a shadow view reads the pending rows of its view through matview's internal temp table)
    shadows = [r[0] for r in conn.execute("SELECT name FROM temp.sqlite_master") if not r[0].startswith("__dbsp_")]
    assert shadows == ["keep"]
    assert stock_bag(path, "SELECT * FROM keep") == exact(conn, ROWS)
    conn.close()


def test_no_shadow_thrash(path: Path) -> None:
    """Temp DDL moves only temp's schema version; reads must not re-create shadows."""
    conn = matview.connect(str(path))
    make_base(conn)
    conn.execute(f"CREATE MATERIALIZED VIEW agg AS {AGG}")
    conn.execute("SELECT * FROM agg").fetchall()
    versions = (
        conn.apsw.execute("PRAGMA main.schema_version").fetchone(),
        conn.apsw.execute("PRAGMA temp.schema_version").fetchone(),
    )
    for _ in range(20):
        conn.execute("SELECT * FROM agg").fetchall()
        conn.execute("INSERT INTO t(g, a) VALUES ('q', 1)")
    assert versions == (
        conn.apsw.execute("PRAGMA main.schema_version").fetchone(),
        conn.apsw.execute("PRAGMA temp.schema_version").fetchone(),
    )
    conn.close()


def test_user_ddl_on_a_view_is_refused(path: Path) -> None:
    conn = matview.connect(str(path))
    make_base(conn)
    conn.execute(f"CREATE MATERIALIZED VIEW agg AS {AGG}")
    for sql in [
        "DROP VIEW agg",
        "DROP VIEW IF EXISTS main.agg",
        "DROP TABLE agg",
        "DROP TABLE temp.agg",
        "ALTER TABLE agg RENAME TO other",
    ]:
        with pytest.raises(matview.Error, match="DROP MATERIALIZED VIEW"):
            conn.execute(sql)
    for sql in ["CREATE TABLE agg(x)", "CREATE VIEW agg AS SELECT 1", "CREATE TEMP TABLE agg(x)"]:
        with pytest.raises(apsw.SQLError, match="already exists"):
            conn.execute(sql)
    with pytest.raises(matview.Error, match="already exists"):
        conn.execute(f"CREATE MATERIALIZED VIEW agg AS {ROWS}")
    conn.execute("CREATE INDEX agg_n ON agg(n)")  # redirected to the view's table
    assert exact(conn, "SELECT g FROM agg WHERE n = 15") == exact(conn, f"SELECT g FROM ({AGG}) WHERE n = 15")
    assert_view_matches(conn, "agg", AGG)
    conn.close()


def test_user_temp_object_with_a_view_name_is_left_alone(path: Path) -> None:
    first = matview.connect(str(path))
    make_base(first)
    second = matview.connect(str(path))
    second.execute("CREATE TEMP TABLE mine(x)")
    first.execute(f"CREATE MATERIALIZED VIEW mine AS {AGG}")
    second.execute("INSERT INTO temp.mine VALUES (1)")  # still the user's own temp table
    assert second.execute("SELECT * FROM mine").fetchall() == [(1,)]
    assert exact(second, "SELECT * FROM main.mine") == exact(second, AGG)
    first.close()
    second.close()


def test_verify_checks_what_stock_clients_read(path: Path) -> None:
    conn = matview.connect(str(path))
    make_base(conn)
    conn.execute(f"CREATE MATERIALIZED VIEW agg AS {AGG}")
    assert conn.view("agg").verify()
    stock_sqlite3(path, ["DROP VIEW agg"])  # a client that bypasses matview breaks the plain view
    assert not conn.view("agg").verify()
    assert "no such table" in stock_reads(path, ["SELECT * FROM agg"])[0]["error"]
    conn.execute("REFRESH MATERIALIZED VIEW agg")  # re-makes it
    assert conn.view("agg").verify()
    assert stock_bag(path, "SELECT * FROM agg") == exact(conn, AGG)
    conn.close()


# ---------------------------------------------------------------------------- catalog format 1


def make_format_1(path: Path) -> dict[str, str]:
    """A file as matview 0.1.0 (catalog format 1) left it: each view a virtual table in main,
    no plain view, no heavy index, format_version 1."""
    views = {"agg": AGG, "rows v": ROWS, "dist": DISTINCT}
    conn = matview.connect(str(path))
    make_base(conn)
    for name, sql in views.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {qi(name)} AS {sql}")
    raw = conn.apsw
    raw.authorizer = None  # (past matview's DDL guard: an old file made by hand)
    with raw:
        for name in views:
            readable.drop_shadow(raw, name)  # (this connection's temp shadow)
            raw.execute(f"DROP VIEW main.{qi(name)}")
            raw.execute(f"DROP INDEX main.{qi('__dbsp_heavy_' + name)}")
            raw.execute(f"CREATE VIRTUAL TABLE main.{qi(name)} USING matview")
        raw.execute("UPDATE __dbsp_meta SET value = 1 WHERE key = 'format_version'")
    conn.close()
    return views


def format_of(path: Path) -> Any:
    return stock_read(path, "SELECT value FROM __dbsp_meta WHERE key = 'format_version'")[0][0]


def test_format_1_file_is_upgraded_on_open(path: Path) -> None:
    views = make_format_1(path)
    assert format_of(path) == 1
    assert "no such module: matview" in stock_reads(path, ["SELECT * FROM agg"])[0]["error"]
    stock_sqlite3(path, ["INSERT INTO t(g, a) VALUES ('pending', 1)"])
    # a read-only matview connection reads the old format as it is, exactly
    ro = matview.install(apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY))
    for name, sql in views.items():
        assert_view_matches(ro, name, sql)
    ro.close()
    assert format_of(path) == 1
    conn = matview.connect(str(path))  # writable: upgrades
    assert format_of(path) == catalog.FORMAT_VERSION == 3
    kinds = dict(conn.execute("SELECT name, type FROM main.sqlite_master WHERE name IN ('agg', 'rows v', 'dist')"))
    assert kinds == {"agg": "view", "rows v": "view", "dist": "view"}
    for name, sql in views.items():
        assert_view_matches(conn, name, sql)
        assert conn.view(name).verify()
    conn.flush()
    for name, sql in views.items():
        assert stock_bag(path, f"SELECT * FROM {qi(name)}") == exact(conn, sql)
    conn.execute("INSERT INTO t(g, a) VALUES ('after', 2)")
    for name, sql in views.items():
        assert stock_bag(path, f"SELECT * FROM {qi(name)}") == exact(conn, sql)
    conn.close()


def test_failed_upgrade_leaves_format_1(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    views = make_format_1(path)
    made: list[str] = []
    original = readable.create_plain_view

    def fail_on_second(conn: apsw.Connection, view: str, plan: Any) -> None:
        made.append(view)
        if len(made) == 2:
            raise RuntimeError("disk on fire")
        original(conn, view, plan)

    monkeypatch.setattr(readable, "create_plain_view", fail_on_second)
    with pytest.raises(RuntimeError, match="disk on fire"):
        matview.connect(str(path))
    monkeypatch.undo()
    assert format_of(path) == 1
    raw = apsw.Connection(str(path))
    assert raw.execute("SELECT count(*) FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%'").fetchone() == (3,)
    raw.close()
    conn = matview.connect(str(path))
    assert format_of(path) == catalog.FORMAT_VERSION
    for name, sql in views.items():
        assert_view_matches(conn, name, sql)
    conn.close()


# ---------------------------------------------------------------------------- tools


def test_sqlite3_shell_reads_views(path: Path) -> None:
    shell = shutil.which("sqlite3")
    if shell is None:
        pytest.skip("no sqlite3 command-line shell on this machine")
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, g TEXT)")
    conn.executemany("INSERT INTO t(g) VALUES (?)", [("a",), ("b",), ("a",)])
    conn.execute("CREATE MATERIALIZED VIEW counts AS SELECT g, COUNT(*) AS n FROM t GROUP BY g")
    done = subprocess.run(
        [shell, str(path), "SELECT g, n FROM counts ORDER BY g;"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["a|2", "b|1"]
    conn.close()


_SQLITE_UTILS = r"""
import json, sys
import sqlite_utils
path, view = json.loads(sys.stdin.read())
db = sqlite_utils.Database(path)
print(json.dumps({"tables": db.table_names(), "views": db.view_names(), "rows": list(db[view].rows),
                  "columns": [c.name for c in db[view].columns]}))
"""


def test_sqlite_utils_lists_and_reads_views(path: Path) -> None:
    pytest.importorskip("sqlite_utils")
    conn = matview.connect(str(path))
    make_base(conn)
    conn.execute(f"CREATE MATERIALIZED VIEW agg AS {AGG}")
    out = stock_python(_SQLITE_UTILS, [str(path), "agg"])
    assert "agg" in out["views"] and "agg" not in out["tables"] and "t" in out["tables"]
    assert out["columns"] == conn.view("agg").columns
    names = conn.view("agg").columns
    assert bag([row[c] for c in names] for row in out["rows"]) == exact(conn, AGG)
    conn.close()


_DATASETTE = r"""
import asyncio, json, sys
from datasette.app import Datasette
from datasette.utils import tilde_encode
path, view = json.loads(sys.stdin.read())
async def main():
    ds = Datasette([path])
    await ds.invoke_startup()
    name = next(iter(ds.databases.keys() - {"_internal", "_memory"}))
    listing = await ds.client.get(f"/{name}.json")
    rows = await ds.client.get(f"/{name}/{tilde_encode(view)}.json?_shape=array&_size=max")
    return {"status": [listing.status_code, rows.status_code], "views": [v["name"] for v in listing.json()["views"]],
            "rows": rows.json()}
print(json.dumps(asyncio.run(main())))
"""


def test_datasette_opens_the_file_and_serves_a_view(path: Path) -> None:
    try:
        import datasette  # noqa: F401
    except ImportError:
        pytest.skip("datasette is not installed (pip install 'matview[datasette]')")
    conn = matview.connect(str(path))
    make_base(conn)
    conn.execute(f"CREATE MATERIALIZED VIEW {qi('agg view')} AS {AGG}")
    conn.execute(f"CREATE MATERIALIZED VIEW dup AS {ROWS}")
    out = stock_python(_DATASETTE, [str(path), "agg view"])
    assert out["status"] == [200, 200], out
    assert {"agg view", "dup"} <= set(out["views"])
    names = conn.view("agg view").columns
    assert bag([row[c] for c in names] for row in out["rows"]) == exact(conn, AGG)
    conn.close()


def test_stock_error_is_raised(path: Path) -> None:
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE t(x)")
    conn.close()
    with pytest.raises(StockError, match="no such table"):
        stock_read(path, "SELECT * FROM nope")


def test_cli_shell_reads_exactly_and_refuses_drop_view(path: Path) -> None:
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, g TEXT)")
    conn.executemany("INSERT INTO t(g) VALUES (?)", [("a",), ("b",), ("a",)])
    conn.execute(
        "CREATE MATERIALIZED VIEW counts WITH (maintenance = 'deferred') AS SELECT g, COUNT(*) AS n FROM t GROUP BY g"
    )
    conn.close()
    stock_sqlite3(path, ["INSERT INTO t(g) VALUES ('b')"])  # pending: only the shadow sees it
    script = "SELECT g, n FROM counts ORDER BY g;\nDROP VIEW counts;\n"
    done = subprocess.run(
        [sys.executable, "-m", "matview.cli", "shell", str(path)],
        input=script,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=_HERE.parent,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[:2] == ["a|2", "b|2"], done.stdout
    assert "use DROP MATERIALIZED VIEW" in done.stdout + done.stderr
    assert stock_read(path, "SELECT type FROM sqlite_master WHERE name = 'counts'") == [("view",)]
    verify = subprocess.run(
        [sys.executable, "-m", "matview.cli", "verify", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=_HERE.parent,
    )
    assert verify.returncode == 0 and "counts: ok" in verify.stdout, verify.stdout + verify.stderr


def test_shadow_view_follows_a_view_created_again_elsewhere(path: Path) -> None:
    """A shadow view's text names the view's columns: when another connection creates the
    view again with other columns, this connection's shadow is made again (regression)."""
    first = matview.connect(str(path))
    make_base(first)
    first.execute("CREATE MATERIALIZED VIEW w AS SELECT id, a FROM t WHERE a > 2")
    assert exact(first, "SELECT * FROM w") == exact(first, "SELECT id, a FROM t WHERE a > 2")
    second = matview.connect(str(path))
    second.execute("DROP MATERIALIZED VIEW w")
    second.execute("CREATE MATERIALIZED VIEW w AS SELECT id, r FROM t WHERE a > 2")
    second.close()
    assert exact(first, "SELECT * FROM w") == exact(first, "SELECT id, r FROM t WHERE a > 2")
    first.execute("INSERT INTO t(g, a, r) VALUES ('z', 9, 1.5)")
    assert exact(first, "SELECT * FROM w") == exact(first, "SELECT id, r FROM t WHERE a > 2")
    first.close()


def test_shadow_view_reads_pending_and_heavy_rows(path: Path) -> None:
    """The shadow view's parts: untouched rows of weight 1 (SQLite), rows of weight > 1 and rows
    pending changes touch (the virtual table), inside a transaction and after it."""
    conn = matview.connect(str(path))
    make_base(conn)
    conn.execute(f"CREATE MATERIALIZED VIEW heavy WITH (maintenance = 'deferred') AS {ROWS}")
    conn.execute("CREATE INDEX heavy_a ON heavy(a)")
    with conn:
        conn.execute("INSERT INTO t(g, a, b) SELECT g, a, b FROM t WHERE a IS NOT NULL LIMIT 5")
        conn.execute("DELETE FROM t WHERE id IN (SELECT id FROM t WHERE a IS NOT NULL LIMIT 3)")
        assert exact(conn, "SELECT * FROM heavy") == exact(conn, ROWS)
        for (a,) in conn.execute("SELECT DISTINCT a FROM t WHERE a IS NOT NULL LIMIT 4").fetchall():
            got = exact(conn, f"SELECT * FROM heavy WHERE a = {a}")
            assert got == exact(conn, f"SELECT * FROM ({ROWS}) WHERE a = {a}")
    assert exact(conn, "SELECT * FROM heavy") == exact(conn, ROWS)
    conn.flush()
    assert exact(conn, "SELECT * FROM heavy") == exact(conn, ROWS)
    assert stock_bag(path, "SELECT * FROM heavy") == exact(conn, ROWS)
    conn.close()


def test_shadow_view_with_awkward_column_names(path: Path) -> None:
    """Column names the shadow view's own parts use: a literal's name (`1`, as its one-row
    guard's), the pending-rows table's internal columns (regressions)."""
    conn = matview.connect(str(path))
    make_base(conn)
    views = {
        "lit": "SELECT 12, 1, a, -2 FROM t",
        "inner": "SELECT a AS __dbsp_keep, id AS __dbsp_any_pending, r AS __dbsp_schema_version FROM t",
    }
    for name, sql in views.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
    for name, sql in views.items():
        assert exact(conn, f"SELECT * FROM {name}") == exact(conn, sql)
    with conn:
        conn.execute("INSERT INTO t(g, a, r) VALUES ('n', 4, 2.5)")
        for name, sql in views.items():
            assert exact(conn, f"SELECT * FROM {name}") == exact(conn, sql)
    conn.close()


def test_an_expression_column_compares_without_affinity(tmp_path: Path) -> None:
    """(A review of the read path, older than it.) A view column that is an expression of the
    SELECT has no affinity there, so compared with a TEXT column 2 equals '2'; read back from
    its stored column (BLOB affinity) it did not: joins, IN and correlated subqueries over the
    view lost rows, through matview and through stock clients alike. Read as `+column` now."""
    import sqlite3

    path = tmp_path / "db.sqlite"
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, g INTEGER)")
    conn.execute("INSERT INTO t(g) VALUES (1), (2), (2)")
    conn.execute("CREATE TABLE s(a TEXT)")
    conn.execute("INSERT INTO s VALUES ('1'), ('2'), ('3')")
    views = {
        "va": "SELECT g, count(*) AS k FROM t GROUP BY g",
        "ve": "SELECT id, g + 1 AS k FROM t",
    }
    for name, sql in views.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
    conn.execute("INSERT INTO t(g) VALUES (1)")  # (pending-row path and stored rows both read)
    for name, sql in views.items():
        for query in [
            "SELECT s.a FROM s JOIN {v} v ON v.k = s.a",
            "SELECT a FROM s WHERE a IN (SELECT k FROM {v})",
            "SELECT s.a, (SELECT count(*) FROM {v} v WHERE v.k = s.a) FROM s",
        ]:
            want = sorted(conn.execute(query.format(v=f"({sql})")).fetchall())
            assert sorted(conn.execute(query.format(v=name)).fetchall()) == want, (name, query)
    conn.close()
    stock = sqlite3.connect(path)
    want = sorted(stock.execute("SELECT s.a FROM s JOIN (SELECT g, count(*) AS k FROM t GROUP BY g) v ON v.k = s.a"))
    assert sorted(stock.execute("SELECT s.a FROM s JOIN va v ON v.k = s.a")) == want
    stock.close()


def test_an_index_on_an_expression_column_serves_lookups_through_the_view(tmp_path: Path) -> None:
    """Such a column is read as `+column` (no affinity, as in the SELECT): the user's index on
    it is made on that expression, which SQLite matches, so a lookup stays a SEARCH."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, x INT)")
    conn.executemany("INSERT INTO t(x) VALUES (?)", [(i,) for i in range(300)])
    conn.execute("CREATE MATERIALIZED VIEW v AS SELECT id, x * 2 AS y FROM t WHERE x % 3 = 0")
    conn.execute("CREATE INDEX vy ON v(y)")
    plan = " ".join(str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN SELECT * FROM v WHERE y = ?", (6,)))
    assert "USING INDEX vy" in plan, plan
    assert conn.execute("SELECT * FROM v WHERE y = ?", (6,)).fetchall() == [(4, 6)]
