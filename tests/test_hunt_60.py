"""Hunt 60: false positives of the damaged-entry checks (session 31), and damage they miss.

Found, and fixed in session 31 (each test failed before its fix):

- A user's own plain SQL view whose text mentions `"__dbsp_s"` and `FROM "__dbsp_view_<its
  name>" AS` (in a string literal or a comment) was taken for a materialized view whose catalog
  row is gone (reads raised `CatalogError`, `DROP MATERIALIZED VIEW` dropped it). Now only a
  view as `readable.plain_view_sql` writes it, over an existing view table, is one.
- matview's own rebuild wrote an entry it then called corrupt: a view over a plain view that was
  redefined, rebuilt by REFRESH of a view it reads (`rebuild._rebuild` skipped
  `plain_view_change`), got a plan reading the new definition's table while its base-table list
  kept the old one. Now the rebuild refuses, and the view keeps "redefined: DROP and CREATE it"
  (an `ALTER TABLE … ADD COLUMN` that would rebuild it is refused, nothing changed).
- An emptied base-table list of a view over a view, or a list naming a missing table besides the
  plan's own, passed the check (every write raised apsw's `BindingsError`; REFRESH failed). Now
  the list must be exactly the one CREATE stores: the plan's tables and those of the views it reads.
- (a chain, not damage) `SELECT count(*) FROM p`, p a view with both a CAST column and an
  expression column (`CAST(avg(v) AS INTEGER)`, `count(*)`), was refused naming `__dbsp_rows_p`,
  matview's temp table: a count(*) reads no column of p, only the virtual table its TEMP shadow
  reads, which `whole._read_objects` now takes for p read on this connection.

Left (expected failures below):

- Another view's plan over the same table (copied into the row) passes every check: the view is
  maintained by it and read wrong as current (the mirror of hunt 59's garbage `sql`; `matview
  verify` sees it).

Held (passing tests at the end; also a 150-run random mix of CREATE/REFRESH/DROP/ALTER ADD/
CREATE INDEX/ANALYZE/VACUUM/rolled-back CREATE/writes/reopens outside this file): no healthy view
of any shape was classified damaged, and every view equalled its SELECT after reopening.
Aggregates, DISTINCT, HAVING, MIN/MAX, GROUP_CONCAT, joins of every kind, subqueries, set
operations, CTEs, internal nodes, chains, views over plain views, windows and LIMIT recomputed
whole, all three options, odd table and view names (quotes, spaces, unicode, `;`, keywords,
`main.`-qualified), WITHOUT ROWID/STRICT/generated columns, a TEMP table beside, REFRESH over a
damaged internal node (options, readers and DROP clean), two connections; outside this file
also the two older-format files of tests/data and option spellings."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import apsw
import msgpack
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_view_matches

import matview

SETUP = [
    "CREATE TABLE t (id INTEGER PRIMARY KEY, g TEXT, v INT)",
    "CREATE TABLE u (id INTEGER PRIMARY KEY, g TEXT, w INT)",
    "INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 5), (3, 'a', 2), (4, NULL, 7)",
    "INSERT INTO u VALUES (1, 'a', 10), (2, 'c', 3), (3, 'a', 4)",
]
WRITES = [
    "INSERT INTO t (id, g, v) VALUES (10, 'b', 9)",
    "UPDATE t SET v = v + 1 WHERE g = 'a'",
    "DELETE FROM u WHERE id = 2",
    "INSERT INTO u (id, g, w) VALUES (9, 'b', 1)",
]
NODES = (
    "SELECT x.g, count(*) AS n FROM (SELECT DISTINCT g, v FROM t) x "
    "JOIN (SELECT g, max(w) AS m FROM u GROUP BY g) y ON x.g = y.g GROUP BY x.g"
)
NODE_DAMAGE = "UPDATE __dbsp_catalog SET plan = x'c0' WHERE name LIKE '\\_\\_dbsp\\_node%' ESCAPE '\\'"


def _connect(path: Path, setup: list[str] = SETUP) -> matview.Connection:
    conn = matview.connect(str(path))
    for statement in setup:
        conn.execute(statement)
    return conn


def _stock(path: Path, sql: str, params: tuple = ()) -> None:
    with sqlite3.connect(path) as stock:  # (another client's edit)
        stock.execute(sql, params)
    stock.close()


def _views(conn: matview.Connection) -> dict[str, str]:
    return {v.name: v.entry.sql for v in conn.registry.sync().values() if not v.name.startswith("__dbsp_")}


def _all_exact(path: Path) -> None:
    """Reopened, no view is damaged and every view equals its SELECT."""
    conn = matview.connect(str(path))
    views = _views(conn)
    assert conn.registry.damaged == {}
    for name, sql in views.items():
        assert_view_matches(conn, name.replace('"', '""'), sql)  # (the oracle quotes the name)
    conn.close()


# ------------------------------------------------------------------ findings: false positives


@pytest.mark.parametrize(
    "body",
    [
        """SELECT 'FROM "__dbsp_view_note" AS "__dbsp_s"' AS doc""",
        """SELECT g FROM t -- as FROM "__dbsp_view_note" AS "__dbsp_s"\n""",
    ],
)
def test_a_users_plain_view_mentioning_the_markers_is_not_damaged(tmp_path: Path, body: str) -> None:
    path = tmp_path / "db.sqlite"
    conn = _connect(path)
    conn.execute("CREATE MATERIALIZED VIEW w AS SELECT g, count(*) AS n FROM t GROUP BY g")
    conn.execute(f"CREATE VIEW note AS {body}")
    conn.close()
    conn = matview.connect(str(path))
    assert conn.registry.damaged == {}  # (got: {'note': … has no matview catalog entry})
    conn.execute("SELECT * FROM note").fetchall()  # (got: CatalogError)
    conn.execute("DROP VIEW note")  # (got: "note is a materialized view: use DROP MATERIALIZED VIEW")


def test_drop_materialized_view_keeps_a_users_plain_view_a_view_reads(tmp_path: Path) -> None:
    conn = _connect(tmp_path / "db.sqlite")
    conn.execute("""CREATE VIEW note AS SELECT g, v FROM t -- see FROM "__dbsp_view_note" AS "__dbsp_s"\n""")
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT g, sum(v) AS s FROM note GROUP BY g")
    with pytest.raises(matview.Error):
        conn.execute("DROP MATERIALIZED VIEW note")  # (got: done; m's plain view is gone)


@pytest.mark.parametrize("rebuild", ["ALTER TABLE t ADD COLUMN z INT", "REFRESH MATERIALIZED VIEW c1"])
def test_a_rebuild_over_a_redefined_plain_view_is_not_catalog_damage(tmp_path: Path, rebuild: str) -> None:
    conn = _connect(
        tmp_path / "db.sqlite",
        [
            "CREATE TABLE t (id INTEGER PRIMARY KEY, g TEXT, v INT)",
            "CREATE TABLE t2 (id INTEGER PRIMARY KEY, g TEXT, v INT)",
            "INSERT INTO t VALUES (1, 'a', 1)",
            "INSERT INTO t2 VALUES (1, 'a', 9)",
            "CREATE VIEW pv AS SELECT g, v FROM t",
            "CREATE MATERIALIZED VIEW c1 AS SELECT g, count(*) AS n FROM t GROUP BY g",  # (rebuilt first)
            "CREATE MATERIALIZED VIEW o2 AS SELECT g FROM t2",  # (t2 has change capture)
            "CREATE MATERIALIZED VIEW m AS SELECT c1.g, sum(pv.v) AS s FROM c1 JOIN pv ON pv.g = c1.g GROUP BY c1.g",
            "DROP VIEW pv",
            "CREATE VIEW pv AS SELECT g, v FROM t2",
        ],
    )
    with pytest.raises(matview.SchemaChanged, match="pv it reads was redefined"):
        conn.execute("SELECT * FROM m").fetchall()
    if rebuild.startswith("ALTER"):  # (refused, nothing changed: m could not be rebuilt)
        with pytest.raises(matview.Error, match="pv it reads was redefined"):
            conn.execute(rebuild)
    else:
        conn.execute(rebuild)
    assert "m" not in conn.registry.damaged  # (was: "catalog entry of view m is corrupt: … do not list t2")
    with pytest.raises(matview.SchemaChanged, match="pv it reads was redefined"):
        conn.execute("SELECT * FROM m").fetchall()


# ------------------------------------------------------------------ findings: damage the checks miss


def test_an_emptied_base_list_of_a_view_over_a_view_blocks_no_write(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    conn = _connect(path)
    conn.execute("CREATE MATERIALIZED VIEW c1 AS SELECT g, sum(v) AS s FROM t GROUP BY g")
    conn.execute("CREATE MATERIALIZED VIEW c2 AS SELECT g, s FROM c1 WHERE s > 0")
    conn.close()
    _stock(path, "UPDATE __dbsp_catalog SET base_tables = x'90' WHERE name = 'c2'")
    conn = matview.connect(str(path))
    conn.execute("INSERT INTO t VALUES (9, 'a', 100)")  # (got: apsw.BindingsError)
    assert_view_matches(conn, "c1", "SELECT g, sum(v) AS s FROM t GROUP BY g")


def test_refresh_repairs_an_emptied_base_list_of_a_view_over_a_view(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    conn = _connect(path)
    conn.execute("CREATE MATERIALIZED VIEW c1 AS SELECT g, sum(v) AS s FROM t GROUP BY g")
    conn.execute("CREATE MATERIALIZED VIEW c2 AS SELECT g, s FROM c1 WHERE s > 0")
    conn.close()
    _stock(path, "UPDATE __dbsp_catalog SET base_tables = x'90' WHERE name = 'c2'")
    conn = matview.connect(str(path))
    conn.execute("REFRESH MATERIALIZED VIEW c2")  # (got: Error "BindingsError: Incorrect number of bindings")
    conn.execute("INSERT INTO t VALUES (9, 'a', 100)")
    assert_view_matches(conn, "c2", "SELECT g, s FROM (SELECT g, sum(v) AS s FROM t GROUP BY g) WHERE s > 0")


def test_refresh_repairs_a_base_list_with_a_missing_table_beside_its_own(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    conn = _connect(path)
    conn.execute("CREATE MATERIALIZED VIEW w AS SELECT g, count(*) AS n FROM t GROUP BY g")
    conn.close()
    _stock(path, "UPDATE __dbsp_catalog SET base_tables = ? WHERE name = 'w'", (msgpack.packb(["t", "z"]),))
    conn = matview.connect(str(path))
    conn.execute("REFRESH MATERIALIZED VIEW w")  # (got: Error "SQLError: no such table: __dbsp_delta_z")
    conn.execute("INSERT INTO t VALUES (9, 'a', 100)")
    assert_view_matches(conn, "w", "SELECT g, count(*) AS n FROM t GROUP BY g")


@pytest.mark.xfail(strict=True, reason="another view's plan over the same table passes every check: read wrong")
def test_a_plan_of_another_view_is_not_read_as_current(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    conn = _connect(path)
    conn.execute("CREATE MATERIALIZED VIEW w AS SELECT g, v FROM t WHERE v > 1")
    conn.execute("CREATE MATERIALIZED VIEW o AS SELECT g, v FROM t WHERE v < 3")
    conn.close()
    _stock(path, "UPDATE __dbsp_catalog SET plan = (SELECT plan FROM __dbsp_catalog WHERE name = 'o') WHERE name = 'w'")
    conn = matview.connect(str(path))
    conn.execute("INSERT INTO t VALUES (8, 'a', 0), (9, 'a', 100)")
    try:
        assert_view_matches(conn, "w", "SELECT g, v FROM t WHERE v > 1")  # (got: ('a', 0) in, ('a', 100) out)
    except matview.Error:
        pass  # (a refusal is fine: never read as current)


# ------------------------------------------------------------------ finding: a chain refused


@pytest.mark.fall_back_to_whole
def test_a_view_over_a_view_with_a_cast_and_an_expression_column(tmp_path: Path) -> None:
    conn = _connect(tmp_path / "db.sqlite")
    conn.execute(
        "CREATE MATERIALIZED VIEW p AS SELECT g, CAST(avg(v) AS INTEGER) AS a, count(*) AS k FROM t GROUP BY g"
    )
    # (was: UnsupportedQuery "the view over matview's own table __dbsp_rows_p is not supported")
    conn.execute("CREATE MATERIALIZED VIEW q AS SELECT count(*) AS c FROM p")
    assert_view_matches(conn, "q", "SELECT count(*) AS c FROM p")
    conn.execute("INSERT INTO t (g, v) VALUES ('new', 4), ('new', 5)")
    conn.execute("DELETE FROM t WHERE g = 'a'")
    assert_view_matches(conn, "q", "SELECT count(*) AS c FROM p")
    assert_view_matches(conn, "p", "SELECT g, CAST(avg(v) AS INTEGER) AS a, count(*) AS k FROM t GROUP BY g")


# ------------------------------------------------------------------ held

SHAPES = {
    "pv_over": "SELECT g, sum(v) AS s FROM t GROUP BY g",  # (the chain below reads it)
    "agg": "SELECT g, count(*) AS n, sum(v) AS s, avg(v) AS a FROM t GROUP BY g",
    "s_distinct": "SELECT DISTINCT g FROM t",
    "s_having_minmax": "SELECT g, min(v) AS mn, max(v) AS mx FROM t GROUP BY g HAVING sum(v) > 2",
    "s_gc": "SELECT g, group_concat(v) AS c FROM t GROUP BY g",
    "s_left": "SELECT t.id, u.w FROM t LEFT JOIN u ON t.g = u.g",
    "s_natural": "SELECT id, g, v, w FROM t NATURAL JOIN u",
    "s_self": "SELECT a.id AS x, b.id AS y FROM t a JOIN t b ON a.g = b.g",
    "s_exists": "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.g = t.g)",
    "s_scalar": "SELECT id, (SELECT max(w) FROM u WHERE u.g = t.g) AS m FROM t",
    "s_except": "SELECT g FROM t EXCEPT SELECT g FROM u",
    "s_cte": "WITH c AS (SELECT g, sum(v) AS s FROM t GROUP BY g) SELECT c.g, c.s, u.w FROM c JOIN u ON c.g = u.g",
    "s_nodes": NODES,
    "s_window": "SELECT id, row_number() OVER (ORDER BY id) AS rn FROM t",
    "s_limit": "SELECT id FROM t ORDER BY id LIMIT 2",
    "s_mainq": "SELECT id FROM main.t WHERE v > 1",
    "s_pv": "SELECT g, sum(v) AS s FROM pv GROUP BY g",
}
OPERATIONS = {
    "refresh": [f"REFRESH MATERIALIZED VIEW {name}" for name in SHAPES],
    "alter": ["ALTER TABLE t ADD COLUMN z INT DEFAULT 3", "ALTER TABLE u ADD COLUMN z TEXT"],
    "indexes": ["CREATE INDEX it ON t (g, v)", "CREATE INDEX iv ON agg (g)", "ANALYZE", "DROP INDEX it"],
    "drops": ["DROP MATERIALIZED VIEW s_nodes", "DROP MATERIALIZED VIEW s_left", "VACUUM"],
    "rolled_back": [
        "BEGIN",
        "CREATE MATERIALIZED VIEW rb AS SELECT d.g FROM (SELECT DISTINCT g FROM u) d",
        "DROP MATERIALIZED VIEW agg",
        "ROLLBACK",
        "SAVEPOINT s",
        "REFRESH MATERIALIZED VIEW s_nodes",
        "ROLLBACK TO s",
        "RELEASE s",
    ],
}


@pytest.mark.fall_back_to_whole
@pytest.mark.parametrize("operation", list(OPERATIONS))
def test_held_views_of_many_shapes_reopen_undamaged_and_exact(tmp_path: Path, operation: str) -> None:
    path = tmp_path / "db.sqlite"
    conn = _connect(path, [*SETUP, "CREATE VIEW pv AS SELECT g, v FROM t WHERE v > 1"])
    for index, (name, sql) in enumerate(SHAPES.items()):
        mode = "deferred" if index % 2 else "immediate"
        conn.execute(f"CREATE MATERIALIZED VIEW {name} WITH (maintenance = '{mode}') AS {sql}")
    conn.execute("CREATE MATERIALIZED VIEW chain WITH (indexes = 'off') AS SELECT g, s FROM pv_over WHERE s > 1")
    for statement in WRITES:
        conn.execute(statement)
    for statement in OPERATIONS[operation]:
        conn.execute(statement)
    conn.execute("INSERT INTO t (id, g, v) VALUES (30, 'a', 3)")
    conn.close()
    _all_exact(path)
    _all_exact(path)


@pytest.mark.parametrize(
    "table", ['"my table"', '"we""ird"', '"ÄÖü"', '"MiXeD"', "[br ack]", '"t.x"', '"select"', '"x;y"']
)
def test_held_odd_table_and_view_names(tmp_path: Path, table: str) -> None:
    path = tmp_path / "db.sqlite"
    conn = _connect(path, [f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, g TEXT, v INT)"])
    conn.execute(f"INSERT INTO {table} VALUES (1, 'a', 1), (2, 'b', 2)")
    conn.execute(f'CREATE MATERIALIZED VIEW "v ""{table[1:-1]}" AS SELECT g, sum(v) AS s FROM {table} GROUP BY g')
    conn.execute(f"CREATE MATERIALIZED VIEW main.w AS SELECT * FROM main.{table} WHERE v > 0")
    conn.execute(f"INSERT INTO {table} VALUES (5, 'a', 3)")
    conn.close()
    _all_exact(path)


@pytest.mark.parametrize(
    "setup",
    [
        ["CREATE TABLE k (a TEXT PRIMARY KEY, g TEXT, v INT) WITHOUT ROWID"],
        ["CREATE TABLE k (a INTEGER PRIMARY KEY, g TEXT, v INT) STRICT"],
        ["CREATE TABLE k (a INTEGER PRIMARY KEY, b INT, g TEXT AS ('g' || (b % 2)), v INT AS (b * 2) STORED)"],
    ],
)
def test_held_table_kinds(tmp_path: Path, setup: list[str]) -> None:
    path = tmp_path / "db.sqlite"
    conn = _connect(path, setup)
    columns = "(a, b)" if "AS (" in setup[0] else "(a, g, v)"
    rows = "(1, 1), (2, 2)" if "AS (" in setup[0] else "(1, 'a', 1), (2, 'b', 2)"
    conn.execute(f"INSERT INTO k {columns} VALUES {rows}")
    conn.execute("CREATE MATERIALIZED VIEW kv AS SELECT g, count(*) AS n, max(v) AS m FROM k GROUP BY g")
    conn.execute("CREATE TEMP TABLE kt (x)")
    conn.execute(f"INSERT INTO k {columns} VALUES {rows.replace('1', '3').replace('2', '4')}")
    conn.close()
    _all_exact(path)


@pytest.mark.parametrize(
    "options", ["maintenance = 'deferred'", "maintenance = 'deferred', indexes = 'off', recompute = 'never'"]
)
def test_held_refresh_over_a_damaged_node_keeps_options_and_readers(tmp_path: Path, options: str) -> None:
    path = tmp_path / "db.sqlite"
    conn = _connect(path)
    conn.execute(f"CREATE MATERIALIZED VIEW d1 WITH ({options}) AS {NODES}")
    conn.execute("CREATE MATERIALIZED VIEW d2 AS SELECT g, n FROM d1 WHERE n > 0")
    before = {(n, m) for n, m in conn.execute("SELECT name, maintenance FROM __dbsp_catalog").fetchall()}
    plan = conn.registry.get("d1").entry.plan
    conn.close()
    _stock(path, NODE_DAMAGE)
    conn = matview.connect(str(path))
    with pytest.raises(matview.SchemaChanged, match="REFRESH MATERIALIZED VIEW d1"):
        conn.execute("SELECT * FROM d2").fetchall()
    conn.execute("REFRESH MATERIALIZED VIEW d1")
    for statement in WRITES:
        conn.execute(statement)
    assert {(n, m) for n, m in conn.execute("SELECT name, maintenance FROM __dbsp_catalog").fetchall()} == before
    again = conn.registry.get("d1").entry.plan
    assert (again.recompute_never, again.auto_indexes) == (plan.recompute_never, plan.auto_indexes)
    conn.close()
    _all_exact(path)
    conn = matview.connect(str(path))
    conn.execute("DROP MATERIALIZED VIEW d2")
    conn.execute("DROP MATERIALIZED VIEW d1")
    left = conn.execute("SELECT name FROM sqlite_master WHERE name NOT IN ('t', 'u')").fetchall()
    assert {n for (n,) in left} <= {"__dbsp_meta", "__dbsp_catalog", "__dbsp_progress"} | {
        n for (n,) in left if n.startswith("sqlite_autoindex___dbsp_")
    }
    assert conn.execute("SELECT count(*) FROM __dbsp_catalog").fetchone() == (0,)


def test_held_a_users_plain_view_reading_a_view_table_or_named_like_a_dropped_view(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    conn = _connect(path)
    conn.execute("CREATE MATERIALIZED VIEW w AS SELECT g, count(*) AS n FROM t GROUP BY g")
    conn.execute("CREATE MATERIALIZED VIEW gone AS SELECT DISTINCT g FROM t")
    conn.execute('CREATE VIEW mine AS SELECT * FROM "__dbsp_view_w" AS "__dbsp_s"')
    conn.execute("DROP MATERIALIZED VIEW gone")
    conn.execute("CREATE VIEW gone AS SELECT g FROM t")
    conn.close()
    _all_exact(path)
    conn = matview.connect(str(path))
    assert len(conn.execute("SELECT * FROM mine").fetchall()) == 3
    assert len(conn.execute("SELECT * FROM gone").fetchall()) == 4


def test_held_two_connections(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    a = _connect(path)
    b = matview.connect(str(path))
    b.execute(f"CREATE MATERIALIZED VIEW d WITH (maintenance = 'deferred') AS {NODES}")
    b.execute("CREATE MATERIALIZED VIEW e AS SELECT g, n FROM d WHERE n > 0")
    a.execute("INSERT INTO t VALUES (7, 'c', 1)")
    assert_view_matches(a, "d", NODES)
    b.execute("BEGIN")
    b.execute("CREATE MATERIALIZED VIEW z AS SELECT DISTINCT g FROM t")
    assert a.execute("SELECT count(*) FROM e").fetchall() and a.registry.damaged == {}
    b.execute("ROLLBACK")
    b.execute("REFRESH MATERIALIZED VIEW d")
    a.execute("INSERT INTO u VALUES (8, 'c', 1)")
    assert_view_matches(a, "e", f"SELECT g, n FROM ({NODES}) WHERE n > 0")
    assert a.registry.damaged == {} and b.registry.damaged == {}
    with pytest.raises((apsw.Error, matview.Error)):
        a.execute("SELECT * FROM z").fetchall()
