"""Hunt 49 (an attack on session 29's own changes): the correlated IN, the capture's new probes,
failed scripts. Each test failed on the first version of those changes."""

from __future__ import annotations

import sys
from pathlib import Path

import apsw
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_view_matches

import matview


def _connect(tmp_path: Path, setup: list[str]) -> matview.Connection:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in setup:
        conn.execute(sql)
    return conn


IN_SETUP = [
    "CREATE TABLE o (id INTEGER PRIMARY KEY, k INTEGER, u INTEGER, z INTEGER)",
    "CREATE TABLE s (v INTEGER, k INTEGER, w INTEGER, flag INTEGER)",
    "CREATE INDEX s_v ON s (v)",
    "CREATE INDEX s_w ON s (w)",
    "CREATE VIEW pv AS SELECT v, k, w FROM s",
    "INSERT INTO o VALUES (1, 5, 7, 3), (2, 6, NULL, 4)",
    "INSERT INTO s VALUES (5, 9, 3, 1), (7, 7, 4, 1)",
]


@pytest.mark.parametrize(
    "select",
    [
        # an alias inside the subquery named like the outer table: `o.k` there is not the outer row's
        "SELECT id FROM o WHERE k IN (SELECT v FROM (SELECT v, k, w FROM s) AS o WHERE w = z)",
        "SELECT id FROM o WHERE k IN (SELECT v FROM pv AS o WHERE w = z)",
        "WITH d AS (SELECT v, k, w FROM s) SELECT id FROM o WHERE k IN (SELECT v FROM d AS o WHERE w = z)",
        # the subquery selects an outer column: it reads the outer row
        "SELECT id FROM o WHERE u IN (SELECT o.k FROM s WHERE flag = 1)",
        "SELECT id FROM o WHERE u IN (SELECT z FROM s)",
    ],
)
def test_a_membership_that_reads_the_outer_row_stays_as_written(tmp_path: Path, select: str) -> None:
    conn = _connect(tmp_path, IN_SETUP)
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {select}")
    assert_view_matches(conn, "v", select)
    for sql in ["UPDATE o SET z = 4 WHERE id = 1", "INSERT INTO s VALUES (6, 6, 4, 1)", "UPDATE s SET flag = 0"]:
        conn.execute(sql)
        assert_view_matches(conn, "v", select)


DOUBLE = [
    # an ignored insert leaves row 1's image saved; its delete cascades to row 2
    (
        [
            "PRAGMA foreign_keys = ON",
            "CREATE TABLE t (id INTEGER PRIMARY KEY, parent INT REFERENCES t (id) ON DELETE CASCADE, v INT)",
            "INSERT INTO t VALUES (1, NULL, 10), (2, 1, 20), (3, NULL, 30)",
        ],
        ["INSERT OR IGNORE INTO t VALUES (1, NULL, 99)", "DELETE FROM t WHERE id = 1"],
    ),
    # a user's AFTER DELETE trigger, made after the view, deletes another row while a REPLACE deletes
    (
        [
            "CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT UNIQUE, v INT)",
            "INSERT INTO t VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30)",
        ],
        [
            "CREATE TRIGGER user_del AFTER DELETE ON t WHEN old.k = 'a' BEGIN DELETE FROM t WHERE id = 3; END",
            "PRAGMA recursive_triggers = ON",
            "INSERT OR REPLACE INTO t VALUES (5, 'a', 50)",
        ],
    ),
]


@pytest.mark.parametrize("setup, writes", DOUBLE)
def test_a_deleted_row_is_counted_once(tmp_path: Path, setup: list[str], writes: list[str]) -> None:
    conn = _connect(tmp_path, setup)
    select = "SELECT count(*) AS n, sum(v) AS total FROM t"
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {select}")
    for sql in writes:
        conn.execute(sql)
        assert_view_matches(conn, "v", select)


def test_a_unique_index_on_the_integer_primary_key_is_probed_already(tmp_path: Path) -> None:
    """The triggers probe the rowid, which an INTEGER PRIMARY KEY is: no view breaks."""
    conn = _connect(tmp_path, ["CREATE TABLE t (id INTEGER PRIMARY KEY, x INT)", "INSERT INTO t VALUES (1, 1)"])
    conn.execute("CREATE MATERIALIZED VIEW v AS SELECT count(*) AS n FROM t")
    stock = apsw.Connection(str(tmp_path / "db.sqlite"))
    stock.execute("CREATE UNIQUE INDEX t_id ON t (id)")
    stock.execute("CREATE UNIQUE INDEX t_id_x ON t (id, x)")
    stock.close()
    assert conn.execute("SELECT * FROM v").fetchall() == [(1,)]


def test_a_nocase_unique_index_made_through_matview_is_followed(tmp_path: Path) -> None:
    setup = ["CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT UNIQUE, v INT)", "INSERT INTO t VALUES (1, 'a', 2)"]
    conn = _connect(tmp_path, setup)
    select = "SELECT count(*) AS n, sum(v) AS total FROM t"
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {select}")
    conn.execute("CREATE UNIQUE INDEX t_k ON t (k COLLATE NOCASE)")
    conn.execute("INSERT OR REPLACE INTO t VALUES (2, 'A', 5)")  # deletes row 1 by the NOCASE key
    assert_view_matches(conn, "v", select)


def test_a_script_failing_midway_is_folded_for_stock_readers(tmp_path: Path) -> None:
    setup = ["CREATE TABLE t (id INTEGER PRIMARY KEY)", "INSERT INTO t VALUES (1)"]
    conn = _connect(tmp_path, setup)
    conn.execute("CREATE MATERIALIZED VIEW v AS SELECT count(*) AS n FROM t")
    with pytest.raises(apsw.ConstraintError):
        conn.execute("INSERT INTO t VALUES (2); INSERT INTO t VALUES (1)")
    stock = apsw.Connection(str(tmp_path / "db.sqlite"))
    assert stock.execute("SELECT * FROM main.v").fetchall() == [(2,)]


@pytest.mark.parametrize(
    "select",
    [
        "SELECT m1.e FROM m1 JOIN s ON m1.e = s.w",
        "SELECT e FROM m1 WHERE m1.e IN (SELECT w FROM s)",
        "SELECT m1.id FROM m1 WHERE EXISTS (SELECT 1 FROM s WHERE s.w = m1.e)",
    ],
)
def test_an_upstream_expression_column_is_read_without_affinity(tmp_path: Path, select: str) -> None:
    """An upstream view's expression column (`i + 0`: no affinity) is stored untyped (BLOB
    affinity): compared with a TEXT column, 1 never met '1' where SQLite, reading the view,
    applies TEXT affinity to it (found by hunt 49; older than this session)."""
    setup = [
        "CREATE TABLE b (id INTEGER PRIMARY KEY, i INTEGER)",
        "CREATE TABLE s (id INTEGER PRIMARY KEY, w TEXT)",
        "INSERT INTO b VALUES (1, 1), (2, 2)",
        "INSERT INTO s VALUES (1, '1')",
    ]
    conn = _connect(tmp_path, setup)
    conn.execute("CREATE MATERIALIZED VIEW m1 AS SELECT id, i + 0 AS e FROM b")
    conn.execute(f"CREATE MATERIALIZED VIEW w AS {select}")
    assert_view_matches(conn, "w", select)
    for sql in ["INSERT INTO s VALUES (2, '2')", "UPDATE b SET i = 3 WHERE id = 1", "INSERT INTO b VALUES (3, 1)"]:
        conn.execute(sql)
        assert_view_matches(conn, "w", select)
