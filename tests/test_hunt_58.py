"""Hunt 58: the DDL guard (SQLite's authorizer, session 31), the read of a pending change whose
row image raises (`pending_read.pending_view_delta` → `fallback.select_delta`), and the split of
`lifecycle` into `lifecycle`/`compile_view`/`snapshot`/`rebuild`.

Found, and fixed (each test failed before its fix):

- the same file ATTACHed under another name: `DROP TABLE x.t`, `ALTER TABLE x.t …`, `DROP VIEW
  x.w`, `DROP TABLE x.__dbsp_view_w` ran through `conn.execute` (the guard looked at `main`
  only; now a schema whose file is main's is main: `sqlite3_db_filename`, no SQL);
- a second `matview.install` on the same apsw connection: the first `Connection`'s `ALTER TABLE
  … ADD COLUMN` was refused with apsw's bare AuthError, and an authorizer the application had set
  before the first install was no longer asked (the guards now chain, and matview's own DDL
  passes each);
- the "no sum/total/avg" check was a regex over the view's SQL: `"total"(x)`, `[sum](x)` and a
  plain view with a total passed it, so a read of a pending change with a raising row image (or
  of a large pending change) showed SQLite's scan-order sum, the same view after COMMIT the
  engine's (now SQLite's tokens, of the view and of the plain views it reads);
- a large pending read with a TEMP table named like a base table raised (the SELECT the read
  runs read the TEMP table), where a small one and the fold do not (now such a read runs the
  delta terms, which name main's table).

Found, left (expected failures below, documented in the README):

- the guard answers from the registry in memory: on `conn.apsw`, after another connection
  created a view over `u`, `ALTER TABLE u RENAME …` / `DROP VIEW wu` run; after another
  connection dropped the last view over `t`, or after a ROLLBACK issued on `conn.apsw` undid a
  CREATE MATERIALIZED VIEW, a DROP of the table is refused (through `conn.execute`, which reads
  the schema first, both are right);
- an unqualified `DROP VIEW v` on `conn.apsw` drops matview's TEMP shadow (SQLite resolves temp
  first); the next statement through `conn` makes it again;
- a table or index the user names `__dbsp_…` is created, but can never be dropped.

Held: the rest (see the passing tests at the end)."""

from __future__ import annotations

import sys
from pathlib import Path

import apsw
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_view_matches

import matview

GROUPS = "SELECT g, count(*) AS n FROM t GROUP BY g"
VALS = [-1e16, 0.30000000000000004, 0.001, 1e16, 0.8999999999999999, 0.6000000000000001]  # (SQLite: 1.801…02)


def _db(tmp_path: Path) -> matview.Connection:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, g TEXT, v INT)")
    conn.execute("INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 5)")
    conn.execute(f"CREATE MATERIALIZED VIEW w AS {GROUPS}")
    return conn


def _names(conn: matview.Connection) -> set[str]:
    return {n for (n,) in conn.apsw.execute("SELECT name FROM main.sqlite_master")}


# ------------------------------------------------------------------ the guard: the same file attached


@pytest.mark.parametrize(
    "ddl", ["DROP TABLE x.t", "ALTER TABLE x.t RENAME COLUMN g TO gg", "DROP VIEW x.w", "DROP TABLE x.__dbsp_view_w"]
)
def test_the_same_file_attached_under_another_name_is_guarded(tmp_path: Path, ddl: str) -> None:
    conn = _db(tmp_path)
    conn.execute(f"ATTACH '{tmp_path / 'db.sqlite'}' AS x")
    before = _names(conn)
    with pytest.raises(matview.Error):
        conn.execute(ddl)  # (got: runs; w then raises SchemaChanged, or is "a damaged file")
    assert _names(conn) == before


# ------------------------------------------------------------------ the guard: a stale registry on conn.apsw


@pytest.mark.xfail(
    strict=True, reason="conn.apsw's guard answers from a registry that has not seen another connection's view"
)
@pytest.mark.parametrize(
    "ddl", ["ALTER TABLE u RENAME TO u2", "ALTER TABLE u RENAME COLUMN x TO xx", "DROP VIEW main.wu"]
)
def test_a_view_another_connection_created_is_guarded_on_conn_apsw(tmp_path: Path, ddl: str) -> None:
    conn = _db(tmp_path)
    other = matview.connect(str(tmp_path / "db.sqlite"))
    other.execute("CREATE TABLE u (x, y)")
    other.execute("CREATE MATERIALIZED VIEW wu AS SELECT x FROM u")
    with pytest.raises(apsw.AuthError):
        conn.apsw.execute(ddl)  # (got: runs; `wu` is then unreadable until DROPped)


@pytest.mark.xfail(strict=True, reason="conn.apsw's guard still sees the view another connection dropped")
def test_a_table_whose_last_view_another_connection_dropped_can_be_dropped_on_conn_apsw(tmp_path: Path) -> None:
    conn = _db(tmp_path)
    other = matview.connect(str(tmp_path / "db.sqlite"))
    other.execute("DROP MATERIALIZED VIEW w")
    conn.apsw.execute("DROP TABLE t")  # (got: AuthError "not authorized")


@pytest.mark.xfail(strict=True, reason="a ROLLBACK on conn.apsw leaves the rolled-back view in the guard's registry")
def test_a_table_whose_view_was_rolled_back_on_conn_apsw_can_be_dropped(tmp_path: Path) -> None:
    conn = _db(tmp_path)
    conn.execute("CREATE TABLE u (x)")
    conn.execute("BEGIN")
    conn.execute("CREATE MATERIALIZED VIEW wu AS SELECT x FROM u")
    conn.apsw.execute("ROLLBACK")
    assert "wu" not in _names(conn)
    conn.apsw.execute("DROP TABLE u")  # (got: AuthError; through conn.execute it runs)


@pytest.mark.xfail(strict=True, reason="unqualified DROP VIEW on conn.apsw drops the TEMP shadow (not main): allowed")
def test_an_unqualified_drop_view_of_a_materialized_view_on_conn_apsw(tmp_path: Path) -> None:
    conn = _db(tmp_path)
    conn.execute(f"CREATE MATERIALIZED VIEW d WITH (maintenance = 'deferred') AS {GROUPS}")
    conn.execute("INSERT INTO t VALUES (3, 'c', 1)")
    with pytest.raises(matview.Error, match="d is a materialized view"):
        conn.execute("DROP VIEW d")  # (through matview: refused)
    try:
        conn.apsw.execute("DROP VIEW d")  # (got: runs, "dropped"; `d` stays in main)
    except apsw.AuthError:
        pass
    assert sorted(conn.apsw.execute("SELECT * FROM d")) == sorted(conn.apsw.execute(GROUPS))  # (got: no 'c')


# ------------------------------------------------------------------ the guard: a second install


def test_add_column_through_the_first_of_two_installs(tmp_path: Path) -> None:
    conn = _db(tmp_path)
    matview.install(conn.apsw)
    conn.execute("ALTER TABLE t ADD COLUMN z INT")  # (got: apsw.AuthError "not authorized")
    conn.execute("INSERT INTO t VALUES (3, 'a', 2, 9)")
    assert_view_matches(conn, "w", GROUPS)


def test_the_applications_authorizer_survives_a_second_install(tmp_path: Path) -> None:
    raw = apsw.Connection(str(tmp_path / "db.sqlite"))
    raw.execute("CREATE TABLE secret (x)")

    def no_secrets(action: int, arg1: str | None, *_: str | None) -> int:
        return apsw.SQLITE_DENY if action == apsw.SQLITE_READ and arg1 == "secret" else apsw.SQLITE_OK

    raw.authorizer = no_secrets
    matview.install(raw)
    second = matview.install(raw)
    with pytest.raises(apsw.AuthError):
        second.execute("SELECT * FROM secret").fetchall()  # (got: rows)


# ------------------------------------------------------------------ the guard: names of matview's kind


@pytest.mark.xfail(
    strict=True, reason="a user's table/index named __dbsp_… is created, then refused as matview's own forever"
)
@pytest.mark.parametrize("kind", ["TABLE", "INDEX"])
def test_a_users_object_named_like_matviews_can_be_dropped(tmp_path: Path, kind: str) -> None:
    conn = _db(tmp_path)
    conn.execute("CREATE TABLE mine (a)")
    conn.execute("CREATE TABLE __dbsp_mine (a)" if kind == "TABLE" else "CREATE INDEX __dbsp_mine ON mine (a)")
    conn.execute(f"DROP {kind} __dbsp_mine")  # (got: "__dbsp_mine is matview's own")


# ------------------------------------------------------------------ reads: the sum check is a regex

EVENTS = "SELECT json_extract(body, '$.kind') AS kind, {total}(x) AS s FROM ev GROUP BY 1"


def _fixed_row_read(tmp_path: Path, select: str, plain_view: str | None = None) -> tuple[list, list]:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE ev (id INTEGER PRIMARY KEY, body TEXT, x)")
    conn.execute("""INSERT INTO ev VALUES (1, '{"kind":"click"}', 1)""")
    if plain_view:
        conn.execute(plain_view)
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {select}")
    conn.execute("BEGIN")
    conn.execute("INSERT INTO ev VALUES (2, 'oops', 0)")  # (a row image whose json_extract raises)
    conn.execute("""UPDATE ev SET body = '{"kind":"view"}' WHERE id = 2""")
    conn.executemany("""INSERT INTO ev (body, x) VALUES ('{"kind":"view"}', ?)""", [(v,) for v in VALS])
    inside = sorted(conn.execute("SELECT * FROM v").fetchall())
    conn.execute("COMMIT")
    return inside, sorted(conn.execute("SELECT * FROM v").fetchall())


@pytest.mark.parametrize("total", ['"total"', "[sum]", "`total`"])
def test_a_read_of_a_fixed_row_under_a_quoted_sum_says_why(tmp_path: Path, total: str) -> None:
    with pytest.raises(matview.Error, match="malformed JSON"):  # (was: SQLite's scan-order sum, 1.8010000000000002)
        _fixed_row_read(tmp_path, EVENTS.format(total=total))


def test_a_read_of_a_fixed_row_through_a_plain_view_with_a_total_says_why(tmp_path: Path) -> None:
    pv = "CREATE VIEW pv AS " + EVENTS.format(total="total")
    with pytest.raises(matview.Error, match="malformed JSON"):
        _fixed_row_read(tmp_path, "SELECT kind, s FROM pv", plain_view=pv)


def test_a_read_of_a_fixed_row_under_a_plain_total_still_says_why_held(tmp_path: Path) -> None:
    with pytest.raises(matview.Error, match="malformed JSON"):
        _fixed_row_read(tmp_path, EVENTS.format(total="total"))


def test_a_large_pending_read_under_a_quoted_sum_equals_the_view_after_commit(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, r REAL)")
    conn.execute("CREATE MATERIALIZED VIEW v AS SELECT count(*) AS k, [sum](r) AS a FROM t")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO t (r) VALUES (?)", [(v,) for v in VALS] + [(0.0,)] * 2100)
    inside = conn.execute("SELECT * FROM v").fetchall()
    conn.execute("COMMIT")
    assert inside == conn.execute("SELECT * FROM v").fetchall()  # (got: 1.8010000000000002, then 1.801)


def test_a_large_pending_read_beside_a_temp_table_named_like_the_base_table(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, r REAL)")
    conn.execute("CREATE MATERIALIZED VIEW v AS SELECT id, r FROM t")
    conn.execute("CREATE TEMP TABLE t (shadow)")  # (the user's: README)
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO main.t (r) VALUES (?)", [(float(i),) for i in range(2100)])
    inside = conn.execute("SELECT count(*) FROM v").fetchall()  # (got: "cannot be read: no such column: id")
    conn.execute("COMMIT")
    assert inside == conn.execute("SELECT count(*) FROM v").fetchall() == [(2100,)]


# ------------------------------------------------------------------ held


@pytest.mark.parametrize(
    "ddl",
    [
        "DROP TABLE [T]",
        'ALTER TABLE "main"."T" RENAME TO t2',
        "/* x */ ALTER TABLE t DROP COLUMN v",
        "DROP TABLE main.__DBSP_VIEW_W",
        "ALTER TABLE t ADD COLUMN z; ALTER TABLE t RENAME COLUMN v TO vv",
    ],
)
def test_spellings_through_executemany_and_cursors_held(tmp_path: Path, ddl: str) -> None:
    conn = _db(tmp_path)
    with pytest.raises(matview.Error):
        conn.executemany(ddl, [()])
    with pytest.raises(apsw.AuthError):
        conn.cursor().execute(ddl.split(";")[-1])
    assert {"t", "w"} <= _names(conn)
    conn.execute("INSERT INTO t VALUES (3, 'a', 2)" if "ADD" not in ddl else "INSERT INTO t VALUES (3, 'a', 2, 0)")
    assert_view_matches(conn, "w", GROUPS)


def test_users_ddl_beside_views_held(tmp_path: Path) -> None:
    conn = _db(tmp_path)
    conn.execute("CREATE TEMP TABLE t (a)")
    conn.execute("ALTER TABLE t ADD COLUMN b")  # (the TEMP one)
    conn.execute("ALTER TABLE t RENAME TO tt")
    conn.execute("DROP TABLE tt")
    conn.execute("ATTACH ':memory:' AS aux")
    conn.execute("CREATE TABLE aux.w (a); CREATE TABLE aux.t (a)")
    conn.execute("ALTER TABLE aux.t RENAME COLUMN a TO aa")
    conn.execute("DROP TABLE aux.w")
    conn.execute("CREATE VIEW __dbsp_mine AS SELECT 1")
    conn.execute("DROP VIEW __dbsp_mine")
    with conn:
        conn.execute("DROP MATERIALIZED VIEW w")
        conn.execute("DROP TABLE t")
    assert "t" not in _names(conn)


NODES = {
    "agg_join": (
        "SELECT a.id, s.n, s.total FROM a JOIN (SELECT v, count(*) AS n, sum(r) AS total FROM b GROUP BY v) AS s "
        "ON s.v = a.v"
    ),
    "distinct_join": "SELECT d.v, b.id FROM (SELECT DISTINCT v FROM a) AS d JOIN b ON b.v = d.v",
    "in_group_by": "SELECT id, k FROM a WHERE v IN (SELECT v FROM b GROUP BY v HAVING count(*) > 1)",
    "lj": "SELECT a.id, a.k, b.r FROM a LEFT JOIN b ON b.v = a.v",
    "mm": "SELECT v, min(r) AS lo, max(r) AS hi, group_concat(id) AS ids FROM b GROUP BY v",
}


def test_add_column_refresh_and_drop_with_nodes_and_views_over_views_held(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE a (id INTEGER PRIMARY KEY, v INT, k TEXT)")
    conn.execute("CREATE TABLE b (id INTEGER PRIMARY KEY, v INT, r REAL)")
    conn.execute("INSERT INTO a VALUES (1, 1, 'x'), (2, 2, 'y'), (3, 1, 'z')")
    conn.execute("INSERT INTO b VALUES (1, 1, 1.5), (2, 1, 2.5), (3, 2, 4.0)")
    live = dict(NODES, vov=f"SELECT n, count(*) AS c FROM ({NODES['agg_join']}) GROUP BY n")
    for name, select in NODES.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {select}")
    conn.execute("CREATE MATERIALIZED VIEW vov AS SELECT n, count(*) AS c FROM agg_join GROUP BY n")
    conn.execute("CREATE UNIQUE INDEX u_mm ON mm (v)")
    conn.execute("ALTER TABLE a ADD COLUMN extra INT DEFAULT 7")
    with conn:
        conn.execute("ALTER TABLE b ADD COLUMN e2")
        conn.execute("INSERT INTO b (id, v, r) VALUES (4, 3, 1.0)")
    conn.executemany("ALTER TABLE b ADD COLUMN e3", [()])
    conn.execute("SAVEPOINT s")
    conn.execute("ALTER TABLE a ADD COLUMN e4")
    conn.execute("ROLLBACK TO s")
    conn.execute("RELEASE s")
    conn.execute("INSERT INTO a (id, v, k) VALUES (4, 3, 'w')")
    stock = apsw.Connection(str(tmp_path / "db.sqlite"))
    stock.execute("ALTER TABLE b ADD COLUMN e5")
    stock.close()
    for name in live:
        conn.execute(f"REFRESH MATERIALIZED VIEW {name}")
    conn.execute("INSERT INTO b (id, v, r) VALUES (5, 1, 2.0)")
    for name, select in live.items():
        assert_view_matches(conn, name, select)
    for name in ["vov", *NODES]:
        conn.execute(f"DROP MATERIALIZED VIEW {name}")
    conn.execute("DROP TABLE a")
    conn.apsw.execute("DROP TABLE b")
    assert not {n for n in _names(conn) if n.startswith("__dbsp_")} - {
        "__dbsp_meta",
        "__dbsp_catalog",
        "__dbsp_progress",
    }


def test_an_old_file_upgrades_under_an_applications_authorizer_held(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    path.write_bytes((Path(__file__).parent / "data" / "matview-0.1.0.db").read_bytes())
    raw = apsw.Connection(str(path))
    raw.authorizer = lambda *_: apsw.SQLITE_OK
    conn = matview.install(raw)
    views = [n for (n,) in conn.execute("SELECT name FROM main.sqlite_master WHERE type = 'view'")]
    assert views
    for name in views:
        with pytest.raises(apsw.AuthError):
            conn.apsw.execute(f"DROP VIEW main.{name}")
        conn.execute(f"REFRESH MATERIALIZED VIEW {name}")
        conn.execute(f"DROP MATERIALIZED VIEW {name}")


FIXED_ROW_VIEWS = {
    "nocase": "SELECT json_extract(body, '$.kind') COLLATE NOCASE AS kind, count(*) AS n FROM ev GROUP BY 1",
    "distinct": "SELECT DISTINCT json_extract(body, '$.kind') COLLATE NOCASE AS kind FROM ev",
    "concat": "SELECT json_extract(body, '$.kind') AS kind, group_concat(id) AS ids FROM ev GROUP BY 1",
    "node": (
        "SELECT e.id, s.n FROM ev e JOIN (SELECT x, count(*) AS n FROM ev WHERE json_extract(body, '$.kind') "
        "> 'a' GROUP BY x) s ON s.x = e.x"
    ),
    "left": (
        "SELECT e.id, f.k FROM ev e LEFT JOIN (SELECT id, json_extract(body, '$.kind') AS k FROM ev) f "
        "ON f.id = e.id + 1"
    ),
}


@pytest.mark.parametrize("mode", ["immediate", "deferred"])
def test_reads_of_a_fixed_row_held(tmp_path: Path, mode: str) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE ev (id INTEGER PRIMARY KEY, body TEXT, x INTEGER)")
    conn.execute("""INSERT INTO ev VALUES (1, '{"kind":"click"}', 1), (5, '{"kind":"Click"}', 1)""")
    for name, select in FIXED_ROW_VIEWS.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} WITH (maintenance = '{mode}') AS {select}")
    conn.execute("BEGIN")
    conn.execute("INSERT INTO ev VALUES (2, 'oops', 0)")
    conn.execute("SAVEPOINT s")
    conn.execute("""UPDATE ev SET body = '{"kind":"view"}' WHERE id = 2""")
    conn.execute("DELETE FROM ev WHERE id = 1")
    for name, select in FIXED_ROW_VIEWS.items():
        assert_view_matches(conn, name, select)
    conn.execute("RELEASE s")
    conn.execute("COMMIT")
    for name, select in FIXED_ROW_VIEWS.items():
        assert_view_matches(conn, name, select)
