"""Subqueries (EXISTS, IN, scalar; correlated or not; nested; the same table inside and out),
maintained by partition recompute per row of the first table: differential tests against
SQLite in both modes over the join generator's schemas and write mixes, SQLite's NULL
semantics of IN by name, the refusals, and a sensitivity check (the step that finds the
reached rows, disabled, must make the differential tests fail)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_view_matches, create_views_both_modes
from test_joins import Runner, Table, random_program

import matview
from matview.delta_terms import DeltaTerms
from matview.operators import partition


def _subquery_views(r: random.Random, tables: list[Table]) -> dict[str, str]:
    a, b = tables[0].name, tables[1].name
    c = tables[2].name if len(tables) > 2 else a
    shapes = {
        "exists": f"SELECT * FROM {a} x WHERE EXISTS (SELECT 1 FROM {b} y WHERE y.k = x.k AND y.v > 0)",
        "not_exists": f"SELECT x.id, x.v FROM {a} x WHERE NOT EXISTS (SELECT 1 FROM {b} y WHERE y.v = x.v)",
        "in": f"SELECT id, k FROM {a} WHERE k IN (SELECT k FROM {b} WHERE v IS NOT NULL)",
        "not_in": f"SELECT id FROM {a} WHERE v NOT IN (SELECT v FROM {b})",
        "in_value": f"SELECT id, v IN (SELECT v FROM {b} WHERE {b}.k = {a}.k) FROM {a}",
        "scalar_agg": f"SELECT id, (SELECT count(*) FROM {b} y WHERE y.v <= x.v) FROM {a} x",
        "scalar_max": f"SELECT x.id, (SELECT max(y.v) FROM {b} y WHERE y.k = x.k) AS m FROM {a} x",
        "scalar_min_id": f"SELECT x.id FROM {a} x WHERE x.id > (SELECT min(y.id) + 1 FROM {b} y WHERE y.v = x.v)",
        "uncorrelated": f"SELECT id, v FROM {a} WHERE v * 3 > (SELECT count(*) FROM {a} WHERE v IS NOT NULL)",
        "lookup": f"SELECT x.id, (SELECT y.r FROM {b} y WHERE y.id = x.v) FROM {a} x",
        # (reached by value: the rows whose comparison a new value flips, `sql.value_reach`)
        "above_avg": f"SELECT id, v FROM {a} WHERE v > (SELECT avg(v) FROM {a}) AND id > 1",
        "at_max": f"SELECT x.id, x.r FROM {a} x WHERE x.r = (SELECT max(r) FROM {b})",
        "value_join": (
            f"SELECT x.id, y.id FROM {a} x JOIN {b} y ON y.k = x.k "
            f"WHERE y.r < (SELECT total(r) / 3 FROM {c} WHERE v IS NOT NULL) AND x.v > 0"
        ),
        "nested": (f"SELECT id FROM {a} WHERE v IN (SELECT v FROM {b} WHERE k IN (SELECT k FROM {c} WHERE r > 0))"),
        "join_outer": (
            f"SELECT x.id, y.id FROM {a} x JOIN {b} y ON x.k = y.k "
            f"WHERE y.v >= (SELECT min(z.v) FROM {c} z WHERE z.id <> x.id)"
        ),
        "agg_over": (
            f"SELECT x.v, count(*), sum((SELECT count(*) FROM {b} y WHERE y.k = x.k)) FROM {a} x "
            f"WHERE x.id IN (SELECT id FROM {c}) GROUP BY x.v"
        ),
        "case_exists": (
            f"SELECT id, CASE WHEN EXISTS (SELECT 1 FROM {b} WHERE {b}.v = {a}.id) THEN 'y' ELSE 'n' END FROM {a}"
        ),
        "distinct": f"SELECT DISTINCT x.v FROM {a} x WHERE x.k IN (SELECT k FROM {b} UNION ALL SELECT k FROM {c})",
        "left_sub": (f"SELECT x.id, y.id FROM {a} x LEFT JOIN {b} y ON y.k = x.k AND y.v = (SELECT max(v) FROM {b})"),
    }
    chosen = r.sample(sorted(shapes), r.randint(2, 5))
    return {name: shapes[name] for name in chosen}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_random_subquery_views_and_writes(tmp_path_factory, seed):
    path = tmp_path_factory.mktemp("subqueries") / "db.sqlite"
    Runner(path, random_program(random.Random(seed), _subquery_views)).run()


@pytest.mark.parametrize("seed", range(8))
def test_seeded_subquery_programs(tmp_path, seed):
    Runner(tmp_path / "db.sqlite", random_program(random.Random(3000 + seed), _subquery_views)).run()


def test_sensitivity_reached_rows_disabled_makes_the_differential_fail(tmp_path, monkeypatch):
    """With the changes of a subquery's tables hidden from the step that finds the reached
    rows, the differential tests must see wrong views (so they can see that bug)."""
    original = partition.root_queries

    def blind(terms: DeltaTerms, changed: frozenset[str], applied: bool = True) -> tuple[str | None, str]:
        top = sum(1 for part in terms.plan.from_template[1::2] if part.startswith("source"))
        return original(terms, changed & frozenset(terms.plan.sources[:top]), applied)

    monkeypatch.setattr(partition, "root_queries", blind)
    failures = 0
    for seed in range(6):
        try:
            Runner(tmp_path / f"db{seed}.sqlite", random_program(random.Random(3000 + seed), _subquery_views)).run()
        except AssertionError:
            failures += 1
    assert failures > 0


# --------------------------------------------------------------------------------------
# SQLite's semantics, by name


def _scenario(tmp_path: Path, views: dict[str, str], writes: list[str]) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, x INTEGER)")
    conn.execute("CREATE TABLE s(id INTEGER PRIMARY KEY, y INTEGER)")
    conn.execute("INSERT INTO t(x) VALUES (1), (2), (NULL)")
    live = create_views_both_modes(conn, views)
    for write in ["", *writes]:
        if write:
            conn.execute(write)
        for view, sql in live.items():
            assert_view_matches(conn, view, sql)
    conn.close()


def test_not_in_with_an_empty_set_and_a_set_that_gains_a_null(tmp_path):
    """`NULL NOT IN (empty)` is 1; `2 NOT IN (1, NULL)` is NULL: rows appear and vanish as the
    set empties or gains a NULL."""
    _scenario(
        tmp_path,
        {
            "kept": "SELECT id FROM t WHERE x NOT IN (SELECT y FROM s)",
            "value": "SELECT id, x NOT IN (SELECT y FROM s), x IN (SELECT y FROM s) FROM t",
        },
        [
            "INSERT INTO s(y) VALUES (1)",
            "INSERT INTO s(y) VALUES (NULL)",
            "DELETE FROM s WHERE y IS NULL",
            "DELETE FROM s",
            "UPDATE t SET x = 1 WHERE x IS NULL",
        ],
    )


def test_exists_flips_both_ways_and_a_scalar_subquery_with_no_row(tmp_path):
    _scenario(
        tmp_path,
        {
            "exists": "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM s WHERE s.y = t.x)",
            "scalar": "SELECT id, (SELECT max(y) FROM s WHERE y < t.x), (SELECT y FROM s WHERE s.id = t.x) FROM t",
            "same_table": "SELECT id FROM t WHERE x >= (SELECT avg(id) FROM t) - 1",
            "one_row": "SELECT id, (SELECT 5), (SELECT t.x + 1) FROM t WHERE (x, 1) = (SELECT max(y), 1 FROM s)",
        },
        [
            "INSERT INTO s(y) VALUES (2)",
            "UPDATE s SET y = 1",
            "INSERT INTO t(x) VALUES (7)",
            "DELETE FROM s",
            "DELETE FROM t WHERE x = 7",
        ],
    )


@pytest.mark.parametrize(
    "sql,words",
    [
        ("SELECT id, (SELECT y FROM s) FROM t", "several rows"),
        ("SELECT id, (SELECT y FROM s WHERE y = t.x) FROM t", "several rows"),
        ("SELECT id FROM t WHERE (SELECT group_concat(y) FROM s) IS NULL", "group_concat"),
        ("SELECT id FROM t WHERE x > (SELECT sum(DISTINCT y) FROM s)", "sum"),
        ("SELECT x, count(*) FROM t GROUP BY x HAVING count(*) > (SELECT count(*) FROM s WHERE s.y = t.x)", "HAVING"),
        ("SELECT id FROM t WHERE EXISTS (WITH w AS (SELECT 1) SELECT * FROM w)", "WITH"),
        ("SELECT id FROM t WHERE x IN (SELECT rowid FROM s)", "rowid"),
        ("SELECT id FROM t WHERE x IN (SELECT y FROM s UNION SELECT x FROM t)", "UNION"),
        ("SELECT id FROM t WHERE x = (SELECT max(y COLLATE NOCASE) FROM s)", "max"),
        ("SELECT id FROM t WHERE x IN (SELECT DISTINCT y FROM s WHERE s.y > t.x)", "DISTINCT"),
    ],
)
def test_refusals_name_the_construct(tmp_path, sql, words):
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, x)")
    conn.execute("CREATE TABLE s(id INTEGER PRIMARY KEY, y)")
    with pytest.raises(matview.UnsupportedQuery, match=words):
        conn.execute(f"CREATE MATERIALIZED VIEW v AS {sql}")
    assert conn.views() == []


def test_a_text_primary_key_with_nulls_identifies_rows_and_survives_vacuum(tmp_path):
    """A rowid table's PRIMARY KEY may hold NULLs (`IN` never matches them): rows with NULL keys
    are recomputed as one. VACUUM renumbers rowids under pending changes; the key survives."""
    path = tmp_path / "db.sqlite"
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE r(name TEXT PRIMARY KEY, m INTEGER)")
    conn.execute("CREATE TABLE o(id INTEGER PRIMARY KEY, region TEXT, amount INTEGER)")
    conn.execute("INSERT INTO r VALUES ('a', 1), (NULL, 2), (NULL, 3), ('b', 4)")
    conn.execute("INSERT INTO o(region, amount) VALUES ('a', 5), (NULL, 6)")
    views = {
        "exists": "SELECT r.name, r.m FROM r WHERE EXISTS (SELECT 1 FROM o WHERE o.region IS r.name)",
        "chain": "SELECT r.name, r.m, o.id FROM r LEFT JOIN o ON o.region = r.name LEFT JOIN o AS o2 ON o2.id = o.id",
    }
    live = create_views_both_modes(conn, views)
    writes = [
        "INSERT INTO o(region, amount) VALUES ('b', 1)",
        "INSERT INTO r VALUES (NULL, 9)",
        "DELETE FROM o WHERE region IS NULL",
        "UPDATE r SET m = 7 WHERE name IS NULL",
        "DELETE FROM r WHERE m = 2",
        "UPDATE r SET m = 8 WHERE name = 'a'",
        "VACUUM",
    ]
    for write in writes:
        conn.execute(write)
        for view, sql in live.items():
            assert_view_matches(conn, view, sql)
    conn.close()


def test_a_declared_column_named_like_the_rowid_inside_a_subquery(tmp_path):
    """`items(oid, sku)` declares `oid`: inside a subquery it is that column (maintained), while
    the rowid of a table that declares no such column stays refused there."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE o(id INTEGER PRIMARY KEY, x INT)")
    conn.execute("CREATE TABLE items(oid INTEGER, sku TEXT, PRIMARY KEY (oid, sku)) WITHOUT ROWID")
    conn.execute("CREATE TABLE items2(oid INTEGER, sku TEXT, PRIMARY KEY (oid, sku))")
    views = {
        "counted": "SELECT o.id, (SELECT count(*) FROM items i WHERE i.oid = o.id) AS k FROM o",
        "existing": "SELECT o.id FROM o WHERE EXISTS (SELECT 1 FROM items2 AS i WHERE i.oid = o.id)",
    }
    for name, sql in views.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
    with pytest.raises(matview.UnsupportedQuery, match="oid inside a subquery"):
        conn.execute("CREATE MATERIALIZED VIEW bad AS SELECT id FROM o WHERE x IN (SELECT oid FROM o AS p)")
    for step in range(6):
        with conn:
            conn.execute("INSERT OR REPLACE INTO o VALUES (?, ?)", (step % 4, step))
            conn.execute("INSERT OR IGNORE INTO items VALUES (?, ?)", (step % 3, f"s{step % 2}"))
            conn.execute("INSERT OR IGNORE INTO items2 VALUES (?, ?)", ((step + 1) % 4, "s"))
            if step % 3 == 2:
                conn.execute("DELETE FROM items WHERE oid = 1")
                conn.execute("UPDATE OR IGNORE items2 SET oid = oid + 1 WHERE oid = 2")
        for name, sql in views.items():
            assert_view_matches(conn, name, sql)
