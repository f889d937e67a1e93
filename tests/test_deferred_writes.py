"""A write in autocommit mode on a connection whose views are all deferred runs in SQLite's own
transaction (the capture triggers log it there): no BEGIN/COMMIT of matview's, no fold — until
the backlog passes `pending_limit`, which folds right after (`Connection._deferred_write`)."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from oracle import assert_view_matches

import matview

GROUPED = "SELECT g, count(*) AS n, sum(x) AS s FROM t GROUP BY g"


def make(path: Path, pending_limit: int = 1000, maintenance: str = "deferred") -> matview.Connection:
    conn = matview.connect(str(path), pending_limit=pending_limit)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, g INT, x INT UNIQUE)")
    conn.execute(f"CREATE MATERIALIZED VIEW v WITH (maintenance = '{maintenance}') AS {GROUPED}")
    return conn


def statements_of(conn: matview.Connection, sql: str, params: tuple[object, ...] = ()) -> list[str]:
    seen: list[str] = []
    conn.apsw.set_profile(lambda statement, _ns: seen.append(statement.split()[0].upper()))
    try:
        conn.execute(sql, params)
    finally:
        conn.apsw.set_profile(None)
    return seen


def test_a_deferred_write_is_one_statement(tmp_path: Path) -> None:
    conn = make(tmp_path / "d.db")
    seen = statements_of(conn, "INSERT INTO t (g, x) VALUES (?, ?)", (1, 10))
    assert "BEGIN" not in seen and "COMMIT" not in seen and seen.count("INSERT") == 1, seen
    assert conn.apsw.last_insert_rowid() == 1 and conn.changes() == 1
    assert conn.view("v").pending() == 1
    with pytest.raises(apsw.ConstraintError):
        conn.execute("INSERT INTO t (g, x) VALUES (2, 10)")  # (x is UNIQUE: nothing logged)
    assert conn.view("v").pending() == 1
    assert_view_matches(conn, "v", GROUPED)
    immediate = make(tmp_path / "i.db", maintenance="immediate")
    assert "COMMIT" in statements_of(immediate, "INSERT INTO t (g, x) VALUES (1, 10)")


def test_past_the_limit_the_backlog_folds_right_after(tmp_path: Path) -> None:
    conn = make(tmp_path / "l.db", pending_limit=10)
    for i in range(40):
        conn.execute("INSERT INTO t (g, x) VALUES (?, ?)", (i % 3, i))
        assert conn.view("v").pending() <= 15, i  # (the limit is soft: counted every limit/2 writes)
    conn.execute("UPDATE t SET x = x + 100 WHERE g = 1")
    conn.execute("DELETE FROM t WHERE g = 2")
    other = matview.connect(str(tmp_path / "l.db"))
    assert_view_matches(other, "v", GROUPED)
    assert_view_matches(conn, "v", GROUPED)
