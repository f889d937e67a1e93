"""Regressions found by a hostile hunt over two-table outer joins: a user column named rowid
was read as the rowid in old states (fixed in delta_terms.DeltaTerms); these keep it fixed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_view_matches

import matview

MODES = ("immediate", "deferred")


def _steps(conn, transactions):
    for statements in transactions:
        conn.execute("BEGIN")
        for sql in statements:
            conn.execute(sql)
        conn.execute("COMMIT")


@pytest.mark.parametrize("mode", MODES)
def test_preserved_table_with_a_column_named_rowid_keeps_stale_padding(tmp_path, mode):
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE p(rowid TEXT, k INT)")
    conn.execute("CREATE TABLE n(id INTEGER PRIMARY KEY, k INT)")
    sql = "SELECT p.k, n.id FROM p LEFT JOIN n ON p.k = n.k"
    conn.execute(f"CREATE MATERIALIZED VIEW v WITH (maintenance = '{mode}') AS {sql}")
    steps = [["INSERT INTO p VALUES (NULL, 1)"], ["INSERT INTO p VALUES (NULL, 2)", "INSERT INTO n VALUES (1, 1)"]]
    _steps(conn, steps)
    assert_view_matches(conn, "v", sql)


@pytest.mark.parametrize("join", ["FROM n JOIN p ON p.k = n.k", "FROM p LEFT JOIN n ON p.k = n.k"])
@pytest.mark.parametrize("mode", MODES)
def test_oid_of_a_table_with_a_column_named_rowid(tmp_path, mode, join):
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE p(id INTEGER PRIMARY KEY, rowid TEXT, k INT)")
    conn.execute("CREATE TABLE n(id INTEGER PRIMARY KEY, k INT)")
    sql = f"SELECT p.oid, n.id {join}"
    conn.execute(f"CREATE MATERIALIZED VIEW v WITH (maintenance = '{mode}') AS {sql}")
    _steps(
        conn,
        [
            ["INSERT INTO p VALUES (1, 'zz', 1)"],
            ["INSERT INTO p VALUES (2, 'yy', 2)", "INSERT INTO n VALUES (1, 1)", "INSERT INTO n VALUES (2, 2)"],
        ],
    )
    assert_view_matches(conn, "v", sql)
