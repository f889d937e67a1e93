# ruff: noqa: E501  (each view stays on one line)
"""A scalar subquery that looks a row up by a UNIQUE key other than the INTEGER PRIMARY KEY is one
row at most, and maintained (hunt 42 ranked it the most common shape recomputed whole: a
settings table, `(SELECT n FROM settings WHERE k = 'bonus')` with `k TEXT PRIMARY KEY`; a user by
email). Every column of a PRIMARY KEY or UNIQUE index (not a partial one) must be fixed by `=`
under the index's collation, converting no key value; otherwise SQLite's choice of a first row
is a choice, and the view is recomputed whole."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_views_match, check_write_mix, create_views_both_modes

import matview

SETUP = [
    "CREATE TABLE settings(k TEXT PRIMARY KEY, n INTEGER)",
    "CREATE TABLE users(id INTEGER PRIMARY KEY, email TEXT UNIQUE, name TEXT, tag TEXT COLLATE NOCASE UNIQUE)",
    "CREATE TABLE pairs(a, b, x, UNIQUE (a, b))",
    "CREATE TABLE o(id INTEGER PRIMARY KEY, email TEXT, amt INTEGER, n INTEGER, c)",
    "CREATE TABLE partial(a TEXT, b)",
    "CREATE UNIQUE INDEX partial_a ON partial(a) WHERE b > 0",
    "INSERT INTO settings VALUES ('bonus', 2), ('cap', 10)",
    "INSERT INTO users VALUES (1, 'a@x', 'Ann', 'red'), (2, 'b@x', 'Bob', 'Blue'), (3, NULL, 'Nil', NULL)",
    "INSERT INTO pairs VALUES (1, 2, 'p12'), ('1', 2, 'q12'), (2, 2, 'p22')",
    "INSERT INTO o VALUES (1, 'a@x', 5, 1, 1), (2, 'A@x', 6, 2, '1'), (3, NULL, 7, NULL, 2), (4, 'b@x', 8, 1, 1.0)",
]

MAINTAINED = {
    "setting": "SELECT id, amt * (SELECT n FROM settings WHERE k = 'bonus') AS paid FROM o",
    "by_email": "SELECT o.id, (SELECT name FROM users WHERE email = o.email) AS who FROM o",
    "by_tag": "SELECT o.id, (SELECT name FROM users WHERE tag = o.email) AS who FROM o",
    "by_pair": "SELECT o.id, (SELECT x FROM pairs WHERE a = o.c AND b = 2) AS x FROM o",
}

WHOLE = {
    "converted": "SELECT o.id, (SELECT name FROM users WHERE users.email = o.n) AS who FROM o",
    "left_column": "SELECT o.id, (SELECT name FROM users u WHERE o.email = u.email) AS who FROM o",
    "half_key": "SELECT o.id, (SELECT x FROM pairs WHERE a = o.c) AS x FROM o",
    "partial_index": "SELECT o.id, (SELECT b FROM partial WHERE a = o.email) AS b FROM o",
    "collated": "SELECT o.id, (SELECT name FROM users WHERE email = o.email COLLATE NOCASE) AS who FROM o",
}


def _write(conn: Any, rng: random.Random) -> None:
    kind = rng.random()
    email = rng.choice(["'a@x'", "'A@x'", "'b@x'", "'c@x'", "NULL"])
    if kind < 0.2:
        conn.execute(f"REPLACE INTO settings VALUES ('bonus', {rng.randint(1, 4)})")
    elif kind < 0.3:
        conn.execute("DELETE FROM settings WHERE k = 'bonus'")
    elif kind < 0.5:
        conn.execute(f"REPLACE INTO users VALUES ({rng.randint(1, 5)}, {email}, 'N{rng.randint(1, 9)}', {email})")
    elif kind < 0.6:
        conn.execute(
            f"UPDATE users SET email = {email} WHERE id = {rng.randint(1, 5)} AND NOT EXISTS (SELECT 1 FROM users WHERE email IS {email})"
        )
    elif kind < 0.75:
        conn.execute(
            f"INSERT OR REPLACE INTO pairs VALUES ({rng.choice(['1', chr(39) + '1' + chr(39), '2', '1.0'])}, 2, 'x{rng.randint(1, 9)}')"
        )
    elif kind < 0.95:
        conn.execute(
            f"INSERT INTO o(email, amt, n, c) VALUES ({email}, {rng.randint(1, 9)}, {rng.randint(1, 2)}, {rng.choice(['1', chr(39) + '1' + chr(39), '2', '1.0'])})"
        )
    else:
        conn.execute(f"DELETE FROM o WHERE id = {rng.randint(1, 8)}")


@pytest.mark.parametrize("seed", range(2))
def test_lookups_by_a_unique_key_are_maintained(tmp_path: Path, seed: int) -> None:
    conn, live = check_write_mix(tmp_path, SETUP, MAINTAINED, _write, seed, steps=12)
    for view in live:
        assert "recomputed whole" not in conn.view(view).explain(), view
    conn.close()


@pytest.mark.fall_back_to_whole
def test_lookups_that_may_match_several_rows_stay_whole(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in SETUP:
        conn.execute(sql)
    live = create_views_both_modes(conn, WHOLE)
    for view in live:
        assert "recomputed whole" in conn.view(view).explain(), view
    rng = random.Random(5)
    for _ in range(8):
        with conn:
            _write(conn, rng)
        assert_views_match(conn, live)
    conn.close()


@pytest.mark.fall_back_to_whole
@pytest.mark.parametrize("key", ["k TEXT PRIMARY KEY", "k INTEGER PRIMARY KEY"])
def test_an_operator_as_loose_as_equals_makes_no_lookup(tmp_path: Path, key: str) -> None:
    """Hunt 46: `k = o.t IS NOT NULL` is `(k = o.t) IS NOT NULL` (SQLite reads `=`, IS, IN, LIKE,
    BETWEEN, `<>`… left to right), true for every row: no lookup of k. Taken for one, the view
    kept the first row of a scan that another view's index then changed."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute(f"CREATE TABLE sw({key}, c TEXT, p1, p2, p3, p4)" + (" WITHOUT ROWID" if "TEXT" in key else ""))
    keys = ("'a'", "'b'") if "TEXT" in key else ("1", "2")
    conn.execute(f"INSERT INTO sw(k, c) VALUES ({keys[0]}, 'z'), ({keys[1]}, 'y')")
    conn.execute("CREATE TABLE o(id INTEGER PRIMARY KEY, t TEXT)")
    conn.execute("INSERT INTO o VALUES (1, 'q')")
    views = {
        f"v{i}": f"SELECT id, (SELECT k FROM sw WHERE k = o.t {tail}) AS v FROM o"
        for i, tail in enumerate(["IS NOT NULL", "<> 1", "IN (0, 1)", "NOTNULL", "LIKE 1"])
    }
    for name, select in views.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {select}")
        assert "recomputed whole" in conn.view(name).explain(), name
    conn.execute("CREATE MATERIALIZED VIEW counts AS SELECT id, (SELECT count(*) FROM sw WHERE c = o.t) AS n FROM o")
    with conn:
        conn.execute("INSERT INTO o VALUES (2, 'r')")
    assert_views_match(conn, views)
    conn.close()
