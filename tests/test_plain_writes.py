"""A plain write inside an open transaction runs as it is (`Connection._runs_as_it_is`): no
write lock and no look at the schema before it, one look at commit. These tests hold the
cases where the look before would have mattered: another connection changed the views since
this one last looked, and writes that read a view."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
for _p in (str(_HERE), str(_HERE.parent)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from oracle import assert_view_matches  # noqa: E402

import matview  # noqa: E402
from matview_ext.statements import plain_write_target  # noqa: E402


@pytest.mark.parametrize(
    ("sql", "plain"),
    [
        ("INSERT INTO t VALUES (?, ?)", True),
        ("  /* c */ insert or replace into t(a) values (1)", True),
        ("REPLACE INTO t VALUES (1, 2)", True),
        ("UPDATE t SET b = b + 1 WHERE a = ?", True),
        ("UPDATE OR IGNORE t SET b = 1 WHERE a IN (1, 2)", True),
        ("DELETE FROM t WHERE a = 1 RETURNING *", True),
        ("INSERT INTO t VALUES (1, 2) ON CONFLICT (a) DO UPDATE SET b = excluded.b", True),
        ("INSERT INTO t SELECT * FROM u", False),
        ("INSERT INTO t VALUES ((SELECT max(a) FROM v), 1)", False),
        ("UPDATE t SET b = v.n FROM v WHERE v.a = t.a", False),
        ("DELETE FROM t WHERE a IN v", False),
        ("DELETE FROM t WHERE a in\n\tv", False),
        ("WITH c AS (SELECT 1) INSERT INTO t SELECT * FROM c", False),
        ("INSERT INTO t VALUES (1, 2); DELETE FROM t", False),
        ("SELECT * FROM t", False),
        ("CREATE TABLE x(a)", False),
        ("INSERT INTO t VALUES ('select')", False),  # (a word in a literal: only the long way)
        ('DELETE FROM t2 WHERE x IN"w"', False),  # (hunt 35: IN with no space before the table)
        ("DELETE FROM t2 WHERE x IN[w]", False),
        ("DELETE FROM t2 WHERE x IN`w`", False),
        ("DELETE FROM t2 WHERE x NOT IN/**/w", False),
        ("DELETE FROM t2 WHERE x IN--c\nw", False),
        ("DELETE FROM t2 WHERE x IN(1, 2) AND y NOT IN (3)", True),
        ("UPDATE temp.t SET b = 1", False),
        ('UPDATE main."t" SET b = 1', True),
    ],
)
def test_which_writes_read_only_their_target(sql: str, plain: bool) -> None:
    assert (plain_write_target(sql) is not None) is plain


def _make(tmp_path: Path) -> str:
    path = str(tmp_path / "plain.db")
    conn = matview.connect(path)
    conn.execute("PRAGMA journal_mode=WAL").fetchall()
    conn.execute("CREATE TABLE t(a INTEGER PRIMARY KEY, g INTEGER, b INTEGER)")
    conn.execute("CREATE TABLE log(a INTEGER, n INTEGER)")
    conn.execute("INSERT INTO t VALUES (1, 1, 10), (2, 1, 20), (3, 2, 30)")
    conn.close()
    return path


@pytest.mark.parametrize("maintenance", ["immediate", "deferred"])
def test_a_view_another_connection_created_is_folded_at_this_ones_commit(tmp_path: Path, maintenance: str) -> None:
    path = _make(tmp_path)
    mine = matview.connect(path)
    with mine:
        mine.execute("INSERT INTO t VALUES (4, 2, 40)")  # (this connection looked at the schema: no view)
    other = matview.connect(path)
    select = "SELECT g, count(*) AS n, sum(b) AS s FROM t GROUP BY g"
    other.execute(f"CREATE MATERIALIZED VIEW v WITH (maintenance = '{maintenance}') AS {select}")
    with mine:
        mine.execute("INSERT INTO t VALUES (5, 3, 50)")
        mine.execute("UPDATE t SET g = 3 WHERE a = 1")
        mine.execute("DELETE FROM t WHERE a = 2")
    assert (mine.view("v").pending() == 0) is (maintenance == "immediate")  # (folded at the commit)
    assert_view_matches(mine, "v", select)
    assert_view_matches(other, "v", select)
    other.execute("DROP MATERIALIZED VIEW v")
    with mine:
        mine.execute("INSERT INTO t VALUES (6, 3, 60)")  # (its capture is gone: nothing to fold)
    assert mine.execute("SELECT count(*) FROM t").fetchall() == [(5,)]


def test_a_write_that_reads_a_view_another_connection_created_reads_its_pending_rows(tmp_path: Path) -> None:
    path = _make(tmp_path)
    mine = matview.connect(path)
    other = matview.connect(path)
    other.execute(
        "CREATE MATERIALIZED VIEW v WITH (maintenance = 'deferred') AS SELECT g, count(*) AS n FROM t GROUP BY g"
    )
    other.execute("INSERT INTO t VALUES (7, 5, 70)")  # (pending: the stored rows lack group 5)
    with mine:
        mine.execute("INSERT INTO log SELECT g, n FROM v")
        mine.execute("UPDATE log SET n = v.n + 100 FROM v WHERE v.g = log.a AND v.g = 5")
        mine.execute("DELETE FROM log WHERE a IN (SELECT g FROM v WHERE n = 1) AND a = 2")
    assert sorted(mine.execute("SELECT * FROM log")) == [(1, 2), (5, 101)]


def test_a_write_to_a_table_named_like_a_view_another_connection_dropped(tmp_path: Path) -> None:
    """This connection read view v (it has v's shadow); another dropped v and made a table v:
    a write to it goes to the table (the fast path would have met the stale shadow, hunt 35)."""
    path = _make(tmp_path)
    mine = matview.connect(path)
    mine.execute("CREATE MATERIALIZED VIEW v AS SELECT g, count(*) AS n FROM t GROUP BY g")
    assert mine.execute("SELECT count(*) FROM v").fetchall() == [(2,)]
    other = matview.connect(path)
    other.execute("DROP MATERIALIZED VIEW v")
    other.execute("CREATE TABLE v(x)")
    with mine:
        mine.execute("INSERT INTO v VALUES (1)")
    assert mine.execute("SELECT * FROM v").fetchall() == [(1,)]
    assert other.execute("SELECT * FROM v").fetchall() == [(1,)]
