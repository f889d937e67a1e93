"""A file written by matview 0.1.0 (tests/data/matview-0.1.0.db, made by that release: catalog
format 1, plans of format 1, views as virtual tables in main, a deferred view with a pending
change) opens, reads exactly, is upgraded, and goes on being maintained."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_view_matches
from stock import stock_read

import matview

DATA = Path(__file__).parent / "data" / "matview-0.1.0.db"
VIEWS = {
    "totals": "SELECT g, COUNT(*) AS n, SUM(x) AS s, AVG(r) AS a, MIN(x) AS lo, MAX(r) AS hi FROM t GROUP BY g",
    "rows_d": "SELECT id, x * 2 AS y, g FROM t WHERE x % 2 = 0",
    "dist": "SELECT DISTINCT g FROM t",
    "expr": "SELECT g, SUM(x) / COUNT(*) + 1 AS m FROM t GROUP BY g HAVING COUNT(*) > 1",
}


def _check(conn: matview.Connection) -> None:
    for view, sql in VIEWS.items():
        assert_view_matches(conn, view, sql)


def test_file_of_release_0_1_0_opens_reads_and_is_maintained(tmp_path):
    path = tmp_path / "old.db"
    shutil.copyfile(DATA, path)
    conn = matview.connect(str(path))
    assert {v.name for v in conn.views()} == set(VIEWS)
    _check(conn)  # the deferred view's pending change included
    conn.execute("INSERT INTO t(g, x, r) VALUES ('a', 7, 1.25), ('e', 8, 2.0)")
    conn.execute("DELETE FROM t WHERE x = 0")
    with conn:
        conn.execute("UPDATE t SET g = 'b' WHERE g = 'c'")
    _check(conn)
    conn.flush()
    assert all(conn.view(name).verify() for name in VIEWS)
    conn.execute("REFRESH MATERIALIZED VIEW totals")
    conn.execute("CREATE MATERIALIZED VIEW fresh AS SELECT g, TOTAL(r) FROM t GROUP BY g")
    conn.execute("INSERT INTO t(g, x, r) VALUES ('a', 1, 0.25)")
    _check(conn)
    assert_view_matches(conn, "fresh", "SELECT g, TOTAL(r) FROM t GROUP BY g")
    conn.close()
    # upgraded: a client without matview reads the views as of their last fold
    rows = stock_read(path, "SELECT g, n FROM totals ORDER BY g")
    assert rows and all(isinstance(n, int) for _, n in rows)


# A file of catalog format 2 (made by tests/data/make_format2_partition.py with the matview of
# commit 53e5dbd): partition-recompute views kept each root's rows as msgpack
# state (operator -1); format 3 moves them into __dbsp_kept_<v> (matview.storage.kept_rows).
FORMAT2 = Path(__file__).parent / "data" / "matview-format2-partition.db"
FORMAT2_VIEWS = {
    "ex": "SELECT * FROM c WHERE EXISTS (SELECT 1 FROM o WHERE o.cid = c.id AND o.status = 'open')",
    "mx": "SELECT c.id, (SELECT max(o.amount) FROM o WHERE o.cid = c.id) AS m FROM c",
    "lj": "SELECT c.region, count(o.id) AS n, sum(o.amount) AS s FROM c LEFT JOIN o ON o.cid = c.id "
    "LEFT JOIN k ON k.b = c.id GROUP BY c.region",
    "kn": "SELECT k.a, k.b FROM k WHERE k.b IN (SELECT cid FROM o)",
}


def _check_format2(conn: matview.Connection) -> None:
    for view, sql in FORMAT2_VIEWS.items():
        assert_view_matches(conn, view, sql)


def test_file_of_format_2_moves_kept_rows_into_tables_and_is_maintained(tmp_path):
    path = tmp_path / "f2.db"
    shutil.copyfile(FORMAT2, path)
    conn = matview.connect(str(path))
    assert conn.execute("SELECT value FROM __dbsp_meta WHERE key = 'format_version'").fetchone() == (3,)
    for view in FORMAT2_VIEWS:
        assert conn.execute(f"SELECT count(*) FROM __dbsp_state_{view} WHERE operator_id = -1").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM __dbsp_kept_ex").fetchone()[0] > 0
    _check_format2(conn)  # the deferred view's pending change included
    with conn:
        conn.execute("UPDATE o SET status = 'open' WHERE status = 'done' AND id % 3 = 0")
        conn.execute("INSERT INTO k VALUES ('w', 4), (NULL, NULL)")
        conn.execute("DELETE FROM c WHERE id = 2")
    conn.execute("UPDATE o SET cid = cid + 1, amount = 2.0 WHERE id % 4 = 1")
    _check_format2(conn)
    conn.flush()
    assert all(conn.view(name).verify() for name in FORMAT2_VIEWS)
    conn.execute("REFRESH MATERIALIZED VIEW ex")
    conn.execute("DELETE FROM o WHERE status = 'open' AND id % 2 = 0")
    _check_format2(conn)
    conn.execute("DROP MATERIALIZED VIEW ex")
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name LIKE '%kept_ex%'").fetchone() == (0,)
    conn.close()
