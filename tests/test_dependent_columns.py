"""A column outside the aggregates whose table's key is grouped by (`SELECT c.name, count(*)
FROM c JOIN o … GROUP BY c.id`): every row of a group has the same row of that table, so the
value SQLite shows is that row's, and matview groups by it too (`dependent_group_terms`).
Checked against SQLite under random writes (row by row and set at a time), both modes, with
NOCASE and untyped columns whose values change variant; tables whose key may be NULL, or
whose key is not grouped by, stay refused."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from oracle import assert_refused, assert_views_match, check_write_mix

import matview
from matview.circuit import BULK_ROWS

SETUP = [
    "CREATE TABLE c(id INTEGER PRIMARY KEY, name TEXT, city TEXT COLLATE NOCASE, u)",
    "CREATE TABLE o(id INTEGER PRIMARY KEY, cid INT, amount REAL, day TEXT)",
    "CREATE TABLE w(a INT NOT NULL, b TEXT NOT NULL, v, PRIMARY KEY (a, b)) WITHOUT ROWID",
    "CREATE TABLE n(k INT PRIMARY KEY, label TEXT)",
]

VIEWS = {
    "joined": "SELECT c.name, count(*) AS n FROM c JOIN o ON o.cid = c.id GROUP BY c.id",
    "left": "SELECT c.id, c.name, c.city, count(o.id), sum(o.amount) FROM c LEFT JOIN o ON o.cid = c.id GROUP BY c.id",
    "having": "SELECT name, city, u, max(amount) FROM c, o WHERE o.cid = c.id GROUP BY c.id "
    "HAVING count(*) > 1 AND name <> 'z'",
    "expression": "SELECT upper(c.name) || '!' AS shout, count(*) FROM o JOIN c ON c.id = o.cid GROUP BY o.cid, c.id",
    "composite": "SELECT w.v, count(*) FROM w JOIN o ON o.cid = w.a GROUP BY w.a, w.b",
    "padded": "SELECT o.cid, c.name FROM o LEFT JOIN c ON c.id = o.cid GROUP BY o.cid, c.id",
    "rowid": "SELECT c.name, count(*) FROM c JOIN o ON o.cid = c.id GROUP BY c.rowid",
    # through a key equality: o's key grouped, c's key equated to o's column (the order's customer)
    "through_join": "SELECT o.id, c.name, c.city, count(*) FROM o JOIN c ON c.id = o.cid GROUP BY o.id",
    "through_where": "SELECT o.id, c.name, o.amount FROM o, c WHERE c.id = o.cid GROUP BY o.id",
    "through_left": "SELECT o.id, c.name, o.day FROM o LEFT JOIN c ON c.id = o.cid GROUP BY o.id",
    "through_two": "SELECT o.id, c.name, w.v FROM o JOIN c ON c.id = o.cid LEFT JOIN w ON w.a = c.id AND w.b = o.day "
    "GROUP BY o.id",
}


def _write(conn: matview.Connection, rng: random.Random) -> None:
    kind = rng.random()
    if kind < 0.3:
        conn.execute(
            "INSERT INTO o(cid, amount, day) VALUES (?, ?, ?)",
            (rng.randint(1, 4), rng.choice([1, 5, 7.5, None]), rng.choice(["d1", "d2"])),
        )
    elif kind < 0.45:
        conn.execute(
            "INSERT OR REPLACE INTO c VALUES (?, ?, ?, ?)",
            (rng.randint(1, 4), rng.choice("abz"), rng.choice(["x", "X"]), rng.choice([1, 1.0, "1"])),
        )
    elif kind < 0.5:
        conn.execute("UPDATE c SET name = upper(name), city = lower(city), u = 1.0 WHERE id = ?", (rng.randint(1, 4),))
    elif kind < 0.58:
        conn.execute("DELETE FROM c WHERE id = ?", (rng.randint(1, 4),))
    elif kind < 0.7:
        conn.execute("UPDATE o SET cid = ? WHERE id % 4 = ?", (rng.randint(1, 4), rng.randint(0, 3)))
    elif kind < 0.8:
        conn.execute("DELETE FROM o WHERE id % 5 = ?", (rng.randint(0, 4),))
    else:
        conn.execute(
            "INSERT OR REPLACE INTO w VALUES (?, ?, ?)",
            (rng.randint(1, 4), rng.choice("pq"), rng.choice([1, None, "z", 1.0])),
        )


@pytest.mark.parametrize("seed", range(3))
def test_columns_the_grouped_key_determines(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    conn, live = check_write_mix(tmp_path, SETUP, VIEWS, _write, seed, steps=12)
    with conn:  # set at a time
        conn.executemany(
            "INSERT INTO o(cid, amount, day) VALUES (?, ?, ?)",
            [(rng.randint(1, 6), rng.choice([1, 2.5]), "d3") for _ in range(BULK_ROWS * 2)],
        )
        conn.execute("INSERT OR REPLACE INTO c VALUES (5, 'e', 'Y', 2), (6, 'f', 'y', 2.0)")
    assert_views_match(conn, live)


@pytest.mark.parametrize(
    "select",
    [
        "SELECT n.label, count(*) FROM n GROUP BY n.k",  # a rowid table's PRIMARY KEY may hold NULLs
        "SELECT c.name, count(*) FROM c JOIN o ON o.cid = c.id GROUP BY o.cid",  # c's key is not grouped by
        "SELECT w.v, count(*) FROM w GROUP BY w.a",  # half of a composite key
    ],
)
def test_columns_no_grouped_key_determines_are_refused(tmp_path: Path, select: str) -> None:
    assert_refused(tmp_path, SETUP, select, "neither aggregated nor a GROUP BY column")


@pytest.mark.parametrize(
    "setup, select",
    [
        # a key unique under BINARY over a NOCASE column: one NOCASE group holds 'x' and 'X' (review)
        (
            "CREATE TABLE r(k TEXT NOT NULL COLLATE NOCASE, v, PRIMARY KEY (k COLLATE BINARY))",
            "SELECT r.v, count(*) FROM r JOIN o ON o.day = r.k GROUP BY r.k",
        ),
        (
            "CREATE TABLE r(a INT NOT NULL, b TEXT NOT NULL COLLATE NOCASE, v, PRIMARY KEY (a, b COLLATE BINARY)) "
            "WITHOUT ROWID",
            "SELECT r.v, count(*) FROM r GROUP BY r.a, r.b",
        ),
    ],
)
def test_a_key_finer_than_its_columns_determines_nothing(tmp_path, setup, select):
    assert_refused(tmp_path, [*SETUP, setup], select, "neither aggregated nor a GROUP BY column")
