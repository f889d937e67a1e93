"""Views maintained per row of a table without a PRIMARY KEY (TPC-H as its own DDL declares
it: no keys at all). Such a root's rows are known by rowid, which VACUUM renumbers only in a
table without any index: matview keeps an empty one on it (`indexes.keep_rowids`), and a view
whose index is gone reads as broken until REFRESH, never wrong."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_views_match, check_write_mix
from stock import stock_sqlite3

import matview

SETUP = [
    "CREATE TABLE o(cust, amount INTEGER, status TEXT)",  # no key, no index: rows may repeat
    "CREATE TABLE l(ok INTEGER, qty)",
    "CREATE TABLE c(id INTEGER PRIMARY KEY, seg TEXT)",
    "INSERT INTO o VALUES (1, 10, 'open'), (1, 10, 'open'), (2, 5, 'done'), (3, NULL, 'open'), (NULL, 7, 'done')",
    "INSERT INTO l VALUES (1, 2), (1, 2), (2, 1), (4, 3.5), (NULL, 1)",
    "INSERT INTO c VALUES (1, 'retail'), (2, 'corp'), (5, 'retail')",
]

VIEWS = {
    "exists": "SELECT cust, amount FROM o WHERE EXISTS (SELECT 1 FROM l WHERE l.ok = o.cust AND l.qty > 1)",
    "not_exists": "SELECT * FROM o WHERE NOT EXISTS (SELECT 1 FROM c WHERE c.id = o.cust)",
    "in_list": "SELECT cust, status FROM o WHERE cust IN (SELECT ok FROM l WHERE qty < 3)",
    "q17": "SELECT sum(amount) / 7.0 AS yearly FROM o WHERE amount > (SELECT 2 * avg(qty) FROM l WHERE l.ok = o.cust)",
    "scalar": "SELECT cust, (SELECT max(qty) FROM l WHERE l.ok = o.cust) AS top FROM o",
    "left_chain": "SELECT o.cust, o.amount, c.seg, l.qty FROM o LEFT JOIN c ON c.id = o.cust "
    "LEFT JOIN l ON l.ok = o.cust",
    "left_grouped": "SELECT o.status, count(l.qty) AS n, sum(o.amount) AS s FROM o LEFT JOIN l ON l.ok = o.cust "
    "GROUP BY o.status",
    "right": "SELECT c.id, o.amount FROM o RIGHT JOIN c ON c.id = o.cust",
    "right_root": "SELECT c.seg, o.cust, o.amount, l.qty FROM c RIGHT JOIN o ON c.id = o.cust JOIN l ON l.ok = o.cust",
    "left_then_right": "SELECT o.amount, l.qty, c.id FROM o LEFT JOIN l ON l.ok = o.cust RIGHT JOIN c ON c.id = o.cust",
}


def _write(conn: Any, rng: random.Random) -> None:
    cust = rng.choice(["1", "2", "3", "4", "NULL", "1.0", "'1'"])
    amount = rng.choice(["10", "5", "NULL", "7", "2.5"])
    status = rng.choice(["'open'", "'done'"])
    kind = rng.random()
    if kind < 0.25:
        conn.execute(f"INSERT INTO o VALUES ({cust}, {amount}, {status})")
    elif kind < 0.35:
        conn.execute("INSERT INTO o SELECT * FROM o WHERE rowid = (SELECT min(rowid) FROM o)")  # a duplicate
    elif kind < 0.45:
        conn.execute("DELETE FROM o WHERE rowid = (SELECT max(rowid) FROM o WHERE cust IS 1)")  # one of equal rows
    elif kind < 0.55:
        conn.execute(f"UPDATE o SET amount = {amount}, cust = {cust} WHERE rowid % 3 = {rng.randint(0, 2)}")
    elif kind < 0.62:
        conn.execute("UPDATE o SET rowid = (SELECT max(rowid) + 1 FROM o) WHERE rowid = (SELECT min(rowid) FROM o)")
    elif kind < 0.68:
        conn.execute(
            f"REPLACE INTO o(rowid, cust, amount, status) VALUES ({rng.randint(1, 8)}, {cust}, {amount}, {status})"
        )
    elif kind < 0.8:
        conn.execute(f"INSERT INTO l VALUES ({cust}, {rng.choice(['1', '2', '3.5', 'NULL'])})")
    elif kind < 0.88:
        conn.execute(f"DELETE FROM l WHERE rowid = (SELECT min(rowid) FROM l WHERE ok IS {cust})")
    elif kind < 0.95:
        conn.execute(f"REPLACE INTO c VALUES ({rng.randint(1, 5)}, {rng.choice(['NULL', chr(39) + 'corp' + chr(39)])})")
    else:
        conn.execute("DELETE FROM o")
        conn.execute("INSERT INTO o VALUES (2, 5, 'done'), (1, 10, 'open')")


@pytest.mark.parametrize("seed", range(3))
def test_keyless_roots_maintained_under_writes(tmp_path: Path, seed: int) -> None:
    conn, live = check_write_mix(tmp_path, SETUP, VIEWS, _write, seed, steps=12)
    for view in live:
        assert "recomputed whole" not in conn.view(view).explain(), view
    indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    # (l comes before a RIGHT JOIN's root in left_then_right; c has an INTEGER PRIMARY KEY)
    assert {"__dbsp_rowids_o", "__dbsp_rowids_l"} <= indexes and "__dbsp_rowids_c" not in indexes
    conn.close()


def test_vacuum_keeps_the_rowids_views_know(tmp_path: Path) -> None:
    """VACUUM, by matview and by a stock client, after deletes that leave gaps in the rowids:
    the views stay equal to their SELECTs through the writes after it. With `indexes = 'off'`
    matview's empty index is the only one on the root."""
    path = tmp_path / "db.sqlite"
    conn = matview.connect(str(path))
    for sql in SETUP:
        conn.execute(sql)
    live = {}
    for name, select in VIEWS.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} WITH (indexes = 'off') AS {select}")
        live[name] = select
    assert [row[1] for row in conn.execute("PRAGMA index_list(o)")] == ["__dbsp_rowids_o"]
    rng = random.Random(3)
    with conn:
        for _ in range(40):
            _write(conn, rng)
        conn.execute("DELETE FROM o WHERE rowid % 2 = 0")
    before = conn.execute("SELECT rowid, * FROM o ORDER BY rowid").fetchall()
    conn.execute("VACUUM")
    assert conn.execute("SELECT rowid, * FROM o ORDER BY rowid").fetchall() == before
    conn.close()
    stock_sqlite3(path, ["DELETE FROM o WHERE rowid % 3 = 0", "INSERT INTO o VALUES (1, 10, 'open')"])
    stock_sqlite3(path, ["VACUUM"])
    conn = matview.connect(str(path))
    assert_views_match(conn, live)
    for _ in range(8):
        with conn:
            for _ in range(3):
                _write(conn, rng)
        assert_views_match(conn, live)
    for view in list(live):
        conn.execute(f"DROP MATERIALIZED VIEW {view}")
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = '__dbsp_rowids_o'").fetchone() == (0,)
    conn.close()


def test_a_dropped_rowid_index_breaks_the_view_until_refresh(tmp_path: Path) -> None:
    """Another client drops matview's index and VACUUMs (the rowids move): the view reads as an
    error naming REFRESH — never stale rows — writes go on, and REFRESH rebuilds it exactly."""
    path = tmp_path / "db.sqlite"
    conn = matview.connect(str(path))
    for sql in SETUP:
        conn.execute(sql)
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {VIEWS['exists']}")
    conn.execute("DELETE FROM o WHERE rowid IN (1, 3)")
    conn.close()
    stock_sqlite3(path, ["DROP INDEX __dbsp_rowids_o"])
    stock_sqlite3(path, ["VACUUM"])
    conn = matview.connect(str(path))
    with pytest.raises(matview.Error, match="REFRESH MATERIALIZED VIEW v"):
        conn.execute("SELECT * FROM v").fetchall()
    with conn:
        conn.execute("INSERT INTO o VALUES (1, 3, 'open')")  # a write is never blocked by a view
    conn.execute("REFRESH MATERIALIZED VIEW v")
    assert_views_match(conn, {"v": VIEWS["exists"]})
    conn.execute("DELETE FROM o WHERE rowid = 2")
    assert_views_match(conn, {"v": VIEWS["exists"]})
    conn.close()


@pytest.mark.parametrize("vacuum_by", ["matview", "stock"])
def test_rowids_after_a_vacuum_are_the_rows_the_view_knows(tmp_path: Path, vacuum_by: str) -> None:
    """Gaps in the rowids, a VACUUM, then changes to rows whose rowids a renumbering would have
    moved: each reaches the root row the view knows by that rowid (without matview's index,
    the view kept a row whose match was deleted and showed an updated row twice)."""
    path = tmp_path / "db.sqlite"
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE o(cust, amount)")
    conn.execute("CREATE TABLE l(ok, qty)")
    conn.execute("INSERT INTO o VALUES (1, 10), (2, 20), (3, 30), (4, 40), (5, 50), (6, 60)")
    conn.execute("INSERT INTO l VALUES (1, 1), (2, 1), (3, 1), (4, 1), (5, 1), (6, 1)")
    select = "SELECT cust, amount FROM o WHERE EXISTS (SELECT 1 FROM l WHERE l.ok = o.cust)"
    conn.execute(f"CREATE MATERIALIZED VIEW v WITH (indexes = 'off') AS {select}")
    conn.execute("DELETE FROM o WHERE cust IN (1, 3)")
    before = conn.execute("SELECT rowid, * FROM o ORDER BY rowid").fetchall()
    if vacuum_by == "matview":
        conn.execute("VACUUM")
    else:
        conn.close()
        stock_sqlite3(path, ["VACUUM"])
        conn = matview.connect(str(path))
    assert conn.execute("SELECT rowid, * FROM o ORDER BY rowid").fetchall() == before
    conn.execute("DELETE FROM l WHERE ok = 4")
    conn.execute("UPDATE o SET amount = amount + 1 WHERE cust = 5")
    assert_views_match(conn, {"v": select})
    conn.close()


def _stock_script(path: Path, *statements: str) -> None:
    """Each statement in a transaction of its own (VACUUM runs outside one), by a stock client."""
    for sql in statements:
        assert not stock_sqlite3(path, [sql])["errors"]


SELECT_EXISTS = "SELECT x FROM o WHERE EXISTS (SELECT 1 FROM l WHERE l.k = o.x)"


def _guarded_file(path: Path, options: str = "") -> Any:
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE o(x)")
    conn.execute("CREATE TABLE l(k)")
    conn.execute("INSERT INTO l VALUES (1), (2), (3), (4)")
    conn.execute("INSERT INTO o VALUES (1), (2), (3), (4)")
    conn.execute(f"CREATE MATERIALIZED VIEW v {options} AS {SELECT_EXISTS}")
    return conn


@pytest.mark.parametrize("maintenance", ["immediate", "deferred"])
def test_a_view_that_lost_its_rowid_index_stays_broken_when_another_view_brings_it_back(
    tmp_path: Path, maintenance: str
) -> None:
    """Hunt 44: another client dropped the index and VACUUMed (rowids 2, 4 became 1, 2); a new
    view over the table made the index again — the first view read wrong rows as if nothing
    had happened. It stays broken until its own REFRESH."""
    path = tmp_path / "db.sqlite"
    conn = _guarded_file(path, f"WITH (indexes = 'off', maintenance = '{maintenance}')")
    conn.execute("DELETE FROM o WHERE x IN (1, 3)")
    conn.close()
    _stock_script(path, "DROP INDEX __dbsp_rowids_o", "VACUUM")
    conn = matview.connect(str(path))
    conn.execute("CREATE MATERIALIZED VIEW w WITH (indexes = 'off') AS SELECT x FROM o WHERE x IN (SELECT k FROM l)")
    conn.execute("DELETE FROM l WHERE k = 4")
    with pytest.raises(matview.Error, match="REFRESH MATERIALIZED VIEW v"):
        conn.execute("SELECT * FROM v").fetchall()
    assert_views_match(conn, {"w": "SELECT x FROM o WHERE x IN (SELECT k FROM l)"})
    conn.execute("REFRESH MATERIALIZED VIEW v")
    conn.execute("DELETE FROM l WHERE k = 2")
    assert_views_match(conn, {"v": SELECT_EXISTS})
    conn.close()


def test_a_table_renamed_away_takes_its_rowid_index_and_refresh_makes_one_for_the_new_table(tmp_path: Path) -> None:
    """Hunt 44: RENAME carries the index to the old table; REFRESH of the view over a new
    table of the name found the index name taken and made none — a later VACUUM renumbered the
    new table's rowids under the view."""
    path = tmp_path / "db.sqlite"
    _guarded_file(path).close()
    _stock_script(path, "ALTER TABLE o RENAME TO o_old", "CREATE TABLE o(x)", "INSERT INTO o VALUES (1), (2), (3), (4)")
    conn = matview.connect(str(path))
    conn.execute("REFRESH MATERIALIZED VIEW v")
    on = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master WHERE name = '__dbsp_rowids_o'").fetchall())
    assert on == {"__dbsp_rowids_o": "o"}
    conn.execute("DELETE FROM o WHERE x IN (1, 3)")
    conn.close()
    _stock_script(path, "VACUUM")
    conn = matview.connect(str(path))
    conn.execute("DELETE FROM l WHERE k = 4")
    assert_views_match(conn, {"v": SELECT_EXISTS})
    conn.close()
