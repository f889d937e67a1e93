# ruff: noqa: E501  (each query stays on one line, as an application writes it)
"""Hunt 57: analytics / reporting queries as people write them against SQLite — date bucketing
(strftime, date(…, 'start of month'), weekday weeks, julianday spans), CASE pivots, FILTER,
COUNT(DISTINCT), GROUP_CONCAT with and without ORDER BY, total/avg over mixed INTEGER/REAL/TEXT/
NULL/BLOB values, printf/format/round/iif/coalesce, LIKE/GLOB, json_extract and ->>, a star
schema (fact + dimensions, a NOCASE dimension key), LEFT JOIN lookups whose dimension row comes
and goes, self-joins, cohorts/retention through aggregating CTEs and derived tables, latest row
per customer, EXISTS / NOT EXISTS / IN / NOT IN (NULLs, affinity and NOCASE on either side, row
values, expressions, nested two levels), scalar subqueries, set operations of grouped arms,
views over views — under inserts, REPLACE, upserts, key updates, deletes emptying groups,
bulk loads past the recompute threshold, savepoints with ROLLBACK TO, rollbacks, stock sqlite3
writers, reopen; both maintenance modes; filtered reads of pending changes.

Found: a read inside a transaction (or on a read-only connection) evaluates the view's
expressions over every row image the pending change log holds, not over the net change: a row
whose expression raises (malformed JSON, abs(-2**63)) that was inserted and then fixed or
deleted before the read made the read raise `cannot be read: malformed JSON` although the
SELECT, run at that moment, returns rows. After a fold (a commit of a matview connection, a
flush) the view read right. Fixed: such a read reads the SELECT's rows − the stored ones
(`pending_read.pending_view_delta`) where that is exact (no sum/total/avg: SQLite rounds REAL sums
in scan order); a view with a sum still raises until the fold, which recomputes it.

Held (no wrong answer): everything else above."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import apsw
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_view_matches, assert_views_match, check_write_mix, create_views_both_modes
from stock import stock_sqlite3

import matview

MODES = ("immediate", "deferred")

# ------------------------------------------------------------------ found: raising row images

KINDS = "SELECT json_extract(body, '$.kind') AS kind, count(*) AS n FROM ev GROUP BY 1"


def _events(tmp_path: Path, mode: str) -> matview.Connection:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE ev(id INTEGER PRIMARY KEY, body TEXT, x INTEGER)")
    conn.execute("""INSERT INTO ev VALUES (1, '{"kind":"click"}', 1)""")
    conn.execute(f"CREATE MATERIALIZED VIEW v WITH (maintenance = '{mode}') AS {KINDS}")
    return conn


@pytest.mark.parametrize("mode", MODES)
def test_a_read_inside_the_transaction_that_fixed_a_malformed_row(tmp_path: Path, mode: str) -> None:
    conn = _events(tmp_path, mode)
    conn.execute("BEGIN")
    conn.execute("INSERT INTO ev VALUES (2, 'oops', 2)")
    conn.execute("""UPDATE ev SET body = '{"kind":"view"}' WHERE id = 2""")
    assert_view_matches(conn, "v", KINDS)  # the SELECT: [('click', 1), ('view', 1)]
    conn.execute("COMMIT")
    assert_view_matches(conn, "v", KINDS)  # (holds: the fold is right)


def test_a_view_with_a_sum_reads_a_fixed_row_after_the_fold(tmp_path: Path) -> None:
    """(the limit: SQLite's SELECT rounds REAL sums in scan order, the engine exactly, so a
    read that cannot run the delta terms says why until the fold recomputes the view)"""
    conn = _events(tmp_path, "immediate")
    summed = "SELECT json_extract(body, '$.kind') AS kind, sum(x) AS total FROM ev GROUP BY 1"
    conn.execute(f"CREATE MATERIALIZED VIEW s AS {summed}")
    conn.execute("BEGIN")
    conn.execute("INSERT INTO ev VALUES (2, 'oops', 2)")
    conn.execute("""UPDATE ev SET body = '{"kind":"view"}' WHERE id = 2""")
    with pytest.raises(matview.Error, match="cannot be read: malformed JSON"):
        conn.execute("SELECT * FROM s").fetchall()
    conn.execute("COMMIT")
    assert_view_matches(conn, "s", summed)


@pytest.mark.parametrize("mode", MODES)
def test_a_read_inside_the_transaction_that_inserted_and_deleted_a_raising_row(tmp_path: Path, mode: str) -> None:
    conn = _events(tmp_path, mode)
    absolute = "SELECT id, abs(x) AS ax FROM ev"
    conn.execute(f"CREATE MATERIALIZED VIEW a WITH (maintenance = '{mode}') AS {absolute}")
    with conn:
        conn.execute("INSERT INTO ev VALUES (2, '{}', ?)", (-(2**63),))
        conn.execute("DELETE FROM ev WHERE id = 2")
        assert_view_matches(conn, "a", absolute)  # the SELECT: [(1, 1)]


def test_a_read_only_reader_of_a_deferred_backlog_with_a_fixed_row(tmp_path: Path) -> None:
    conn = _events(tmp_path, "deferred")
    conn.execute("INSERT INTO ev VALUES (2, 'oops', 2)")  # autocommit: the backlog waits
    conn.execute("""UPDATE ev SET body = '{"kind":"view"}' WHERE id = 2""")
    reader = matview.install(apsw.Connection(str(tmp_path / "db.sqlite"), flags=apsw.SQLITE_OPEN_READONLY))
    assert_view_matches(reader, "v", KINDS)


@pytest.mark.parametrize("mode", MODES)
def test_a_read_after_deleting_a_committed_malformed_row(tmp_path: Path, mode: str) -> None:
    conn = _events(tmp_path, mode)
    conn.execute("INSERT INTO ev VALUES (2, 'oops', 2)")  # the view raises, as its SELECT does
    with pytest.raises(matview.Error, match="malformed JSON"):
        conn.execute("SELECT * FROM v").fetchall()
    with conn:
        conn.execute("DELETE FROM ev WHERE id = 2")  # the user removes the bad row
        assert_view_matches(conn, "v", KINDS)


def test_raising_rows_fold_right_once_committed(tmp_path: Path) -> None:
    """The same changes, read after COMMIT: right in both modes (the fold nets them out)."""
    conn = _events(tmp_path, "immediate")
    conn.execute(f"CREATE MATERIALIZED VIEW w WITH (maintenance = 'deferred') AS {KINDS}")
    with conn:
        conn.execute("INSERT INTO ev VALUES (2, 'oops', 2)")
        conn.execute("""UPDATE ev SET body = '{"kind":"view"}' WHERE id = 2""")
    conn.execute("INSERT INTO ev VALUES (3, 'oops', 3)")
    conn.execute("DELETE FROM ev WHERE id = 3")
    for view in ("v", "w"):
        assert_view_matches(conn, view, KINDS)


# ------------------------------------------------------------------ held: a star schema's reports

STAR = [
    "CREATE TABLE region(id INTEGER PRIMARY KEY, name TEXT COLLATE NOCASE)",
    "CREATE TABLE customer(id INTEGER PRIMARY KEY, name TEXT, region_id INTEGER, tier TEXT, meta TEXT)",
    "CREATE TABLE product(id INTEGER PRIMARY KEY, cat TEXT, price REAL, sku TEXT UNIQUE)",
    "CREATE TABLE sale(id INTEGER PRIMARY KEY, cust_id INTEGER, prod_id INTEGER, ts TEXT, qty INTEGER, amount NUMERIC, status TEXT)",
    "INSERT INTO region VALUES (1, 'North'), (2, 'south'), (3, 'SOUTH'), (4, NULL)",
    """INSERT INTO customer VALUES (1, 'ann', 1, 'gold', '{"age":30}'), (2, 'bob', 2, 'silver', '{"age":41}'), (3, 'cy', NULL, NULL, NULL), (4, 'dee', 3, 'gold', '{"age":"30"}')""",
    "INSERT INTO product VALUES (1, 'toys', 9.99, 'T1'), (2, 'food', 0.1, 'F1'), (3, NULL, NULL, 'X'), (4, 'toys', 10, 'T2')",
    "INSERT INTO sale VALUES (1, 1, 1, '2024-01-05 10:00:00', 2, 19.98, 'paid'), (2, 1, 2, '2024-01-31', 1, 0.1, 'open'), (3, 2, 1, '2024-02-01T00:00:00', NULL, '10', 'paid'), (4, 3, 3, NULL, 1, NULL, 'void'), (5, 4, 4, '2024-02-29', 3, 30, 'paid'), (6, 2, 2, '2023-12-31 23:59:59', 5, -0.0, NULL)",
]

REPORTS = {
    "monthly": "SELECT strftime('%Y-%m', ts) AS month, count(*) AS n, sum(amount) AS s, total(amount) AS t, avg(amount) AS a FROM sale GROUP BY 1",
    "pivot": "SELECT cust_id, SUM(CASE WHEN status = 'paid' THEN amount END) AS paid, SUM(CASE WHEN status = 'open' THEN amount ELSE 0 END) AS open, count(*) FILTER (WHERE status IS NULL) AS nulls, iif(sum(qty) > 3, 'big', 'small') AS size, count(DISTINCT date(ts)) AS days FROM sale GROUP BY cust_id",
    "concat": "SELECT cust_id, group_concat(status, ', ') AS sts, group_concat(qty, '|' ORDER BY qty DESC) AS qs, group_concat(DISTINCT prod_id) AS ps FROM sale GROUP BY cust_id",
    "star": "SELECT r.name AS region, p.cat, count(*) AS n, round(sum(s.qty * p.price), 2) AS revenue FROM sale s JOIN customer c ON c.id = s.cust_id JOIN product p ON p.id = s.prod_id LEFT JOIN region r ON r.id = c.region_id GROUP BY r.name, p.cat",
    "latest": "SELECT s.cust_id, s.id, s.amount FROM sale s JOIN (SELECT cust_id, max(ts) AS mts FROM sale GROUP BY cust_id) l ON l.cust_id = s.cust_id AND l.mts = s.ts",
    "cohort": "WITH first AS (SELECT cust_id, min(date(ts)) AS d0 FROM sale GROUP BY cust_id) SELECT f.d0, count(DISTINCT s.cust_id) AS back FROM first f JOIN sale s ON s.cust_id = f.cust_id AND date(s.ts) > f.d0 GROUP BY f.d0",
    "members": "SELECT c.id, EXISTS (SELECT 1 FROM sale s WHERE s.cust_id = c.id) AS bought, (SELECT max(ts) FROM sale s WHERE s.cust_id = c.id AND s.status = 'paid') AS last_paid, c.id NOT IN (SELECT cust_id FROM sale) AS never FROM customer c WHERE NOT EXISTS (SELECT 1 FROM product p WHERE p.cat = 'toys' AND NOT EXISTS (SELECT 1 FROM sale s WHERE s.cust_id = c.id AND s.prod_id = p.id)) OR c.region_id NOT IN (SELECT id FROM region WHERE name LIKE 's%')",
    "share": "SELECT p.cat, sum(s.amount) AS s, sum(s.amount) * 100.0 / (SELECT sum(amount) FROM sale) AS pct FROM sale s JOIN product p ON p.id = s.prod_id GROUP BY p.cat HAVING count(*) >= 1",
    "json": "SELECT json_extract(meta, '$.age') AS age, meta ->> 'age' AS age2, count(*) AS n FROM customer GROUP BY 1, 2",
    "arms": "SELECT cust_id AS k, count(*) AS n FROM sale GROUP BY cust_id UNION ALL SELECT prod_id, count(*) FROM sale GROUP BY prod_id",
    "fmt": "SELECT id, printf('%05.2f', amount) AS p, format('%s-%d', status, qty) AS f, upper(substr(status, 1, 2)) AS s2, instr(ts, '-') AS i FROM sale WHERE status LIKE 'P%' OR ts GLOB '2024-0[12]*'",
}


def _star_write(conn: matview.Connection, rng: random.Random) -> None:
    amt = rng.choice(
        ["NULL", "0.1", "-0.0", "'10'", "10", "1e308", "9007199254740993", "'abc'", "''", "x'00'", "19.98"]
    )
    ts = rng.choice(
        [
            "NULL",
            "'2024-01-05 10:00:00'",
            "'2024-01-31'",
            "'2024-02-01T00:00:00'",
            "'bad'",
            "'2024-02-29'",
            "1704067200",
        ]
    )
    st = rng.choice(["'paid'", "'open'", "'void'", "NULL", "'Paid'", "''"])
    c, p, sid = rng.randrange(1, 7), rng.randrange(1, 6), rng.randrange(1, 12)
    region_name = rng.choice(["NULL", "'South'", "'north'"])
    cat = rng.choice(["NULL", "'toys'", "'food'"])
    sql = rng.choice(
        [
            f"INSERT INTO sale(cust_id, prod_id, ts, qty, amount, status) VALUES ({c}, {p}, {ts}, {rng.choice(['NULL', '1', '5'])}, {amt}, {st})",
            f"INSERT OR REPLACE INTO sale VALUES ({sid}, {c}, {p}, {ts}, 2, {amt}, {st})",
            f"UPDATE sale SET cust_id = {c}, ts = {ts} WHERE id = {sid}",
            f"UPDATE sale SET amount = {amt}, status = {st} WHERE id = {sid}",
            f"UPDATE sale SET id = id + 20 WHERE id = {sid}",
            f"DELETE FROM sale WHERE cust_id = {c}",
            f"UPDATE customer SET region_id = {rng.choice(['NULL', '1', '2', '3', '5'])} WHERE id = {c}",
            f"""INSERT OR REPLACE INTO customer VALUES ({c}, 'n{c}', {rng.randrange(1, 6)}, 'gold', '{{"age":{rng.randrange(3)}}}')""",
            f"DELETE FROM customer WHERE id = {c}",
            f"INSERT INTO region VALUES ({rng.randrange(1, 7)}, {region_name}) ON CONFLICT(id) DO UPDATE SET name = excluded.name",
            f"DELETE FROM region WHERE id = {rng.randrange(1, 7)}",
            f"UPDATE product SET price = {rng.choice(['NULL', '0.1', '10'])}, cat = {cat} WHERE id = {p}",
            f"INSERT INTO product(id, cat, price, sku) VALUES ({p}, 'new', 1.5, 'S{p}') ON CONFLICT(sku) DO UPDATE SET price = price + 1",
        ]
    )
    try:
        conn.execute(sql)
    except matview.Error:
        raise
    except apsw.ConstraintError:
        pass


@pytest.mark.fall_back_to_whole
def test_star_schema_reports_hold_under_a_write_mix(tmp_path: Path) -> None:
    conn, live = check_write_mix(tmp_path, STAR, REPORTS, _star_write, seed=3, steps=8)
    with conn:  # savepoints: one released, one rolled back to, a read between
        conn.execute("SAVEPOINT a")
        _star_write(conn, random.Random(7))
        conn.execute("SAVEPOINT b")
        conn.execute("DELETE FROM sale")
        assert_views_match(conn, live)
        conn.execute("ROLLBACK TO b")
        conn.execute("RELEASE a")
    assert_views_match(conn, live)
    stock_sqlite3(
        tmp_path / "db.sqlite",
        [
            "UPDATE region SET name = 'SOUTH' WHERE id = 1",
            "INSERT INTO sale(cust_id, prod_id, ts, amount, status) VALUES (1, 4, '2024-03-01', '7', 'paid')",
        ],
    )
    assert_views_match(conn, live)
    conn.close()


# ------------------------------------------------------------------ held: membership by affinity and NOCASE

MEMBERS = [
    "CREATE TABLE cust(id INTEGER PRIMARY KEY, code TEXT COLLATE NOCASE, num TEXT, grp INTEGER)",
    "CREATE TABLE ev(id INTEGER PRIMARY KEY, code TEXT, numi INTEGER, who TEXT COLLATE NOCASE, k INTEGER)",
    "INSERT INTO cust VALUES (1, 'A', '01', 1), (2, 'b', '2', 1), (3, 'C', NULL, 2), (4, NULL, 'x', 2), (5, 'a', '1', NULL)",
    "INSERT INTO ev VALUES (1, 'a', 1, NULL, 1), (2, 'B', 2, 'A', 2), (3, NULL, NULL, 'b', 3), (4, 'c', 3, 'c', NULL)",
]

MEMBER_VIEWS = {
    "in_nocase": "SELECT id, code FROM cust WHERE code IN (SELECT code FROM ev)",
    "notin_nocase": "SELECT id, code FROM cust WHERE code NOT IN (SELECT code FROM ev)",
    "in_affinity": "SELECT id, num FROM cust WHERE num IN (SELECT numi FROM ev)",
    "in_reverse": "SELECT id FROM ev WHERE numi IN (SELECT num FROM cust) OR who IN (SELECT code FROM cust)",
    "exists_affinity": "SELECT id FROM cust c WHERE NOT EXISTS (SELECT 1 FROM ev e WHERE c.num = e.numi)",
    "row_value": "SELECT id FROM cust WHERE (code, grp) IN (SELECT code, k FROM ev)",
    "scalar": "SELECT id, (SELECT count(*) FROM ev e WHERE e.who = c.code) AS n, (SELECT max(id) FROM ev e WHERE e.k > c.grp) AS m FROM cust c",
}


def _member_write(conn: matview.Connection, rng: random.Random) -> None:
    code = rng.choice(["NULL", "'a'", "'A'", "'b'", "'B'", "'c'"])
    num = rng.choice(["NULL", "'01'", "'1'", "'2'", "' 2'", "2", "'1.0'"])
    numi = rng.choice(["NULL", "1", "2", "'01'", "1.0", "2.5"])
    k = rng.choice(["NULL", "1", "2", "3"])
    i = rng.randrange(1, 8)
    conn.execute(
        rng.choice(
            [
                f"INSERT OR REPLACE INTO cust VALUES ({i}, {code}, {num}, {k})",
                f"UPDATE cust SET code = {code}, num = {num} WHERE id = {i}",
                f"DELETE FROM cust WHERE id = {i}",
                f"INSERT OR REPLACE INTO ev VALUES ({i}, {code}, {numi}, {code}, {k})",
                f"UPDATE ev SET numi = {numi}, who = {code}, k = {k} WHERE id = {i}",
                f"DELETE FROM ev WHERE id = {i}",
            ]
        )
    )


def test_membership_by_affinity_and_nocase_holds(tmp_path: Path) -> None:
    conn, _ = check_write_mix(tmp_path, MEMBERS, MEMBER_VIEWS, _member_write, seed=2, steps=10)
    conn.close()


# ------------------------------------------------------------------ held: views over views, pending reads


def test_report_layers_over_a_daily_view(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in STAR:
        conn.execute(sql)
    layers = {
        "daily": "SELECT date(ts) AS d, cust_id, sum(amount) AS s, count(*) AS n FROM sale GROUP BY 1, 2",
        "by_day": "SELECT d, count(*) AS custs, sum(s) AS tot, sum(n) AS n FROM daily GROUP BY d",
        "tier_tot": "SELECT c.tier, sum(dl.s) AS s, count(*) AS k FROM daily dl JOIN customer c ON c.id = dl.cust_id GROUP BY c.tier",
        "regulars": "SELECT id, name FROM customer WHERE id IN (SELECT cust_id FROM daily WHERE n >= 2)",
    }
    live = {}
    for (name, sql), mode in zip(layers.items(), ("immediate", "deferred", "immediate", "deferred")):
        conn.execute(f"CREATE MATERIALIZED VIEW {name} WITH (maintenance = '{mode}') AS {sql}")
        live[name] = sql
    rng = random.Random(5)
    for step in range(8):
        conn.execute("BEGIN")
        for _ in range(3):
            _star_write(conn, rng)
        assert_views_match(conn, live)  # pending changes merged inside the transaction
        conn.execute("ROLLBACK" if step == 3 else "COMMIT")
        assert_views_match(conn, live)
    conn.close()


def test_text_that_looks_numeric_in_aggregates(tmp_path: Path) -> None:
    setup = ["CREATE TABLE m(id INTEGER PRIMARY KEY, g INTEGER, u, t TEXT, n NUMERIC, r REAL)"]
    values = [
        "' 10'",
        "'10 '",
        "'1e3'",
        "'0x10'",
        "'10abc'",
        "'-0'",
        "'+5'",
        "'1.0'",
        "'.5'",
        "'5.'",
        "'inf'",
        "'1e400'",
        "'0.1'",
        "NULL",
        "3",
        "0.5",
        "''",
        "x'3130'",
    ]
    views = {
        "untyped": "SELECT g, sum(u) AS s, total(u) AS t, avg(u) AS a, min(u) AS mn, max(u) AS mx, count(DISTINCT u) AS cd FROM m GROUP BY g",
        "text": "SELECT g, sum(t) AS s, total(t) AS t, avg(t) AS a, sum(t + 0) AS s0, sum(CAST(t AS REAL)) AS sr FROM m GROUP BY g",
        "numeric": "SELECT g, sum(n) AS s, avg(n) AS a, count(DISTINCT n) AS cd, sum(DISTINCT n) AS sd, avg(DISTINCT r) AS ad FROM m GROUP BY g",
        "groups": "SELECT n, count(*) AS c FROM m GROUP BY n",
    }

    def write(conn: matview.Connection, rng: random.Random) -> None:
        i, g = rng.randrange(1, 9), rng.choice(["1", "2", "NULL"])
        a, b, c, d = (rng.choice(values) for _ in range(4))
        conn.execute(
            rng.choice(
                [
                    f"INSERT OR REPLACE INTO m VALUES ({i}, {g}, {a}, {b}, {c}, {d})",
                    f"UPDATE m SET u = {a}, t = {b} WHERE id = {i}",
                    f"DELETE FROM m WHERE id = {i}",
                ]
            )
        )

    conn, _ = check_write_mix(tmp_path, setup, views, write, seed=4, steps=10)
    conn.close()


def test_empty_and_refilled_groups_of_a_grand_total(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in STAR:
        conn.execute(sql)
    live = create_views_both_modes(
        conn,
        {
            "grand": "SELECT count(*) AS n, sum(amount) AS s, max(ts) AS last FROM sale WHERE status = 'paid'",
            "busy": "SELECT count(*) AS n FROM sale s JOIN customer c ON c.id = s.cust_id HAVING count(*) > 2",
        },
    )
    for step in (
        ["DELETE FROM sale"],
        ["INSERT INTO sale(cust_id, status, amount) VALUES (1, 'paid', 1), (1, 'paid', 2.5), (2, 'paid', NULL)"],
        ["DELETE FROM customer"],
    ):
        with conn:
            for sql in step:
                conn.execute(sql)
        assert_views_match(conn, live)
    conn.close()
