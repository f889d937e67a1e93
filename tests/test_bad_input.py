"""Bad input: every mistake raises a precise matview.Error and leaves the database intact.

After each error the file must still pass `PRAGMA integrity_check`, base tables must still take
writes, and every existing materialized view must still equal its SELECT (tests/oracle.py).
Refused SQL must leave nothing behind: the schema (sqlite_master) is exactly what it was.
"""

from __future__ import annotations

import hashlib
import sqlite3
import sys
from pathlib import Path

import apsw
import pytest

_HERE = Path(__file__).resolve().parent
for _p in (str(_HERE), str(_HERE.parent)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from oracle import assert_view_matches, bag  # noqa: E402

import matview  # noqa: E402

V_IMM_SQL = "SELECT id, a, b FROM t WHERE a > 1"
V_AGG_SQL = "SELECT b, COUNT(*) AS n, SUM(a) AS s, MIN(a) AS lo, MAX(c) AS hi FROM t GROUP BY b"


def schema(conn) -> list[tuple]:
    return sorted(tuple(r) for r in conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))


def internal_names(conn) -> list[str]:
    return sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE name LIKE '__dbsp%'"))


class DB:
    """A file with base table t, a table `other`, a plain SQL view, an index, and two
    materialized views (one immediate filter view, one deferred aggregate view)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = matview.connect(str(path))
        c = self.conn
        c.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, a INTEGER, b TEXT, c REAL)")
        c.execute("CREATE TABLE other(x INTEGER PRIMARY KEY, y TEXT)")
        c.execute("CREATE TABLE nokey(k TEXT, v INTEGER)")
        c.execute("CREATE VIEW plain_view AS SELECT id, a FROM t")
        c.execute("CREATE INDEX t_a_idx ON t(a)")
        c.executemany(
            "INSERT INTO t(a, b, c) VALUES (?, ?, ?)",
            [(i % 5, "bcd"[i % 3], i * 0.25) for i in range(40)],
        )
        c.executemany("INSERT INTO other(y) VALUES (?)", [("p",), ("q",)])
        c.executemany("INSERT INTO nokey VALUES (?, ?)", [("k", 1), ("k", 2)])
        c.execute(f"CREATE MATERIALIZED VIEW v_imm WITH (maintenance = 'immediate') AS {V_IMM_SQL}")
        c.execute(f"CREATE MATERIALIZED VIEW v_agg WITH (maintenance = 'deferred') AS {V_AGG_SQL}")
        self.views = {"v_imm": V_IMM_SQL, "v_agg": V_AGG_SQL}

    def assert_views(self) -> None:
        for view, sql in self.views.items():
            assert_view_matches(self.conn, view, sql)

    def assert_intact(self) -> None:
        """Integrity ok; base tables writable via matview and via stdlib sqlite3; views follow."""
        c = self.conn
        assert c.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        self.assert_views()
        with c:
            c.execute("INSERT INTO t(a, b, c) VALUES (3, 'b', 1.5)")
            c.execute("UPDATE t SET a = a + 1 WHERE id = 1")
            self.assert_views()
        self.assert_views()
        c.execute("DELETE FROM t WHERE id = (SELECT max(id) FROM t)")
        self.assert_views()
        raw = sqlite3.connect(self.path)
        raw.execute("INSERT INTO t(a, b, c) VALUES (4, 'd', 2.0)")
        raw.execute("INSERT INTO other(y) VALUES ('r')")
        raw.commit()
        raw.close()
        self.assert_views()


@pytest.fixture
def db(tmp_path: Path):
    d = DB(tmp_path / "bad.db")
    yield d
    d.conn.close()


def raises_exactly(exc_type: type[BaseException], sql: str, conn, *, not_type: type | None = None):
    """Run `sql`, expecting `exc_type` (and not the narrower `not_type`); return the exception."""
    with pytest.raises(exc_type) as info:
        conn.execute(sql).fetchall()
    if not_type is not None:
        assert not isinstance(info.value, not_type), f"{sql!r} raised {type(info.value).__name__}: {info.value}"
    return info.value


# ---------------------------------------------------------------------------- errors in the view body


def test_syntax_error_in_view_body(db: DB) -> None:
    before = schema(db.conn)
    exc = raises_exactly(
        matview.Error, "CREATE MATERIALIZED VIEW v_bad AS SELECT id, FROM t WHERE", db.conn, not_type=None
    )
    assert "syntax" in str(exc).lower() or "near" in str(exc).lower(), str(exc)
    exc = raises_exactly(matview.Error, "CREATE MATERIALIZED VIEW v_bad AS SELEKT id FORM t", db.conn)
    assert schema(db.conn) == before
    db.assert_intact()


def test_syntax_error_in_create_statement_itself(db: DB) -> None:
    before = schema(db.conn)
    for sql in [
        "CREATE MATERIALIZED VIEW AS SELECT id FROM t",  # no name
        "CREATE MATERIALIZED VIEW v_bad SELECT id FROM t",  # no AS
        "CREATE MATERIALIZED VIEW v_bad AS",  # no body
    ]:
        with pytest.raises(matview.Error):
            db.conn.execute(sql).fetchall()
    assert schema(db.conn) == before
    db.assert_intact()


@pytest.mark.parametrize(
    "option",
    ["maintenance = 'sometimes'", "maintenance = immediate_ish", "flavour = 'vanilla'"],
)
def test_bad_with_option(db: DB, option: str) -> None:
    before = schema(db.conn)
    with pytest.raises(matview.Error) as info:
        db.conn.execute(f"CREATE MATERIALIZED VIEW v_bad WITH ({option}) AS SELECT id FROM t").fetchall()
    assert (
        not isinstance(info.value, matview.UnsupportedQuery)
        or "maint" in str(info.value).lower()
        or ("flavour" in str(info.value).lower())
    )
    assert schema(db.conn) == before
    db.assert_intact()


def test_unknown_table(db: DB) -> None:
    before = schema(db.conn)
    exc = raises_exactly(
        matview.Error,
        "CREATE MATERIALIZED VIEW v_bad AS SELECT x FROM no_such_table",
        db.conn,
        not_type=matview.UnsupportedQuery,
    )
    assert "no_such_table" in str(exc), str(exc)
    assert schema(db.conn) == before
    db.assert_intact()


@pytest.mark.parametrize(
    "body",
    [
        "SELECT id, nope FROM t",
        "SELECT id FROM t WHERE nope > 1",
        "SELECT b, SUM(nope) FROM t GROUP BY b",
        "SELECT nope, COUNT(*) FROM t GROUP BY nope",
        "SELECT b, COUNT(*) FROM t GROUP BY b HAVING MAX(nope) > 1",
        "SELECT other.x FROM t",
    ],
)
def test_unknown_column(db: DB, body: str) -> None:
    before = schema(db.conn)
    exc = raises_exactly(
        matview.Error, f"CREATE MATERIALIZED VIEW v_bad AS {body}", db.conn, not_type=matview.UnsupportedQuery
    )
    assert "nope" in str(exc) or "other.x" in str(exc) or "no such column" in str(exc), str(exc)
    assert schema(db.conn) == before
    db.assert_intact()


def test_unknown_function(db: DB) -> None:
    before = schema(db.conn)
    with pytest.raises(matview.Error) as info:
        db.conn.execute("CREATE MATERIALIZED VIEW v_bad AS SELECT no_such_fn(a) FROM t").fetchall()
    assert "no_such_fn" in str(info.value), str(info.value)
    assert schema(db.conn) == before
    db.assert_intact()


# ---------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    "name",
    ["t", "other", "plain_view", "t_a_idx", "v_imm", "v_agg", "V_IMM", "T", "sqlite_master"],
)
def test_name_collision(db: DB, name: str) -> None:
    before = schema(db.conn)
    before_rows = db.conn.execute("SELECT * FROM v_imm").fetchall()
    with pytest.raises(matview.Error) as info:
        db.conn.execute(f'CREATE MATERIALIZED VIEW "{name}" AS SELECT id, b FROM t WHERE a = 0').fetchall()
    assert not isinstance(info.value, matview.UnsupportedQuery) or name == "sqlite_master", str(info.value)
    if name != "sqlite_master":
        assert "exist" in str(info.value).lower() or name.lower() in str(info.value).lower(), str(info.value)
    assert schema(db.conn) == before
    assert db.conn.execute("SELECT * FROM v_imm").fetchall() == before_rows
    db.assert_intact()


def test_name_with_internal_prefix_refused(db: DB) -> None:
    before = schema(db.conn)
    with pytest.raises(matview.Error):
        db.conn.execute("CREATE MATERIALIZED VIEW __dbsp_mine AS SELECT id FROM t").fetchall()
    assert schema(db.conn) == before
    db.assert_intact()


def test_if_not_exists_on_existing_view_is_a_noop(db: DB) -> None:
    before = schema(db.conn)
    rows = db.conn.execute("SELECT * FROM v_imm").fetchall()
    # a different body: must be ignored, the old definition stays
    db.conn.execute("CREATE MATERIALIZED VIEW IF NOT EXISTS v_imm AS SELECT id FROM t WHERE a = 0").fetchall()
    db.conn.execute(
        "CREATE MATERIALIZED VIEW IF NOT EXISTS v_agg WITH (maintenance = 'immediate') AS SELECT b FROM t"
    ).fetchall()
    assert schema(db.conn) == before
    assert db.conn.execute("SELECT * FROM v_imm").fetchall() == rows
    db.assert_intact()


def test_if_not_exists_on_existing_table_is_an_error_or_noop(db: DB) -> None:
    """IF NOT EXISTS naming an existing *table*: SQLite's CREATE VIEW IF NOT EXISTS is a no-op
    then; either a no-op or a matview.Error is acceptable, but never a half-made view."""
    before = schema(db.conn)
    try:
        db.conn.execute("CREATE MATERIALIZED VIEW IF NOT EXISTS other AS SELECT id FROM t").fetchall()
    except matview.Error:
        pass
    assert schema(db.conn) == before
    assert db.conn.execute("SELECT count(*) FROM other").fetchall() == [(2,)]
    db.assert_intact()


QUOTED_NAMES = ["my view", "select", "order", "Ünïcødé_表", "with 'apostrophe'", "1starts_with_digit", 'dq"inside']


def qi(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def view_bag(conn, name: str):
    return bag(conn.execute(f"SELECT * FROM {qi(name)}").fetchall())


@pytest.mark.parametrize("name", QUOTED_NAMES)
def test_names_that_need_quoting_work(db: DB, name: str) -> None:
    conn = db.conn
    sql = "SELECT id, a, b FROM t WHERE a >= 3"
    agg = "SELECT b, COUNT(*) AS n, MAX(a) AS mx FROM t GROUP BY b"
    conn.execute(f"CREATE MATERIALIZED VIEW {qi(name)} AS {sql}")
    conn.execute(f"CREATE MATERIALIZED VIEW {qi(name + '_agg')} WITH (maintenance = 'deferred') AS {agg}")

    def check() -> None:
        assert view_bag(conn, name) == bag(conn.execute(sql).fetchall())
        assert view_bag(conn, name + "_agg") == bag(conn.execute(agg).fetchall())
        if '"' not in name:
            assert_view_matches(conn, name, sql)

    check()
    with conn:
        conn.execute("INSERT INTO t(a, b, c) VALUES (9, 'z', 0.5)")
        check()
    conn.execute("UPDATE t SET a = 0 WHERE a = 4")
    check()
    conn.execute(f"CREATE INDEX {qi(name + ' idx')} ON {qi(name)}(a)")
    assert sorted(conn.execute(f"SELECT id FROM {qi(name)} WHERE a = 9").fetchall()) == sorted(
        conn.execute("SELECT id FROM t WHERE a = 9").fetchall()
    )
    conn.close()
    db.conn = conn = matview.connect(str(db.path))
    check()
    conn.execute(f"REFRESH MATERIALIZED VIEW {qi(name)}")
    check()
    conn.execute(f"DROP MATERIALIZED VIEW {qi(name)}")
    conn.execute(f"DROP MATERIALIZED VIEW {qi(name + '_agg')}")
    assert not [n for n in internal_names(conn) if name in n], internal_names(conn)
    assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchall()
    db.assert_intact()


def test_base_table_and_columns_that_need_quoting(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "q.db"))
    conn.execute('CREATE TABLE "my table"("from" INTEGER, "ü col" TEXT, "a""b" REAL)')
    conn.executemany('INSERT INTO "my table" VALUES (?, ?, ?)', [(i % 4, f"s{i % 3}", i * 0.5) for i in range(30)])
    views = {
        "q1": 'SELECT "from", "ü col", "a""b" FROM "my table" WHERE "from" <> 2',
        "q2": 'SELECT "ü col", COUNT(*) AS "count", MIN("a""b") AS "min", MAX("from") AS "max" '
        'FROM "my table" GROUP BY "ü col"',
    }
    for name, sql in views.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
    for name, sql in views.items():
        assert_view_matches(conn, name, sql)
    conn.execute('DELETE FROM "my table" WHERE "from" = 1')
    conn.execute('UPDATE "my table" SET "a""b" = -1 WHERE "ü col" = \'s2\'')
    for name, sql in views.items():
        assert_view_matches(conn, name, sql)
    conn.close()


@pytest.mark.parametrize("second", ["a_before", "a_insert", "a_x", "A_BEFORE"])
def test_base_tables_whose_names_extend_each_other(tmp_path: Path, second: str) -> None:
    """Internal objects are named per base table; "a" and "a_before" must not share any (the
    capture trigger names __dbsp_trg_<table>_<event> collide: "a" + "before_insert" ==
    "a_before" + "insert"), or writes to one table go uncaptured and its view is silently stale."""
    conn = matview.connect(str(tmp_path / "names.db"))
    conn.execute("CREATE TABLE a(id INTEGER PRIMARY KEY, x INTEGER)")
    conn.execute(f"CREATE TABLE {qi(second)}(id INTEGER PRIMARY KEY, x INTEGER)")
    views = {"va": "SELECT x FROM a", "vb": f"SELECT x FROM {qi(second)}"}
    for name, sql in views.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")

    def write_and_check() -> None:
        for table in ("a", second):
            if any(table in sql for sql in views.values()):
                conn.execute(f"INSERT INTO {qi(table)}(x) VALUES (1), (2)")
                conn.execute(f"UPDATE {qi(table)} SET x = x + 10 WHERE x = 1")
                conn.execute(f"DELETE FROM {qi(table)} WHERE x = 2")
        for name, sql in views.items():
            assert_view_matches(conn, name, sql)

    write_and_check()
    # dropping one view must not remove the other table's capture
    conn.execute("DROP MATERIALIZED VIEW vb")
    del views["vb"]
    write_and_check()
    conn.execute(f"CREATE MATERIALIZED VIEW vb AS SELECT x FROM {qi(second)}")
    views["vb"] = f"SELECT x FROM {qi(second)}"
    conn.execute("DROP MATERIALIZED VIEW va")
    del views["va"]
    write_and_check()
    conn.close()


# ---------------------------------------------------------------------------- DROP / REFRESH of unknowns


def test_drop_unknown_materialized_view(db: DB) -> None:
    before = schema(db.conn)
    with pytest.raises(matview.Error) as info:
        db.conn.execute("DROP MATERIALIZED VIEW no_such_view").fetchall()
    assert "no_such_view" in str(info.value), str(info.value)
    db.conn.execute("DROP MATERIALIZED VIEW IF EXISTS no_such_view").fetchall()
    assert schema(db.conn) == before
    db.assert_intact()


@pytest.mark.parametrize("name", ["t", "plain_view", "t_a_idx"])
def test_drop_materialized_view_of_a_non_materialized_object(db: DB, name: str) -> None:
    before = schema(db.conn)
    with pytest.raises(matview.Error):
        db.conn.execute(f"DROP MATERIALIZED VIEW {name}").fetchall()
    with pytest.raises(matview.Error):
        db.conn.execute(f"DROP MATERIALIZED VIEW IF EXISTS {name}").fetchall()
    assert schema(db.conn) == before
    db.assert_intact()


def test_refresh_unknown_view(db: DB) -> None:
    before = schema(db.conn)
    for name in ["no_such_view", "t", "plain_view"]:
        with pytest.raises(matview.Error) as info:
            db.conn.execute(f"REFRESH MATERIALIZED VIEW {name}").fetchall()
        assert name in str(info.value), str(info.value)
    assert schema(db.conn) == before
    db.assert_intact()


# ---------------------------------------------------------------------------- schema changes under a view
#
# Engine behaviour (checked and pinned here):
# * through matview, DROP TABLE / ALTER TABLE of a table a view reads is refused with a
#   matview.Error naming the view(s); nothing changes (ADD COLUMN: the views are rebuilt);
# * matview cannot stop another client (stdlib sqlite3). After that client's DROP TABLE,
#   ALTER TABLE ... ADD COLUMN / RENAME COLUMN / RENAME TO, every view over the table raises
#   matview.SchemaChanged on read (never stale rows). REFRESH brings it back when its SELECT is
#   still valid (ADD COLUMN), raises matview.Error when not; DROP MATERIALIZED VIEW always works.
#   ALTER TABLE ... DROP COLUMN is refused by SQLite itself (the capture triggers use the column).

SCHEMA_CHANGES = [
    "DROP TABLE t",
    "ALTER TABLE t ADD COLUMN d INTEGER DEFAULT 7",
    "ALTER TABLE t RENAME COLUMN a TO a2",
    "ALTER TABLE t RENAME COLUMN c TO c2",
    "ALTER TABLE t DROP COLUMN c",
    "ALTER TABLE t RENAME TO t_renamed",
]


def test_add_column_under_a_view_through_matview_rebuilds_it(db: DB) -> None:
    """(ADD COLUMN is maintained through matview: the views over the table are rebuilt.)"""
    db.conn.execute("ALTER TABLE t ADD COLUMN d INTEGER DEFAULT 7")
    assert db.conn.execute("SELECT count(*) FROM t").fetchall() == [(40,)]
    db.assert_intact()


@pytest.mark.parametrize("ddl", [ddl for ddl in SCHEMA_CHANGES if "ADD COLUMN" not in ddl])
def test_schema_change_under_a_view_through_matview_is_refused(db: DB, ddl: str) -> None:
    before = schema(db.conn)
    with pytest.raises(matview.Error) as info:
        db.conn.execute(ddl).fetchall()
    assert "v_imm" in str(info.value) and "v_agg" in str(info.value), str(info.value)
    assert schema(db.conn) == before
    assert db.conn.execute("SELECT count(*) FROM t").fetchall() == [(40,)]
    db.assert_intact()


def test_schema_change_of_an_unwatched_table_through_matview_works(db: DB) -> None:
    conn = db.conn
    conn.execute("ALTER TABLE other ADD COLUMN z INTEGER")
    conn.execute("ALTER TABLE other RENAME COLUMN y TO y2")
    conn.execute("ALTER TABLE other RENAME TO other2")
    conn.execute("DROP TABLE other2")
    raw = sqlite3.connect(db.path)
    raw.execute("CREATE TABLE other(x INTEGER PRIMARY KEY, y TEXT)")
    raw.commit()
    raw.close()
    db.assert_intact()


def sqlite3_ddl(db: DB, ddl: str) -> None:
    db.conn.close()
    raw = sqlite3.connect(db.path)
    raw.execute(ddl)
    raw.commit()
    raw.close()
    db.conn = matview.connect(str(db.path))


def assert_views_schema_changed(db: DB) -> None:
    for view in ("v_imm", "v_agg"):
        with pytest.raises(matview.SchemaChanged) as info:
            db.conn.execute(f"SELECT * FROM {view}").fetchall()
        assert view in str(info.value) and "t" in str(info.value), str(info.value)
        with pytest.raises(matview.SchemaChanged):
            db.conn.execute(f"SELECT count(*) FROM {view} WHERE 1").fetchall()


def drop_views_and_check_clean(db: DB, table: str) -> None:
    for view in ("v_imm", "v_agg"):
        db.conn.execute(f"DROP MATERIALIZED VIEW {view}")
    db.views = {}
    leftovers = [n for n in internal_names(db.conn) if n not in ("__dbsp_catalog", "__dbsp_meta", "__dbsp_progress")]
    assert not leftovers, leftovers
    triggers = db.conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall()
    assert not triggers, triggers
    if table:
        db.conn.execute(f"INSERT INTO {table} DEFAULT VALUES")
    db.conn.execute("INSERT INTO other(y) VALUES ('still writable')")


def test_drop_table_under_a_view_from_stdlib_sqlite3(db: DB) -> None:
    sqlite3_ddl(db, "DROP TABLE t")
    assert_views_schema_changed(db)
    with pytest.raises(matview.Error):
        db.conn.execute("REFRESH MATERIALIZED VIEW v_imm").fetchall()
    assert_views_schema_changed(db)
    drop_views_and_check_clean(db, "")


def test_drop_and_recreate_table_from_stdlib_sqlite3(db: DB) -> None:
    """Recreating a dropped table (same columns) must not silently revive a view: the new table
    has no capture triggers, so the view must either refuse or be maintained again."""
    db.conn.close()
    raw = sqlite3.connect(db.path)
    raw.execute("DROP TABLE t")
    raw.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, a INTEGER, b TEXT, c REAL)")
    raw.execute("INSERT INTO t(a, b, c) VALUES (5, 'b', 1.0)")
    raw.commit()
    raw.close()
    db.conn = conn = matview.connect(str(db.path))
    for view in ("v_imm", "v_agg"):
        try:
            rows = conn.execute(f"SELECT * FROM {view}").fetchall()
        except matview.SchemaChanged:
            conn.execute(f"REFRESH MATERIALIZED VIEW {view}")
            rows = conn.execute(f"SELECT * FROM {view}").fetchall()
        assert bag(rows) == bag(conn.execute(db.views[view]).fetchall()), view
    # and later writes (through matview and through sqlite3) are maintained
    conn.execute("INSERT INTO t(a, b, c) VALUES (6, 'b', 2.0)")
    db.assert_views()
    raw = sqlite3.connect(db.path)
    raw.execute("INSERT INTO t(a, b, c) VALUES (7, 'c', 3.0)")
    raw.commit()
    raw.close()
    db.assert_intact()


def test_add_column_from_stdlib_sqlite3_then_refresh(db: DB) -> None:
    sqlite3_ddl(db, "ALTER TABLE t ADD COLUMN d INTEGER DEFAULT 7")
    assert_views_schema_changed(db)
    db.conn.execute("INSERT INTO t(a, b, c, d) VALUES (3, 'c', 1.0, 8)")  # the table stays writable
    assert_views_schema_changed(db)
    for view in ("v_imm", "v_agg"):
        db.conn.execute(f"REFRESH MATERIALIZED VIEW {view}")
    db.assert_views()
    db.conn.execute("INSERT INTO t(a, b, c, d) VALUES (4, 'b', 2.0, 9)")
    db.conn.execute("UPDATE t SET d = 0, a = 9 WHERE id = 2")
    db.assert_intact()


@pytest.mark.parametrize(
    "ddl,table,recovers",
    [
        ("ALTER TABLE t RENAME COLUMN a TO a2", "t", False),
        ("ALTER TABLE t RENAME COLUMN c TO c2", "t", True),  # v_imm does not read c: REFRESH rebuilds it
        ("ALTER TABLE t RENAME TO t_renamed", "t_renamed", False),
    ],
)
def test_rename_from_stdlib_sqlite3(db: DB, ddl: str, table: str, recovers: bool) -> None:
    sqlite3_ddl(db, ddl)
    assert_views_schema_changed(db)
    if recovers:
        db.conn.execute("REFRESH MATERIALIZED VIEW v_imm")  # v_agg's problem is not v_imm's
        assert_view_matches(db.conn, "v_imm", V_IMM_SQL)
    for view in ("v_agg",) if recovers else ("v_imm", "v_agg"):
        with pytest.raises(matview.Error):
            db.conn.execute(f"REFRESH MATERIALIZED VIEW {view}").fetchall()
        with pytest.raises(matview.SchemaChanged):
            db.conn.execute(f"SELECT * FROM {view}").fetchall()
    db.conn.execute(f"INSERT INTO {table} DEFAULT VALUES")
    drop_views_and_check_clean(db, table)


def test_drop_column_from_stdlib_sqlite3_is_refused_by_sqlite(db: DB) -> None:
    db.conn.close()
    raw = sqlite3.connect(db.path)
    with pytest.raises(sqlite3.OperationalError):
        raw.execute("ALTER TABLE t DROP COLUMN c")
    raw.close()
    db.conn = matview.connect(str(db.path))
    db.assert_intact()


# ---------------------------------------------------------------------------- unsupported SQL


RECURSIVE = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r"

RECOMPUTED_WHOLE = [
    "SELECT id FROM t WHERE a IN (SELECT x FROM other ORDER BY y LIMIT 1)",
    "SELECT id FROM (SELECT id, a FROM t LIMIT 3) WHERE a > 1",
    "SELECT id FROM t UNION SELECT x FROM other LIMIT 2",
    "SELECT id FROM t UNION ALL SELECT ROW_NUMBER() OVER () FROM t",
    "SELECT id FROM t EXCEPT SELECT x FROM other LIMIT 1",
    "SELECT id, ROW_NUMBER() OVER (ORDER BY id) AS rn FROM t",
    "SELECT id, SUM(a) OVER (PARTITION BY b) AS s FROM t",
    "SELECT id, SUM(a) OVER w AS s FROM t WINDOW w AS (ORDER BY id)",
    "WITH c AS (SELECT DISTINCT a FROM t LIMIT 2) SELECT a FROM c",
    "SELECT id FROM t LIMIT 5",
    "SELECT id FROM t ORDER BY id LIMIT 5 OFFSET 2",
    "SELECT b, COUNT(*) FROM t GROUP BY b LIMIT 1",
]


UNSUPPORTED = [
    ("SELECT t.id FROM t FULL JOIN other ON t.id = other.x JOIN t u ON u.id = other.x", ["full join"]),
    ("SELECT id FROM t WHERE EXISTS (WITH w AS (SELECT 1) SELECT * FROM w)", ["with"]),
    (
        "SELECT t.id FROM t LEFT JOIN (SELECT b, CAST(a AS TEXT) FROM t WHERE a > 0) s ON s.b = t.b",
        ["left join", "expression"],
    ),
    ("SELECT b, sum(a ORDER BY a) FROM t GROUP BY b", ["order by inside"]),
    ("SELECT id FROM t RIGHT JOIN (SELECT y FROM other) o ON o.y = t.id", ["outer join", "subquery"]),
    ("SELECT b, COUNT(*) FROM t GROUP BY b HAVING COUNT(*) > (SELECT COUNT(*) FROM other WHERE y = t.a)", ["subquer"]),
    ("SELECT id FROM t INTERSECT SELECT b FROM t EXCEPT SELECT id FROM t", ["intersect over column"]),
    (
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r",
        ["cte", "with", "common table", "recursive"],
    ),
    ("SELECT id, random() AS r FROM t", ["random"]),
    ("SELECT id FROM t WHERE a > random()", ["random"]),
    ("SELECT id, randomblob(4) AS r FROM t", ["randomblob"]),
    ("SELECT b, MAX(a + random()) FROM t GROUP BY b", ["random"]),
    ("SELECT id, date('now') AS d FROM t", ["date", "now"]),
    ("SELECT id FROM t WHERE b < datetime('now')", ["datetime", "now"]),
    ("SELECT id, julianday('now') AS d FROM t", ["julianday", "now"]),
    # the clock, computed or handed on (hunt 26: these were maintained, and kept the time of a fold)
    ("SELECT id, strftime('%H:%M:%f', 'no' || 'w') AS ts FROM t", ["strftime", "now"]),
    ("SELECT id, date(char(110, 111, 119)) AS d FROM t", ["date", "now"]),
    ("SELECT id, unixepoch(('subsec')) AS ts FROM t", ["unixepoch", "subsec"]),
    ("WITH c AS (SELECT id, 'now' AS n FROM t) SELECT id, strftime('%H', n) AS h FROM c", ["now", "date function"]),
    ("SELECT t.id, strftime('%f', c.n) AS f FROM t, (SELECT 'now' AS n) c", ["now", "date function"]),
    ("SELECT id, CURRENT_TIMESTAMP AS d FROM t", ["current_timestamp"]),
    ("SELECT id, CURRENT_DATE AS d FROM t", ["current_date"]),
    ("SELECT id, changes() AS ch FROM t", ["changes"]),
    ("SELECT id, last_insert_rowid() AS r FROM t", ["last_insert_rowid"]),
    ("SELECT k, group_concat(v) AS g FROM nokey GROUP BY k", ["group_concat"]),
    ("SELECT id FROM plain_view WHERE a IN (SELECT x FROM other)", ["subquer"]),
]


@pytest.mark.parametrize("body,words", UNSUPPORTED, ids=[u[0][:60] for u in UNSUPPORTED])
@pytest.mark.parametrize("maintenance", ["immediate", "deferred"])
def test_unsupported_query_refused_and_nothing_left(db: DB, body: str, words: list[str], maintenance: str) -> None:
    conn = db.conn
    before = schema(conn)
    before_internal = internal_names(conn)
    with pytest.raises(matview.UnsupportedQuery) as info:
        conn.execute(f"CREATE MATERIALIZED VIEW v_bad WITH (maintenance = '{maintenance}') AS {body}").fetchall()
    message = str(info.value).lower()
    assert any(w in message for w in words), f"message does not name the construct {words}: {info.value}"
    assert internal_names(conn) == before_internal
    assert schema(conn) == before
    with pytest.raises((matview.Error, apsw.SQLError)):
        conn.execute("SELECT * FROM v_bad").fetchall()
    # the name is free: a supported view of that name can be created afterwards
    conn.execute("CREATE MATERIALIZED VIEW v_bad AS SELECT id, a FROM t WHERE a < 2")
    db.views["v_bad"] = "SELECT id, a FROM t WHERE a < 2"
    db.assert_intact()


@pytest.mark.parametrize("body", RECOMPUTED_WHOLE, ids=[b[:60] for b in RECOMPUTED_WHOLE])
def test_limits_and_windows_are_recomputed_whole(db: DB, body: str) -> None:
    """Refused before: a LIMIT or a window makes the view recomputed whole (`sql.whole`)."""
    db.conn.execute(f"CREATE MATERIALIZED VIEW v_whole AS {body}")
    db.views["v_whole"] = body
    assert "recomputed whole" in db.conn.view("v_whole").explain()
    db.assert_intact()


def test_unsupported_in_if_not_exists_is_refused_too(db: DB) -> None:
    before = schema(db.conn)
    with pytest.raises(matview.UnsupportedQuery):
        db.conn.execute(f"CREATE MATERIALIZED VIEW IF NOT EXISTS v_new AS {RECURSIVE}").fetchall()
    assert schema(db.conn) == before
    db.assert_intact()


def test_unsupported_inside_open_transaction_keeps_the_transaction(db: DB) -> None:
    """A refused CREATE inside `with conn:` raises, but the writes before it are not lost
    if the caller catches the error (the transaction stays usable)."""
    conn = db.conn
    with conn:
        conn.execute("INSERT INTO t(a, b, c) VALUES (4, 'x', 0.0)")
        with pytest.raises(matview.UnsupportedQuery):
            conn.execute(f"CREATE MATERIALIZED VIEW v_bad AS {RECURSIVE}").fetchall()
        db.assert_views()
    assert conn.execute("SELECT count(*) FROM t WHERE b = 'x'").fetchall() == [(1,)]
    assert "v_bad" not in [r[0] for r in conn.execute("SELECT name FROM sqlite_master")]
    db.assert_intact()


# ---------------------------------------------------------------------------- catalog from the future


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# The catalog layout (matview/storage/catalog.py, migrations/001_catalog.sql): the file format version is
# the row key='format_version' of __dbsp_meta; each view's plan format is __dbsp_catalog.format.
FUTURE_EDITS = {
    "meta_format_version": "UPDATE __dbsp_meta SET value = value + 1000 WHERE key = 'format_version'",
    "view_plan_format": "UPDATE __dbsp_catalog SET format = format + 1000",
}


@pytest.mark.parametrize("edit", sorted(FUTURE_EDITS))
def test_catalog_from_a_newer_format_is_refused_and_file_untouched(tmp_path: Path, edit: str) -> None:
    path = tmp_path / "future.db"
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, a INTEGER)")
    conn.execute("INSERT INTO t(a) VALUES (1), (2)")
    conn.execute("CREATE MATERIALIZED VIEW v AS SELECT a FROM t WHERE a > 1")
    conn.close()
    raw = sqlite3.connect(path)
    assert raw.execute(FUTURE_EDITS[edit]).rowcount >= 1
    raw.commit()
    raw.close()
    digest = file_digest(path)
    siblings = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(matview.Error) as info:
        c = matview.connect(str(path))
        try:
            c.execute("SELECT * FROM v").fetchall()
            c.execute("INSERT INTO t(a) VALUES (3)")
            c.execute("CREATE MATERIALIZED VIEW v2 AS SELECT a FROM t")
            c.flush()
        finally:
            c.close()
    assert isinstance(info.value, matview.CatalogError), type(info.value)
    assert "newer" in str(info.value).lower(), str(info.value)
    assert file_digest(path) == digest
    assert sorted(p.name for p in tmp_path.iterdir()) == siblings
    # stdlib sqlite3 still reads the base table
    raw = sqlite3.connect(path)
    assert raw.execute("SELECT a FROM t ORDER BY a").fetchall() == [(1,), (2,)]
    raw.close()


@pytest.mark.parametrize(
    "corruption",
    [
        "DELETE FROM __dbsp_meta WHERE key = 'format_version'",
        "UPDATE __dbsp_meta SET value = 'one' WHERE key = 'format_version'",
        "UPDATE __dbsp_catalog SET plan = x'c1c1c1'",
        "DROP TABLE __dbsp_catalog",
    ],
)
def test_corrupt_catalog_is_a_catalog_error(tmp_path: Path, corruption: str) -> None:
    path = tmp_path / "corrupt.db"
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, a INTEGER)")
    conn.execute("CREATE MATERIALIZED VIEW v AS SELECT a FROM t WHERE a > 1")
    conn.close()
    raw = sqlite3.connect(path)
    raw.execute(corruption)
    raw.commit()
    raw.close()
    digest = file_digest(path)
    with pytest.raises(matview.CatalogError):
        c = matview.connect(str(path))
        try:
            c.execute("SELECT * FROM v").fetchall()
            c.execute("INSERT INTO t(a) VALUES (3)")
            c.flush()
        finally:
            c.close()
    assert file_digest(path) == digest


def test_integrity_check_after_own_alter_and_foreign_schema_change(tmp_path: Path) -> None:
    """Minimal repro: ALTER TABLE (of a table no view reads) through matview, then another
    connection changes the schema; the next PRAGMA integrity_check through matview raised a raw
    apsw.SchemaChangeError (the vtable's xConnect queries the catalog mid-prepare)."""
    path = tmp_path / "sc.db"
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, a INTEGER)")
    conn.execute("CREATE TABLE other(x INTEGER PRIMARY KEY, y TEXT)")
    conn.execute("CREATE MATERIALIZED VIEW v AS SELECT a FROM t")
    conn.execute("ALTER TABLE other ADD COLUMN z")
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE q(x)")
    raw.commit()
    raw.close()
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert_view_matches(conn, "v", "SELECT a FROM t")
    finally:
        conn.close()


def test_a_refused_first_create_leaves_no_node_behind_and_writes_go_on(tmp_path: Path) -> None:
    """Regression (hostile hunt F4): a CREATE refused after its internal node was registered
    (the first view of the file) left the node in the connection's registry, and the next
    write in a transaction failed with a raw apsw.SQLError (no such table: __dbsp_meta)."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, g TEXT, x INTEGER)")
    conn.execute("CREATE TABLE t2(id INTEGER PRIMARY KEY, g TEXT)")
    with pytest.raises(matview.UnsupportedQuery):
        conn.execute(
            "CREATE MATERIALIZED VIEW v AS SELECT upper(g) AS g, count(*) FROM t GROUP BY upper(g) "
            "HAVING count(*) > (SELECT count(DISTINCT g) FROM t2)"
        )
    assert conn.views() == []
    with conn:
        conn.execute("INSERT INTO t(g, x) VALUES ('a', 1)")
    conn.executemany("INSERT INTO t(g, x) VALUES (?, ?)", [("b", 2)])
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (2,)


def test_dropping_a_view_a_cursor_still_reads_says_so(tmp_path: Path) -> None:
    """SQLite drops no table a statement still reads: with the shadow view read by SQLite
    itself, DROP MATERIALIZED VIEW under an open cursor failed as a bare "LockedError"."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, x INT)")
    conn.execute("INSERT INTO t(x) VALUES (1), (2)")
    conn.execute("CREATE MATERIALIZED VIEW v AS SELECT x FROM t")
    cursor = conn.execute("SELECT * FROM v")
    with pytest.raises(matview.Error, match=r"still reads it.*close the open cursors"):
        conn.execute("DROP MATERIALIZED VIEW v")
    del cursor
    conn.execute("DROP MATERIALIZED VIEW v")
    assert conn.views() == []


def test_index_hints_are_refused_by_name(tmp_path):
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t(a, b)")
    conn.execute("CREATE INDEX i ON t(a)")
    for select, hint in [
        ("SELECT a FROM t INDEXED BY i WHERE a > 1", "INDEXED BY"),
        ("SELECT a FROM t NOT INDEXED", "NOT INDEXED"),
    ]:
        with pytest.raises(matview.UnsupportedQuery, match=f"{hint} \\(an index hint\\)"):
            conn.execute(f"CREATE MATERIALIZED VIEW v AS {select}")
