"""The DDL guard (`matview.storage.ddl_guard`): SQLite's authorizer refuses DROP/ALTER of what
views stand on, whichever way the statement reaches SQLite on a matview connection — the
underlying apsw connection and its cursors included, past matview's statement patterns."""

from __future__ import annotations

import sys
from pathlib import Path

import apsw
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_view_matches

import matview
from matview import names

VIEW = "SELECT g, sum(v) AS s, count(*) AS n FROM t GROUP BY g"


def _db(tmp_path: Path, **options: object) -> matview.Connection:
    conn = matview.connect(str(tmp_path / "db.sqlite"), **options)  # type: ignore[arg-type]
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, g TEXT, v INT)")
    conn.execute("INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 5)")
    conn.execute(f"CREATE MATERIALIZED VIEW w AS {VIEW}")
    return conn


def _schema(conn: matview.Connection) -> list[tuple[str, str]]:
    return conn.apsw.execute("SELECT type, name FROM main.sqlite_master ORDER BY name").fetchall()


@pytest.mark.parametrize(
    "ddl",
    [
        "DROP TABLE t",
        "DROP TABLE IF EXISTS main.T",
        "ALTER TABLE t RENAME TO t2",
        "ALTER TABLE t RENAME COLUMN v TO v2",
        "ALTER TABLE t DROP COLUMN v",
        "ALTER TABLE t ADD COLUMN extra",  # (only through `conn.execute`, which rebuilds the views)
        "DROP VIEW main.w",
        f"DROP TABLE {names.view_table('w')}",
        f"ALTER TABLE {names.state_table('w')} RENAME TO x",
        f"DROP TABLE {names.delta_table('t')}",
        f"DROP TRIGGER {names.trigger('t', 'insert')}",
        f"DROP INDEX {names.view_key_index('w')}",
    ],
)
@pytest.mark.parametrize("through", ["apsw", "cursor"])
def test_ddl_past_the_statement_patterns_is_refused_by_sqlite(tmp_path: Path, ddl: str, through: str) -> None:
    conn = _db(tmp_path)
    before = _schema(conn)
    run = conn.apsw.execute if through == "apsw" else conn.cursor().execute
    with pytest.raises(apsw.AuthError):
        run(ddl)
    assert _schema(conn) == before
    conn.execute("INSERT INTO t VALUES (3, 'a', 2)")
    conn.execute("UPDATE t SET g = 'c' WHERE id = 2")
    assert_view_matches(conn, "w", VIEW)
    assert conn.view("w").verify()


def test_a_refusal_through_the_api_names_the_views(tmp_path: Path) -> None:
    conn = _db(tmp_path)
    # (EXPLAIN runs nothing, but SQLite asks the authorizer while it prepares the DROP)
    with pytest.raises(matview.Error, match="table t is used by materialized view"):
        conn.execute("EXPLAIN DROP TABLE t")
    with pytest.raises(matview.Error, match="w is a materialized view"):
        conn.execute("DROP VIEW w")


def test_the_users_own_objects_stay_theirs(tmp_path: Path) -> None:
    conn = _db(tmp_path)
    conn.execute("CREATE TABLE other (x)")
    conn.execute("CREATE INDEX by_g ON t (g)")
    conn.execute("CREATE TRIGGER mine AFTER INSERT ON t BEGIN INSERT INTO other VALUES (new.id); END")
    conn.execute("CREATE TEMP TABLE t (shadow)")  # (unqualified `t` is the temp one now)
    conn.execute("ATTACH ':memory:' AS aux")
    conn.execute("CREATE TABLE aux.t (x)")
    theirs = (
        "DROP TRIGGER mine",
        "DROP INDEX by_g",
        "DROP TABLE t",
        "DROP TABLE aux.t",
        "ALTER TABLE other RENAME TO o",
    )
    for ddl in theirs:
        conn.apsw.execute(ddl)
    conn.execute("INSERT INTO main.t VALUES (3, 'a', 2)")
    assert_view_matches(conn, "w", VIEW)


def test_matview_runs_its_own_ddl(tmp_path: Path) -> None:
    conn = _db(tmp_path)
    conn.execute("ALTER TABLE t ADD COLUMN extra INT")
    conn.execute("CREATE INDEX by_v ON t (v)")
    conn.execute("REFRESH MATERIALIZED VIEW w")
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT g, max(v) AS top FROM t GROUP BY g")
    conn.execute("INSERT INTO t VALUES (3, 'a', 9, 1)")
    assert_view_matches(conn, "m", "SELECT g, max(v) AS top FROM t GROUP BY g")
    conn.execute("DROP MATERIALIZED VIEW m")
    conn.execute("DROP MATERIALIZED VIEW w")
    conn.execute("DROP TABLE t")  # (no view reads it now)
    assert [n for _, n in _schema(conn) if n.startswith(names.PREFIX)] == [
        n for _, n in _schema(conn) if n in (names.CATALOG, names.META, names.PROGRESS)
    ]


def test_an_authorizer_the_user_had_set_is_still_asked(tmp_path: Path) -> None:
    raw = apsw.Connection(str(tmp_path / "db.sqlite"))
    raw.execute("CREATE TABLE secret (x); CREATE TABLE t (id INTEGER PRIMARY KEY, g TEXT, v INT)")

    def no_secrets(action: int, arg1: str | None, *_: str | None) -> int:
        return apsw.SQLITE_DENY if action == apsw.SQLITE_READ and arg1 == "secret" else apsw.SQLITE_OK

    raw.authorizer = no_secrets
    conn = matview.install(raw)
    with pytest.raises(apsw.AuthError):
        conn.execute("SELECT * FROM secret")
    conn.execute(f"CREATE MATERIALIZED VIEW w AS {VIEW}")
    with pytest.raises(apsw.AuthError):
        conn.apsw.execute("DROP TABLE t")
