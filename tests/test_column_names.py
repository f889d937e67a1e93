"""A view's columns are named as SQLite names its SELECT's: a column reference written in
another case than declared is named as declared (`SELECT L.ACCT … ` gives `acct`; a subquery
would name it as written, which is how they were probed before — a second real-world hunt's
finding, met by TPC-H kits writing upper-case names over lower-case DDL)."""

from __future__ import annotations

import sqlite3

import pytest

import matview

SELECTS = [
    "SELECT L.ACCT, L.Amount FROM ledger L",
    "SELECT ACCT, count(*) FROM ledger GROUP BY ACCT",
    "SELECT ACCT FROM ledger UNION SELECT Amount FROM ledger",
    "SELECT Id, (SELECT count(*) FROM ledger x WHERE x.ACCT = ledger.ACCT) FROM ledger",
]


@pytest.mark.parametrize("select", SELECTS)
def test_names_are_the_selects(tmp_path, select):
    path = str(tmp_path / "db.sqlite")
    conn = matview.connect(path)
    conn.execute("CREATE TABLE ledger(id INTEGER PRIMARY KEY, acct INT, amount INT)")
    conn.execute("INSERT INTO ledger VALUES (1, 1, 5), (2, 1, 7)")
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {select}")
    expected = [d[0] for d in conn.apsw.cursor().execute(select).getdescription()]
    assert [d[0] for d in conn.execute("SELECT * FROM v").getdescription()] == expected
    stock = sqlite3.connect(path)
    assert [d[0] for d in stock.execute("SELECT * FROM v").description] == expected
