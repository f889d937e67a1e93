"""A view whose catalog entry another client damaged (`catalog.DamagedEntry`): it blocks no other
view and no write; reading it raises why; REFRESH makes it again from its SELECT, DROP removes it."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_view_matches

import matview

GROUPED = "SELECT g, count(*) AS n, sum(v) AS s FROM t GROUP BY g"
OTHER = "SELECT g, v FROM t WHERE v > 1"
_ENV = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
DAMAGES = [
    "UPDATE __dbsp_catalog SET plan = x'' WHERE name = 'w'",
    "UPDATE __dbsp_catalog SET plan = x'c0' WHERE name = 'w'",
    "UPDATE __dbsp_catalog SET base_tables = 'zzz' WHERE name = 'w'",
    "UPDATE __dbsp_catalog SET format = 'x' WHERE name = 'w'",
    "UPDATE __dbsp_catalog SET plan = x'80' WHERE name = 'w'",  # (an empty map)
]


def _file(tmp_path: Path, damage: str, mode: str = "immediate", view: str = GROUPED) -> Path:
    path = tmp_path / "db.sqlite"
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, g TEXT, v INT)")
    conn.execute("INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 5), (3, 'a', 2)")
    conn.execute(f"CREATE MATERIALIZED VIEW w WITH (maintenance = '{mode}') AS {view}")
    conn.execute(f"CREATE MATERIALIZED VIEW o AS {OTHER}")
    conn.close()
    with sqlite3.connect(path) as stock:  # (another client's edit: a stock sqlite3)
        stock.execute(damage)
    stock.close()
    return path


def _internal(conn: matview.Connection, view: str) -> list[str]:
    return [
        str(name)
        for (name,) in conn.execute("SELECT name FROM sqlite_master").fetchall()
        if str(name).startswith("__dbsp_") and str(name).endswith(f"_{view}")
    ]


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_entry_blocks_no_other_view_and_no_write(tmp_path: Path, damage: str) -> None:
    conn = matview.connect(str(_file(tmp_path, damage)))
    with pytest.raises(matview.CatalogError, match=r"catalog entry of view w is corrupt.*REFRESH"):
        conn.execute("SELECT * FROM w").fetchall()
    with pytest.raises(matview.CatalogError):
        conn.execute("SELECT g FROM w WHERE n > 100").fetchall()  # (a filter no stored row passes)
    with pytest.raises(matview.CatalogError, match="catalog entry of view w is corrupt"):
        conn.view("w")
    conn.execute("INSERT INTO t VALUES (4, 'c', 7)")
    conn.execute("UPDATE t SET v = 9 WHERE id = 1")
    assert_view_matches(conn, "o", OTHER)
    with pytest.raises(matview.Error):
        conn.execute("CREATE MATERIALIZED VIEW w AS SELECT 1 AS one FROM t")  # (the name is still taken)
    with pytest.raises(matview.Error, match="w is a materialized view"):
        conn.execute("DROP VIEW w")
    with pytest.raises(apsw.AuthError):
        conn.apsw.execute("DROP VIEW main.w")
    conn.execute("REFRESH MATERIALIZED VIEW w")
    assert_view_matches(conn, "w", GROUPED)
    conn.execute("DELETE FROM t WHERE g = 'a'")
    assert_view_matches(conn, "w", GROUPED)
    assert_view_matches(conn, "o", OTHER)
    conn.close()
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    assert_view_matches(conn, "w", GROUPED)


def test_refresh_keeps_the_maintenance_mode(tmp_path: Path) -> None:
    conn = matview.connect(str(_file(tmp_path, DAMAGES[0], mode="deferred")))
    conn.execute("REFRESH MATERIALIZED VIEW w")
    assert conn.view("w").maintenance == "deferred"
    conn.execute("INSERT INTO t VALUES (4, 'c', 7)")
    assert_view_matches(conn, "w", GROUPED)


def test_drop_removes_everything_of_the_view_and_the_name_is_free_again(tmp_path: Path) -> None:
    conn = matview.connect(str(_file(tmp_path, DAMAGES[2])))
    conn.execute("DROP MATERIALIZED VIEW w")
    assert _internal(conn, "w") == []
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'w'").fetchall() == []
    assert conn.execute("SELECT name FROM sqlite_temp_master WHERE name = 'w'").fetchall() == []
    conn.execute("CREATE MATERIALIZED VIEW w AS SELECT g, max(v) AS top FROM t GROUP BY g")
    conn.execute("INSERT INTO t VALUES (4, 'a', 9)")
    assert_view_matches(conn, "w", "SELECT g, max(v) AS top FROM t GROUP BY g")
    conn.execute("DROP MATERIALIZED VIEW w")
    conn.execute("DROP MATERIALIZED VIEW o")
    conn.execute("DROP TABLE t")  # (its change capture went with the last view)
    assert [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")] == []


def test_a_damaged_view_with_internal_nodes_drops_them(tmp_path: Path) -> None:
    nested = "SELECT x.g, x.n FROM (SELECT g, count(*) AS n FROM t GROUP BY g) AS x JOIN t ON t.g = x.g"
    conn = matview.connect(str(_file(tmp_path, DAMAGES[0], view=nested)))
    nodes = [
        n for (n,) in conn.execute("SELECT name FROM __dbsp_catalog WHERE name LIKE '\\_\\_dbsp\\_node%' ESCAPE '\\'")
    ]
    conn.execute("DROP MATERIALIZED VIEW w")
    left = [n for (n,) in conn.execute("SELECT name FROM __dbsp_catalog")]
    assert left == ["o"], (nodes, left)


def test_a_damaged_entry_whose_select_is_lost_can_be_dropped(tmp_path: Path) -> None:
    conn = matview.connect(str(_file(tmp_path, "UPDATE __dbsp_catalog SET plan = x'', sql = x'ff' WHERE name = 'w'")))
    with pytest.raises(matview.CatalogError, match="its SELECT is lost too: DROP"):
        conn.execute("REFRESH MATERIALIZED VIEW w")
    conn.execute("DROP MATERIALIZED VIEW w")
    assert _internal(conn, "w") == []


def test_verify_reports_the_damaged_view(tmp_path: Path) -> None:
    path = _file(tmp_path, DAMAGES[0])
    done = subprocess.run(
        [sys.executable, "-m", "matview.cli", "verify", str(path)],
        capture_output=True,
        text=True,
        env=_ENV,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "o: ok" in done.stdout and "w: ERROR" in done.stdout


def test_a_view_over_a_damaged_view_says_so_and_refresh_rebuilds_it(tmp_path: Path) -> None:
    path = _file(tmp_path, "SELECT 1")
    conn = matview.connect(str(path))
    conn.execute("CREATE MATERIALIZED VIEW d AS SELECT n, count(*) AS k FROM w GROUP BY n")
    conn.close()
    with sqlite3.connect(path) as stock:
        stock.execute(DAMAGES[0])
    stock.close()
    conn = matview.connect(str(path))
    conn.execute("INSERT INTO t VALUES (4, 'a', 3)")
    with pytest.raises(matview.Error, match="reads w, whose catalog entry is damaged: REFRESH MATERIALIZED VIEW w"):
        conn.execute("SELECT * FROM d").fetchall()
    with pytest.raises(matview.Error, match="read by materialized view"):
        conn.execute("DROP MATERIALIZED VIEW w")
    conn.execute("REFRESH MATERIALIZED VIEW w")
    conn.execute("INSERT INTO t VALUES (5, 'c', 3)")
    assert_view_matches(conn, "w", GROUPED)
    assert_view_matches(
        conn, "d", "SELECT n, count(*) AS k FROM (SELECT g, count(*) AS n FROM t GROUP BY g) GROUP BY n"
    )
