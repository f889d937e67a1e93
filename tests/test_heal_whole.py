"""A view whose incremental result only SQLite's scan order decides (MIN/MAX tied between 1 and
1.0, a GROUP BY or DISTINCT value with several spellings) is switched to whole recompute in the
transaction that finds it (`matview/fallback.py`): it reads as its SELECT, never as an error."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import apsw
import pytest
from oracle import MODES, assert_view_matches
from stock import stock_sqlite3

import matview

pytestmark = pytest.mark.fall_back_to_whole

TIE = "SELECT g, min(x) AS lo, max(x) AS hi, count(*) AS n FROM t GROUP BY g"
SPELLINGS = "SELECT a.name, sum(b.w) AS s FROM a JOIN b ON a.k = b.k GROUP BY a.name"
DISTINCT = "SELECT DISTINCT a.name FROM a JOIN b ON a.k = b.k"


def make(path: Path) -> matview.Connection:
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, g, x)")
    conn.execute("INSERT INTO t (g, x) VALUES (1, 2), (1, 1), (2, 5), (3, 'a')")
    conn.execute("CREATE TABLE a (id INTEGER PRIMARY KEY, name TEXT COLLATE NOCASE, k INT)")
    conn.execute("CREATE TABLE b (k INT, w INT)")
    conn.execute("INSERT INTO a (name, k) VALUES ('x', 1), ('y', 2)")
    conn.execute("INSERT INTO b VALUES (1, 10), (2, 20)")
    return conn


def whole(conn: matview.Connection, view: str) -> bool:
    return "recomputed whole" in conn.view(view).explain()


def create(conn: matview.Connection, views: dict[str, str], mode: str = "immediate") -> None:
    for name, sql in views.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} WITH (maintenance = '{mode}') AS {sql}")


def check(conn: matview.Connection, views: dict[str, str]) -> None:
    for name, sql in views.items():
        assert_view_matches(conn, name, sql)
        assert conn.view(name).verify()


@pytest.mark.parametrize("mode", MODES)
def test_a_fold_that_meets_a_tie_switches_to_whole(tmp_path: Path, mode: str) -> None:
    conn = make(tmp_path / "t.db")
    views = {"lohi": TIE, "spelled": SPELLINGS, "uniq": DISTINCT}
    create(conn, views, mode)
    assert not any(whole(conn, name) for name in views)
    with conn:
        conn.execute("INSERT INTO t (g, x) VALUES (1, 1.0), (2, 5.0)")  # ties 1 = 1.0, 5 = 5.0
        conn.execute("INSERT INTO a (name, k) VALUES ('X', 2)")  # 'x' and 'X' in one group
    check(conn, views)
    assert all(whole(conn, name) for name in views)
    assert "tied" in conn.view("lohi").explain()
    # maintained whole from now on: ties leave and come back
    for statement in (
        "DELETE FROM t WHERE x = 1.0",
        "UPDATE t SET x = 1.0 WHERE x = 1 AND g = 1",
        "INSERT INTO t (g, x) VALUES (4, 7), (4, 7.0)",
        "DELETE FROM a WHERE name = 'x'",
        "INSERT INTO a (name, k) VALUES ('Y', 1)",
    ):
        conn.execute(statement)
        check(conn, views)
    conn.close()
    reopened = matview.connect(str(tmp_path / "t.db"))
    assert whole(reopened, "lohi")
    reopened.execute("INSERT INTO t (g, x) VALUES (1, 0.5)")
    check(reopened, views)


def test_create_over_a_tie_is_whole_and_refresh_heals(tmp_path: Path) -> None:
    conn = make(tmp_path / "c.db")
    conn.execute("INSERT INTO t (g, x) VALUES (1, 1.0)")
    conn.execute(f"CREATE MATERIALIZED VIEW lohi AS {TIE}")
    assert whole(conn, "lohi")
    check(conn, {"lohi": TIE})
    conn.execute(f"CREATE MATERIALIZED VIEW later AS {TIE.replace('GROUP BY g', 'WHERE g <> 1 GROUP BY g')}")
    assert not whole(conn, "later")
    conn.execute("INSERT INTO t (g, x) VALUES (2, 5.0)")
    conn.execute("REFRESH MATERIALIZED VIEW later")
    assert whole(conn, "later")
    check(conn, {"later": TIE.replace("GROUP BY g", "WHERE g <> 1 GROUP BY g")})


def test_recompute_never_keeps_the_refusal_on_read(tmp_path: Path) -> None:
    conn = make(tmp_path / "n.db")
    conn.execute(f"CREATE MATERIALIZED VIEW lohi WITH (recompute = 'never') AS {TIE}")
    conn.execute("INSERT INTO t (g, x) VALUES (1, 1.0)")
    with pytest.raises(matview.Error, match="tied"):
        conn.execute("SELECT * FROM lohi").fetchall()
    conn.execute("REFRESH MATERIALIZED VIEW lohi")
    with pytest.raises(matview.Error, match="tied"):
        conn.execute("SELECT * FROM lohi").fetchall()
    assert not whole(conn, "lohi")
    conn.execute("DELETE FROM t WHERE x = 1.0")
    check(conn, {"lohi": TIE})


def test_a_rolled_back_heal_leaves_the_view_incremental(tmp_path: Path) -> None:
    conn = make(tmp_path / "r.db")
    conn.execute(f"CREATE MATERIALIZED VIEW lohi AS {TIE}")
    conn.execute("BEGIN")
    conn.execute("SAVEPOINT outer_sp")
    conn.execute("SAVEPOINT inner_sp")
    conn.execute("INSERT INTO t (g, x) VALUES (1, 1.0)")
    conn.execute("RELEASE inner_sp")  # (folds: the heal happens here)
    conn.execute("ROLLBACK TO outer_sp")
    conn.execute("INSERT INTO t (g, x) VALUES (1, 3)")
    conn.execute("COMMIT")
    assert not whole(conn, "lohi")
    check(conn, {"lohi": TIE})
    with conn:
        conn.execute("INSERT INTO t (g, x) VALUES (2, 5.0)")
    assert whole(conn, "lohi")
    conn.execute("BEGIN")
    conn.execute("DELETE FROM t WHERE g = 2")
    conn.execute("ROLLBACK")
    check(conn, {"lohi": TIE})
    conn.close()
    other = matview.connect(str(tmp_path / "r.db"))
    other.execute("INSERT INTO t (g, x) VALUES (3, 'a')")
    check(other, {"lohi": TIE})


def test_a_view_over_a_healed_view_and_a_stock_writer(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    conn = make(path)
    conn.execute(f"CREATE MATERIALIZED VIEW lohi AS {TIE}")
    conn.execute("CREATE MATERIALIZED VIEW top AS SELECT n, count(*) AS c FROM lohi GROUP BY n")
    conn.execute("INSERT INTO t (g, x) VALUES (1, 1.0)")
    check(conn, {"lohi": TIE, "top": f"SELECT n, count(*) AS c FROM ({TIE}) GROUP BY n"})
    assert whole(conn, "lohi")
    conn.close()
    stock_sqlite3(path, ["INSERT INTO t (g, x) VALUES (5, 2), (5, 2.0)", "DELETE FROM t WHERE x = 1.0"])
    conn = matview.connect(str(path))
    check(conn, {"lohi": TIE, "top": f"SELECT n, count(*) AS c FROM ({TIE}) GROUP BY n"})


#: a subquery's MAX over an untyped column: its order-free twin raises on a 5 / 5.0 tie
SUBQUERY = "SELECT id, g FROM t WHERE x = (SELECT max(x) FROM t AS u WHERE u.g = t.g)"


@pytest.mark.parametrize("mode", MODES)
def test_a_subquery_tie_switches_to_whole(tmp_path: Path, mode: str) -> None:
    conn = make(tmp_path / "q.db")
    conn.execute(f"CREATE MATERIALIZED VIEW peak WITH (maintenance = '{mode}') AS {SUBQUERY}")
    assert not whole(conn, "peak")
    conn.execute("INSERT INTO t (g, x) VALUES (2, 5.0)")
    check(conn, {"peak": SUBQUERY})
    assert whole(conn, "peak")
    conn.execute("DELETE FROM t WHERE x = 5")
    check(conn, {"peak": SUBQUERY})


def test_create_and_refresh_over_a_subquery_tie(tmp_path: Path) -> None:
    conn = make(tmp_path / "cq.db")
    conn.execute("INSERT INTO t (g, x) VALUES (2, 5.0)")
    conn.execute(f"CREATE MATERIALIZED VIEW peak AS {SUBQUERY}")
    assert whole(conn, "peak")
    check(conn, {"peak": SUBQUERY})
    conn.execute("DELETE FROM t WHERE typeof(x) = 'real'")
    conn.execute(f"CREATE MATERIALIZED VIEW again AS {SUBQUERY}")
    assert not whole(conn, "again")
    with conn:  # (through the wrapper's own apsw connection: no fold before the REFRESH)
        conn.apsw.execute("INSERT INTO t (g, x) VALUES (2, 5.0)")
        conn.execute("REFRESH MATERIALIZED VIEW again")
    assert whole(conn, "again")
    check(conn, {"again": SUBQUERY})


@pytest.mark.parametrize("mode", MODES)
def test_ties_under_a_users_unique_index_heal(tmp_path: Path, mode: str) -> None:
    """The incremental ΔV put one marker in `lo` for two groups, which collided in the user's
    UNIQUE index before the fold could heal: a raw ConstraintError (hunt 29). Now the heal's ΔV
    is applied instead of it."""
    conn = matview.connect(str(tmp_path / "u.db"))
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, g, x)")
    conn.executemany("INSERT INTO t (g, x) VALUES (?, ?)", [(i, i) for i in range(3)])
    lohi = "SELECT g, min(x) AS lo, max(x) AS hi FROM t GROUP BY g"
    conn.execute(f"CREATE MATERIALIZED VIEW lohi WITH (maintenance = '{mode}') AS {lohi}")
    conn.execute("CREATE UNIQUE INDEX lohi_lo ON lohi (lo)")
    conn.executemany("INSERT INTO t (g, x) VALUES (?, ?)", [(i, float(i)) for i in range(3)])
    check(conn, {"lohi": lohi})
    assert whole(conn, "lohi")


def test_a_collate_in_the_select_list_heals_and_refreshes(tmp_path: Path) -> None:
    """Whole recompute reads `name COLLATE NOCASE` as a BINARY column: the heal keeps the
    view's own columns, and a REFRESH of the healed view keeps them too (hunt 29)."""
    conn = make(tmp_path / "k.db")
    conn.execute("CREATE TABLE c (id INTEGER PRIMARY KEY, name TEXT, k INT)")  # (BINARY)
    conn.execute("INSERT INTO c (name, k) VALUES ('x', 1), ('y', 2)")
    views = {
        "dn": "SELECT DISTINCT c.name COLLATE NOCASE AS n, b.k FROM c JOIN b ON c.k = b.k",
        "gn": "SELECT c.name COLLATE NOCASE AS n, count(*) AS m FROM c JOIN b ON c.k = b.k GROUP BY 1",
    }
    create(conn, views)
    assert not any(whole(conn, name) for name in views)
    conn.execute("INSERT INTO c (name, k) VALUES ('X', 1)")
    check(conn, views)
    for name in views:
        assert whole(conn, name)
        conn.execute(f"REFRESH MATERIALIZED VIEW {name}")
    check(conn, views)


def test_a_read_after_a_stock_writer_heals(tmp_path: Path) -> None:
    """A stock client's commit leaves an immediate view's changes pending until a matview
    connection commits; a read through one merged them and raised on the spelling it cannot
    choose (hunt 29). Now the read folds them first (another connection committed), and heals."""
    path = tmp_path / "w.db"
    conn = make(path)
    conn.execute(f"CREATE MATERIALIZED VIEW spelled AS {SPELLINGS}")
    assert_view_matches(conn, "spelled", SPELLINGS)
    stock_sqlite3(path, ["INSERT INTO a (name, k) VALUES ('X', 2)"])
    conn.execute("SELECT count(*) FROM b").fetchall()  # (a read naming no view: the fold waits for one)
    check(conn, {"spelled": SPELLINGS})
    assert whole(conn, "spelled")


def test_refresh_of_a_broken_view_reaches_its_subscribers(tmp_path: Path) -> None:
    """A healed view is broken by a user's index until REFRESH (whole recompute follows the
    plan); the REFRESH changed its rows, and delivered nothing to its or its readers'
    subscribers (hunt 29)."""
    conn = matview.connect(str(tmp_path / "f.db"))
    conn.execute("CREATE TABLE a (id INTEGER PRIMARY KEY, name TEXT COLLATE NOCASE, k INT)")
    conn.execute("CREATE TABLE b (id INTEGER PRIMARY KEY, k INT, w INT)")
    conn.execute("INSERT INTO a (name, k) VALUES ('x', 2), ('X', 1), ('y', 3)")
    conn.execute("INSERT INTO b (k, w) VALUES (1, 10), (2, 20), (3, 5), (1, 7)")
    summed = "SELECT a.name, sum(b.w) AS s FROM a JOIN b ON a.k = b.k GROUP BY a.name"
    conn.execute(f"CREATE MATERIALIZED VIEW v WITH (indexes = 'off') AS {summed}")
    conn.execute("CREATE MATERIALIZED VIEW top AS SELECT name, s FROM v WHERE s > 1")
    feeds = {name: conn.subscribe(name) for name in ("v", "top")}
    mirror = {name: Counter(conn.execute(f"SELECT * FROM {name}").fetchall()) for name in feeds}
    conn.execute("CREATE INDEX ak ON a (k)")
    conn.execute("REFRESH MATERIALIZED VIEW v")
    for name, feed in feeds.items():
        for change in feed:
            for row, weight in change.rows:
                mirror[name][row] += weight
        assert +mirror[name] == Counter(conn.execute(f"SELECT * FROM {name}").fetchall()), name


@pytest.mark.parametrize("reader", ["transaction", "query_only", "locked"])
def test_a_read_that_cannot_fold_reads_as_the_select(tmp_path: Path, reader: str) -> None:
    """A stock client's commit leaves changes that meet a tie or a spelling pending; a read
    that cannot fold them (inside a transaction, on a read-only connection, while another
    connection holds the write lock) raised on the marker until the next fold (hunt 29). Its
    pending ΔV is now the SELECT's rows − the stored ones, and the next fold heals."""
    path = tmp_path / "r.db"
    conn = make(path)
    views = {"spelled": SPELLINGS, "names": DISTINCT, "tie": TIE}
    create(conn, views)
    stock_sqlite3(path, ["INSERT INTO a (name, k) VALUES ('X', 2)", "INSERT INTO t (g, x) VALUES (1, 1.0)"])
    if reader == "transaction":
        conn.execute("BEGIN")
        check(conn, views)
        conn.execute("ROLLBACK")
    elif reader == "query_only":
        read_only = matview.connect(str(path))
        read_only.execute("PRAGMA query_only = 1")
        check(read_only, views)
        read_only.close()
    else:
        writer = apsw.Connection(str(path))
        writer.execute("BEGIN IMMEDIATE")
        check(conn, views)
        writer.execute("ROLLBACK")
        writer.close()
    assert not any(whole(conn, name) for name in views)  # (nothing folded yet)
    conn.execute("INSERT INTO b VALUES (3, 1)")
    check(conn, views)
    assert all(whole(conn, name) for name in views)


NODE_TIE = "SELECT s.g, s.m, u.label FROM (SELECT g, min(x) AS m FROM tt GROUP BY g) AS s JOIN u ON u.g = s.g"
NODE_CTE = (
    "WITH s AS (SELECT g, max(x) AS m, count(*) AS n FROM tt GROUP BY g) SELECT p.g, p.m, q.n FROM s AS p JOIN s AS q "
    "ON p.g = q.g"
)


def make_typed(path: Path) -> matview.Connection:
    """Typed group keys (an untyped or NOCASE one is refused in a node, so recomputed whole
    from the start): only the aggregated values tie."""
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE tt (id INTEGER PRIMARY KEY, g INT, x)")
    conn.execute("INSERT INTO tt (g, x) VALUES (1, 2), (1, 1), (2, 5), (3, 'a')")
    conn.execute("CREATE TABLE u (g INT, label TEXT)")
    conn.execute("INSERT INTO u VALUES (1, 'one'), (2, 'two')")
    return conn


def nodes(conn: matview.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM sqlite_master WHERE name LIKE '%dbsp_node%'").fetchall()[0][0])


@pytest.mark.parametrize("mode", MODES)
def test_a_tie_in_an_internal_node_recomputes_its_owner_whole(tmp_path: Path, mode: str) -> None:
    """A fold that met a tie in a view's aggregating FROM-subquery or CTE, maintained as an
    internal node, stalled the view: it read as an error, REFRESH too, until it was dropped.
    The owner is now recomputed whole in that transaction, its nodes dropped, and its ΔV
    reaches the views over it and the change feed."""
    conn = make_typed(tmp_path / "n.db")
    views = {"tie": NODE_TIE, "cte": NODE_CTE}
    create(conn, views, mode)
    assert not any(whole(conn, name) for name in views)
    conn.execute("CREATE MATERIALIZED VIEW over_tie AS SELECT label, m FROM tie WHERE g < 3")
    views["over_tie"] = "SELECT label, m FROM (" + NODE_TIE + ") WHERE g < 3"
    feed = conn.subscribe("tie")
    seen = Counter(conn.execute("SELECT * FROM tie").fetchall())
    assert nodes(conn) > 0
    with conn:
        conn.execute("INSERT INTO tt (g, x) VALUES (1, 1.0), (2, 5.0)")
        conn.execute("INSERT INTO u VALUES (3, 'three')")
    conn.flush()
    check(conn, views)
    assert whole(conn, "tie") and whole(conn, "cte") and nodes(conn) == 0
    for change in feed:
        for row, weight in change.rows:
            seen[row] += weight
    assert +seen == Counter(conn.execute(NODE_TIE).fetchall())
    conn.execute("INSERT INTO tt (g, x) VALUES (2, 4)")
    check(conn, views)
    conn.execute("REFRESH MATERIALIZED VIEW tie")
    check(conn, views)


def test_a_node_tie_a_read_cannot_fold_reads_as_the_select(tmp_path: Path) -> None:
    """A stock client's commit leaves a node's tie pending: a read inside a transaction reads the
    owner as its SELECT; a ROLLBACK undoes the fold that recomputed it whole; the next one does it."""
    path = tmp_path / "r.db"
    conn = make_typed(path)
    conn.execute(f"CREATE MATERIALIZED VIEW tie AS {NODE_TIE}")
    stock_sqlite3(path, ["INSERT INTO tt (g, x) VALUES (1, 1.0)"])
    conn.execute("BEGIN")
    check(conn, {"tie": NODE_TIE})
    conn.execute("INSERT INTO u VALUES (3, 'three')")
    conn.flush()
    assert whole(conn, "tie") and nodes(conn) == 0
    conn.execute("ROLLBACK")
    # (raw: a statement through matview would fold the stock client's change again at once)
    assert conn.apsw.execute("SELECT count(*) FROM sqlite_master WHERE name LIKE '%dbsp_node%'").fetchall()[0][0]
    check(conn, {"tie": NODE_TIE})
    conn.execute("INSERT INTO u VALUES (3, 'three')")
    check(conn, {"tie": NODE_TIE})
    assert whole(conn, "tie") and nodes(conn) == 0


def test_recompute_never_keeps_a_node_tie_a_refusal(tmp_path: Path) -> None:
    conn = make_typed(tmp_path / "k.db")
    conn.execute(f"CREATE MATERIALIZED VIEW tie WITH (recompute = 'never') AS {NODE_TIE}")
    conn.execute("INSERT INTO tt (g, x) VALUES (1, 1.0)")  # (the write commits; the view stalls)
    with pytest.raises(matview.Error, match="tied"):
        conn.execute("SELECT * FROM tie").fetchall()
    assert conn.execute("SELECT count(*) FROM tt").fetchall() == [(5,)]


Q15_TIE = (
    "WITH r AS (SELECT g, sum(v) AS tot FROM q GROUP BY g) SELECT g, tot FROM r WHERE tot = (SELECT max(tot) FROM r)"
)


@pytest.mark.parametrize("mode", MODES)
def test_a_tie_in_the_subquery_of_a_view_with_nodes_recomputes_it_whole(tmp_path: Path, mode: str) -> None:
    """TPC-H Q15's shape over a SUM that is INTEGER in one group and REAL in another: the
    subquery's max() ties 2 and 2.0 in the view that owns the CTE's node (hunt 30). It read
    as an error, and a CREATE over the tie raised; both are now recomputed whole, as is a view
    whose node holds a tie when it is created."""
    conn = matview.connect(str(tmp_path / "q.db"))
    conn.execute("CREATE TABLE q (id INTEGER PRIMARY KEY, g TEXT, v)")
    conn.execute("INSERT INTO q VALUES (1, 'a', 1), (2, 'b', 2)")
    conn.execute(f"CREATE MATERIALIZED VIEW top WITH (maintenance = '{mode}') AS {Q15_TIE}")
    assert not whole(conn, "top") and nodes(conn) > 0
    conn.execute("INSERT INTO q VALUES (3, 'a', 1.0)")
    views = {"top": Q15_TIE}
    check(conn, views)
    max_of_max = Q15_TIE.replace("sum(v)", "max(v)")
    created = {"again": Q15_TIE, "extremes": max_of_max}
    create(conn, created, mode)
    views.update(created)
    conn.execute("INSERT INTO q VALUES (4, 'c', 3)")
    check(conn, views)
    assert all(whole(conn, name) for name in views) and nodes(conn) == 0


def test_an_owner_recomputed_whole_is_switched_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The view object the registry keeps held its heal request: every later fold switched the
    owner again (recompiled, state cleared), 35× the cost of a write with 60 views (hunt 30)."""
    from matview import owner_heal

    switched: list[str] = []
    switch = owner_heal.recompute_whole_instead
    monkeypatch.setattr(
        owner_heal, "recompute_whole_instead", lambda c, r, o, m: (switched.append(o.name), switch(c, r, o, m))[1]
    )
    conn = make_typed(tmp_path / "o.db")
    sql = "SELECT count(*) AS n, sum(mx) AS s FROM (SELECT g, max(x) AS mx FROM tt GROUP BY g)"
    conn.execute(f"CREATE MATERIALIZED VIEW owner AS {sql}")
    conn.execute(
        "CREATE MATERIALIZED VIEW other WITH (maintenance = 'deferred') AS SELECT g, count(*) FROM tt GROUP BY g"
    )
    conn.execute("INSERT INTO tt (g, x) VALUES (2, 5.0)")
    assert switched == ["owner"] and whole(conn, "owner")
    for value in range(3):
        conn.execute("INSERT INTO tt (g, x) VALUES (7, ?)", (value,))
        conn.execute("SELECT * FROM other").fetchall()
    assert switched == ["owner"]
    check(conn, {"owner": sql})


@pytest.mark.parametrize("mode", MODES)
def test_in_over_a_having_created_over_a_tie(tmp_path: Path, mode: str) -> None:
    """`g IN (SELECT g FROM t GROUP BY g HAVING max(v) >= 2)` created while a group's max tied 2
    and 2.0: the IN's node held the tie as a marker, which the HAVING took for false — the group
    was left out of the set for good (hunt 30, a wrong answer). The view is compiled whole."""
    conn = matview.connect(str(tmp_path / "h.db"))
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, g TEXT, v)")
    conn.execute("CREATE TABLE u (id INTEGER PRIMARY KEY, g TEXT)")
    conn.execute("INSERT INTO t VALUES (1, 'b', 2.0), (2, 'b', 2)")
    conn.execute("INSERT INTO u VALUES (1, 'b'), (2, 'c')")
    views = {
        "members": "SELECT id FROM u WHERE g IN (SELECT g FROM t GROUP BY g HAVING max(v) >= 2)",
        "others": "SELECT id FROM u WHERE g NOT IN (SELECT g FROM t GROUP BY g HAVING min(v) <= 2)",
    }
    create(conn, views, mode)
    check(conn, views)
    conn.execute("INSERT INTO u VALUES (3, 'b')")
    conn.execute("DELETE FROM t WHERE id = 1")
    check(conn, views)


def test_recompute_never_keeps_a_tie_in_the_subquery_of_a_view_with_nodes(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "n.db"))
    conn.execute("CREATE TABLE q (id INTEGER PRIMARY KEY, g TEXT, v)")
    conn.execute("INSERT INTO q VALUES (1, 'a', 1), (2, 'b', 2)")
    conn.execute(f"CREATE MATERIALIZED VIEW top WITH (recompute = 'never') AS {Q15_TIE}")
    conn.execute("INSERT INTO q VALUES (3, 'a', 1.0)")
    with pytest.raises(matview.Error, match="tied"):
        conn.execute("SELECT * FROM top").fetchall()
    conn.execute("INSERT INTO q VALUES (4, 'c', 1)")
    assert not whole(conn, "top") and nodes(conn) > 0
