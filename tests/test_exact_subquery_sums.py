"""SUM/TOTAL/AVG of REALs inside subqueries: maintained with order-free exact sums
(`matview.operators.exact_sums`), equal to SQLite's own, in both modes."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from oracle import assert_view_matches, column_names, create_views_both_modes

import matview

SCHEMA = [
    "CREATE TABLE users(id INTEGER PRIMARY KEY, k REAL, name TEXT)",
    "CREATE TABLE posts(id INTEGER PRIMARY KEY, user_id INTEGER, amt REAL, n, txt TEXT)",
]

VIEWS = {
    "correlated_avg": "SELECT id FROM users WHERE k > (SELECT avg(amt) FROM posts WHERE posts.user_id = users.id)",
    "scalar_sum": "SELECT id, (SELECT sum(amt) FROM posts WHERE user_id = users.id) FROM users",
    "text_total": "SELECT id, (SELECT total(txt) AS t FROM posts WHERE user_id = users.id) AS t FROM users",
    "above_average": "SELECT id, amt FROM posts WHERE amt > (SELECT avg(amt) FROM posts)",
    "mixed_sum": "SELECT u.id, (SELECT sum(n) FROM posts p WHERE p.user_id = u.id) AS s FROM users u",
    "distinct_typed": "SELECT id, (SELECT sum(DISTINCT amt) FROM posts WHERE user_id = users.id) AS s FROM users",
    "nested": (
        "SELECT id FROM users WHERE id IN (SELECT user_id FROM posts p "
        "WHERE p.amt >= (SELECT avg(q.amt) FROM posts q WHERE q.user_id = p.user_id))"
    ),
    "in_aggregate_view": (
        "SELECT name, count(*) AS c, sum(k) AS s FROM users "
        "WHERE k * 2 > (SELECT total(amt) FROM posts WHERE posts.user_id = users.id) GROUP BY name"
    ),
    "having_filter_inside": (
        "SELECT id FROM users WHERE EXISTS (SELECT 1 FROM posts WHERE user_id = users.id "
        "AND amt * 3 > (SELECT avg(amt) FROM posts))"
    ),
}


def _amount(rng: random.Random) -> object:
    return rng.choice([round(rng.uniform(-500, 5000), 2), round(rng.uniform(0, 1), 3), 0.1, 0.2, 0.3, None])


def _n(rng: random.Random) -> object:
    return rng.choice([rng.randint(-50, 50), round(rng.uniform(-10, 10), 2), "12", "1.5", "abc", None])


def _insert_post(conn: matview.Connection, rng: random.Random) -> None:
    conn.execute(
        "INSERT INTO posts(user_id, amt, n, txt) VALUES (?, ?, ?, ?)",
        (rng.randint(1, 30), _amount(rng), _n(rng), rng.choice(["7", "2.25", "x", None, "1e3"])),
    )


def _setup(path: Path, rng: random.Random) -> tuple[matview.Connection, dict[str, str]]:
    conn = matview.connect(str(path))
    for sql in SCHEMA:
        conn.execute(sql)
    for ident in range(1, 31):
        conn.execute(
            "INSERT INTO users VALUES (?, ?, ?)", (ident, round(rng.uniform(-100, 3000), 2), rng.choice("abc"))
        )
    for _ in range(200):
        _insert_post(conn, rng)
    return conn, create_views_both_modes(conn, VIEWS)


def _check(conn: matview.Connection, live: dict[str, str]) -> None:
    for view, sql in live.items():
        assert_view_matches(conn, view, sql)


@pytest.mark.parametrize("seed", range(3))
def test_real_sums_in_subqueries_follow_every_write(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "db.sqlite"
    conn, live = _setup(path, rng)
    _check(conn, live)
    for step in range(12):
        with conn:
            for _ in range(rng.randint(1, 6)):
                kind = rng.random()
                if kind < 0.4:
                    _insert_post(conn, rng)
                elif kind < 0.6:
                    conn.execute("UPDATE posts SET amt = ? WHERE id = ?", (_amount(rng), rng.randint(1, 220)))
                elif kind < 0.75:
                    conn.execute("DELETE FROM posts WHERE id = ?", (rng.randint(1, 220),))
                elif kind < 0.9:
                    conn.execute(
                        "UPDATE users SET k = ? WHERE id = ?", (round(rng.uniform(-100, 3000), 2), rng.randint(1, 30))
                    )
                else:
                    conn.execute(
                        "UPDATE posts SET user_id = ? WHERE user_id = ?", (rng.randint(1, 30), rng.randint(1, 30))
                    )
        if step % 5 == 4:
            conn.close()
            conn = matview.connect(str(path))
        _check(conn, live)
    conn.close()


def test_a_rolled_back_write_and_a_stock_writer_leave_the_sums_right(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "db.sqlite"
    conn, live = _setup(path, random.Random(9))
    conn.execute("BEGIN")
    conn.execute("DELETE FROM posts WHERE id % 3 = 0")
    conn.execute("ROLLBACK")
    _check(conn, live)
    stock = sqlite3.connect(path)
    stock.execute("UPDATE posts SET amt = amt + 0.1 WHERE id % 2 = 0")
    stock.commit()
    stock.close()
    _check(conn, live)


def test_column_names_are_the_users_own_text(tmp_path: Path) -> None:
    conn, live = _setup(tmp_path / "db.sqlite", random.Random(1))
    for view, sql in live.items():
        assert column_names(conn.execute(f'SELECT * FROM "{view}"')) == column_names(conn.execute(sql))


def test_a_distinct_sum_of_an_untyped_column_stays_refused(tmp_path: Path) -> None:
    """`sum(DISTINCT n)` keeps one of 1 and 1.0 in scan order: the sum's type would follow it."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in SCHEMA:
        conn.execute(sql)
    with pytest.raises(matview.UnsupportedQuery, match="sum"):
        conn.execute(
            "CREATE MATERIALIZED VIEW v AS SELECT id, (SELECT sum(DISTINCT n) FROM posts WHERE user_id = users.id) "
            "FROM users"
        )


def test_an_integer_overflow_inside_a_subquery_is_an_error_not_a_value(tmp_path: Path) -> None:
    """SQLite's SUM of integers raises "integer overflow"; so does CREATE, and a write that makes a
    maintained subquery sum overflow makes reading the view raise, as its SELECT does, until the
    data is fixed."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in SCHEMA:
        conn.execute(sql)
    conn.execute("INSERT INTO users VALUES (1, 0, 'a')")
    conn.execute("INSERT INTO posts(user_id, n) VALUES (1, 9000000000000000000), (1, 9000000000000000000)")
    select = "SELECT id, (SELECT sum(n) FROM posts WHERE user_id = users.id) AS s FROM users"
    with pytest.raises(matview.Error, match="overflow"):
        conn.execute(f"CREATE MATERIALIZED VIEW v AS {select}")
    conn.execute("DELETE FROM posts")
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {select}")
    conn.execute("INSERT INTO posts(user_id, n) VALUES (1, 9000000000000000000)")
    conn.execute("INSERT INTO posts(user_id, n) VALUES (1, 9000000000000000000)")
    with pytest.raises(matview.Error, match="overflow"):  # as its SELECT raises now
        conn.execute("SELECT * FROM v").fetchall()
    conn.execute("UPDATE posts SET n = 5 WHERE id = (SELECT max(id) FROM posts)")
    assert_view_matches(conn, "v", select)


def test_values_stay_identical_when_sqlite_plans_the_subquery_otherwise(tmp_path: Path) -> None:
    """Over 400 users SQLite builds an automatic index for the correlated subquery in the full
    SELECT while partition recompute reads posts by rowid: the two scan orders add the REALs
    in different orders, and the stored value must still be the one re-evaluated later."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in SCHEMA:
        conn.execute(sql)
    rng = random.Random(4)
    with conn:
        for ident in range(1, 401):
            conn.execute("INSERT INTO users VALUES (?, ?, 'a')", (ident, rng.randint(0, 20)))
        for _ in range(3000):
            conn.execute(
                "INSERT INTO posts(user_id, amt, n) VALUES (?, ?, ?)",
                (rng.randint(1, 400), rng.choice([0.1, 0.7, 1e-9, 123456.789, 3.3]), rng.randint(0, 20)),
            )
    live = create_views_both_modes(
        conn, {"v": "SELECT id, (SELECT sum(amt) FROM posts WHERE n IS users.k) AS s FROM users"}
    )
    for _ in range(5):
        conn.execute("UPDATE users SET k = ? WHERE id = ?", (rng.randint(0, 20), rng.randint(1, 400)))
        conn.execute("UPDATE posts SET amt = 0.3 WHERE id = ?", (rng.randint(1, 3000),))
        _check(conn, live)
