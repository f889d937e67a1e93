"""A SELECT the incremental engine refuses is recomputed whole (`compile_view.compile_with_nodes`,
`sql.whole`; on for users, on here by the `fall_back_to_whole` mark): GROUP_CONCAT over a join
without an ORDER BY, a bare column over a join, a FULL JOIN of three tables, a recursive CTE, a
scalar DISTINCT subquery (TPC-DS q6), UNION over an untyped column, a node whose groups have
variants. SQLite decides each order-dependent value as the SELECT re-run does. Checked in both
modes under random writes, a rollback, reopen and a stock `sqlite3` writer; what whole recompute
cannot do either stays refused with the incremental engine's own words; `WITH (recompute =
'never')` refuses."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_views_match, create_views_both_modes, drive_write_mix
from stock import stock_sqlite3

import matview

pytestmark = pytest.mark.fall_back_to_whole

SETUP = [
    "CREATE TABLE cats(id INTEGER PRIMARY KEY, name TEXT, city TEXT COLLATE NOCASE)",
    "CREATE TABLE products(id INTEGER PRIMARY KEY, cat_id INT, name TEXT, price, tag)",
    "CREATE TABLE months(id INTEGER PRIMARY KEY, seq INT, year INT, moy INT)",
    "INSERT INTO cats VALUES (1, 'a', 'Oslo'), (2, 'b', 'oslo'), (3, 'c', 'Rome')",
    "INSERT INTO products VALUES (1, 1, 'x', 5, 1), (2, 1, 'y', 5.0, 1.0), (3, 2, 'z', 7, 'a'), (4, 9, 'w', 1, NULL)",
    "INSERT INTO months VALUES (1, 100, 2001, 1), (2, 101, 2001, 2), (3, 100, 2001, 1)",
]

VIEWS = {
    "concat_join": "SELECT c.city, group_concat(p.name) FROM cats c JOIN products p ON p.cat_id = c.id GROUP BY c.city",
    "bare_join": "SELECT c.city, p.name, max(p.price) FROM products p JOIN cats c ON c.id = p.cat_id GROUP BY c.city",
    "full_chain": "SELECT c.id, p.id, m.id FROM cats c FULL JOIN products p ON p.cat_id = c.id "
    "FULL JOIN months m ON m.id = p.id",
    "recursive": "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 4) "
    "SELECT p.name, r.n FROM products p JOIN r ON r.n = p.cat_id",
    "distinct_scalar": "SELECT count(*) FROM products p WHERE p.cat_id = "
    "(SELECT DISTINCT seq - 99 FROM months WHERE year = 2001 AND moy = 1)",
    "untyped_union": "SELECT tag FROM products UNION SELECT price FROM products",
    "variant_node": "SELECT n, count(*) FROM (SELECT city, count(*) AS n FROM cats GROUP BY city) GROUP BY n",
}


def _write(conn: matview.Connection, rng: random.Random) -> None:
    kind = rng.randrange(5)
    if kind < 2:
        conn.execute(
            "INSERT OR REPLACE INTO products VALUES (?, ?, ?, ?, ?)",
            (
                rng.randrange(10),
                rng.randrange(5),
                rng.choice("xyzw"),
                rng.choice([5, 5.0, 7, None]),
                rng.choice([1, 1.0, "a", None]),
            ),
        )
    elif kind == 2:
        conn.execute(
            "INSERT OR REPLACE INTO cats VALUES (?, ?, ?)",
            (rng.randrange(5), rng.choice("abc"), rng.choice(["Oslo", "OSLO", "Rome"])),
        )
    elif kind == 3:
        conn.execute(
            "INSERT OR REPLACE INTO months VALUES (?, ?, 2001, ?)",
            (rng.randrange(5), rng.choice([100, 101, 102]), rng.randrange(1, 3)),
        )
    else:
        conn.execute(f"DELETE FROM {rng.choice(['cats', 'products', 'months'])} WHERE id = ?", (rng.randrange(10),))


@pytest.mark.parametrize("seed", range(2))
def test_refused_shapes_are_recomputed_whole(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "db.sqlite"
    conn = matview.connect(str(path))
    for sql in SETUP:
        conn.execute(sql)
    live = create_views_both_modes(conn, VIEWS)
    for name in live:
        assert "recomputed whole" in conn.view(name).explain()
    conn = drive_write_mix(path, conn, live, _write, random.Random(seed), steps=10)
    conn.close()
    stock_sqlite3(path, ["UPDATE products SET price = 5 WHERE price = 5.0", "DELETE FROM cats WHERE id = 2"])
    conn = matview.connect(str(path))
    assert_views_match(conn, live)
    # an index that changes how SQLite joins (the order GROUP_CONCAT and the bare column follow):
    # the same rows, or broken until REFRESH — never stale
    conn.execute("CREATE INDEX by_cat ON products(cat_id, name DESC)")
    for name, select in live.items():
        try:
            assert_views_match(conn, {name: select})
        except matview.Error as exc:
            assert "REFRESH" in str(exc)
            conn.execute(f"REFRESH MATERIALIZED VIEW {name}")
            assert_views_match(conn, {name: select})


@pytest.mark.parametrize(
    ("select", "words"),
    [
        ("SELECT c.city, random() FROM cats c JOIN products p ON p.cat_id = c.id", "random"),
        (
            "SELECT c.city, group_concat(p.name) FROM cats c JOIN temp_things p ON p.cat_id = c.id GROUP BY 1",
            "temporary",
        ),
    ],
)
def test_what_whole_recompute_cannot_do_stays_refused_in_the_engines_words(
    tmp_path: Path, select: str, words: str
) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in SETUP:
        conn.execute(sql)
    conn.execute("CREATE TEMP TABLE temp_things(cat_id, name)")
    with pytest.raises(matview.UnsupportedQuery, match=words):
        conn.execute(f"CREATE MATERIALIZED VIEW v AS {select}")
    assert conn.views() == []


def test_recompute_never_refuses(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in SETUP:
        conn.execute(sql)
    with pytest.raises(matview.UnsupportedQuery, match="GROUP_CONCAT over a join"):
        conn.execute(f"CREATE MATERIALIZED VIEW v WITH (recompute = 'never') AS {VIEWS['concat_join']}")
    with pytest.raises(matview.UnsupportedQuery, match="LIMIT"):
        conn.execute("CREATE MATERIALIZED VIEW v WITH (recompute = 'never') AS SELECT * FROM cats LIMIT 1")
    with pytest.raises(matview.Error, match="recompute must be"):
        conn.execute("CREATE MATERIALIZED VIEW v WITH (recompute = 'sometimes') AS SELECT * FROM cats")
    assert conn.views() == []


def test_a_refusal_found_once_compiled_falls_back_too(tmp_path: Path) -> None:
    """A GROUP_CONCAT that SQLite would answer through one of matview's indexes (index order, not
    the rowid order kept incrementally) is found only once the plan is compiled: recomputed whole
    instead, exact; REFRESH keeps it so; `recompute = 'never'` refuses it by name."""
    path = tmp_path / "db.sqlite"
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, g TEXT, k INTEGER)")
    conn.execute("CREATE TABLE t2(id INTEGER PRIMARY KEY, x INTEGER)")
    conn.execute("INSERT INTO t(g, k) VALUES ('b', 3), ('a', 2), ('c', 1)")
    conn.execute("CREATE MATERIALIZED VIEW j AS SELECT t.id, t2.id AS i2 FROM t JOIN t2 ON t.k = t2.x")
    select = "SELECT group_concat(k) AS ks FROM t"
    with pytest.raises(matview.UnsupportedQuery, match="GROUP_CONCAT: SQLite reads t through an index"):
        conn.execute(f"CREATE MATERIALIZED VIEW never WITH (recompute = 'never') AS {select}")
    live = create_views_both_modes(conn, {"gc": select})
    assert "recomputed whole" in conn.view("gc_imm").explain()
    rng = random.Random(5)
    for step in range(8):
        with conn:
            conn.execute("INSERT INTO t(g, k) VALUES (?, ?)", (rng.choice("abc"), rng.randrange(9)))
            if step % 3 == 2:
                conn.execute("DELETE FROM t WHERE id = (SELECT min(id) FROM t)")
        assert_views_match(conn, live)
    conn.execute("REFRESH MATERIALIZED VIEW gc_imm")
    assert "recomputed whole" in conn.view("gc_imm").explain()
    conn.close()
    conn = matview.connect(str(path))
    assert_views_match(conn, live)
