"""Why subquery values that follow SQLite's scan order stay refused (a hostile hunt's findings).

An attempt maintained them — the first row of a scalar subquery returning several, GROUP_CONCAT,
REAL sums, LIMIT, NOCASE DISTINCT — on the premise "same rows + same indexes and statistics =>
same query plan => same value", re-evaluating every root when a fingerprint of the indexes and
sqlite_stat1 changed. The hunt broke the premise four ways, each a wrong result:

1. SQLite plans a correlated subquery with the outer query's estimated loop count: the full
   SELECT over 400 users built an AUTOMATIC COVERING INDEX on posts(q, title) and read rows in
   title order, while partition recompute's rows query (`… AND key IN (reached roots)`) scanned
   posts by rowid: `(SELECT title FROM posts WHERE q IS users.k)` gave 't00197' in SQLite and
   't04997' in the view, with default options, after one UPDATE of users.
2. sqlite_stat4 samples change plans while sqlite_stat1 stays byte-identical.
3. Rows written into sqlite_stat1 by hand take effect only when the schema is re-read.
4. `PRAGMA reverse_unordered_selects` and `PRAGMA automatic_index` are per-connection plan inputs.

So these shapes are refused at CREATE (the reverted change and its tests: git history). REAL
sums are maintained since with order-free exact sums (tests/test_exact_subquery_sums.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_view_matches

import matview

SCHEMA = [
    "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT COLLATE NOCASE, k)",
    "CREATE TABLE posts(id INTEGER PRIMARY KEY, user_id INTEGER, title TEXT COLLATE NOCASE, q, w REAL, a, b)",
]

ORDER_DEPENDENT = {
    "first_row_is": "SELECT id, (SELECT title FROM posts WHERE q IS users.k) AS t FROM users",
    "first_row_eq": "SELECT id, (SELECT title FROM posts WHERE q = users.k) AS t FROM users",
    "first_row_two_indexes": "SELECT id, (SELECT title FROM posts WHERE a = 1 AND b = 2) AS t FROM users",
    "group_concat": "SELECT id, (SELECT group_concat(title) FROM posts WHERE q IS users.k) FROM users",
    "nocase_distinct": "SELECT id, name IN (SELECT DISTINCT title FROM posts) FROM users",
    "nocase_max": "SELECT id, (SELECT max(title) FROM posts WHERE user_id = users.id) FROM users",
}


@pytest.mark.parametrize("shape", sorted(ORDER_DEPENDENT))
def test_values_that_follow_the_scan_order_are_refused(tmp_path, shape):
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in SCHEMA:
        conn.execute(sql)
    with pytest.raises(matview.UnsupportedQuery):
        conn.execute(f"CREATE MATERIALIZED VIEW v AS {ORDER_DEPENDENT[shape]}")
    assert conn.views() == []


def test_a_limit_that_follows_the_scan_order_is_recomputed_whole(tmp_path):
    """Refused before; recomputed whole now: an index that changes the plan (and so the ties)
    breaks it until REFRESH, never stale."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in SCHEMA:
        conn.execute(sql)
    conn.execute("INSERT INTO users VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3)")
    conn.execute("INSERT INTO posts(user_id, w) VALUES (1, 1.0), (2, 1.0), (3, 1.0), (3, 0.5)")
    select = "SELECT id FROM users WHERE id IN (SELECT user_id FROM posts ORDER BY w LIMIT 2)"
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {select}")
    assert_view_matches(conn, "v", select)
    conn.execute("CREATE INDEX posts_w ON posts(w)")
    try:  # the same rows under the new plan, or broken until REFRESH — never stale
        assert_view_matches(conn, "v", select)
    except matview.Error as exc:
        assert "REFRESH" in str(exc)
        conn.execute("REFRESH MATERIALIZED VIEW v")
        assert_view_matches(conn, "v", select)
