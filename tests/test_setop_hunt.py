"""Hostile differential hunt over set operations (UNION ALL / UNION / INTERSECT / EXCEPT).

The first four tests were confirmed failures (fixed: refused, or maintained exactly; each
docstring gives the SQLite-vs-matview difference); the rest are passing cases worth keeping
(refusals by type across arms, NULLs, NUMERIC vs INTEGER, cascades, many arms, mixed chains
that end in UNION)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_view_matches, run_scenario

import matview

THREE_TABLES = [
    "CREATE TABLE a(id INTEGER PRIMARY KEY, v INTEGER)",
    "CREATE TABLE b(id INTEGER PRIMARY KEY, v INTEGER)",
    "CREATE TABLE c(id INTEGER PRIMARY KEY, v INTEGER)",
    "INSERT INTO a(v) VALUES (1), (2), (2)",
    "INSERT INTO b(v) VALUES (2), (3)",
    "INSERT INTO c(v) VALUES (3), (3), (4)",
]


# --------------------------------------------------------------------------------------
# confirmed failures


def test_union_then_union_all_keeps_last_arms_duplicates(tmp_path):
    """`A UNION B UNION ALL C` is `(A UNION B) UNION ALL C` (compounds associate to the left).

    SQLite gives {1, 2, 3, 3, 3, 4} (c's two 3s, plus b's 3 from the distinct part);
    matview gives {1, 2, 3, 4}: split_arms treats any chain of UNION and UNION ALL as one
    UNION over all arms, which is right only when the last operator is UNION."""
    # fixed: refused, then maintained (the left operand `A UNION B` is an internal node)
    run_scenario(
        tmp_path,
        THREE_TABLES,
        {"u": "SELECT v FROM a UNION SELECT v FROM b UNION ALL SELECT v FROM c"},
        [["INSERT INTO c(v) VALUES (1)"], ["DELETE FROM a"]],
    ).close()


def test_union_all_union_union_all_chain(tmp_path):
    """`A UNION ALL B UNION C UNION ALL A`: SQLite keeps the last arm's rows as a bag on top
    of the distinct union of a, b, c ({1, 2, 3, 4} + a's {1, 2, 2}); matview gives only the
    distinct {1, 2, 3, 4}."""
    # fixed: refused, then maintained (the left operand is an internal node)
    run_scenario(
        tmp_path,
        THREE_TABLES,
        {"u": "SELECT v FROM a UNION ALL SELECT v FROM b UNION SELECT v FROM c UNION ALL SELECT v FROM a"},
        [["INSERT INTO c(v) VALUES (1)"]],
    ).close()


def test_union_all_real_first_arm_integer_second_arm_on_create(tmp_path):
    """CREATE over a populated table: `SELECT r FROM a UNION ALL SELECT i FROM a` (r REAL,
    i INTEGER).

    SQLite gives (2.5,), (7,) — the compound applies no affinity; matview gives (2.5,), (7.0,):
    ViewTable.insert_select fills from `SELECT c0 … FROM (<compound>)`, and SQLite gives a
    compound FROM-subquery's column the first arm's REAL affinity, turning 7 into 7.0. The same
    with a NUMERIC second arm (4 → 4.0). Incremental inserts are right; only the fill is wrong."""
    run_scenario(
        tmp_path,
        [
            "CREATE TABLE a(id INTEGER PRIMARY KEY, r REAL, i INTEGER, n NUMERIC)",
            "INSERT INTO a VALUES (1, 2.5, 7, 4)",
        ],
        {"ri": "SELECT r FROM a UNION ALL SELECT i FROM a", "rn": "SELECT r FROM a UNION ALL SELECT n FROM a"},
        [["INSERT INTO a VALUES (2, 3.5, 8, 5)"]],
    ).close()


def test_union_all_real_first_arm_after_refresh(tmp_path):
    """Created empty (so incremental maintenance is right), then REFRESH MATERIALIZED VIEW.

    SQLite gives (2.5,), (7,) for `SELECT r FROM a UNION ALL SELECT i FROM b`; after REFRESH
    matview gives (2.5,), (7.0,) (same cause as the CREATE fill)."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE a(id INTEGER PRIMARY KEY, r REAL)")
    conn.execute("CREATE TABLE b(id INTEGER PRIMARY KEY, i INTEGER)")
    sql = "SELECT r FROM a UNION ALL SELECT i FROM b"
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {sql}")
    conn.execute("INSERT INTO a VALUES (1, 2.5)")
    conn.execute("INSERT INTO b VALUES (1, 7)")
    assert_view_matches(conn, "v", sql)  # right before the refresh
    conn.execute("REFRESH MATERIALIZED VIEW v")
    assert_view_matches(conn, "v", sql)
    conn.close()


# --------------------------------------------------------------------------------------
# passing cases worth keeping


def test_union_all_chain_that_ends_in_union_is_distinct(tmp_path):
    """`A UNION B UNION ALL C UNION C` ends in UNION, so distinct over all arms is right."""
    run_scenario(
        tmp_path,
        THREE_TABLES,
        {
            "u1": "SELECT v FROM a UNION ALL SELECT v FROM b UNION SELECT v FROM c",
            "u2": "SELECT v FROM a UNION SELECT v FROM b UNION ALL SELECT v FROM c UNION SELECT v FROM c",
        },
        [["INSERT INTO c(v) VALUES (1)"], ["DELETE FROM a"], ["UPDATE c SET v = v + 1", "DELETE FROM b"]],
    ).close()


@pytest.mark.parametrize("op", ["UNION", "INTERSECT", "EXCEPT"])
@pytest.mark.parametrize(
    "first,second",
    [("i", "r"), ("r", "i"), ("i", "t"), ("t", "n"), ("t", "n COLLATE NOCASE"), ("t", "u"), ("i", "id + 0.0")],
)
def test_distinct_set_operations_refuse_arms_that_differ_in_type_or_collation(tmp_path, op, first, second):
    """A later arm's REAL / TEXT / NOCASE / untyped column against a typed BINARY first arm."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE a(id INTEGER PRIMARY KEY, i INTEGER, r REAL, t TEXT, n TEXT COLLATE NOCASE, u)")
    conn.execute("CREATE TABLE b(id INTEGER PRIMARY KEY, i INTEGER, r REAL, t TEXT, n TEXT COLLATE NOCASE, u)")
    with pytest.raises(matview.UnsupportedQuery, match="equal values can differ"):
        conn.execute(f"CREATE MATERIALIZED VIEW v AS SELECT {first} FROM a {op} SELECT {second} FROM b")
    assert conn.views() == []
    conn.close()


def test_union_all_arms_of_different_types_created_empty(tmp_path):
    """UNION ALL keeps each arm's storage class (1 vs 1.0 vs '1') when maintained incrementally."""
    setup = [
        "CREATE TABLE a(id INTEGER PRIMARY KEY, i INTEGER, r REAL, t TEXT, u)",
        "CREATE TABLE b(id INTEGER PRIMARY KEY, i INTEGER, r REAL, t TEXT, u)",
    ]
    views = {
        "ir": "SELECT i FROM a UNION ALL SELECT r FROM b",
        "ri": "SELECT r FROM a UNION ALL SELECT i FROM b",
        "it": "SELECT i, t FROM a UNION ALL SELECT t, u FROM b",
        "ex": "SELECT i * 2, r FROM a UNION ALL SELECT u, id + 0.5 FROM b",
    }
    steps = [
        ["INSERT INTO a VALUES (1, 1, 1.0, '1', 1.0)", "INSERT INTO b VALUES (1, 1, 1.0, '1', '1')"],
        ["INSERT INTO b VALUES (2, 2, 2.5, 'x', 2)", "UPDATE a SET i = 3"],
        ["DELETE FROM a", "DELETE FROM b WHERE id = 1"],
    ]
    run_scenario(tmp_path, setup, views, steps).close()


def test_intersect_except_union_with_nulls_and_numeric_vs_integer(tmp_path):
    """NULLs compare equal in set operations; NUMERIC and INTEGER columns store equal numbers alike."""
    setup = [
        "CREATE TABLE a(id INTEGER PRIMARY KEY, r REAL, i INTEGER, n NUMERIC, t TEXT)",
        "CREATE TABLE b(id INTEGER PRIMARY KEY, r REAL, i INTEGER, n NUMERIC, t TEXT)",
    ]
    views = {
        f"{op.lower()}_{k}": f"SELECT {x} FROM a {op} SELECT {y} FROM b"
        for op in ("UNION", "INTERSECT", "EXCEPT")
        for k, (x, y) in enumerate([("i", "n"), ("n, r", "i, r"), ("i, t", "i, t")])
    }
    steps = [
        ["INSERT INTO a VALUES (1, -0.0, 1, 1, NULL)", "INSERT INTO b VALUES (1, 0.0, NULL, 1.0, NULL)"],
        ["INSERT INTO a VALUES (2, 0.0, NULL, 2.5, x'01')", "INSERT INTO b VALUES (2, NULL, 1, '1', x'01')"],
        ["DELETE FROM a WHERE id = 1"],
        ["UPDATE b SET i = NULL, n = NULL, t = NULL"],
    ]
    run_scenario(tmp_path, setup, views, steps).close()


@pytest.mark.parametrize("op", ["UNION ALL", "UNION", "INTERSECT", "EXCEPT"])
def test_set_operations_under_trigger_and_foreign_key_cascades(tmp_path, op):
    setup = [
        "PRAGMA foreign_keys = ON",
        "CREATE TABLE a(id INTEGER PRIMARY KEY, v INTEGER)",
        "CREATE TABLE b(id INTEGER PRIMARY KEY, v INTEGER, "
        "aid INTEGER REFERENCES a(id) ON DELETE CASCADE ON UPDATE CASCADE)",
        "CREATE TRIGGER tr AFTER INSERT ON a BEGIN INSERT INTO b(v, aid) VALUES (new.v, new.id); END",
        "INSERT INTO a VALUES (1, 1), (2, 2)",
    ]
    steps = [
        ["INSERT INTO a VALUES (3, 3)"],
        ["DELETE FROM a WHERE id = 1"],
        ["UPDATE a SET id = 10 WHERE id = 2"],
        ["INSERT INTO b(v, aid) VALUES (5, 3)"],
        ["DELETE FROM a"],
    ]
    views = {"v": f"SELECT v FROM b {op} SELECT v FROM a", "ids": f"SELECT aid FROM b {op} SELECT id FROM a"}
    run_scenario(tmp_path, setup, views, steps).close()


@pytest.mark.parametrize("op", ["UNION ALL", "UNION", "INTERSECT", "EXCEPT"])
def test_thirteen_arms_over_two_tables_and_self_joins(tmp_path, op):
    """Occurrence numbers past 9 (source10…) and one table in every arm, changed in one transaction."""
    setup = [
        "CREATE TABLE a(id INTEGER PRIMARY KEY, v INTEGER, t TEXT)",
        "CREATE TABLE b(id INTEGER PRIMARY KEY, v INTEGER, t TEXT)",
        "INSERT INTO a VALUES (1, 1, 'x'), (2, 2, 'y')",
        "INSERT INTO b VALUES (1, 2, 'x'), (2, 2, 'z')",
    ]
    arms = [
        f"SELECT x.v FROM a x JOIN b y ON x.v = y.v AND y.id > {i % 2}"
        if i % 2
        else f"SELECT x.v FROM {'ab'[i % 3 == 0]} x WHERE x.id > {i % 3}"
        for i in range(13)
    ]
    steps = [
        ["INSERT INTO b VALUES (4, 1, 'x')"],
        ["UPDATE a SET v = v + 1", "UPDATE b SET v = v - 1"],
        ["DELETE FROM b WHERE id = 1"],
        ["INSERT INTO a VALUES (7, 3, 'z')", "INSERT INTO a VALUES (8, 1, 'z')"],
    ]
    run_scenario(tmp_path, setup, {"m": f" {op} ".join(arms)}, steps).close()


def test_upsert_replace_index_vacuum_refresh_between_writes(tmp_path):
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in [
        "CREATE TABLE a(id INTEGER PRIMARY KEY, v INTEGER UNIQUE, t TEXT)",
        "CREATE TABLE b(id INTEGER PRIMARY KEY, v INTEGER, t TEXT)",
        "INSERT INTO a VALUES (1, 1, 'x'), (2, 2, 'y')",
        "INSERT INTO b VALUES (1, 2, 'x'), (2, 2, 'z')",
    ]:
        conn.execute(sql)
    views = {
        "u": "SELECT v, t FROM a UNION SELECT v, t FROM b",
        "i": "SELECT v, t FROM a INTERSECT SELECT v, t FROM b",
        "e": "SELECT a.t FROM a JOIN b ON a.v = b.v EXCEPT SELECT t FROM a WHERE v > 1",
        "ua": "SELECT a.t, b.v FROM a JOIN b ON a.v = b.v UNION ALL SELECT a.t, b.v FROM a JOIN b ON a.t = b.t",
    }
    for name, sql in views.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
        conn.execute(f"CREATE MATERIALIZED VIEW {name}_d WITH (maintenance = 'deferred') AS {sql}")
    steps: list[str | list[str]] = [
        ["INSERT INTO a VALUES (3, 2, 'q') ON CONFLICT(v) DO UPDATE SET t = excluded.t, v = v + 10"],
        "CREATE INDEX ia ON a(t)",
        ["REPLACE INTO a VALUES (5, 1, 'x')"],
        "VACUUM",
        ["DELETE FROM a", "DELETE FROM b", "INSERT INTO a VALUES (1, 2, 'x')", "INSERT INTO b VALUES (1, 2, 'x')"],
        "REFRESH MATERIALIZED VIEW u",
        ["UPDATE a SET v = v + 1, t = t || t"],
    ]
    for step in steps:
        if isinstance(step, str):
            conn.execute(step)
        else:
            with conn:
                for sql in step:
                    conn.execute(sql)
        for name, sql in views.items():
            assert_view_matches(conn, name, sql)
            assert_view_matches(conn, f"{name}_d", sql)
    conn.close()


@pytest.mark.parametrize(
    "sql,words",
    [
        ("SELECT v FROM a UNION SELECT v FROM b ORDER BY 5", "out of range"),
        ("SELECT v FROM a INTERSECT SELECT v FROM b ORDER BY t", "does not match"),
        ("SELECT v FROM a UNION SELECT v, t FROM b", "same number of result columns"),
        ("SELECT v FROM a ORDER BY v UNION SELECT v FROM b", "ORDER BY clause should come after"),
    ],
)
def test_invalid_compounds_are_refused_though_order_by_is_dropped(tmp_path, sql, words):
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE a(id INTEGER PRIMARY KEY, v INTEGER, t TEXT)")
    conn.execute("CREATE TABLE b(id INTEGER PRIMARY KEY, v INTEGER, t TEXT)")
    with pytest.raises(matview.Error, match=words):
        conn.execute(f"CREATE MATERIALIZED VIEW v AS {sql}")
    assert conn.views() == []
    conn.close()
