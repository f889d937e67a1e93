"""`a IS [NOT] DISTINCT FROM b` (SQLite 3.39): SQLite's `a IS NOT b` (`a IS b`) by another
name (`validate.spell_distinct_from`), in WHERE, ON, subqueries, GROUP BY and the select list
(named as written). Refused before with messages about a table named `1` (the passes read its
`FROM` as a clause). Maintained in both modes under random writes of NULLs, 1, 1.0 and '1'."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import check_write_mix, column_names

import matview

SETUP = [
    "CREATE TABLE t(id INTEGER PRIMARY KEY, a, b)",
    "CREATE TABLE u(id INTEGER PRIMARY KEY, x)",
]

VIEWS = {
    "where": "SELECT id FROM t WHERE a IS NOT DISTINCT FROM 1",
    "item": "SELECT id, a IS DISTINCT FROM b FROM t",
    "on": "SELECT t.id, u.id FROM t JOIN u ON u.x IS NOT DISTINCT FROM t.a",
    "exists": "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.x IS DISTINCT FROM t.b)",
    "grouped": "SELECT a IS NOT DISTINCT FROM NULL AS missing, count(*) FROM t GROUP BY 1",
}


def _write(conn: matview.Connection, rng: random.Random) -> None:
    value = rng.choice([None, 1, 1.0, "1", 2])
    if rng.random() < 0.6:
        conn.execute("INSERT OR REPLACE INTO t VALUES (?, ?, ?)", (rng.randrange(8), value, rng.choice([None, 1, 2])))
    elif rng.random() < 0.7:
        conn.execute("INSERT OR REPLACE INTO u VALUES (?, ?)", (rng.randrange(5), value))
    else:
        conn.execute(f"DELETE FROM {rng.choice('tu')} WHERE id = ?", (rng.randrange(8),))


@pytest.mark.parametrize("seed", range(2))
def test_distinct_from_is_maintained(tmp_path: Path, seed: int) -> None:
    conn, _live = check_write_mix(tmp_path, SETUP, VIEWS, _write, seed, steps=10)
    assert column_names(conn.execute("SELECT * FROM item_imm")) == ["id", "a IS DISTINCT FROM b"]
