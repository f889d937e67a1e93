"""RIGHT JOIN among three or more tables (issue 5): joins nest to the left, so every output row
comes from one row of the right table of the last RIGHT JOIN — its root — and the view is
maintained per root row (`operators.partition`, `Plan.root`), as LEFT JOIN chains are per row of
their first table. Differential, both modes, random writes to every table, rollback, reopen."""

from __future__ import annotations

import random

import pytest
from oracle import assert_refused, check_write_mix

SETUP = [
    "CREATE TABLE a(id INTEGER PRIMARY KEY, k, x)",
    "CREATE TABLE b(id INTEGER PRIMARY KEY, k, y)",
    "CREATE TABLE c(id INTEGER PRIMARY KEY, k, z)",
    "CREATE TABLE e(k INTEGER PRIMARY KEY, w) WITHOUT ROWID",
    "INSERT INTO a(k, x) VALUES (1, 'a1'), (2, 'a2'), (NULL, 'an')",
    "INSERT INTO b(k, y) VALUES (1, 10), (1, 11), (3, 30)",
    "INSERT INTO c(k, z) VALUES (1, 'c1'), (2, 'c2'), (4, 'c4'), (NULL, 'cn')",
    "INSERT INTO e VALUES (1, 'e1'), (4, 'e4')",
]

VIEWS = {
    "last": "SELECT a.x, b.y, c.z FROM a JOIN b ON a.k = b.k RIGHT JOIN c ON c.k = b.k",
    "middle": "SELECT a.x, b.y, c.z FROM a RIGHT JOIN b ON a.k = b.k LEFT JOIN c ON c.k = b.k",
    "star": "SELECT * FROM a LEFT JOIN b ON a.k = b.k RIGHT JOIN c ON c.k = a.k",
    "twice": "SELECT a.id AS ai, b.id AS bi, c.id AS ci FROM a RIGHT JOIN b ON a.k = b.k RIGHT JOIN c ON c.k = b.k",
    "grouped": "SELECT c.k, count(a.id), count(*), sum(b.y) FROM a JOIN b ON a.k = b.k RIGHT JOIN c ON c.k = b.k "
    "GROUP BY c.k",
    "comma": "SELECT a.x, c.z FROM a, b RIGHT JOIN c ON c.k = b.k WHERE a.k IS b.k OR a.id IS NULL",
    "then_inner": "SELECT b.y, c.z, e.w FROM a RIGHT JOIN b ON a.k = b.k JOIN c ON c.k = b.k "
    "LEFT JOIN e ON e.k = c.k WHERE b.y > 0",
    "without_rowid_root": "SELECT coalesce(a.x, 'none') AS x, e.w FROM a JOIN b ON a.k = b.k RIGHT JOIN e ON e.k = b.k",
    # a later inner join that accepts the root's row only while the left side is NULL (review finding)
    "is_after": "SELECT a.id AS ai, b.id AS bi, c.id AS ci FROM a RIGHT JOIN b ON a.k = b.k JOIN c ON c.z IS a.x",
    "is_after_two": "SELECT a.id AS ai, c.id AS ci, e.k AS ek FROM a JOIN b ON a.k = b.k RIGHT JOIN c ON c.k = b.y "
    "JOIN e ON e.w IS b.y",
    # an outer join before the root: a change there reaches every root
    "outer_before": "SELECT a.id AS ai, b.id AS bi, c.id AS ci FROM a LEFT JOIN b ON b.k = a.k "
    "RIGHT JOIN c ON c.k IS b.y",
}

COLUMNS = {"a": "x", "b": "y", "c": "z"}


def _write(conn, rng: random.Random) -> None:
    table = rng.choice("abce")
    action = rng.random()
    if table == "e":
        if action < 0.6:
            conn.execute("INSERT OR REPLACE INTO e VALUES (?, ?)", (rng.randint(1, 5), rng.choice(["e", None, 7])))
        else:
            conn.execute("DELETE FROM e WHERE k = ?", (rng.randint(1, 5),))
        return
    if action < 0.45:
        conn.execute(
            f"INSERT INTO {table}(k, {COLUMNS[table]}) VALUES (?, ?)",
            (rng.choice([1, 2, 3, 4, None]), rng.choice([1, 2.5, None, "q"])),
        )
    elif action < 0.7:
        conn.execute(f"DELETE FROM {table} WHERE id = (SELECT id FROM {table} ORDER BY random() LIMIT 1)")
    else:
        conn.execute(
            f"UPDATE {table} SET k = ? WHERE id = (SELECT id FROM {table} ORDER BY random() LIMIT 1)",
            (rng.choice([1, 2, 3, 4, None]),),
        )


@pytest.mark.parametrize("seed", range(3))
def test_right_join_chains_follow_every_write(tmp_path, seed):
    check_write_mix(tmp_path, SETUP, VIEWS, _write, seed, steps=12)


@pytest.mark.parametrize(
    ("select", "match"),
    [
        ("SELECT * FROM a FULL JOIN b ON a.k = b.k JOIN c ON c.k = b.k", "FULL JOIN"),
        ("SELECT c.z FROM a RIGHT JOIN c USING (k) JOIN b ON b.id = c.id", "USING or NATURAL"),
        ("SELECT a.x FROM a JOIN b ON a.k = b.k RIGHT JOIN c ON c.k = b.k WHERE EXISTS (SELECT 1 FROM e)", "RIGHT"),
    ],
)
def test_what_stays_refused(tmp_path, select, match):
    assert_refused(tmp_path, SETUP, select, match=match)


def test_over_a_materialized_view_and_an_aggregating_subquery(tmp_path):
    setup = [
        "CREATE TABLE a(id INTEGER PRIMARY KEY, k INT, x INT)",
        "CREATE TABLE b(id INTEGER PRIMARY KEY, k INT, y INT)",
        "CREATE TABLE c(id INTEGER PRIMARY KEY, k INT, z INT)",
        "CREATE MATERIALIZED VIEW g AS SELECT k, count(*) AS n FROM a GROUP BY k",
        "INSERT INTO a(k, x) VALUES (1, 1), (2, 2)",
        "INSERT INTO b(k, y) VALUES (1, 10), (2, 20)",
        "INSERT INTO c(k, z) VALUES (1, 5), (3, 6)",
    ]
    views = {
        "over_view": "SELECT g.n, b.y, c.z FROM g JOIN b ON g.k = b.k RIGHT JOIN c ON c.k = b.k",
        "over_subquery": "SELECT s.t, c.z FROM (SELECT k, sum(y) AS t FROM b GROUP BY k) s JOIN a ON a.k = s.k "
        "RIGHT JOIN c ON c.k = s.k",
        "grouped": "SELECT c.z, count(*) FROM g RIGHT JOIN b ON b.k = g.k RIGHT JOIN c ON c.k = b.k GROUP BY c.z",
    }

    def write(conn, rng: random.Random) -> None:
        table = rng.choice("abc")
        column = {"a": "x", "b": "y", "c": "z"}[table]
        if rng.random() < 0.6:
            values = (rng.choice([1, 2, 3, None]), rng.randint(0, 9))
            conn.execute(f"INSERT INTO {table}(k, {column}) VALUES (?, ?)", values)
        else:
            conn.execute(f"DELETE FROM {table} WHERE id = (SELECT id FROM {table} ORDER BY random() LIMIT 1)")

    check_write_mix(tmp_path, setup, views, write, seed=2, steps=10)


def test_the_same_table_twice_before_the_root(tmp_path):
    """A deleted row joined to itself before the root is found only in the old state (a review
    finding: `a a1 JOIN a a3 ON a3.id = a1.id RIGHT JOIN c …` kept the deleted pair's rows)."""
    setup = [
        "CREATE TABLE a(id INTEGER PRIMARY KEY, k, x)",
        "CREATE TABLE c(id INTEGER PRIMARY KEY, k, z)",
        "CREATE TABLE w(k INT, j INT, v, PRIMARY KEY (k, j)) WITHOUT ROWID",
        "INSERT INTO a(k, x) VALUES (1, 2), (2, 1)",
        "INSERT INTO c(k, z) VALUES (1, 1), (2, 1)",
    ]
    views = {
        "same_row": "SELECT a1.id AS i1, a3.id AS i3, c.id AS ci FROM a a1 JOIN a a3 ON a3.id = a1.id "
        "RIGHT JOIN c ON c.k = a1.k",
        "other_row": "SELECT a1.id AS i1, a3.x, c.id AS ci FROM a a1 JOIN a a3 ON a3.k = a1.x "
        "RIGHT JOIN c ON c.k = a3.k",
        "without_rowid": "SELECT w1.v AS v1, w2.v AS v2, c.id AS ci FROM w w1 JOIN w w2 ON w2.k = w1.j "
        "RIGHT JOIN c ON c.k = w1.k",
    }

    def write(conn, rng: random.Random) -> None:
        action = rng.random()
        if action < 0.35:
            conn.execute("INSERT INTO a(k, x) VALUES (?, ?)", (rng.randint(1, 4), rng.randint(1, 4)))
        elif action < 0.55:
            conn.execute("DELETE FROM a WHERE id IN (SELECT id FROM a ORDER BY random() LIMIT 2)")
        elif action < 0.7:
            values = (rng.randint(1, 4), rng.randint(1, 4), rng.randint(0, 9))
            conn.execute("INSERT OR REPLACE INTO w VALUES (?, ?, ?)", values)
        elif action < 0.8:
            conn.execute("DELETE FROM w WHERE (k, j) = (SELECT k, j FROM w ORDER BY random() LIMIT 1)")
        else:
            conn.execute("INSERT INTO c(k, z) VALUES (?, 1)", (rng.randint(1, 4),))

    check_write_mix(tmp_path, setup, views, write, seed=7, steps=12)


def test_keys_that_collate_otherwise_than_their_columns(tmp_path):
    """A primary key or UNIQUE index may collate a column otherwise than the column declares
    (`PRIMARY KEY (a, b COLLATE BINARY)` over a NOCASE b holds 'u' and 'U'): the change capture
    compares rows as the key does (a review found 'U' replacing 'u' in the view)."""
    setup = [
        "CREATE TABLE w4(a INT NOT NULL, b TEXT COLLATE NOCASE NOT NULL, x, PRIMARY KEY(a, b COLLATE BINARY)) "
        "WITHOUT ROWID",
        "CREATE TABLE w3(a INT, b TEXT, x, PRIMARY KEY(b COLLATE RTRIM, a)) WITHOUT ROWID",
        "CREATE TABLE r(id INTEGER PRIMARY KEY, b TEXT COLLATE NOCASE, x, UNIQUE(b COLLATE BINARY))",
        # (the common one: a BINARY email unique under NOCASE — REPLACE deleted the other spelling unseen)
        "CREATE TABLE e(id INTEGER PRIMARY KEY, b TEXT, x, UNIQUE(b COLLATE NOCASE))",
    ]
    views = {
        "w4": "SELECT * FROM w4",
        "w4_count": "SELECT a, count(*) FROM w4 GROUP BY a",
        "w3": "SELECT * FROM w3",
        "r": "SELECT * FROM r",
        "e": "SELECT * FROM e",
    }

    def write(conn, rng: random.Random) -> None:
        spelling = rng.choice(["u", "U", "u ", "v"])
        table = rng.choice(["w4", "w3", "r", "e"])
        if rng.random() < 0.6:
            if table in ("r", "e"):
                conn.execute(f"INSERT OR REPLACE INTO {table}(b, x) VALUES (?, ?)", (spelling, rng.randint(0, 9)))
            else:
                conn.execute(f"INSERT OR REPLACE INTO {table} VALUES (1, ?, ?)", (spelling, rng.randint(0, 9)))
        else:
            conn.execute(f"DELETE FROM {table} WHERE b = ? COLLATE BINARY", (spelling,))

    check_write_mix(tmp_path, setup, views, write, seed=3, steps=12)
