"""Hunt 28's findings in the large-change path (refresh as a delta, `operators/recompute.py`)
and in applying large ΔVs (`ViewTable.apply`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from oracle import assert_view_matches

import matview

COUNT = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
EXISTS = "SELECT id, v FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.k = a.k)"


@pytest.mark.parametrize("rows", [1500, 2500])  # an incremental fold, then one recomputed
def test_a_recomputing_fold_beside_an_open_statement(tmp_path: Path, rows: int) -> None:
    """The recompute rebuilt a partition view's kept rows by DROP TABLE, which SQLite refuses
    while another statement of the connection runs: the user's write failed (LockedError)."""
    conn = matview.connect(str(tmp_path / "l.db"))
    conn.execute("CREATE TABLE a (id INTEGER PRIMARY KEY, k INT, v INT)")
    conn.execute("CREATE TABLE b (id INTEGER PRIMARY KEY, k INT)")
    conn.execute("CREATE TABLE jobs (id INTEGER PRIMARY KEY, n INT)")
    conn.execute("INSERT INTO b (k) SELECT value FROM json_each('[1, 5, 7, 42]')")
    conn.execute("INSERT INTO jobs VALUES (1, ?), (2, 1)", (rows,))
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {EXISTS}")
    conn.execute(f"CREATE MATERIALIZED VIEW d WITH (maintenance = 'deferred') AS {EXISTS}")
    version = conn.execute("PRAGMA schema_version").fetchone()[0]
    for _job, n in conn.execute("SELECT id, n FROM jobs"):  # an open cursor
        conn.execute(COUNT + "INSERT INTO a (k, v) SELECT i % 100, i FROM n", (n,))
        conn.execute("SELECT count(*) FROM d").fetchall()
    with conn:
        for _job, n in conn.execute("SELECT id, n FROM jobs"):
            conn.execute(COUNT + "INSERT INTO a (k, v) SELECT i % 50, i FROM n", (n,))
    assert conn.execute("PRAGMA schema_version").fetchone()[0] == version  # (no DROP: no reload)
    for name in ("v", "d"):
        assert_view_matches(conn, name, EXISTS)


def test_large_deltas_keep_a_users_unique_index_on_a_view(tmp_path: Path) -> None:
    """A ΔV of more than 4 rows was applied by upserting the new rows before deleting the old
    ones: a user's UNIQUE index on a view column (true of the SELECT) failed the base write,
    or stalled a recomputed view, whose stored rows — what stock sqlite3 reads — went stale."""
    path = tmp_path / "u.db"
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE a (id INTEGER PRIMARY KEY, k INT, v INT)")
    conn.execute("CREATE TABLE b (k INT PRIMARY KEY, w INT)")
    joined = "SELECT a.id, a.v, b.w FROM a LEFT JOIN b ON b.k = a.k"
    conn.execute(f"CREATE MATERIALIZED VIEW jv AS {joined}")
    conn.execute("CREATE UNIQUE INDEX jv_id ON jv (id)")
    conn.execute(COUNT + "INSERT INTO a (k, v) SELECT i % 5, i FROM n", (10,))
    conn.execute(COUNT + "INSERT INTO b SELECT i, i FROM n", (50,))  # every (id, v, NULL) becomes (id, v, w)
    assert_view_matches(conn, "jv", joined)

    grouped = "SELECT region, count(*) AS n, sum(amount) AS total FROM orders GROUP BY region"
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, region TEXT, amount INTEGER)")
    conn.execute(f"CREATE MATERIALIZED VIEW revenue AS {grouped}")
    conn.execute("CREATE UNIQUE INDEX revenue_region ON revenue (region)")
    for region in "zyxwvutsrq":  # the view table's rows in another order than GROUP BY's
        conn.execute("INSERT INTO orders (region, amount) VALUES (?, 1)", (region,))
    conn.execute(COUNT + "INSERT INTO orders (region, amount) SELECT char(113 + i % 10), i FROM n", (3000,))
    assert conn.view("revenue").pending() == 0
    want = sorted(conn.execute(grouped).fetchall())
    conn.close()
    stock = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sqlite3, sys; print(json.dumps(sorted(sqlite3.connect(sys.argv[1]).execute("
            "'SELECT * FROM revenue').fetchall())))",
            str(path),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert [tuple(row) for row in json.loads(stock.stdout)] == want
