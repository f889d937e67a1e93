# ruff: noqa: E501  (each view stays on one line)
"""Hunt 42 (about 580 real-world SELECTs over star, app and forum schemas, 7,000 seeded write
mixes, both modes): one wrong answer. SQLite's `x IN t` — a table name after IN, its shorthand
for `x IN (SELECT * FROM t)` — reads `t` with no subquery in the text, so the front end planned
the view over its FROM tables alone and a change of `t` never reached it. The authorizer now
checks at CREATE that the plan follows every table SQLite reads (`whole.untracked_reads`); such a
view is recomputed whole."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import check_write_mix

import matview

SETUP = [
    "CREATE TABLE banned(uid INTEGER)",
    "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT)",
    "CREATE TABLE comments(id INTEGER PRIMARY KEY, uid INT, post INT)",
    "CREATE VIEW banned_view AS SELECT uid FROM banned",
    "INSERT INTO users VALUES (1, 'a'), (2, 'b'), (3, 'c')",
    "INSERT INTO comments VALUES (1, 1, 10), (2, 2, 10), (3, 3, 11), (4, NULL, 11)",
    "INSERT INTO banned VALUES (1)",
]

VIEWS = {
    "in_table": "SELECT id FROM comments WHERE uid IN banned",
    "not_in_table": "SELECT id, uid FROM comments WHERE uid NOT IN main.banned",
    "in_view": "SELECT id FROM comments WHERE (uid + 0) IN banned_view",
    "in_case": "SELECT id, CASE WHEN uid IN banned THEN 'hidden' ELSE 'shown' END AS s FROM comments",
    "in_filter": "SELECT post, count(*) FILTER (WHERE uid IN banned) AS n FROM comments GROUP BY post",
    "in_on": "SELECT c.id, u.name FROM comments c LEFT JOIN users u ON u.id = c.uid AND c.uid NOT IN banned",
    "in_exists": "SELECT u.id FROM users u WHERE EXISTS (SELECT 1 FROM comments c WHERE c.uid = u.id AND c.uid IN banned)",
    "in_scalar": "SELECT u.id, (SELECT count(*) FROM comments c WHERE c.uid = u.id AND c.uid IN banned) AS n FROM users u",
}


def _write(conn: Any, rng: random.Random) -> None:
    uid = rng.choice(["1", "2", "3", "NULL"])
    kind = rng.random()
    if kind < 0.35:
        conn.execute(f"INSERT INTO banned VALUES ({uid})")
    elif kind < 0.6:
        conn.execute(f"DELETE FROM banned WHERE rowid = (SELECT min(rowid) FROM banned WHERE uid IS {uid})")
    elif kind < 0.8:
        conn.execute(f"INSERT INTO comments(uid, post) VALUES ({uid}, {rng.choice([10, 11])})")
    else:
        conn.execute(f"UPDATE comments SET uid = {uid} WHERE id = {rng.randint(1, 6)}")


@pytest.mark.fall_back_to_whole
@pytest.mark.parametrize("seed", range(2))
def test_a_table_named_after_in_reaches_the_view(tmp_path: Path, seed: int) -> None:
    conn, live = check_write_mix(tmp_path, SETUP, VIEWS, _write, seed, steps=10)
    for view in live:
        assert "recomputed whole" in conn.view(view).explain(), view
    conn.close()


def test_the_reason_names_the_shorthand_and_a_temp_table_is_refused(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in SETUP:
        conn.execute(sql)
    with pytest.raises(matview.UnsupportedQuery, match=r"IN banned`: a table name after IN"):
        conn.execute(f"CREATE MATERIALIZED VIEW v WITH (recompute = 'never') AS {VIEWS['in_table']}")
    conn.execute("CREATE TEMP TABLE tt(v)")
    with pytest.raises(matview.UnsupportedQuery, match="temporary table"):
        conn.execute("CREATE MATERIALIZED VIEW w AS SELECT id FROM comments WHERE uid IN tt")
    assert conn.views() == []
    conn.close()
