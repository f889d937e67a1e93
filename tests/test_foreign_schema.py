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
