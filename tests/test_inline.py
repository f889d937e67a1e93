"""FROM-subqueries, CTEs and plain views, inlined into one SELECT over base tables (the
`inline` pass): differential tests against SQLite in both maintenance modes, over the join
generator's schemas and write mixes, and the semantic corners of flattening by name."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from oracle import MODES, assert_recomputed_whole, assert_view_matches, create_views_both_modes, run_scenario
from test_joins import Runner, Table, random_program

import matview


def _inline_views(r: random.Random, tables: list[Table]) -> tuple[dict[str, str], list[str]]:
    a, b = tables[0].name, tables[1].name
    c = tables[2].name if len(tables) > 2 else a
    plain = [
        f"CREATE VIEW pv_ab AS SELECT {a}.id AS aid, {b}.id AS bid, {a}.k, {b}.v FROM {a} JOIN {b} ON {a}.k = {b}.k",
        "CREATE VIEW pv_of_view(x, w) AS SELECT aid, v + 1 FROM pv_ab WHERE bid > 1",
        f"CREATE VIEW pv_single AS SELECT id, k, v * 10 AS v10 FROM {c} WHERE r IS NOT NULL",
        f"CREATE VIEW pv_agg AS SELECT v, count(*) AS n, total(r) AS tr FROM {c} GROUP BY v",
    ]
    shapes = {
        "cte_join": (
            f"WITH x AS (SELECT id, k, v * 2 AS v2 FROM {a} WHERE v IS NOT NULL) "
            f"SELECT x.id, {b}.id, x.v2 FROM x JOIN {b} ON x.k = {b}.k"
        ),
        "cte_twice": (
            f"WITH x AS (SELECT id, k, v FROM {a}) "
            "SELECT p.id, q.id, p.v FROM x p JOIN x q ON p.k = q.k AND p.id < q.id"
        ),
        "cte_chain": (
            f"WITH x AS (SELECT id, v FROM {a} WHERE v > 0), y(i, w) AS (SELECT id, v + 1 FROM x) "
            "SELECT w, count(*), sum(i) FROM y GROUP BY w"
        ),
        "sub_agg": (
            f"SELECT s.k2, count(*), sum(s.v), max(s.r) FROM (SELECT {a}.v AS k2, {b}.v, {b}.r FROM {a} "
            f"JOIN {b} ON {a}.k = {b}.k) s GROUP BY s.k2"
        ),
        "nested": f"SELECT * FROM (SELECT * FROM (SELECT id, v FROM {a} WHERE v > 0) i WHERE i.v < 3) o",
        "view": "SELECT aid, v FROM pv_ab WHERE v IS NOT NULL",
        "view_agg": "SELECT v, count(*), total(aid) FROM pv_ab GROUP BY v",
        "view_of_view": "SELECT w, count(*) FROM pv_of_view GROUP BY w",
        "view_join": f"SELECT p.id, p.v10, {b}.v FROM pv_single p JOIN {b} ON p.v10 = {b}.v * 10",
        "derived_using": f"SELECT * FROM (SELECT id, k AS kk FROM {a}) s JOIN {b} ON s.kk = {b}.k",
        "derived_natural": f"SELECT * FROM (SELECT id AS i2, k, r FROM {a} WHERE id > 2) NATURAL JOIN {b}",
        "distinct": f"SELECT DISTINCT s.v FROM (SELECT v FROM {a} WHERE r IS NOT NULL) s",
        "unnamed": f"SELECT count(*), sum({b}.v) FROM (SELECT k AS kk FROM {a}), {b} WHERE kk = {b}.k",
        "where_alias": f"SELECT * FROM (SELECT id, v + 1 AS w FROM {a} WHERE w > 1) s",
        "having": (
            f"WITH x AS (SELECT {a}.v AS av, {b}.id AS bid FROM {a}, {b} WHERE {a}.v = {b}.v) "
            "SELECT av, count(bid) FROM x GROUP BY av HAVING count(*) > 1"
        ),
        "agg_sub": (
            f"SELECT k2, n * 2 FROM (SELECT {a}.v AS k2, count(*) AS n, sum({b}.v) AS s FROM {a} "
            f"JOIN {b} ON {a}.k = {b}.k GROUP BY {a}.v) WHERE n > 1 OR s IS NULL"
        ),
        "agg_view": "SELECT * FROM pv_agg WHERE n > 1",
        "agg_view_expr": "SELECT v, tr / n, n FROM pv_agg WHERE v IS NOT NULL",
        "agg_cte_chain": (
            f"WITH a1 AS (SELECT v, count(*) c FROM {a} GROUP BY 1), b1 AS (SELECT v, c * 2 AS d FROM a1 WHERE c > 1) "
            "SELECT * FROM b1"
        ),
        "agg_no_group": f"SELECT c FROM (SELECT count(*) AS c, max(v) AS m FROM {b} WHERE v > 1) WHERE m IS NOT NULL",
        "agg_having": (
            f"SELECT DISTINCT n FROM (SELECT v % 2 AS m, count(*) AS n FROM {a} GROUP BY m HAVING count(*) > 1) "
            "WHERE m IS NOT NULL"
        ),
        "three": (
            f"SELECT s.id, t.id, {c}.id FROM (SELECT id, k FROM {a}) s JOIN (SELECT id, v FROM {b}) t "
            f"ON s.id = t.v JOIN {c} ON {c}.id = s.id"
        ),
    }
    chosen = r.sample(sorted(shapes), r.randint(2, 5))
    return {name: shapes[name] for name in chosen}, plain


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_random_inlined_views_and_writes(tmp_path_factory, seed):
    path = tmp_path_factory.mktemp("inline") / "db.sqlite"
    Runner(path, random_program(random.Random(seed), _inline_views)).run()


@pytest.mark.parametrize("seed", range(8))
def test_seeded_inlined_programs(tmp_path, seed):
    Runner(tmp_path / "db.sqlite", random_program(random.Random(2000 + seed), _inline_views)).run()


# (GROUP BY keys are typed columns: which of 'a'/'A' SQLite shows for a NOCASE group is its
# scan order, unspecified — README "Semantics")

# --------------------------------------------------------------------------------------
# flattening's semantic corners


def _check(conn: matview.Connection, live: dict[str, str], writes: list[str]) -> None:
    for write in ["", *writes]:
        if write:
            conn.execute(write)
        for view, sql in live.items():
            assert_view_matches(conn, view, sql)


def test_affinity_of_derived_columns_is_the_expressions(tmp_path):
    """A derived column of an expression has no affinity; one of a column keeps its own, so
    `'5' = s.y` compares as SQLite compares it."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, z TEXT, n INTEGER, u)")
    conn.execute("CREATE TABLE w(id INTEGER PRIMARY KEY, a, b TEXT)")
    conn.execute("INSERT INTO t(z, n, u) VALUES ('5', 5, 5), ('4', 4, '4')")
    conn.execute("INSERT INTO w(a, b) VALUES (4, '5'), ('4', '4')")
    live = create_views_both_modes(
        conn,
        {
            "expr_vs_text": "SELECT t.id FROM (SELECT a + 1 AS y FROM w) s, t WHERE s.y = t.z",
            "text_vs_int": "SELECT t.id, s.y FROM (SELECT b AS y FROM w) s JOIN t ON s.y = t.n",
            "literal": "SELECT count(*) FROM (SELECT a + 1 AS y FROM w) s WHERE s.y = '5'",
            "cast": "SELECT t.id FROM (SELECT CAST(a AS TEXT) AS y FROM w) s JOIN t ON t.u = s.y",
        },
    )
    _check(conn, live, ["INSERT INTO w(a, b) VALUES ('3', 3)", "UPDATE t SET u = '5' WHERE id = 1"])


def test_a_collated_derived_column_is_refused_where_it_is_compared(tmp_path):
    """SQLite gives a derived column an implicit collation; inlined, a COLLATE would be
    explicit and win comparisons SQLite's would lose — refused, never guessed."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, r TEXT COLLATE RTRIM)")
    conn.execute("CREATE TABLE u(id INTEGER PRIMARY KEY, b TEXT)")
    with pytest.raises(matview.UnsupportedQuery, match="COLLATE"):
        conn.execute(
            "CREATE MATERIALIZED VIEW v AS SELECT t.id FROM (SELECT b COLLATE NOCASE AS y FROM u) s, t WHERE t.r = s.y"
        )
    # a column's own collation travels with it
    live = create_views_both_modes(conn, {"own": "SELECT s.r FROM (SELECT r FROM t) s JOIN u ON s.r = u.b"})
    _check(conn, live, ["INSERT INTO t(r) VALUES ('a  ')", "INSERT INTO u(b) VALUES ('a')"])


@pytest.mark.parametrize("mode", MODES)
def test_a_redefined_or_dropped_plain_view_stops_the_view(tmp_path, mode):
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v)")
    conn.execute("INSERT INTO t(v) VALUES (1), (2)")
    conn.execute("CREATE VIEW big AS SELECT id, v FROM t WHERE v > 1")
    conn.execute(f"CREATE MATERIALIZED VIEW m WITH (maintenance = '{mode}') AS SELECT count(*) FROM big")
    assert conn.execute("SELECT * FROM m").fetchall() == [(1,)]
    conn.execute("DROP VIEW big")
    conn.execute("CREATE VIEW big AS SELECT id, v FROM t")
    with pytest.raises(matview.Error, match="big it reads was redefined"):
        conn.execute("SELECT * FROM m").fetchall()
    conn.execute("INSERT INTO t(v) VALUES (3)")  # base writes never blocked
    conn.execute("DROP VIEW big")
    with pytest.raises(matview.Error, match="dropped"):
        conn.execute("SELECT * FROM m").fetchall()
    conn.execute("DROP MATERIALIZED VIEW m")
    assert conn.execute("SELECT count(*) FROM t").fetchall() == [(3,)]


def test_refusals_name_the_derived_table(tmp_path):
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, g, v)")
    conn.execute("CREATE VIEW agg AS SELECT g, sum(v) AS s FROM t GROUP BY g")
    conn.execute("CREATE VIEW other AS SELECT id, g FROM t")
    conn.execute("CREATE MATERIALIZED VIEW mv AS SELECT g, v FROM t")  # (its rows may repeat)
    for sql, words in [
        # (an aggregating view in a LEFT JOIN is a node; its untyped group key is what is refused)
        ("SELECT * FROM other LEFT JOIN agg ON agg.g = other.g", "equal but different"),
        # (`SELECT *` straight over a set operation is that set operation: here its untyped column is refused)
        ("SELECT * FROM (SELECT v FROM t UNION SELECT g FROM t) s", "UNION over column v"),
        ("WITH r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT n FROM r", "recursive CTE r"),
        ("SELECT * FROM mv m JOIN t ON t.g = m.g LEFT JOIN t u ON u.id = m.v", "materialized view mv"),
        ("SELECT * FROM (SELECT id FROM t) s WHERE id IN (SELECT g FROM t)", "subquery"),
        ("SELECT s.rowid FROM (SELECT id FROM t) s", "rowid"),
    ]:
        with pytest.raises((matview.UnsupportedQuery, matview.Error), match=words):
            conn.execute(f"CREATE MATERIALIZED VIEW v AS {sql}")
    assert [v.name for v in conn.views()] == ["mv"]
    # a LIMIT or a window inside: recomputed whole (`sql.whole`), no longer refused
    for number, sql in enumerate(
        [
            "WITH c AS (SELECT g FROM t LIMIT 2) SELECT * FROM c",
            "SELECT * FROM (SELECT v FROM t ORDER BY v LIMIT 2) s",
            "SELECT * FROM (SELECT v, row_number() OVER () FROM t) s",
        ]
    ):
        assert_recomputed_whole(conn, sql, f"whole{number}")


def test_names_as_sqlite_resolves_them(tmp_path):
    """Unqualified names, `*` over derived tables (USING columns once), repeated names, and a
    select-list alias in an inner WHERE."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE a(id INTEGER PRIMARY KEY, k TEXT COLLATE NOCASE, v INTEGER)")
    conn.execute("CREATE TABLE b(id INTEGER PRIMARY KEY, k TEXT, w REAL)")
    conn.execute("INSERT INTO a(k, v) VALUES ('x', 1), ('X', 2), ('y', NULL)")
    conn.execute("INSERT INTO b(k, w) VALUES ('x', 0.5), ('Y', 1.5), (NULL, 2.5)")
    live = create_views_both_modes(
        conn,
        {
            "using": "SELECT * FROM (SELECT k, v FROM a) s JOIN b USING (k)",
            "using_rev": "SELECT * FROM b JOIN (SELECT k, v FROM a) s USING (k)",
            "star_q": "SELECT s.*, b.w FROM (SELECT k, v AS v2, v * 2 FROM a) s, b WHERE s.k = b.k",
            "repeat": "SELECT * FROM (SELECT a.k, b.k FROM a, b WHERE a.id = b.id) s",
            "alias_where": "SELECT * FROM (SELECT id, v * 3 AS v3 FROM a WHERE v3 > 2 OR v3 IS NULL) q",
            "group_k": "SELECT s.k, count(*) FROM (SELECT k FROM a) s GROUP BY s.k",
            "cte_scope": (  # the inner WITH's c hides the outer one inside its subquery
                "WITH c AS (SELECT id, v FROM a) SELECT c.id, x.id FROM c, (WITH c AS (SELECT id FROM b) "
                "SELECT id FROM c) x WHERE c.id = x.id"
            ),
        },
    )
    _check(
        conn,
        live,
        [
            "INSERT INTO a(k, v) VALUES ('Y', 5)",
            "UPDATE b SET k = 'X' WHERE id = 3",
            "DELETE FROM a WHERE v = 1",
            "INSERT INTO b(k, w) VALUES ('y', 1)",
        ],
    )


def test_group_by_an_alias_of_an_expression_over_a_view(tmp_path):
    """`GROUP BY band` where band is a CASE over a plain view's column: the inline pass writes the
    alias as `(CASE …)`, which is the select item it names (was refused as a bare column,
    naming the inlined table)."""
    setup = [
        "CREATE TABLE salaries(emp_no INTEGER, salary INTEGER, from_date TEXT, to_date TEXT, "
        "PRIMARY KEY (emp_no, from_date))",
        "CREATE VIEW current_salaries AS SELECT emp_no, salary FROM salaries WHERE to_date IS NULL",
    ]
    views = {
        "bands": "SELECT CASE WHEN salary < 60000 THEN 'low' ELSE 'high' END AS band, COUNT(*) FROM current_salaries "
        "GROUP BY band",
        "derived": "SELECT CASE WHEN s.salary < 60000 THEN 'low' ELSE 'high' END AS band, sum(salary) "
        "FROM (SELECT emp_no, salary FROM salaries WHERE to_date IS NULL) s GROUP BY band",
        "ratio": "SELECT salary / 10000 AS band, COUNT(*) FROM current_salaries GROUP BY (band)",
    }
    steps = [
        ["INSERT INTO salaries VALUES (1, 50000, '2020-01-01', NULL), (2, 95000, '2020-01-01', NULL)"],
        [
            "UPDATE salaries SET to_date = '2021-01-01' WHERE emp_no = 1",
            "INSERT INTO salaries VALUES (1, 70000, '2021-01-01', NULL)",
        ],
        ["DELETE FROM salaries WHERE emp_no = 2"],
    ]
    run_scenario(tmp_path, setup, views, steps)
