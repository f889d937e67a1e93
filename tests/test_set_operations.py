"""Set operations: UNION ALL of select-project-join arms (linear: the sum of the arms' deltas),
and UNION, INTERSECT and EXCEPT where equal values cannot differ (DISTINCT over UNION ALL; per
row counts of each arm); differential tests against SQLite in both modes over the join
generator's schemas and write mixes, and the refusals by name."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_recomputed_whole, assert_views_match, run_scenario
from test_joins import Runner, Table, random_program

import matview


def _set_operation_views(r: random.Random, tables: list[Table]) -> dict[str, str]:
    a, b = tables[0].name, tables[1].name
    c = tables[2].name if len(tables) > 2 else a
    shapes = {
        "union_all": f"SELECT id, v FROM {a} WHERE v > 0 UNION ALL SELECT id, v FROM {b}",
        "union": f"SELECT v FROM {a} UNION SELECT v FROM {b} WHERE id > 2",
        "self": f"SELECT k, id FROM {a} UNION ALL SELECT k, id FROM {a} WHERE v IS NULL",
        "joins": (
            f"SELECT x.id, y.id FROM {a} x JOIN {b} y ON x.k = y.k UNION ALL "
            f"SELECT id, v FROM {c} UNION ALL SELECT y.v, x.v FROM {b} y, {c} x WHERE x.id = y.v ORDER BY 1"
        ),
        "three_union": f"SELECT id FROM {a} UNION SELECT v FROM {b} UNION SELECT id FROM {c} WHERE id > 3",
        "expressions": f"SELECT id * 2, coalesce(r, 0.5) FROM {a} UNION ALL SELECT v, r FROM {b} WHERE r > 0",
        "except": f"SELECT v FROM {a} EXCEPT SELECT v FROM {b} WHERE id > 1",
        "except3": f"SELECT id, v FROM {a} EXCEPT SELECT v, id FROM {b} EXCEPT SELECT id, id FROM {c}",
        "intersect": f"SELECT v FROM {a} INTERSECT SELECT v FROM {b}",
        "intersect_join": (
            f"SELECT x.v FROM {a} x JOIN {b} y ON x.k = y.k INTERSECT SELECT v FROM {c} WHERE r IS NOT NULL"
        ),
    }
    chosen = r.sample(sorted(shapes), r.randint(2, 4))
    return {name: shapes[name] for name in chosen}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_random_set_operation_views_and_writes(tmp_path_factory, seed):
    path = tmp_path_factory.mktemp("setops") / "db.sqlite"
    Runner(path, random_program(random.Random(seed), _set_operation_views)).run()


@pytest.mark.parametrize("seed", range(6))
def test_seeded_set_operation_programs(tmp_path, seed):
    Runner(tmp_path / "db.sqlite", random_program(random.Random(4000 + seed), _set_operation_views)).run()


def test_union_removes_a_row_only_when_no_arm_has_it(tmp_path):
    conn = run_scenario(
        tmp_path,
        [
            "CREATE TABLE a(id INTEGER PRIMARY KEY, v INTEGER)",
            "CREATE TABLE b(id INTEGER PRIMARY KEY, v INTEGER)",
            "INSERT INTO a(v) VALUES (1), (2), (2)",
            "INSERT INTO b(v) VALUES (2), (3)",
        ],
        {"u": "SELECT v FROM a UNION SELECT v FROM b", "ua": "SELECT v FROM a UNION ALL SELECT v FROM b"},
        [
            ["DELETE FROM a WHERE v = 2"],
            ["DELETE FROM b WHERE v = 2"],
            ["INSERT INTO b(v) VALUES (2)", "INSERT INTO a(v) VALUES (2)"],
            ["UPDATE a SET v = 3", "DELETE FROM b"],
        ],
    )
    conn.close()


@pytest.mark.parametrize(
    "sql,words",
    [
        ("SELECT u FROM a EXCEPT SELECT v FROM b", "EXCEPT over column u"),
        ("SELECT v FROM a UNION SELECT v * 1.0 FROM b", "types that differ between arms"),
        ("SELECT u FROM a UNION SELECT v FROM b", "UNION over column u"),
    ],
)
def test_refusals_name_the_construct(tmp_path, sql, words):
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE a(id INTEGER PRIMARY KEY, v INTEGER, u)")
    conn.execute("CREATE TABLE b(id INTEGER PRIMARY KEY, v INTEGER)")
    with pytest.raises(matview.UnsupportedQuery, match=words):
        conn.execute(f"CREATE MATERIALIZED VIEW v AS {sql}")
    assert conn.views() == []
    conn.execute("INSERT INTO a(v) VALUES (1)")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT v FROM a UNION ALL SELECT v FROM b LIMIT 3",
        "SELECT v FROM a UNION ALL SELECT count(*) FROM b LIMIT 3",
        "SELECT v FROM a UNION ALL SELECT sum(v) OVER () FROM b",
        "SELECT v FROM a UNION SELECT 'none'",
    ],
)
def test_limits_windows_and_constant_arms_are_recomputed_whole(tmp_path, sql):
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE a(id INTEGER PRIMARY KEY, v INTEGER, u)")
    conn.execute("CREATE TABLE b(id INTEGER PRIMARY KEY, v INTEGER)")
    live = assert_recomputed_whole(conn, sql)
    for write in [
        "INSERT INTO a(v) VALUES (1), (2), (2)",
        "INSERT INTO b(v) VALUES (3), (1)",
        "DELETE FROM a WHERE v = 2",
    ]:
        conn.execute(write)
        assert_views_match(conn, live)
