"""Hunt: materialized views over materialized views (differential against the SELECT re-run
over the upstream's virtual table). Failures are xfail(strict=True); passing tests pin shapes
that worked under attack."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_view_matches

import matview

SETUP = [
    "CREATE TABLE t(id INTEGER PRIMARY KEY, v INT, r REAL, s TEXT)",
    "CREATE TABLE u(id INTEGER PRIMARY KEY, w INT)",
    # values that do not conform to their column's affinity: SQLite keeps them as they are
    "INSERT INTO t(v, r, s) VALUES ('abc', 'xyz', 'a'), (1.5, 2, 'b'), (3, 3, 'c')",
    "INSERT INTO u(w) VALUES ('abc'), (2.5)",
]


def _db(tmp_path: Path) -> matview.Connection:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in SETUP:
        conn.execute(sql)
    return conn


# An upstream column SQLite declares with a type (so the upstream's virtual table declares it
# too): a parenthesized column holds its column's values (stored typed, read as they are); a set
# operation's column is typed by its first arm but holds the other arms' values unconverted, which
# no SQL can give that affinity unchanged: a view over it is refused.
PARENTHESIZED_UPSTREAMS = {
    "parenthesized_int": "SELECT id, (v) AS pv FROM t",
    "parenthesized_real": "SELECT id, (r) AS pv FROM t",
    "group_by_parenthesized": "SELECT (v) AS pv, count(*) AS id FROM t GROUP BY (v)",
}
SET_OPERATION_UPSTREAMS = {
    "union_all_int_expression": "SELECT id, v AS pv FROM t UNION ALL SELECT id, w + 0 FROM u",
}
# ... but where the arms conflict (an INTEGER column and a TEXT one) SQLite types the column BLOB,
# which converts nothing: read back as stored (`compound.blob_where_arms_conflict`)
BLOB_UPSTREAMS = {
    "union_all_int_text": "SELECT id, v AS pv FROM t UNION ALL SELECT id, s FROM t",
}
# ... unless every arm's column passed the same affinity (plain columns or CASTs of one
# affinity, BINARY): then the set operation's column is as good as a plain column
CONVERTED_ALIKE_UPSTREAMS = {
    "union_all": "SELECT id, v AS pv FROM t UNION ALL SELECT id, w FROM u",
    "union": "SELECT id, v AS pv FROM t UNION SELECT id, w FROM u",
    "union_all_cast": "SELECT id, v AS pv FROM t UNION ALL SELECT id, CAST(s AS INT) FROM t",
}


@pytest.mark.parametrize("mode", ["immediate", "deferred"])
@pytest.mark.parametrize("shape", sorted(PARENTHESIZED_UPSTREAMS))
def test_typed_parenthesized_column_of_upstream_keeps_its_values(tmp_path, shape, mode):
    conn = _db(tmp_path)
    conn.execute(f"CREATE MATERIALIZED VIEW up AS {PARENTHESIZED_UPSTREAMS[shape]}")
    down = "SELECT pv, typeof(pv) FROM up"
    conn.execute(f"CREATE MATERIALIZED VIEW down WITH (maintenance = '{mode}') AS {down}")
    conn.execute("INSERT INTO t(v, r, s) VALUES ('q', 'q', 'q')")
    assert_view_matches(conn, "down", down)


@pytest.mark.parametrize("mode", ["immediate", "deferred"])
@pytest.mark.parametrize("shape", sorted(BLOB_UPSTREAMS))
def test_a_view_over_a_set_operation_column_sqlite_types_blob_is_maintained(tmp_path, shape, mode):
    conn = _db(tmp_path)
    conn.execute(f"CREATE MATERIALIZED VIEW up AS {BLOB_UPSTREAMS[shape]}")
    down = "SELECT pv, typeof(pv) FROM up"
    conn.execute(f"CREATE MATERIALIZED VIEW down WITH (maintenance = '{mode}') AS {down}")
    conn.execute("INSERT INTO t(v, r, s) VALUES ('q', 'q', 'q')")
    conn.execute("INSERT INTO t(v, r, s) VALUES (1, 2.5, '1')")
    assert_view_matches(conn, "up", BLOB_UPSTREAMS[shape])
    assert_view_matches(conn, "down", down)


@pytest.mark.parametrize("shape", sorted(SET_OPERATION_UPSTREAMS))
def test_a_view_over_a_set_operation_column_of_mixed_values_is_refused(tmp_path, shape):
    conn = _db(tmp_path)
    conn.execute(f"CREATE MATERIALIZED VIEW up AS {SET_OPERATION_UPSTREAMS[shape]}")
    with pytest.raises(matview.UnsupportedQuery, match="FROM up: its column"):
        conn.execute("CREATE MATERIALIZED VIEW down AS SELECT pv, typeof(pv) FROM up")
    conn.execute("INSERT INTO t(v, r, s) VALUES ('q', 'q', 'q')")
    assert_view_matches(conn, "up", SET_OPERATION_UPSTREAMS[shape])


@pytest.mark.parametrize("mode", ["immediate", "deferred"])
@pytest.mark.parametrize("shape", sorted(CONVERTED_ALIKE_UPSTREAMS))
def test_a_view_over_a_set_operation_column_converted_alike(tmp_path, shape, mode):
    conn = _db(tmp_path)
    up = CONVERTED_ALIKE_UPSTREAMS[shape]
    conn.execute(f"CREATE MATERIALIZED VIEW up AS {up}")
    down = "SELECT pv, typeof(pv), count(*) FROM up GROUP BY pv"
    conn.execute(f"CREATE MATERIALIZED VIEW down WITH (maintenance = '{mode}') AS {down}")
    conn.execute("INSERT INTO t(v, r, s) VALUES ('q', 'q', 'q'), ('7', 7, '7.0')")
    conn.execute("INSERT INTO u(w) VALUES ('7'), (7.0), (8.5), ('abc')")
    assert_view_matches(conn, "up", up)
    assert_view_matches(conn, "down", down)
    conn.execute("DELETE FROM u WHERE w = 7")
    assert_view_matches(conn, "down", down)


def test_minimal_parenthesized_column(tmp_path):
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v INT)")
    conn.execute("INSERT INTO t(v) VALUES ('abc')")
    conn.execute("CREATE MATERIALIZED VIEW up AS SELECT (v) AS pv FROM t")
    conn.execute("CREATE MATERIALIZED VIEW down AS SELECT pv FROM up")
    assert conn.execute("SELECT pv FROM up").fetchall() == [("abc",)]
    assert conn.execute("SELECT * FROM down").fetchall() == [("abc",)]


def test_parenthesized_text_column_holding_a_blob(tmp_path):
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, s TEXT)")
    conn.execute("INSERT INTO t(s) VALUES ('a')")
    conn.execute("CREATE MATERIALIZED VIEW up AS SELECT id, (s) AS ps FROM t")
    conn.execute("CREATE MATERIALIZED VIEW down AS SELECT ps FROM up")
    conn.execute("INSERT INTO t(s) VALUES (X'41')")
    assert_view_matches(conn, "down", "SELECT ps FROM up")


# ---------------------------------------------------------------------------------------------
# shapes that held


WORKING = {
    "plain_column": ("SELECT id, v AS pv FROM t", "SELECT pv, typeof(pv) FROM up"),
    "unary_plus": ("SELECT id, +v AS pv FROM t", "SELECT pv, count(*) FROM up GROUP BY pv"),
    "collate_binary": ("SELECT id, v COLLATE BINARY AS pv FROM t", "SELECT pv, typeof(pv) FROM up"),
    "from_subquery": ("SELECT q.id, q.pv FROM (SELECT id, v AS pv FROM t) q", "SELECT pv, typeof(pv) FROM up"),
    "cte": ("WITH q AS (SELECT id, v AS pv FROM t) SELECT id, pv FROM q", "SELECT pv, typeof(pv) FROM up"),
    "left_join": ("SELECT t.id, u.w AS pv FROM t LEFT JOIN u ON u.id = t.id", "SELECT pv, typeof(pv) FROM up"),
    "max_of_int": ("SELECT id, max(v) AS pv FROM t GROUP BY id", "SELECT pv, typeof(pv) FROM up WHERE pv <> '3'"),
    "self_join_dupes": (
        "SELECT v AS pv, s AS id FROM t",
        "SELECT a.pv, b.id, count(*) FROM up a JOIN up b ON a.pv = b.pv GROUP BY 1, 2",
    ),
    "union_all_over_up_and_base": ("SELECT id, v AS pv FROM t", "SELECT pv FROM up UNION ALL SELECT v FROM t"),
}


@pytest.mark.parametrize("mode", ["immediate", "deferred"])
@pytest.mark.parametrize("shape", sorted(WORKING))
def test_shapes_that_hold(tmp_path, shape, mode):
    up, down = WORKING[shape]
    conn = _db(tmp_path)
    conn.execute(f"CREATE MATERIALIZED VIEW up WITH (maintenance = '{mode}') AS {up}")
    conn.execute(f"CREATE MATERIALIZED VIEW down AS {down}")
    steps = [
        ["INSERT INTO t(v, r, s) VALUES ('q', 'q', 'q'), (3, 3, 'c')", "INSERT INTO u(w) VALUES ('zz')"],
        ["UPDATE t SET v = v || '' WHERE id = 3", "DELETE FROM u WHERE id = 1"],
        ["DELETE FROM t WHERE id > 3"],
    ]
    for step in steps:
        with conn:
            for sql in step:
                conn.execute(sql)
        assert_view_matches(conn, "down", down)


def test_upstream_overflow_not_read_by_downstream_is_fine(tmp_path):
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, g, v INTEGER)")
    conn.execute("INSERT INTO t(g, v) VALUES (1, 1), (2, 5)")
    conn.execute("CREATE MATERIALIZED VIEW up AS SELECT g, sum(v) AS s FROM t GROUP BY g")
    conn.execute("CREATE MATERIALIZED VIEW down AS SELECT g, count(*) FROM up GROUP BY g")
    conn.execute(f"INSERT INTO t(g, v) VALUES (1, {2**63 - 1}), (3, 1)")
    assert_view_matches(conn, "down", "SELECT g, count(*) FROM up GROUP BY g")


def test_downstream_created_in_rolled_back_transaction(tmp_path):
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, g INT, v INT)")
    conn.execute("INSERT INTO t(g, v) VALUES (1, 1), (1, 2), (2, 3)")
    up = "SELECT g, count(*) AS n, sum(v) AS s FROM t GROUP BY g"
    down = "SELECT n, count(*) AS k, sum(s) AS ss FROM up GROUP BY n"
    conn.execute(f"CREATE MATERIALIZED VIEW up WITH (maintenance = 'deferred') AS {up}")
    conn.execute("INSERT INTO t(g, v) VALUES (3, 3)")
    conn.execute("BEGIN")
    conn.execute(f"CREATE MATERIALIZED VIEW down AS {down}")
    conn.execute("INSERT INTO t(g, v) VALUES (4, 5)")
    assert_view_matches(conn, "down", down)
    conn.execute("ROLLBACK")
    conn.execute("INSERT INTO t(g, v) VALUES (2, 5)")
    assert_view_matches(conn, "up", up)
    conn.execute(f"CREATE MATERIALIZED VIEW down AS {down}")
    conn.execute("INSERT INTO t(g, v) VALUES (7, 5)")
    assert_view_matches(conn, "down", down)
