"""A view's columns are named as SQLite names its SELECT's: a column reference written in
another case than declared is named as declared (`SELECT L.ACCT … ` gives `acct`; a subquery
would name it as written, which is how they were probed before — a second real-world hunt's
finding, met by TPC-H kits writing upper-case names over lower-case DDL)."""

from __future__ import annotations

import sqlite3

import pytest

import matview
from matview.sql.validate import parse_select

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


def test_a_subquerys_table_alias_that_is_also_a_select_list_alias(tmp_path):
    """`o.status AS cust … EXISTS (SELECT 1 FROM customers cust WHERE cust.id = …)`: inside the
    subquery `cust` only names the table (a qualifier, or the alias given): maintained (refused
    before as a name that could be the select-list alias)."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INT, status TEXT)")
    select = (
        "SELECT o.id, o.status AS cust FROM orders o "
        "WHERE EXISTS (SELECT 1 FROM customers cust WHERE cust.id = o.customer_id)"
    )
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {select}")
    conn.execute("INSERT INTO customers(name) VALUES ('a')")
    conn.execute("INSERT INTO orders(customer_id, status) VALUES (1, 'x'), (2, 'y')")
    assert conn.execute("SELECT * FROM v").fetchall() == conn.execute(select).fetchall()


def test_messages_name_what_the_user_wrote(tmp_path):
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, d TEXT, k INT)")
    # timediff's arguments are two time values, not modifiers: maintained
    conn.execute("CREATE MATERIALIZED VIEW td AS SELECT id, timediff('2023-01-01', d) AS td FROM t")
    median = (
        "SELECT avg(k) FROM (SELECT k FROM t ORDER BY k LIMIT 2 - (SELECT count(*) FROM t) % 2 "
        "OFFSET (SELECT (count(*) - 1) / 2 FROM t))"
    )
    # a parse failure is plain text (sqlglot colours the failing token for terminals)
    with pytest.raises(matview.UnsupportedQuery) as raised:
        parse_select(median)
    assert "\x1b[" not in str(raised.value)
    # the median through LIMIT/OFFSET subqueries, refused before: recomputed whole
    conn.execute(f"CREATE MATERIALIZED VIEW median AS {median}")
    conn.execute("INSERT INTO t(k) VALUES (3), (1), (2), (8)")
    assert conn.execute("SELECT * FROM median").fetchall() == conn.execute(median).fetchall() == [(2.5,)]


@pytest.mark.parametrize(
    "select",
    [
        "SELECT id, timediff(d, 'subsec') FROM t",
        "SELECT datetime('subsec') FROM t",
        "SELECT julianday('SUBSECOND') FROM t",
        "SELECT strftime('%H', 'subsec') FROM t",
    ],
)
def test_subsec_as_the_time_value_is_the_clock(tmp_path, select):
    """'subsec' (or 'subsecond') as a time value means now, to the millisecond (a review found it
    accepted: the view held the clock of its CREATE and a later write failed)."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, d TEXT, k INT)")
    with pytest.raises(matview.UnsupportedQuery, match="not deterministic"):
        conn.execute(f"CREATE MATERIALIZED VIEW v AS {select}")


def test_create_over_text_that_is_not_utf8_is_a_clean_error(tmp_path):
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, g, b)")
    conn.execute("INSERT INTO t VALUES (1, 1, x'ff')")
    with pytest.raises(matview.Error, match="not valid UTF-8"):
        conn.execute("CREATE MATERIALIZED VIEW v AS SELECT g, group_concat(b) FROM t GROUP BY g")
    conn.execute("INSERT INTO t VALUES (2, 2, 3)")  # nothing left behind, writes go on
    assert conn.views() == []


def test_ddl_refusals_name_the_users_views_only(tmp_path):
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, g INT, v INT)")
    grouped = "(SELECT g, sum(v) AS s FROM t GROUP BY g)"
    conn.execute(f"CREATE MATERIALIZED VIEW m AS SELECT * FROM {grouped} x JOIN t ON t.g = x.g")
    with pytest.raises(matview.Error) as raised:
        conn.execute("ALTER TABLE t RENAME TO t2")
    assert "__dbsp" not in str(raised.value) and "m" in str(raised.value)


@pytest.mark.parametrize(
    "select",
    [
        "SELECT rowid, * FROM ledger",
        "SELECT L.ACCT, acct FROM ledger L",
        'SELECT amount, Amount, amount AS "amount:1" FROM ledger',
        "SELECT id, id, id FROM ledger ORDER BY id LIMIT 5",  # (recomputed whole)
    ],
)
def test_columns_of_one_name_are_named_as_create_view_names_them(tmp_path, select):
    """`id`, `id:1`, as SQLite's own CREATE VIEW (hunt 26: the first was named as a subquery
    names it, `ACCT` or `rowid`); REFRESH keeps them."""
    path = str(tmp_path / "db.sqlite")
    conn = matview.connect(path)
    conn.execute("CREATE TABLE ledger(id INTEGER PRIMARY KEY, acct INT, Amount INT)")
    conn.execute("INSERT INTO ledger VALUES (1, 1, 5), (2, 1, 7)")
    conn.execute(f"CREATE VIEW plain AS {select}")
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {select}")
    expected = [d[0] for d in conn.execute("SELECT * FROM plain").getdescription()]
    assert [d[0] for d in conn.execute("SELECT * FROM v").getdescription()] == expected
    conn.execute("REFRESH MATERIALIZED VIEW v")
    assert [d[0] for d in conn.execute("SELECT * FROM v").getdescription()] == expected
