# ruff: noqa: E501  (SQL and data stay on one line each)
"""A hostile differential hunt over `A FULL [OUTER] JOIN B ON …` (delta_terms.DeltaTerms._full_terms).

No divergence from SQLite was found (see /tmp/full_join_hunt.md for what was tried); these are
the shapes that held, kept as regression tests: every view must equal its SELECT re-run, as a
bag of typed rows, after every step, in both maintenance modes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_view_matches, run_scenario
from stock import stock_sqlite3

import matview


def _bulk(table: str, n: int, key: str, offset: int = 0) -> str:
    return (
        f"INSERT OR REPLACE INTO {table} WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
        f"WHERE x < {n}) SELECT x + {offset}, {key}, x % 4 FROM c"
    )


def _check(conn, live):
    for view, sql in live.items():
        assert_view_matches(conn, view, sql)


J = "FROM a x FULL JOIN b y ON"
ON_SHAPES = {
    "eq": f"SELECT x.id, y.id, x.k, y.k {J} x.k = y.k",
    "eq_flipped": f"SELECT x.id, y.id, x.k, y.k {J} y.k = x.k",
    "is": f"SELECT x.id, y.id {J} x.k IS y.k",
    "or": f"SELECT x.id, y.id {J} x.k = y.k OR x.v = y.v",
    "ineq": f"SELECT x.id, y.id {J} x.v < y.v",
    "on1": f"SELECT x.id, y.id {J} 1",
    "on0": f"SELECT x.id, y.id, y.k {J} 0",
    "left_only": f"SELECT x.id, y.id {J} x.v > 1",
    "right_only": f"SELECT x.id, y.id {J} y.v > 1",
    "const": f"SELECT x.id, y.id {J} x.k = 1 AND y.k IS NOT NULL",
    "star": "SELECT * FROM a FULL JOIN b ON a.k = b.k AND a.v > 1",
    "anti": f"SELECT x.id, y.id {J} x.k = y.k WHERE x.id IS NULL OR y.id IS NULL",
    "where_or": f"SELECT x.id, y.id {J} x.k = y.k WHERE y.id IS NULL OR x.v = 2",
    "case": (
        f"SELECT coalesce(x.v, y.v, -1), CASE WHEN x.id IS NULL THEN 'L' WHEN y.id IS NULL THEN 'R' ELSE 'B' END "
        f"{J} x.k = y.k WHERE coalesce(x.v, y.v) > 0"
    ),
    "agg": f"SELECT count(*), count(x.id), count(y.id), sum(x.v), total(y.v), avg(x.v) {J} x.k = y.k",
    "group_left": f"SELECT x.v, count(*), count(y.id), sum(y.v) {J} x.k = y.k GROUP BY x.v",
    "group_coalesce": f"SELECT coalesce(x.v, y.v) AS g, count(*), count(x.id), max(y.id) {J} x.v = y.v GROUP BY g",
    "having": f"SELECT y.v, count(*), sum(x.v) {J} x.k = y.k AND y.v > 0 GROUP BY y.v HAVING count(*) > 1",
    "distinct": f"SELECT DISTINCT x.id IS NULL, y.id IS NULL, x.v {J} x.k = y.k",
}


@pytest.mark.parametrize(
    ("a_key", "b_key", "values"),
    [
        ("INTEGER", "TEXT", ["1", 1, 1.0, None, 2]),
        ("", "REAL", [1, 1.0, "1", None, "a"]),
        ("TEXT COLLATE NOCASE", "TEXT", ["a", "A", "b", None]),
    ],
)
def test_full_join_on_shapes_with_mixed_keys(tmp_path, a_key, b_key, values):
    """Both sides written in one transaction, join-key updates, NULL keys, REPLACE, upserts,
    rowid reuse, delete-everything-then-reinsert; 1/1.0/'1' and NOCASE keys (the left operand
    decides the collation: `x.k = y.k` and `y.k = x.k` differ)."""
    lit = lambda v: "NULL" if v is None else (f"'{v}'" if isinstance(v, str) else repr(v))  # noqa: E731
    v = [lit(x) for x in values]
    setup = [
        f"CREATE TABLE a(id INTEGER PRIMARY KEY, k {a_key}, v INTEGER)",
        f"CREATE TABLE b(id INTEGER PRIMARY KEY, k {b_key}, v INTEGER)",
        f"INSERT INTO a VALUES (1, {v[0]}, 1), (2, {v[1]}, 2), (3, NULL, 3)",
        f"INSERT INTO b VALUES (1, {v[1]}, 1), (2, {v[2]}, 3), (3, NULL, 0)",
    ]
    steps = [
        [f"INSERT INTO b VALUES (4, {v[0]}, 2)", "DELETE FROM a WHERE id = 2", f"INSERT INTO a VALUES (4, {v[3]}, 0)"],
        [f"UPDATE a SET k = {v[2]} WHERE id = 1", f"UPDATE b SET k = {v[0]} WHERE id = 2"],
        [f"INSERT OR REPLACE INTO b VALUES (1, {v[3]}, 5)", "DELETE FROM a WHERE id = (SELECT max(id) FROM a)"],
        [
            f"INSERT INTO a VALUES (4, {v[1]}, 1)",
            f"INSERT INTO a VALUES (1, {v[1]}, 9) ON CONFLICT(id) DO UPDATE SET k = NULL",
        ],
        [
            "DELETE FROM a",
            "DELETE FROM b",
            f"INSERT INTO b VALUES (1, {v[0]}, 1)",
            f"INSERT INTO a VALUES (1, {v[1]}, 2)",
        ],
        [f"UPDATE a SET k = {v[-1]}", f"UPDATE b SET k = {v[-1]}"],
    ]
    run_scenario(tmp_path, setup, ON_SHAPES, steps).close()


def test_full_self_join_composite_pk_without_rowid(tmp_path):
    setup = [
        "CREATE TABLE a(p TEXT, q INTEGER, k TEXT COLLATE NOCASE, v INTEGER, PRIMARY KEY(q, p)) WITHOUT ROWID",
        "CREATE TABLE b(id INTEGER NOT NULL PRIMARY KEY, k TEXT, v INTEGER) WITHOUT ROWID",
        "INSERT INTO a VALUES ('x', 1, 'a', 1), ('y', 1, 'B', 2), ('z', 2, NULL, 1)",
        "INSERT INTO b VALUES (1, 'A', 1), (2, 'b', 3)",
    ]
    views = {
        "cross": "SELECT a.p, a.q, b.id, a.k, b.k FROM a FULL JOIN b ON b.k = a.k",
        "self_same": "SELECT x.p, x.q, y.p, y.q FROM a x FULL JOIN a y ON x.k = y.k AND x.p < y.p",
        "self_other": "SELECT x.p, y.p, y.q FROM a x FULL OUTER JOIN a y ON x.v = y.q",
        "self_agg": "SELECT coalesce(x.v, y.v) AS g, count(*), count(x.p), count(y.p) FROM a x FULL JOIN a y "
        "ON x.q = y.v GROUP BY g",
    }
    steps = [
        ["INSERT INTO a VALUES ('x', 1, 'c', 0) ON CONFLICT(q, p) DO UPDATE SET k = 'A'"],
        ["INSERT INTO b VALUES (1, 'c', 5) ON CONFLICT DO UPDATE SET k = excluded.k", "UPDATE a SET q = q + 1"],
        ["UPDATE a SET p = 'w' WHERE k = 'c'", "UPDATE b SET id = id + 10", "INSERT INTO a VALUES ('v', 3, 'b', 2)"],
        ["DELETE FROM a", "INSERT INTO a VALUES ('x', 1, 'b', 1)"],
    ]
    run_scenario(tmp_path, setup, views, steps).close()


def test_full_join_refusals(tmp_path):
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for t in ("a", "b", "c"):
        conn.execute(f"CREATE TABLE {t}(id INTEGER PRIMARY KEY, k, v)")
    for sql in [
        "SELECT * FROM a FULL JOIN b USING (k)",
        "SELECT * FROM a NATURAL FULL JOIN b",
        "SELECT * FROM a NATURAL FULL OUTER JOIN b",
        "SELECT a.id FROM a FULL JOIN b ON a.k = b.k JOIN c ON c.k = b.k",
        "SELECT a.id FROM a JOIN b ON a.k = b.k FULL JOIN c ON c.k = b.k",
        "SELECT a.id FROM a FULL JOIN b ON a.k = b.k FULL JOIN c ON c.k = b.k",
        "SELECT a.id FROM a FULL JOIN b ON a.k = b.k, c",
        "SELECT a.id FROM a FULL JOIN b ON a.k = b.k LEFT JOIN c ON c.k = b.k",
        "SELECT a.id FROM a FULL JOIN b",
        "SELECT a.id FROM a FULL JOIN (SELECT * FROM b) s ON a.k = s.k",
        "SELECT a.id FROM a FULL JOIN b ON a.k IN (SELECT k FROM c)",
    ]:
        with pytest.raises(matview.UnsupportedQuery):
            conn.execute(f"CREATE MATERIALIZED VIEW r AS {sql}")
    conn.close()


@pytest.mark.parametrize("mode", ["immediate", "deferred"])
def test_full_join_savepoints_reopen_stock_writer_and_bulk(tmp_path, mode):
    path = tmp_path / "db.sqlite"
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE a(id INTEGER PRIMARY KEY, k INTEGER, v INTEGER)")
    conn.execute("CREATE TABLE b(id INTEGER PRIMARY KEY, k INTEGER, v INTEGER)")
    conn.execute(_bulk("a", 20, "x % 7"))
    conn.execute(_bulk("b", 20, "x % 11"))
    views = {
        "rows": "SELECT a.id, b.id, a.k, b.k FROM a FULL JOIN b ON a.k = b.k",
        "grouped": "SELECT coalesce(a.k, b.k) AS g, count(*), count(a.id), count(b.id), min(b.v), max(a.v), "
        "sum(a.v) FROM a FULL JOIN b ON a.k = b.k GROUP BY g",
        "self": "SELECT x.v, count(*), min(y.id), max(y.k) FROM a x FULL JOIN a y ON x.k = y.v GROUP BY x.v",
        "total": "SELECT count(*), count(a.id), count(b.id) FROM a FULL JOIN b ON a.k = b.k AND b.v > 1",
    }
    live = {}
    for name, sql in views.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} WITH (maintenance = '{mode}') AS {sql}")
        live[name] = sql
    _check(conn, live)
    conn.execute("BEGIN")
    conn.execute("DELETE FROM a WHERE k = 1")
    conn.execute("INSERT INTO b VALUES (100, 3, 3)")
    conn.execute("SAVEPOINT s")
    conn.execute("UPDATE b SET k = k + 1")
    conn.execute(_bulk("a", 90, "x % 5", 200))
    _check(conn, live)  # reads inside the transaction see its writes
    conn.execute("ROLLBACK TO s")
    _check(conn, live)
    conn.execute("COMMIT")
    _check(conn, live)
    with conn:  # > 64 delta rows on both sides: the batched path
        conn.execute(_bulk("a", 150, "x % 13", 20))
        conn.execute("DELETE FROM b WHERE k < 4")
        conn.execute(_bulk("b", 80, "x % 3", 5))
    _check(conn, live)
    conn.close()
    stock_sqlite3(
        path,
        ["DELETE FROM a WHERE k = 2", "INSERT INTO b VALUES (500, 2, 1)", "UPDATE a SET k = NULL WHERE id % 5 = 0"],
    )
    conn = matview.connect(str(path))
    _check(conn, live)
    with conn:  # everything deleted on both sides, then reinserted
        conn.execute("DELETE FROM a")
        conn.execute("DELETE FROM b")
        conn.execute(_bulk("b", 70, "x % 4"))
    _check(conn, live)
    conn.close()


def test_full_join_unqualified_columns_and_swapped_aliases(tmp_path):
    setup = [
        "CREATE TABLE a(id INTEGER PRIMARY KEY, k, v)",
        "CREATE TABLE b(bid INTEGER PRIMARY KEY, bk, w)",
        "INSERT INTO a VALUES (1, 1, 1), (2, 2, 2)",
        "INSERT INTO b VALUES (1, 1, 1), (2, 3, 3)",
    ]
    views = {
        "unqualified": "SELECT id, bid, v, w FROM a FULL JOIN b ON k = bk AND v IS NOT NULL",
        "swapped": "SELECT a.bid, b.id FROM a AS b FULL JOIN b AS a ON a.bk = b.k",
        "anti_count": "SELECT count(*), count(id), count(bid) FROM a FULL JOIN b ON k = bk WHERE bid IS NULL OR id IS NULL",
    }
    steps = [
        ["INSERT INTO b VALUES (3, 2, 0)"],
        ["DELETE FROM b WHERE bk = 1", "INSERT INTO a VALUES (3, 3, 3)"],
        ["UPDATE b SET bk = 1, w = 2"],
        ["DELETE FROM a"],
        ["INSERT INTO a VALUES (1, 1, 2)", "UPDATE a SET id = 5"],
    ]
    run_scenario(tmp_path, setup, views, steps).close()
