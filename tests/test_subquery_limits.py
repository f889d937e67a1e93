"""ORDER BY … LIMIT/OFFSET inside a subquery, where the order is total (issue 6): the latest
row per user, the top N, the second smallest. SQLite picks the rows, so the value is the same
whatever plan a fold uses, once ties are impossible — the ORDER BY ends with the table's
INTEGER PRIMARY KEY (or every column of a NOT NULL primary key). Differential, both modes,
rollback, reopen and a stock `sqlite3` writer; ties and aliases stay refused."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest
from oracle import assert_views_match, create_views_both_modes, drive_write_mix

import matview

SCHEMA = [
    "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT COLLATE NOCASE, quota INTEGER)",
    "CREATE TABLE posts(id INTEGER PRIMARY KEY, user_id INTEGER, created TEXT, score)",
    "CREATE TABLE marks(user_id INTEGER NOT NULL, day TEXT NOT NULL, v REAL, PRIMARY KEY (user_id, day)) WITHOUT ROWID",
]

VIEWS = {
    "latest": (
        "SELECT u.id, (SELECT created FROM posts p WHERE p.user_id = u.id ORDER BY created DESC, id DESC LIMIT 1) "
        "AS last FROM users u"
    ),
    "second_lowest": (
        "SELECT id, (SELECT score FROM posts WHERE user_id = users.id ORDER BY score, id LIMIT 1 OFFSET 1) AS s2 "
        "FROM users"
    ),
    "first_by_key": "SELECT id, (SELECT score FROM posts WHERE user_id = users.id ORDER BY posts.id) AS s FROM users",
    "top_three": "SELECT id, name FROM users WHERE id IN (SELECT user_id FROM posts ORDER BY score DESC, id LIMIT 3)",
    "top_n_per_quota": (
        "SELECT id FROM users WHERE 2 IN (SELECT score FROM posts WHERE user_id = users.id "
        "ORDER BY created, id LIMIT 2)"
    ),
    "two_or_more": "SELECT id FROM users WHERE EXISTS (SELECT 1 FROM posts WHERE user_id = users.id LIMIT 1 OFFSET 1)",
    "latest_mark": (
        "SELECT id, (SELECT v FROM marks WHERE marks.user_id = users.id ORDER BY day DESC, user_id LIMIT 1) AS v "
        "FROM users"
    ),
    "recent_window": (
        "SELECT id FROM users WHERE EXISTS (SELECT 1 FROM (SELECT user_id FROM posts ORDER BY id DESC LIMIT 5) AS r "
        "WHERE r.user_id = users.id)"
    ),
    "in_aggregate": (
        "SELECT quota, count(*) AS n FROM users "
        "WHERE (SELECT score FROM posts WHERE user_id = users.id ORDER BY created, id LIMIT 1) > 1 GROUP BY quota"
    ),
}


def _post(rng: random.Random) -> tuple[object, ...]:
    return (
        rng.randint(1, 12),
        rng.choice(["2024-01-01", "2024-01-02", "2024-02-01", None]),  # ties, broken by id
        rng.choice([1, 1.0, 2, 2.0, 0.5, "2", None, rng.randint(0, 5)]),
    )


def _setup(path: Path, rng: random.Random) -> tuple[matview.Connection, dict[str, str]]:
    conn = matview.connect(str(path))
    for sql in SCHEMA:
        conn.execute(sql)
    with conn:
        for i in range(1, 13):
            conn.execute("INSERT INTO users VALUES (?, ?, ?)", (i, rng.choice(["a", "A", "b"]), rng.randint(0, 3)))
        for _ in range(50):
            conn.execute("INSERT INTO posts(user_id, created, score) VALUES (?, ?, ?)", _post(rng))
        for _ in range(30):
            conn.execute(
                "INSERT OR REPLACE INTO marks VALUES (?, ?, ?)",
                (rng.randint(1, 12), rng.choice(["d1", "d2", "d3"]), rng.choice([0.1, 0.2, None])),
            )
    return conn, create_views_both_modes(conn, VIEWS)


def _write(conn: matview.Connection, rng: random.Random) -> None:
    kind = rng.random()
    if kind < 0.3:
        conn.execute("INSERT INTO posts(user_id, created, score) VALUES (?, ?, ?)", _post(rng))
    elif kind < 0.45:
        conn.execute("DELETE FROM posts WHERE id = ?", (rng.randint(1, 80),))
    elif kind < 0.6:
        conn.execute("UPDATE posts SET created = ?, score = ? WHERE id = ?", (*_post(rng)[1:], rng.randint(1, 80)))
    elif kind < 0.7:
        conn.execute("UPDATE posts SET user_id = ? WHERE id = ?", (rng.randint(1, 12), rng.randint(1, 80)))
    elif kind < 0.8:
        conn.execute(
            "UPDATE users SET quota = ?, name = ? WHERE id = ?",
            (rng.randint(0, 3), rng.choice("aAb"), rng.randint(1, 12)),
        )
    elif kind < 0.9:
        conn.execute(
            "INSERT OR REPLACE INTO marks VALUES (?, ?, ?)",
            (rng.randint(1, 12), rng.choice(["d1", "d2", "d3", "d4"]), rng.choice([0.1, 0.2, None])),
        )
    else:
        conn.execute("DELETE FROM marks WHERE user_id = ?", (rng.randint(1, 12),))


@pytest.mark.parametrize("seed", range(3))
def test_ordered_limits_follow_every_write(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "db.sqlite"
    conn, live = _setup(path, rng)
    conn = drive_write_mix(path, conn, live, _write, rng, steps=16, rolled_back_at=7)
    stock = sqlite3.connect(path)
    stock.execute("UPDATE posts SET created = '2024-01-01' WHERE id % 2 = 0")
    stock.execute("DELETE FROM posts WHERE id % 5 = 0")
    stock.commit()
    stock.close()
    assert_views_match(conn, live)
    conn.close()


#: each refused before (ties, or an order that does not end them): recomputed whole now, so SQLite
#: decides the ties as the SELECT re-run does (`sql.whole`)
RECOMPUTED_WHOLE = {
    "ties on created": (
        "SELECT id, (SELECT score FROM posts WHERE user_id = users.id ORDER BY created LIMIT 1) FROM users"
    ),
    "a term an alias names": (
        "SELECT id, (SELECT created AS id FROM posts WHERE user_id = users.id ORDER BY id LIMIT 1) FROM users"
    ),
    "top N without an order": "SELECT id FROM users WHERE id IN (SELECT user_id FROM posts LIMIT 3)",
    # a second reviewer's findings, each a wrong view before
    "a derived table beside the key's table": (
        "SELECT id, (SELECT x.v FROM posts, (SELECT v FROM marks) AS x WHERE x.v > 0 ORDER BY posts.id LIMIT 1) "
        "FROM users"
    ),
    "a string literal named like the key": (
        "SELECT id, (SELECT created FROM posts WHERE user_id = users.id ORDER BY 'id' LIMIT 1) FROM users"
    ),
    "INTEGER PRIMARY KEY DESC, no rowid alias": (
        "SELECT id, (SELECT y FROM pdesc WHERE pdesc.w = users.quota ORDER BY id LIMIT 1) FROM users"
    ),
    "a primary key that may hold NULLs": ("SELECT id FROM users WHERE id IN (SELECT a FROM nokey ORDER BY a LIMIT 1)"),
}


@pytest.mark.parametrize("sql", RECOMPUTED_WHOLE.values(), ids=list(RECOMPUTED_WHOLE))
def test_orders_with_ties_are_recomputed_whole(tmp_path: Path, sql: str) -> None:
    path = tmp_path / "db.sqlite"
    conn, _live = _setup(path, random.Random(3))
    for statement in [
        "CREATE TABLE nokey(a TEXT, b TEXT, PRIMARY KEY (a))",
        "CREATE TABLE pdesc(id INTEGER PRIMARY KEY DESC, y, w INTEGER)",
        "INSERT INTO nokey VALUES ('1', 'x'), (NULL, 'y'), (NULL, 'z')",
        "INSERT INTO pdesc(y, w) VALUES (1, 0), (2, 0), (3, 1)",
    ]:
        conn.execute(statement)
    live = create_views_both_modes(conn, {"v": sql})
    assert "recomputed whole" in conn.view("v_imm").explain()
    drive_write_mix(path, conn, live, _write, random.Random(5), steps=6).close()


def test_a_lookup_that_may_return_several_rows_stays_refused(tmp_path: Path) -> None:
    """No LIMIT to recompute by: SQLite takes the first of several rows, in an order no one wrote."""
    conn, _live = _setup(tmp_path / "db.sqlite", random.Random(3))
    with pytest.raises(matview.UnsupportedQuery, match="several rows"):
        conn.execute(
            "CREATE MATERIALIZED VIEW v AS SELECT id, (SELECT x.v FROM posts, (SELECT v FROM marks) AS x "
            "WHERE posts.id = users.id) FROM users"
        )
