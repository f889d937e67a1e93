"""Schema changes by other clients (stdlib sqlite3 in its own process) under a mix of views:
views that can go on go on (exact); the others raise SchemaChanged naming the cause and
recover with REFRESH, or say what they need; nothing else in the file is touched.

(Single-table views under ADD/RENAME/DROP COLUMN, DROP TABLE and a table recreated are in
tests/test_bad_input.py; this file runs them under joins, LEFT JOINs, subqueries and views
over views, plus CREATE/DROP INDEX and VACUUM of a table without INTEGER PRIMARY KEY.)
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
for _p in (str(_HERE), str(_HERE.parent)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from oracle import assert_view_matches  # noqa: E402
from reliability_workload import VIEWS, setup  # noqa: E402
from stock import stock_sqlite3  # noqa: E402

import matview  # noqa: E402

#: views over `k`, a table without INTEGER PRIMARY KEY (VACUUM may renumber its rowids)
K_VIEWS = {
    "k_agg": ("deferred", "SELECT substr(code, 1, 1) AS c, COUNT(*) AS n, SUM(qty) AS s FROM k GROUP BY 1"),
    "k_rows": ("immediate", "SELECT code, qty FROM k WHERE qty > 2"),
    "k_join": ("deferred", "SELECT k.code, t.val FROM k JOIN t ON t.grp = k.qty"),
}
ALL = {name: sql for name, (_, sql) in {**VIEWS, **K_VIEWS}.items()}


def make_file(tmp_path: Path) -> Path:
    path = tmp_path / "schema.db"
    setup(path, "WAL")
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE k(code TEXT, qty INTEGER)")
    with conn:
        conn.executemany("INSERT INTO k VALUES (?, ?)", [(f"{c}{i}", i % 7) for i in range(40) for c in "ab"])
        conn.executemany(
            "INSERT INTO t(txn, n, grp, val, note) VALUES (?, 1, ?, ?, ?)",
            [(i + 1, i % 12, i * 13 % 201 - 100, f"n{i}") for i in range(60)],
        )
    for name, (mode, sql) in K_VIEWS.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} WITH (maintenance = '{mode}') AS {sql}")
    conn.close()
    return path


def stock(path: Path, *statements: str) -> None:
    for sql in statements:  # (one at a time: VACUUM cannot run inside a transaction)
        result = stock_sqlite3(path, [sql])
        assert not result["errors"], result


def snapshot(conn: matview.Connection, tables: tuple[str, ...]) -> dict[str, list[tuple[object, ...]]]:
    return {t: sorted(map(tuple, conn.execute(f"SELECT * FROM {t}").fetchall()), key=repr) for t in tables}


def writes_from_both_sides(path: Path) -> None:
    """Pending changes of every kind, from a stock client and through matview."""
    stock(
        path,
        "UPDATE k SET qty = qty + 1 WHERE code LIKE 'a1%'",
        "DELETE FROM k WHERE code IN ('b3', 'a17', 'b22')",
        "INSERT INTO t(txn, n, grp, val, note) VALUES (900, 1, 4, 44, 'stock')",
    )
    conn = matview.connect(str(path))
    with conn:
        conn.execute("UPDATE k SET qty = 6 WHERE code = 'b5'")
        conn.execute("DELETE FROM t WHERE id % 9 = 0")
        conn.execute("UPDATE u SET w = 4 WHERE grp = 3")
    conn.close()


@pytest.mark.parametrize("pending", [False, True], ids=["folded", "pending"])
def test_create_index_vacuum_and_dropped_join_index_leave_every_view_exact(tmp_path: Path, pending: bool) -> None:
    path = make_file(tmp_path)
    if pending:  # a stock client's changes wait in the log while the rowids move
        stock(path, "UPDATE k SET qty = 5 WHERE code = 'a3'", "DELETE FROM k WHERE code = 'b4'")
    conn = matview.connect(str(path))
    join_indexes = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE name LIKE '__dbsp_ix_%'")]
    conn.close()
    stock(
        path,
        "CREATE INDEX k_code ON k(code)",
        "CREATE INDEX t_val ON t(val, note)",
        "DELETE FROM k WHERE rowid % 5 = 0",  # holes VACUUM closes: the rowids of k move
        "VACUUM",
        *(f'DROP INDEX "{name}"' for name in join_indexes[:1]),
    )
    writes_from_both_sides(path)
    stock(path, "VACUUM")
    conn = matview.connect(str(path))
    try:
        for name, sql in ALL.items():
            assert_view_matches(conn, name, sql)
        conn.execute("UPDATE k SET qty = qty - 1")
        conn.execute("DELETE FROM k WHERE qty = 3")
        conn.flush()
        for name, sql in ALL.items():
            assert_view_matches(conn, name, sql)
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()


#: DDL by a stock client: (statements, views that must raise SchemaChanged, a word of its
#: message, views that REFRESH brings back; the others stay refused and say what they need)
CHANGES = {
    "add column": (
        ["ALTER TABLE u ADD COLUMN z INTEGER DEFAULT 3"],
        {"v_join", "v_left", "v_sub", "v_over_def"},
        "altered",
        {"v_join", "v_left", "v_sub", "v_over_def"},
    ),
    "rename column": (
        ["ALTER TABLE u RENAME COLUMN label TO title"],
        {"v_join", "v_left", "v_sub", "v_over_def"},
        "altered",
        {"v_sub"},
    ),
    "drop table": (
        ["DROP TABLE k"],
        {"k_agg", "k_rows", "k_join"},
        "dropped",
        set(),
    ),
    "table recreated": (
        ["DROP TABLE k", "CREATE TABLE k(code TEXT, qty INTEGER)", "INSERT INTO k VALUES ('z1', 3), ('a1', 5)"],
        {"k_agg", "k_rows", "k_join"},
        "created again",
        {"k_agg", "k_rows", "k_join"},
    ),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_schema_change_by_another_client(tmp_path: Path, change: str) -> None:
    statements, broken, word, recovers = CHANGES[change]
    path = make_file(tmp_path)
    conn = matview.connect(str(path))
    untouched = tuple(t for t in ("t", "u", "k") if not any(t in s.split() for s in statements))
    before = snapshot(conn, untouched)
    conn.close()
    stock(path, *statements)
    conn = matview.connect(str(path))
    try:
        for name, sql in ALL.items():
            if name in broken:
                with pytest.raises(matview.SchemaChanged, match=word):
                    conn.execute(f"SELECT * FROM {name}").fetchall()
            else:  # views that can go on go on, through writes too
                assert_view_matches(conn, name, sql)
        with conn:
            conn.execute("INSERT INTO t(txn, n, grp, val, note) VALUES (901, 1, 2, 5, 'after')")
        for name in sorted(broken):
            try:
                conn.execute(f"REFRESH MATERIALIZED VIEW {name}")
            except matview.Error as exc:
                assert name not in recovers, f"{name}: {exc}"
                continue
            assert name in recovers, f"{name} came back after {change}"
        for name, sql in ALL.items():
            if name not in broken or name in recovers:
                assert_view_matches(conn, name, sql)
            else:
                with pytest.raises(matview.Error):
                    conn.execute(f"SELECT * FROM {name}").fetchall()
        after = snapshot(conn, untouched)
        for table in untouched:  # nothing else in the file was touched (t only gained our row)
            rows = [r for r in after[table] if not (table == "t" and r[5] == "after")]
            assert rows == before[table], table
    finally:
        conn.close()


@pytest.mark.parametrize(
    "ddl",
    ["ALTER TABLE a ADD COLUMN z INTEGER DEFAULT 5", "ALTER TABLE a RENAME COLUMN y TO z"],
)
def test_a_view_over_a_column_another_client_added_sees_its_changes(tmp_path, ddl):
    """Another client alters a table views already read; a view created then over the new
    column must not keep the old delta log (its triggers mirror the old columns, and would
    miss the column's changes): the capture is rebuilt, and the older views with it."""
    path = tmp_path / "db.sqlite"
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE a(id INTEGER PRIMARY KEY, g TEXT, y INTEGER DEFAULT 5)")
    conn.execute("INSERT INTO a(g) VALUES ('p'), ('q')")
    conn.execute("CREATE MATERIALIZED VIEW old AS SELECT g, count(*) AS n FROM a GROUP BY g")
    stock_sqlite3(path, [ddl])
    select = "SELECT g, sum(z) AS sz FROM a GROUP BY g"
    conn.execute(f"CREATE MATERIALIZED VIEW vz AS {select}")
    conn.execute("UPDATE a SET z = 100 WHERE g = 'p'")
    conn.execute("INSERT INTO a(g, z) VALUES ('t', 3)")
    stock_sqlite3(path, ["INSERT INTO a(g, z) VALUES ('t', 4)", "DELETE FROM a WHERE g = 'q'"])
    assert_view_matches(conn, "vz", select)
    assert_view_matches(conn, "old", "SELECT g, count(*) AS n FROM a GROUP BY g")


def test_refresh_rebuilds_the_capture_of_a_table_read_only_through_a_node(tmp_path):
    """REFRESH of a view whose altered table it reads only through an internal node (a LEFT
    JOIN to an aggregate) rebuilds that table's capture too (it kept logging the old columns,
    and later writes were folded with the columns swapped)."""
    path = tmp_path / "db.sqlite"
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE c(id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("CREATE TABLE o(id INTEGER PRIMARY KEY, cid INTEGER, amt INTEGER)")
    conn.execute("INSERT INTO c(name) VALUES ('a'), ('b'), ('c')")
    conn.execute("INSERT INTO o(cid, amt) VALUES (1, 5), (2, 3)")
    select = (
        "SELECT c.id, coalesce(t.total, 0) AS tot FROM c LEFT JOIN "
        "(SELECT cid, sum(amt) AS total FROM o GROUP BY cid) t ON t.cid = c.id"
    )
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {select}")
    swap = ["ALTER TABLE o RENAME COLUMN cid TO tmp", "ALTER TABLE o RENAME COLUMN amt TO cid"]
    stock_sqlite3(path, [*swap, "ALTER TABLE o RENAME COLUMN tmp TO amt"])
    with pytest.raises(matview.Error, match="REFRESH"):
        conn.execute("SELECT * FROM v").fetchall()
    conn.execute("REFRESH MATERIALIZED VIEW v")
    conn.execute("INSERT INTO o(cid, amt) VALUES (3, 40)")
    assert_view_matches(conn, "v", select)


def test_add_column_on_a_matview_connection_rebuilds_the_views_over_the_table(tmp_path):
    """An application's migration `ALTER TABLE t ADD COLUMN …` on a table views read: the column
    is added and every view over the table rebuilt in the same transaction (was refused); a view
    whose columns would change (`SELECT *`) makes it fail, naming it, with nothing changed. A
    DROP/ALTER of the user's own TEMP table of that name is the user's business."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, g TEXT, x INT)")
    conn.execute("INSERT INTO t(g, x) VALUES ('a', 1), ('b', 2)")
    views = {"agg": "SELECT g, sum(x) AS s FROM t GROUP BY g", "rows": "SELECT id, g, x FROM t WHERE x > 0"}
    conn.execute(f"CREATE MATERIALIZED VIEW agg WITH (maintenance = 'deferred') AS {views['agg']}")
    conn.execute(f"CREATE MATERIALIZED VIEW rows AS {views['rows']}")
    conn.execute("INSERT INTO t(g, x) VALUES ('a', 5)")
    conn.execute("ALTER TABLE t ADD COLUMN z INTEGER DEFAULT 7")
    conn.execute("INSERT INTO t(g, x, z) VALUES ('c', 3, 9)")
    views["by_z"] = "SELECT g, sum(z) FROM t GROUP BY g"
    conn.execute(f"CREATE MATERIALIZED VIEW by_z AS {views['by_z']}")
    conn.execute("UPDATE t SET z = 1, x = x + 1 WHERE g = 'a'")
    for name, select in views.items():
        assert_view_matches(conn, name, select)
    conn.execute("CREATE MATERIALIZED VIEW everything AS SELECT * FROM t")
    with pytest.raises(matview.Error, match="everything: its columns would change"):
        conn.execute("ALTER TABLE t ADD COLUMN w TEXT")
    assert [row[1] for row in conn.execute("PRAGMA table_info(t)")] == ["id", "g", "x", "z"]
    with pytest.raises(matview.Error, match="DROP MATERIALIZED VIEW them first"):
        conn.execute("ALTER TABLE t RENAME COLUMN x TO y")
    conn.execute("CREATE TEMP TABLE t(q)")
    conn.execute("ALTER TABLE t ADD COLUMN r")  # the temp table, which the name means first
    conn.execute("DROP TABLE temp.t")
    conn.execute("INSERT INTO t(g, x) VALUES ('d', 4)")
    for name, select in views.items():
        assert_view_matches(conn, name, select)


@pytest.mark.parametrize(
    "migration",
    [
        # SQLite's 12-step ALTER: a new table copied, the old one dropped, the new one renamed
        [
            "CREATE TABLE a_new(id INTEGER PRIMARY KEY, g TEXT, x INTEGER)",
            "INSERT INTO a_new SELECT id, g, x * 10 FROM a",
            "DROP TABLE a",
            "ALTER TABLE a_new RENAME TO a",
        ],
        # the old table renamed away (its triggers go with it), a new one made under the name
        [
            "ALTER TABLE a RENAME TO a_backup",
            "CREATE TABLE a(id INTEGER PRIMARY KEY, g TEXT, x INTEGER)",
            "INSERT INTO a(g, x) SELECT g, x * 10 FROM a_backup",
        ],
    ],
)
def test_a_table_another_client_replaced_is_never_read_through_the_old_capture(tmp_path, migration):
    """A view over a table another client replaced reads as an error until REFRESH; creating
    another view on the table rebuilds the capture and the old view with it (it used to answer
    again with its stale rows), and writes to a renamed-away table are not folded as the new one's."""
    path = tmp_path / "db.sqlite"
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE a(id INTEGER PRIMARY KEY, g TEXT, x INTEGER)")
    conn.execute("INSERT INTO a(g, x) VALUES ('p', 1), ('q', 2)")
    select = "SELECT g, sum(x) AS s FROM a GROUP BY g"
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {select}")
    stock_sqlite3(path, migration)
    with pytest.raises(matview.SchemaChanged):
        conn.execute("SELECT * FROM v").fetchall()
    conn.execute("INSERT INTO a(g, x) VALUES ('m', 7)")
    conn.execute("CREATE MATERIALIZED VIEW other AS SELECT count(*) AS n FROM a")
    conn.execute("INSERT INTO a(g, x) VALUES ('m', 9)")
    if "a_backup" in " ".join(migration):
        conn.execute("INSERT INTO a_backup(g, x) VALUES ('old', 5)")
    assert_view_matches(conn, "v", select)
    assert_view_matches(conn, "other", "SELECT count(*) AS n FROM a")
