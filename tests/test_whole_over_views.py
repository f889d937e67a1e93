"""Views recomputed whole that read materialized views: a top N or a ranking over a summary
view (`sql.whole`). The SELECT reads each materialized view as any reader does, through its
virtual table (stored rows with pending changes merged), so its rows are exact whether the
view it reads has folded or not; it folds after that view, in the same transaction. Checked
against the SELECT with every materialized view it reads written out as its own SELECT, in
every pair of maintenance modes, under random writes, rollbacks, savepoints, reads inside a
transaction, reopen, a stock `sqlite3` writer, REFRESH and chains of such views."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import apsw
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import bag, savepoints_released_and_rolled_back
from stock import stock_sqlite3

import matview

SETUP = [
    "CREATE TABLE sales(id INTEGER PRIMARY KEY, region TEXT COLLATE NOCASE, amount, day TEXT)",
    "CREATE TABLE regions(name TEXT PRIMARY KEY COLLATE NOCASE, manager TEXT)",
    "INSERT INTO regions VALUES ('north', 'ann'), ('south', 'bob'), ('East', NULL)",
    "INSERT INTO sales VALUES (1, 'north', 10, 'd1'), (2, 'South', 7, 'd1'), (3, 'east', 7.0, 'd2'), "
    "(4, NULL, 3, 'd2'), (5, 'NORTH', 1, 'd3')",
]
BY_REGION = "SELECT region, sum(amount) AS total, count(*) AS n FROM sales GROUP BY region"
MANAGED = "SELECT s.region, r.manager, s.amount FROM sales s JOIN regions r ON r.name = s.region"
#: typed BINARY columns: its TEMP shadow is a view, not a virtual table
BY_DAY = "SELECT day, count(*) AS n FROM sales GROUP BY day"
#: name: the SELECT over the upstream views `by_region` and `managed`
DOWNSTREAM = {
    "top2": "SELECT region, total FROM {by_region} ORDER BY total DESC, region LIMIT 2",
    "ranked": "SELECT region, rank() OVER (ORDER BY n DESC) AS r, total FROM {by_region}",
    "share": "SELECT region, total, total * 1.0 / sum(total) OVER () AS share FROM {by_region}",
    # (* 1.0: which of 7 and 7.0 max() returns follows the scan order, the view's or the tables')
    "biggest_sale": "SELECT manager, max(amount) * 1.0 AS biggest FROM {managed} GROUP BY manager "
    "ORDER BY biggest DESC, manager LIMIT 1",
    "top_days": "SELECT day, n FROM {by_day} ORDER BY n DESC, day LIMIT 2",
    "both": "SELECT b.region, b.total, m.manager FROM {by_region} b JOIN {managed} m ON m.region = b.region "
    "ORDER BY b.total DESC, b.region, m.amount, m.manager LIMIT 3",
}


def _oracle(select: str) -> str:
    """`select` with the views it reads written out as their SELECTs (the base tables' truth)."""
    return select.format(by_region=f"({BY_REGION})", managed=f"({MANAGED})", by_day=f"({BY_DAY})")


def _named(select: str) -> str:
    return select.format(by_region="by_region", managed="managed", by_day="by_day")


def _check(conn: matview.Connection, live: dict[str, str]) -> None:
    """Each view equals its SELECT over the base tables (every ORDER BY here decides its ties),
    and its SELECT as written, over the views it reads."""
    for name, select in live.items():
        got = bag(conn.execute(f"SELECT * FROM {name}").fetchall())
        assert got == bag(conn.apsw.execute(_oracle(select)).fetchall()), name
        assert got == bag(conn.execute(_named(select)).fetchall()), name


def _write(conn: matview.Connection, rng: random.Random) -> None:
    kind = rng.randrange(5)
    if kind < 2:
        conn.execute(
            "INSERT OR REPLACE INTO sales VALUES (?, ?, ?, ?)",
            (
                rng.randrange(15),
                rng.choice(["north", "NORTH", "south", "east", "west", None]),
                rng.choice([1, 2, 5, 7, 7.0, 10, None, "x"]),
                rng.choice(["d1", "d2", "d3"]),
            ),
        )
    elif kind == 2:
        conn.execute("DELETE FROM sales WHERE id = ?", (rng.randrange(15),))
    elif kind == 3:
        conn.execute("UPDATE sales SET amount = amount + 3 WHERE region = ?", (rng.choice(["north", "south"]),))
    else:
        conn.execute(
            "INSERT OR REPLACE INTO regions VALUES (?, ?)",
            (rng.choice(["north", "west", "EAST"]), rng.choice(["ann", "cy", None])),
        )


def _create(conn: matview.Connection, upstream_mode: str, downstream_mode: str) -> dict[str, str]:
    for sql in SETUP:
        conn.execute(sql)
    conn.execute(f"CREATE MATERIALIZED VIEW by_region WITH (maintenance = '{upstream_mode}') AS {BY_REGION}")
    conn.execute(f"CREATE MATERIALIZED VIEW managed WITH (maintenance = '{upstream_mode}') AS {MANAGED}")
    conn.execute(f"CREATE MATERIALIZED VIEW by_day WITH (maintenance = '{upstream_mode}') AS {BY_DAY}")
    for name, select in DOWNSTREAM.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} WITH (maintenance = '{downstream_mode}') AS {_named(select)}")
    return dict(DOWNSTREAM)


@pytest.mark.parametrize("upstream_mode", ["immediate", "deferred"])
@pytest.mark.parametrize("downstream_mode", ["immediate", "deferred"])
def test_top_n_and_windows_over_materialized_views(tmp_path: Path, upstream_mode: str, downstream_mode: str) -> None:
    path = tmp_path / "db.sqlite"
    conn = matview.connect(str(path))
    live = _create(conn, upstream_mode, downstream_mode)
    assert "recomputed whole" in conn.view("top2").explain()
    rng = random.Random(f"{upstream_mode}-{downstream_mode}")
    _check(conn, live)
    for step in range(14):
        if step == 3:  # rolled back
            conn.execute("BEGIN")
            _write(conn, rng)
            _check(conn, live)  # (read inside the open transaction: the write is seen)
            conn.execute("ROLLBACK")
        if step == 6:  # a savepoint released, one rolled back
            savepoints_released_and_rolled_back(conn, lambda c: _write(c, rng), lambda c: _check(c, live))
        if step == 9:  # another program, which has never heard of matview
            conn.close()
            stock_sqlite3(
                path, ["UPDATE sales SET amount = 50 WHERE id % 3 = 0", "DELETE FROM regions WHERE name = 'south'"]
            )
            conn = matview.connect(str(path))
        if step == 11:
            conn.execute("REFRESH MATERIALIZED VIEW by_region")
        with conn:
            for _ in range(rng.randint(1, 4)):
                _write(conn, rng)
        if step % 5 == 4:
            conn.close()
            conn = matview.connect(str(path))
        _check(conn, live)
    conn.flush()
    _check(conn, live)
    conn.close()


def test_a_chain_of_views_recomputed_whole(tmp_path: Path) -> None:
    """A ranking over a top N over a summary view, and an aggregate over the ranking."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    _create(conn, "deferred", "immediate")
    conn.execute(
        "CREATE MATERIALIZED VIEW top2_ranked WITH (maintenance = 'deferred') AS "
        "SELECT region, row_number() OVER (ORDER BY total) AS k FROM top2"
    )
    conn.execute("CREATE MATERIALIZED VIEW top2_count AS SELECT count(*) AS n, max(k) AS k FROM top2_ranked")
    live = {
        "top2_ranked": f"SELECT region, row_number() OVER (ORDER BY total) AS k FROM ({_oracle(DOWNSTREAM['top2'])})",
        "top2_count": "SELECT count(*) AS n, max(k) AS k FROM "
        f"(SELECT region, row_number() OVER (ORDER BY total) AS k FROM ({_oracle(DOWNSTREAM['top2'])}))",
    }
    rng = random.Random(3)
    for _ in range(15):
        with conn:
            _write(conn, rng)
        _check(conn, live)


def test_a_view_read_by_one_recomputed_whole_is_dropped_last(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    _create(conn, "immediate", "immediate")
    with pytest.raises(matview.Error, match="top2"):
        conn.execute("DROP MATERIALIZED VIEW by_region")
    for name in DOWNSTREAM:
        conn.execute(f"DROP MATERIALIZED VIEW {name}")
    conn.execute("DROP MATERIALIZED VIEW by_region")
    conn.execute("INSERT INTO sales VALUES (20, 'north', 1, 'd9')")


def test_its_columns_keep_the_view_columns_types_and_collations(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    _create(conn, "immediate", "immediate")
    for where in ("region = 'NORTH'", "region > 'M'", "total = '17'"):
        got = conn.execute(f"SELECT * FROM top2 WHERE {where}").fetchall()
        want = conn.apsw.execute(f"SELECT * FROM ({_oracle(DOWNSTREAM['top2'])}) WHERE {where}").fetchall()
        assert bag(got) == bag(want), where


def test_reading_the_file_copy_of_a_view_is_refused(tmp_path: Path) -> None:
    """main.<v> is the plain view other programs read (and plain views of the file, which see only
    main): as of the last fold, not exact."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in SETUP:
        conn.execute(sql)
    conn.execute(f"CREATE MATERIALIZED VIEW by_region AS {BY_REGION}")
    conn.execute("CREATE VIEW positive AS SELECT * FROM by_region WHERE total > 0")  # (reads main.by_region)
    for source in ("main.by_region", "positive"):
        with pytest.raises(matview.UnsupportedQuery, match=r"by_region as the file stores it"):
            conn.execute(f"CREATE MATERIALIZED VIEW v AS SELECT * FROM {source} ORDER BY total LIMIT 1")


def test_a_cte_named_like_a_view_hides_nothing(tmp_path: Path) -> None:
    """SQLite tags a CTE's reads with the CTE's name: one named like a materialized view must
    not pass for that view's shadow (review 27: the base table read inside it went uncaptured,
    and the view stale)."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    _create(conn, "immediate", "immediate")
    conn.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, region TEXT, note TEXT)")
    conn.execute("INSERT INTO notes VALUES (1, 'north', 'x'), (2, 'south', 'y')")
    select = (
        "WITH by_region AS (SELECT n.region, n.note, q.total FROM notes n JOIN temp.by_region q "
        "ON q.region = n.region) SELECT region, note, total FROM by_region ORDER BY note DESC LIMIT 5"
    )
    conn.execute(f"CREATE MATERIALIZED VIEW tagged AS {select}")
    conn.execute("UPDATE notes SET note = 'z' WHERE id = 1")
    conn.execute("INSERT INTO notes VALUES (3, 'SOUTH', 'w')")
    conn.execute("INSERT INTO sales VALUES (30, 'south', 100, 'd1')")
    assert bag(conn.execute("SELECT * FROM tagged").fetchall()) == bag(conn.execute(select).fetchall())
    assert conn.view("tagged").verify()
    conn.execute("CREATE TEMP TABLE scratch(region, note)")
    with pytest.raises(matview.UnsupportedQuery, match="temporary table"):
        conn.execute(
            "CREATE MATERIALIZED VIEW w AS WITH by_region AS (SELECT s.region FROM scratch s JOIN temp.by_region q "
            "ON q.region = s.region) SELECT region FROM by_region LIMIT 3"
        )
    with pytest.raises(matview.UnsupportedQuery, match="matview's own table"):
        conn.execute("CREATE MATERIALIZED VIEW w AS SELECT * FROM __dbsp_view_by_region LIMIT 3")


def test_a_temp_table_named_like_the_view_it_reads_is_never_read(tmp_path: Path) -> None:
    """A connection with a TEMP table named like the upstream (made before matview was
    installed) cannot fold the view from it (review 27): its writes commit, the view's change
    waits (a read there says why), and the next connection folds it exactly."""
    path = tmp_path / "db.sqlite"
    conn = matview.connect(str(path))
    _create(conn, "immediate", "immediate")
    conn.close()
    raw = apsw.Connection(str(path))
    raw.execute("CREATE TEMP TABLE by_region(region, total, n)")
    raw.execute("INSERT INTO temp.by_region VALUES ('bogus', 999, 1)")
    conn = matview.install(raw)
    conn.execute("INSERT INTO sales VALUES (40, 'west', 500, 'd4')")
    with pytest.raises(matview.Error):
        conn.execute("SELECT * FROM top2").fetchall()
    conn.close()
    conn = matview.connect(str(path))
    _check(conn, {"top2": DOWNSTREAM["top2"]})
    assert conn.view("top2").verify()


def test_refresh_of_the_view_it_reads_breaks_nothing(tmp_path: Path) -> None:
    """REFRESH of the upstream or of the view recomputed whole leaves a view over that one
    readable (review 27: its plan, read while its state was rebuilt, looked changed)."""
    path = tmp_path / "db.sqlite"
    conn = matview.connect(str(path))
    _create(conn, "immediate", "immediate")
    conn.execute("CREATE MATERIALIZED VIEW top2_sum AS SELECT count(*) AS n, sum(total) AS s FROM top2")
    live = {"top2_sum": f"SELECT count(*) AS n, sum(total) AS s FROM ({_oracle(DOWNSTREAM['top2'])})"}
    for name in ("by_region", "top2", "top2_sum"):
        conn.execute(f"REFRESH MATERIALIZED VIEW {name}")
        conn.execute("INSERT INTO sales(region, amount, day) VALUES ('east', 4, 'd9')")
        _check(conn, live)
    conn.close()
    conn = matview.connect(str(path))
    _check(conn, live)


def test_matviews_own_tables_cannot_be_named_even_as_strings(tmp_path: Path) -> None:
    """SQLite takes a string in FROM for a name: `'__dbsp_view_w'` read another view's storage,
    uncaptured (review 28)."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    _create(conn, "immediate", "immediate")
    for read in ("'__dbsp_view_managed'", "'pragma_schema_version'", '"__DBSP_VIEW_MANAGED"'):
        with pytest.raises(matview.UnsupportedQuery, match="matview's own table"):
            conn.execute(
                f"CREATE MATERIALIZED VIEW w AS SELECT b.region, (SELECT count(*) FROM {read}) AS k "
                "FROM by_region b ORDER BY b.total LIMIT 5"
            )


def test_a_users_temp_view_dressed_as_a_shadow_is_never_read(tmp_path: Path) -> None:
    """A TEMP view whose text looks like matview's shadow, made before matview was installed:
    the registry checked the view's plan through it before the shadows were made, broke it on
    that connection only, and a write there advanced its progress unfolded (review 28)."""
    path = tmp_path / "db.sqlite"
    conn = matview.connect(str(path))
    _create(conn, "immediate", "immediate")
    conn.close()
    raw = apsw.Connection(str(path))
    raw.execute(
        "CREATE TEMP VIEW by_region AS SELECT 'bogus' AS region, 999 AS total, 1 AS n /* temp.\"__dbsp_pending_ */"
    )
    conn = matview.install(raw)
    conn.execute("INSERT INTO sales VALUES (41, 'west', 500, 'd4')")
    _check(conn, {"top2": DOWNSTREAM["top2"]})
    conn.close()
    conn = matview.connect(str(path))
    _check(conn, {"top2": DOWNSTREAM["top2"]})
    assert conn.view("top2").verify()


@pytest.mark.parametrize("writer", ["matview", "stock"])
def test_a_chain_of_whole_views_leaves_a_sibling_its_upstreams_change(tmp_path: Path, writer: str) -> None:
    """Found by the cross-feature fuzzer with whole recompute on: a fold of views over views
    folds `up` (a deferred LEFT JOIN chain), then `mid` and `top` (recomputed whole, each over
    the one before), then `sibling` (incremental over `up`). Reading `mid`'s shadow while `top`
    folded recomputed `mid`'s pending ΔV, which wrote `up`'s temp ΔV table as of then (empty:
    `up` had folded), so `sibling` read no change and kept a deleted row. The fold now puts its
    own ΔVs back after a reader's computation (`fold._fold_together`)."""
    path = tmp_path / "db.sqlite"
    conn = matview.connect(str(path))
    for sql in [
        "CREATE TABLE t0(id INTEGER PRIMARY KEY, k INTEGER, v INTEGER)",
        "CREATE TABLE t1(id INTEGER PRIMARY KEY, k TEXT, v INTEGER)",
        "INSERT INTO t0 VALUES (9, 1, 1)",
        "INSERT INTO t1 VALUES (10, '1', 2)",
    ]:
        conn.execute(sql)
    live = {
        "up": "SELECT x.id AS id, y.id AS bid, z.id AS cid, z.v AS g FROM t1 x LEFT JOIN t0 y ON x.k = y.k "
        "LEFT JOIN t0 z ON z.v = y.v",
        "mid": "SELECT t1.id AS id, q.g AS h FROM t1 LEFT JOIN up q ON q.g = t1.v ORDER BY 1, 2 LIMIT 50",
        "sibling": "SELECT * FROM up WHERE g > 0",
        "top": "SELECT x.id AS id, q.h AS j FROM t0 x LEFT JOIN mid q ON q.h = x.v ORDER BY 1, 2 LIMIT 50",
    }
    modes = {"up": "deferred", "mid": "immediate", "sibling": "deferred", "top": "immediate"}
    for name, select in live.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} WITH (maintenance = '{modes[name]}') AS {select}")
    writes = ["DELETE FROM t0 WHERE id = 9", "INSERT INTO t0 VALUES (13, NULL, 2)"]
    if writer == "stock":
        conn.close()
        stock_sqlite3(path, writes)
        conn = matview.connect(str(path))
        conn.execute("BEGIN")
        conn.execute("COMMIT")
    else:
        with conn:
            for sql in writes:
                conn.execute(sql)
    oracle = {
        "up": live["up"],
        "mid": live["mid"].replace("JOIN up q", f"JOIN ({live['up']}) q"),
        "sibling": f"SELECT * FROM ({live['up']}) WHERE g > 0",
    }
    oracle["top"] = live["top"].replace("JOIN mid q", f"JOIN ({oracle['mid']}) q")
    _check(conn, oracle)


def test_count_star_over_a_view_reads_its_shadow(tmp_path: Path) -> None:
    """Found by hunt 27: SQLite's authorizer names no database for the table a count(*) counts,
    which was taken for main (the file's copy) and refused with a message that was not true.
    Unqualified, the name is the view's shadow; `main.<v>` and a plain view naming it stay refused."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE sales(id INTEGER PRIMARY KEY, region TEXT, amount INTEGER)")
    conn.execute(
        "CREATE MATERIALIZED VIEW by_region WITH (maintenance = 'deferred') AS "
        "SELECT region, sum(amount) AS total FROM sales GROUP BY region"
    )
    conn.execute("CREATE VIEW region_count AS SELECT count(*) AS n FROM by_region")
    for select in [
        "SELECT count(*) AS n FROM main.by_region ORDER BY n LIMIT 1",
        'SELECT (SELECT count(*) FROM "main"."by_region") AS n',
        "SELECT n FROM region_count LIMIT 5",
    ]:
        with pytest.raises(matview.UnsupportedQuery, match="as the file stores it"):
            conn.execute(f"CREATE MATERIALIZED VIEW w AS {select}")
    select = "SELECT (SELECT count(*) FROM by_region) AS n, (SELECT count(*) FROM sales) AS m"
    conn.execute(f"CREATE MATERIALIZED VIEW w AS {select}")
    oracle = (
        "SELECT (SELECT count(DISTINCT region) + max(region IS NULL) FROM sales) AS n, "
        "(SELECT count(*) FROM sales) AS m"
    )
    for i in range(6):
        with conn:
            conn.execute("INSERT INTO sales(region, amount) VALUES (?, 1)", (f"r{i % 3}" if i != 4 else None,))
        assert bag(conn.execute("SELECT * FROM w").fetchall()) == bag(conn.execute(oracle).fetchall())
