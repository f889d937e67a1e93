"""Subquery values that follow the order SQLite reads rows in — the first row of a scalar
subquery returning several, GROUP_CONCAT, REAL sums, which of 'a'/'A' a NOCASE DISTINCT or
GROUP BY keeps, LIMIT — are maintained: for the same rows and the same query plans SQLite
gives the same value, a root is re-evaluated whenever a row its subquery reads changes, and
a change of the plans (CREATE/DROP INDEX, ANALYZE) re-evaluates every root
(`partition.plans_changed`). Differential after every step, both modes, with index changes,
ANALYZE, VACUUM, reopen and writes from stock sqlite3 between the writes."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_view_matches
from stock import stock_sqlite3

import matview

SCHEMA = [
    "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT COLLATE NOCASE, score REAL, k)",
    "CREATE TABLE posts(id INTEGER PRIMARY KEY, user_id INTEGER, title TEXT COLLATE NOCASE, q, w REAL)",
]

VIEWS = {
    "first_row": "SELECT id, (SELECT title FROM posts WHERE user_id = users.id) AS t FROM users",
    "first_row_uncorrelated": "SELECT id, (SELECT title FROM posts WHERE q > 1) FROM users",
    "group_concat": "SELECT id, (SELECT group_concat(title, '|') FROM posts WHERE user_id = users.id) FROM users",
    "real_avg": "SELECT id FROM users WHERE score > (SELECT avg(w) FROM posts WHERE posts.user_id = users.id)",
    "real_sum_all": "SELECT id, score - (SELECT total(w) FROM posts) FROM users",
    "untyped_sum": "SELECT id, (SELECT sum(q) FROM posts WHERE user_id = users.id) FROM users",
    "in_group_by": "SELECT id FROM users WHERE id IN (SELECT user_id FROM posts GROUP BY user_id HAVING count(*) > 1)",
    "in_distinct_nocase": "SELECT id, name IN (SELECT DISTINCT title FROM posts) FROM users",
    "max_nocase": "SELECT id, (SELECT max(title) FROM posts WHERE user_id = users.id) FROM users",
    "limit": "SELECT id FROM users WHERE id IN (SELECT user_id FROM posts ORDER BY w LIMIT 2)",
    "order_limit_scalar": "SELECT id, (SELECT title FROM posts WHERE user_id = users.id ORDER BY q LIMIT 1) FROM users",
    "bare_column": "SELECT id, (SELECT title || count(*) FROM posts WHERE user_id = users.id) FROM users",
    "union_nocase": "SELECT id FROM users WHERE name IN (SELECT title FROM posts UNION SELECT name FROM users)",
    "untyped_min": "SELECT id, (SELECT min(q) FROM posts WHERE user_id = users.id) FROM users",
}

TITLES = ["a", "A", "b", "B", None]
QS = [1, 1.0, "1", 2, 2.0, 1e308, -1e308, None]
WS = [0.1, 0.2, 0.3, 1e308, -1e308, 2.5, None]


def _write(r: random.Random) -> str:
    kind = r.random()
    if kind < 0.35:
        return (
            f"INSERT INTO posts(user_id, title, q, w) VALUES ({r.randint(1, 5)}, {_lit(r.choice(TITLES))}, "
            f"{_lit(r.choice(QS))}, {_lit(r.choice(WS))})"
        )
    if kind < 0.5:
        return f"DELETE FROM posts WHERE id = (SELECT min(id) FROM posts WHERE user_id = {r.randint(1, 5)})"
    if kind < 0.6:
        return "DELETE FROM posts WHERE id = (SELECT max(id) FROM posts)"  # rowid reuse next
    if kind < 0.75:
        title, w = _lit(r.choice(TITLES)), _lit(r.choice(WS))
        return f"UPDATE posts SET title = {title}, w = {w} WHERE id % 4 = {r.randint(0, 3)}"
    if kind < 0.85:
        return f"UPDATE posts SET user_id = {r.randint(1, 5)} WHERE id % 3 = {r.randint(0, 2)}"
    if kind < 0.93:
        return f"INSERT INTO users(name, score, k) VALUES ({_lit(r.choice(TITLES))}, {_lit(r.choice(WS))}, 1)"
    score, name = _lit(r.choice(WS)), _lit(r.choice(TITLES))
    return f"UPDATE users SET score = {score}, name = {name} WHERE id = {r.randint(1, 6)}"


def _lit(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


PLAN_CHANGES = [
    "CREATE INDEX IF NOT EXISTS p_w ON posts(w)",
    "CREATE INDEX IF NOT EXISTS p_title ON posts(title)",
    "CREATE INDEX IF NOT EXISTS p_uq ON posts(user_id, q)",
    "DROP INDEX IF EXISTS p_w",
    "DROP INDEX IF EXISTS p_uq",
    "ANALYZE",
]


@pytest.mark.parametrize("seed", range(6))
def test_scan_order_values_follow_sqlite(tmp_path, seed):
    r = random.Random(seed)
    path = tmp_path / "db.sqlite"
    conn = matview.connect(str(path))
    for sql in SCHEMA:
        conn.execute(sql)
    for i in range(1, 6):
        conn.execute(f"INSERT INTO users(name, score, k) VALUES ({_lit(r.choice(TITLES))}, {_lit(r.choice(WS))}, {i})")
    for _ in range(12):
        conn.execute(_write(r))
    chosen = dict(r.sample(sorted(VIEWS.items()), 6))
    live = {}
    for name, sql in chosen.items():
        for mode in ("immediate", "deferred"):
            conn.execute(f"CREATE MATERIALIZED VIEW {name}_{mode[:3]} WITH (maintenance = '{mode}') AS {sql}")
            live[f"{name}_{mode[:3]}"] = sql
    for _ in range(14):
        special = r.random()
        if special < 0.25:
            conn.execute(r.choice(PLAN_CHANGES))
        elif special < 0.3:
            conn.execute("VACUUM")
        elif special < 0.36:
            conn.close()
            stock_sqlite3(path, [_write(r) for _ in range(3)])
            conn = matview.connect(str(path))
        elif special < 0.42:
            conn.execute("BEGIN")
            conn.execute(_write(r))
            conn.execute(r.choice(PLAN_CHANGES[:3]))
            for view, sql in live.items():
                assert_view_matches(conn, view, sql)
            conn.execute("ROLLBACK")
        else:
            with conn:
                for _ in range(r.randint(1, 4)):
                    conn.execute(_write(r))
        for view, sql in live.items():
            assert_view_matches(conn, view, sql)
    conn.close()


def test_a_new_index_reorders_a_first_row_subquery(tmp_path):
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in SCHEMA:
        conn.execute(sql)
    conn.execute("INSERT INTO users(name) VALUES ('u')")
    conn.execute("INSERT INTO posts(user_id, title, q) VALUES (1, 'zeta', 2), (1, 'alpha', 1)")
    sql = VIEWS["first_row"]
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {sql}")
    assert conn.execute("SELECT t FROM v").fetchall() == [("zeta",)]
    conn.execute("CREATE INDEX p_title ON posts(user_id, title)")  # SQLite now reads 'alpha' first
    assert conn.execute(sql).fetchall() == [(1, "alpha")]
    assert_view_matches(conn, "v", sql)
    conn.execute("INSERT INTO users(name) VALUES ('x')")
    assert conn.execute('SELECT t FROM "__dbsp_view_v" WHERE id = 1').fetchall() == [("alpha",)]  # folded
