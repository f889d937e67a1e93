"""Date functions that read the clock (`sql.clock`): a view over them would keep the time of its
last fold, so they are refused — written as literals, double-quoted (SQLite reads `"now"` as a
string where no column has that name), computed from constants, or handed to a date function by
a CTE, a derived table, a plain view or a materialized view (hunt 26, review 29). Queries that
only compare or show a 'now' string, or use 'subsec' as a modifier, are maintained."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_views_match, create_views_both_modes

import matview

SETUP = [
    "CREATE TABLE t(id INTEGER PRIMARY KEY, created TEXT, status TEXT, a INT)",
    "INSERT INTO t VALUES (1, '2024-01-01 10:00:00.5', 'now', 1), (2, '2024-02-01', 'later', 0)",
    "CREATE VIEW tagged AS SELECT id, 'now' AS n FROM t",
]

REFUSED = [
    "SELECT id, date('now') AS d FROM t",
    'SELECT id, date("now") AS d FROM t',
    'SELECT id, julianday("now") - julianday(created) AS age FROM t ORDER BY age LIMIT 10',
    "SELECT id, strftime('%H:%M:%f', 'no' || 'w') AS ts FROM t",
    "SELECT id, strftime('%H:%M:%S', CAST('no' || 'w' AS TEXT)) AS ts FROM t",
    "SELECT id, strftime('%H:%M:%S', (SELECT 'no' || 'w')) AS ts FROM t",
    "SELECT id, strftime('%H:%M:%S', iif(a > 0, 'no' || 'w', created)) AS ts FROM t",
    "SELECT id, date(char(110, 111, 119)) AS d FROM t",
    "SELECT id, date(x'6e6f77') AS d FROM t",
    "SELECT id, unixepoch(('subsec')) AS ts FROM t",
    "SELECT id, unixepoch('subsec' COLLATE nocase) AS ts FROM t",
    "WITH c AS (SELECT id, 'now' AS n FROM t) SELECT id, strftime('%H', n) AS h FROM c",
    "SELECT t.id, strftime('%f', c.n) AS f FROM t, (SELECT 'no' || 'w' AS n) c",
    "SELECT id, strftime('%H', n) AS h FROM tagged",
    "SELECT id, strftime('%H', n) AS h FROM tagged ORDER BY id LIMIT 5",
    # (hunt 27: the elements of a constant JSON text are values handed on)
    "SELECT t.id, julianday(j.value) AS v FROM t, json_each('[\"now\"]') j",
    "SELECT t.id, date(j.key) AS v FROM t, json_each('{\"now\": 1}') j",
    "SELECT t.id, date(j.value) AS v FROM t, json_tree('[\"n' || 'ow\"]') j",
    "SELECT t.id, (SELECT date(value) FROM json_each('[\"now\"]')) AS v FROM t",
]

MAINTAINED = {
    "label": "SELECT id, CASE WHEN a > 0 THEN 'Now' ELSE 'Later' END AS k, date(created) AS d FROM t",
    "status": "SELECT id, date(created) AS d FROM t WHERE status = 'now'",
    "listed": "SELECT id, date(created) AS d FROM t WHERE status IN ('now', 'soon')",
    "shown": "SELECT 'now' AS kind, date(created) AS d FROM t",
    "modifier": "SELECT id, datetime(created, 'subsec') AS d, unixepoch(created, 'subsec') AS u FROM t",
    "amount": "SELECT id, date(created, '+' || a || ' days') AS d FROM t",
    "json": "SELECT t.id, date(t.created) AS d, j.value AS v FROM t, json_each('[1, 2]') j",
}


@pytest.mark.fall_back_to_whole
@pytest.mark.parametrize("select", REFUSED)
def test_the_clock_is_refused(tmp_path: Path, select: str) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in SETUP:
        conn.execute(sql)
    with pytest.raises(matview.UnsupportedQuery, match=r"now|subsec"):
        conn.execute(f"CREATE MATERIALIZED VIEW v AS {select}")


def test_a_view_over_a_view_that_shows_now_is_refused(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in SETUP:
        conn.execute(sql)
    conn.execute("CREATE MATERIALIZED VIEW up AS SELECT id, 'now' AS n FROM t")
    with pytest.raises(matview.UnsupportedQuery, match="now"):
        conn.execute("CREATE MATERIALIZED VIEW down AS SELECT id, strftime('%H:%M:%S', n) AS s FROM up")


@pytest.mark.fall_back_to_whole  # (the json_each view is recomputed whole)
def test_now_compared_or_shown_is_maintained(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in SETUP:
        conn.execute(sql)
    live = create_views_both_modes(conn, MAINTAINED)
    conn.execute("INSERT INTO t VALUES (3, '2024-03-01 00:00:01.25', 'now', 2)")
    conn.execute("UPDATE t SET status = 'soon' WHERE id = 1")
    assert_views_match(conn, live)
