"""Hunt 64: subqueries reached by value (`sql/value_reach.py`, `operators/scalar_values.py`,
`operators/partition.py`'s `_root_queries`/`root_delta`/`populate_roots`): an uncorrelated
scalar subquery alone in a conjunct of the WHERE, whose value is kept with the view and whose
move reaches only the rows its conjunct flips.

Tried: values that change type (a sum of integers meeting a REAL, avg/sum/max NULL over an
empty table, total 0.0, count), MIN/MAX tied between 5 and 5.0 (and 0.0/-0.0) compared with
TEXT, NUMERIC, INTEGER, REAL, BLOB, untyped and NOCASE columns (TEXT affinity makes the tie
visible: 5 is '5', 5.0 is '5.0'), text against numbers, blobs, 1e300/1e308 sums overflowing to
inf, integer-overflowing sums; the subquery on either side, under IS / IS NOT / BETWEEN / NOT /
OR / a bare truth test, inside CAST/nullif/CASE/iif (not reached by value: fine), COLLATE after
it; the same subquery in the select list and in the WHERE (also as the same comparison), two
value subqueries in one WHERE, a subquery over the outer table itself, double-quoted names and
select-list aliases in the conjunct (the front end inlines aliases), a column named
"__dbsp_guard" (and one named "1": refused, "ambiguous column name: 1", acceptable);
LEFT/RIGHT/FULL joins with the conjunct over the padded side, a self join,
GROUP BY, DISTINCT, an aggregate without GROUP BY, UNION/UNION ALL arms, a plain view and a
derived table holding the conjunct, views over a value-reach view's upstream (a materialized
aggregate as the outer table, the subquery over its base table), WITHOUT ROWID tables, a
table without a key, a TEXT PRIMARY KEY holding NULLs, UNIQUE keys; INSERT OR REPLACE, UPSERT,
multi-row DELETEs, transactions, ROLLBACK, ROLLBACK TO savepoints with deferred reads inside
them, reads inside an open transaction, reopen, REFRESH, writes by stock sqlite3, CREATE INDEX
/ DROP INDEX / ANALYZE / VACUUM by matview and by stock sqlite3, with and without a write of the
value's table in the same fold; a guard conjunct (`json_valid(p) AND json_extract(p, …) >
(SELECT …)`), and TEXT that is not UTF-8 as the value.

Found (all regressions: before this change these views were recomputed whole, and right), all
fixed the same day:
1. A plan change that moves a tied MIN/MAX (CREATE INDEX, DROP INDEX or ANALYZE, through
   matview or another client) is never reached. `SELECT id, b FROM t WHERE b = (SELECT max(x)
   FROM u)` with u.x = 5 and 5.0 (max 5 in rowid order) and t.b TEXT = '5', '5.0': after
   `CREATE INDEX ux ON u(x)` SQLite's max is 5.0 (the row '5.0'), the view keeps '5' — and
   keeps it after writes of t: their fold computes the value again (the plan kept with it
   differs), finds it moved, stores 5.0, but `_root_queries` runs the flip query only for a
   value whose *table* changed, so no row is reached and the kept value now hides the
   staleness for good. With the subquery over the outer table itself the view is wrong from
   the DROP INDEX until the next write of that table. `replan.keep_views_readable` does not
   look at value-reach views (the README says an index run through matview repairs the views
   whose ties it moves).
2. The value is computed eagerly (`bind_values`, at CREATE and every fold), where SQLite's
   SELECT evaluates an uncorrelated subquery only when some row reaches it. `SELECT id FROM o
   WHERE amount > (SELECT sum(n) FROM big)` with o empty and sum(n) overflowing: SQLite's
   SELECT gives no rows; CREATE fails ("SQLError: integer overflow"), and a write that makes
   the sum overflow leaves the view unreadable ("cannot be folded: integer overflow").
3. The flip query (`scalar_values.reach_query`) evaluates the conjunct under the old and the
   new value on every row of the outer FROM, including rows where SQLite's SELECT never
   evaluates it because an earlier conjunct (a guard) already rejected them:
   `WHERE json_valid(p) AND json_extract(p, '$.n') > (SELECT avg(n) FROM t)` with a row
   `'not json'`. Outside a transaction the fold's error is caught and the view recomputed
   (right, at a recompute's cost); a read inside a transaction that moved the value raises
   "cannot be read: malformed JSON", both modes.

Fixed: (1) every value's flip query runs at every fold (a guard skips it where the value did not
move); a value kept under another plan that differs from the value now reaches every root; a
matview connection's CREATE/DROP INDEX or ANALYZE, or the next read or write after another
client's, rebuilds a view whose value moved (`whole.replanned_otherwise` asks
`scalar_values.replanned_otherwise`). (2) A value that raises leaves every root computed with
the subqueries as written (SQLite evaluates them where its SELECT would) and keeps no value.
(3) A conjunct that calls a function that may raise (`reach_filter.never_fails`) is not reached
by value.

Also seen (no wrong read): TEXT that is not UTF-8 as the value (Python cannot decode it) stalls
the view ("NOT MAINTAINED" in explain) until the value is decodable again; reads stay exact.

Held (no wrong answer): everything else above — see the tests below."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_views_match, check_write_mix, create_views_both_modes
from stock import stock_sqlite3

import matview


def _connect(tmp_path: Path, setup: list[str]) -> matview.Connection:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in setup:
        conn.execute(sql)
    return conn


def _by_value(conn: matview.Connection, live: dict[str, str]) -> None:
    for view in live:
        assert "reaches by value" in conn.view(view).explain(), view


# ------------------------------------------------------------------ found 1: a new index moves a tied MIN/MAX

TIED = [
    "CREATE TABLE u(k INTEGER PRIMARY KEY, x)",
    "CREATE TABLE t(id INTEGER PRIMARY KEY, b TEXT)",
    "INSERT INTO u(x) VALUES (5), (5.0), (1)",  # (max: 5 in rowid order, 5.0 through an index on x)
    "INSERT INTO t(b) VALUES ('5'), ('5.0'), ('1')",  # (TEXT affinity: 5 is '5', 5.0 is '5.0')
]
TIED_VIEW = {"tv": "SELECT id, b FROM t WHERE b = (SELECT max(x) FROM u)"}


@pytest.mark.parametrize("by", ["matview", "stock"])
def test_an_index_on_the_subquery_table_then_a_write_of_the_outer_table(tmp_path: Path, by: str) -> None:
    conn = _connect(tmp_path, TIED)
    live = create_views_both_modes(conn, TIED_VIEW)
    _by_value(conn, live)
    assert_views_match(conn, live)
    if by == "matview":
        conn.execute("CREATE INDEX ux ON u(x)")
    else:
        conn.close()
        stock_sqlite3(tmp_path / "db.sqlite", ["CREATE INDEX ux ON u(x)"])
        conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("INSERT INTO t(b) VALUES ('7')")  # (a fold: the value is computed again, 5.0 now)
    assert_views_match(conn, live)


#: a tied max(x) WHERE y = 1 that the plan decides: 5 through index uy, 5.0 through ux (ANALYZE's choice)
TIED_BEHIND_TWO_INDEXES = [
    "CREATE TABLE u(k INTEGER PRIMARY KEY, x, y)",
    "CREATE INDEX uy ON u(y)",
    "CREATE INDEX ux ON u(x)",
    "CREATE TABLE t(id INTEGER PRIMARY KEY, b TEXT)",
    "INSERT INTO u(x, y) VALUES (5, 1), (5.0, 1)",
    "INSERT INTO u(x, y) WITH RECURSIVE s(v) AS (SELECT 1 UNION ALL SELECT v + 1 FROM s WHERE v < 200) "
    "SELECT v % 5, 1 FROM s",
    "INSERT INTO t(b) VALUES ('5'), ('5.0')",
]


def test_analyze_moves_a_tied_max_then_a_write_of_the_outer_table(tmp_path: Path) -> None:
    conn = _connect(tmp_path, TIED_BEHIND_TWO_INDEXES)
    select = "SELECT id, b FROM t WHERE b = (SELECT max(x) FROM u WHERE y = 1)"  # (uy: 5; after ANALYZE, ux: 5.0)
    live = create_views_both_modes(conn, {"an": select})
    _by_value(conn, live)
    assert_views_match(conn, live)
    conn.execute("ANALYZE")
    conn.execute("INSERT INTO t(b) VALUES ('7')")
    assert_views_match(conn, live)


def test_drop_index_on_the_outer_table_read_at_once(tmp_path: Path) -> None:
    conn = _connect(
        tmp_path,
        [
            "CREATE TABLE t(id INTEGER PRIMARY KEY, x, b TEXT)",
            "CREATE INDEX tx ON t(x)",
            "INSERT INTO t(x, b) VALUES (5, 'a'), (5.0, '5.0'), (1, '5')",  # (max 5.0 through tx, 5 without)
        ],
    )
    live = create_views_both_modes(conn, {"tv": "SELECT id, b FROM t WHERE b = (SELECT max(x) FROM t)"})
    _by_value(conn, live)
    assert_views_match(conn, live)
    conn.execute("DROP INDEX tx")
    assert_views_match(conn, live)


# ------------------------------------------------------------------ found 2: a value SQLite never computes

OVERFLOW = [
    "CREATE TABLE o(id INTEGER PRIMARY KEY, amount)",
    "CREATE TABLE big(n INTEGER)",
    "INSERT INTO big VALUES (9223372036854775807)",
]
OVERFLOW_VIEW = {"ov": "SELECT id FROM o WHERE amount > (SELECT sum(n) FROM big)"}


def test_an_overflowing_sum_over_an_empty_outer_table(tmp_path: Path) -> None:
    conn = _connect(tmp_path, OVERFLOW)
    live = create_views_both_modes(conn, OVERFLOW_VIEW)
    _by_value(conn, live)
    conn.execute("INSERT INTO big VALUES (1)")  # (sum(n) overflows: SQLite's SELECT over an empty o is [])
    assert conn.execute(OVERFLOW_VIEW["ov"]).fetchall() == []
    assert_views_match(conn, live)


def test_create_over_an_overflowing_sum_and_an_empty_outer_table(tmp_path: Path) -> None:
    conn = _connect(tmp_path, [*OVERFLOW, "INSERT INTO big VALUES (1)"])
    assert conn.execute(OVERFLOW_VIEW["ov"]).fetchall() == []
    live = create_views_both_modes(conn, OVERFLOW_VIEW)
    assert_views_match(conn, live)


# ------------------------------------------------------------------ found 3: the flip query on filtered-out rows

JSON = [
    "CREATE TABLE t(id INTEGER PRIMARY KEY, p TEXT, n)",
    """INSERT INTO t(p, n) VALUES ('{"n":1}', 1), ('{"n":5}', 5), ('not json', 0)""",
]
JSON_VIEW = {"js": "SELECT id FROM t WHERE json_valid(p) AND json_extract(p, '$.n') > (SELECT avg(n) FROM t)"}


def test_a_guarded_conjunct_read_inside_a_transaction(tmp_path: Path) -> None:
    conn = _connect(tmp_path, JSON)
    live = create_views_both_modes(conn, JSON_VIEW)
    for view in live:  # (its conjunct calls a function that may raise: not reached by value)
        assert "reaches by value" not in conn.view(view).explain()
    assert_views_match(conn, live)
    with conn:
        conn.execute("UPDATE t SET n = 100 WHERE id = 3")  # (the average moves: 2 → 35.3)
        assert_views_match(conn, live)  # (read before COMMIT: the pending change is merged)


# ------------------------------------------------------------------ held: shapes and writes that are right


def test_an_index_made_with_a_write_of_the_subquery_table_by_stock_sqlite3(tmp_path: Path) -> None:
    """The plan change and a change of the value's table in one fold: the flips are reached."""
    conn = _connect(tmp_path, TIED)
    live = create_views_both_modes(conn, TIED_VIEW)
    conn.close()
    stock_sqlite3(tmp_path / "db.sqlite", ["CREATE INDEX ux ON u(x)", "UPDATE u SET x = 1 WHERE k = 3"])
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    assert_views_match(conn, live)
    conn.execute("REFRESH MATERIALIZED VIEW tv_imm")
    with conn:
        conn.execute("DROP INDEX ux")
        conn.execute("UPDATE u SET x = 1 WHERE k = 3")
    assert_views_match(conn, live)


def test_a_guarded_conjunct_outside_a_transaction(tmp_path: Path) -> None:
    """The flip query's malformed JSON outside a transaction: the fold recomputes, exactly."""
    conn = _connect(tmp_path, JSON)
    live = create_views_both_modes(conn, JSON_VIEW)
    for sql in ["UPDATE t SET n = 100 WHERE id = 3", """INSERT INTO t(p, n) VALUES ('{"n":50}', -500)"""]:
        conn.execute(sql)
        assert_views_match(conn, live)


def test_a_value_that_is_not_utf8_text(tmp_path: Path) -> None:
    """max() of a TEXT that is not UTF-8 (Python cannot decode it): the fold stalls, reads stay
    exact (by their SELECT), and the view folds again once the value is decodable."""
    conn = _connect(
        tmp_path,
        [
            "CREATE TABLE u(k INTEGER PRIMARY KEY, y TEXT)",
            "CREATE TABLE t(id INTEGER PRIMARY KEY, b TEXT)",
            "INSERT INTO u(y) VALUES ('a'), ('b')",
            "INSERT INTO t(b) VALUES ('a'), ('c'), ('zz'), (CAST(x'fe' AS TEXT))",
        ],
    )
    live = create_views_both_modes(conn, {"utf": "SELECT id FROM t WHERE b < (SELECT max(y) FROM u)"})
    _by_value(conn, live)
    with conn:
        conn.execute("INSERT INTO u(y) VALUES (CAST(x'ff' AS TEXT))")
        assert_views_match(conn, live)
    assert_views_match(conn, live)
    conn.execute("INSERT INTO t(b) VALUES ('d')")
    assert_views_match(conn, live)
    conn.execute("DELETE FROM u WHERE k = 3")
    assert_views_match(conn, live)


MIX_SETUP = [
    "CREATE TABLE t(id INTEGER PRIMARY KEY, a, b TEXT, c REAL, d INTEGER, e NUMERIC, f TEXT COLLATE NOCASE, g BLOB)",
    "CREATE TABLE u(k INTEGER PRIMARY KEY, x, y TEXT, z REAL)",
    "CREATE TABLE w(p TEXT PRIMARY KEY, q, r INTEGER) WITHOUT ROWID",
    "CREATE TABLE nk(m, n)",
    "CREATE TABLE np(p TEXT PRIMARY KEY, q)",  # (a rowid table whose PRIMARY KEY holds NULLs)
    "INSERT INTO t VALUES (1, 5, '5', 5, 5, 5, 'abc', x'35'), (2, 5.0, '5.0', 2.5, 2, '5', 'ABC', NULL), "
    "(3, '5', 'abc', NULL, NULL, 2.5, '5', 5), (4, NULL, '', -0.0, 0, 0.0, NULL, '5')",
    "INSERT INTO u VALUES (1, 5, 'abc', 2.5), (2, 5.0, '5', NULL), (3, '7', 'ABC', 1)",
    "INSERT INTO w VALUES ('a', 5, 1), ('b', 2.5, 2)",
    "INSERT INTO nk VALUES (1, 5), (NULL, '5'), (2, 5.0)",
    "INSERT INTO np VALUES (NULL, 1), (NULL, 5), ('a', 2.5)",
]

#: reached by value (checked), over every affinity of the outer column, either side, IS/BETWEEN/NOT/OR
MIX_VIEWS = {
    "untyped_avg": "SELECT id, a FROM t WHERE a > (SELECT avg(x) FROM u)",
    "text_max": "SELECT id FROM t WHERE b = (SELECT max(y) FROM u)",
    "text_num": "SELECT id, b FROM t WHERE b = (SELECT max(x) FROM u)",
    "text_sum": "SELECT id, b FROM t WHERE b = (SELECT sum(x) FROM u)",
    "text_avg": "SELECT id, b FROM t WHERE b <= (SELECT avg(z) FROM u)",
    "nocase": "SELECT id FROM t WHERE f = (SELECT max(y) FROM u)",
    "nocase_left": "SELECT id FROM t WHERE (SELECT min(y) FROM u) < f",
    "numeric": "SELECT id FROM t WHERE e = (SELECT max(x) FROM u)",
    "integer": "SELECT id FROM t WHERE d = (SELECT min(x) FROM u)",
    "real": "SELECT id FROM t WHERE c = (SELECT min(x) FROM u)",
    "blob": "SELECT id FROM t WHERE g = (SELECT max(x) FROM u)",
    "is": "SELECT id FROM t WHERE (SELECT max(x) FROM u) IS a",
    "is_not": "SELECT id FROM t WHERE (SELECT max(z) FROM u) IS NOT c",
    "between": "SELECT id FROM t WHERE a BETWEEN (SELECT min(x) FROM u) AND 6",
    "or": "SELECT id FROM t WHERE a = 1 OR b > (SELECT total(x) FROM u)",
    "same_table": "SELECT id FROM t WHERE a = (SELECT max(a) FROM t)",
    "count": "SELECT id FROM t WHERE d <> (SELECT count(*) FROM u)",
    "concat": "SELECT id FROM t WHERE b || '' = (SELECT max(y) || '' FROM u)",
    "select_list_too": "SELECT id, (SELECT max(x) FROM u) AS m FROM t WHERE a < (SELECT max(x) FROM u)",
    "two": "SELECT id FROM t WHERE a > (SELECT min(x) FROM u) AND b < (SELECT max(q) FROM w)",
    "left_join": "SELECT t.id, u.k FROM t LEFT JOIN u ON u.k = t.d WHERE u.x IS (SELECT max(q) FROM w)",
    "grouped": "SELECT d, count(*), sum(c) FROM t WHERE c >= (SELECT avg(z) FROM u) GROUP BY d",
    "distinct": "SELECT DISTINCT b FROM t WHERE a <> (SELECT count(*) FROM u)",
    "without_rowid": "SELECT p, q FROM w WHERE q > (SELECT avg(a) FROM t)",
    "no_key": "SELECT m, n FROM nk WHERE n < (SELECT max(a) FROM t)",
    "null_key": "SELECT p, q FROM np WHERE q >= (SELECT avg(x) FROM u)",
}

#: a conjunct that reads no outer row flips every row at once: not reached by value (whole, as
#: for users — with `recompute = 'never'` a tied 5 and 5.0 in max(x) stalls the view)
MIX_NOT_BY_VALUE = {
    "not": "SELECT id FROM t WHERE NOT (SELECT max(x) FROM u)",
    "truth": "SELECT id FROM t WHERE (SELECT max(y) FROM u)",
}

MIX_VALUES = [None, 0, 1, 5, 5.0, -0.0, 0.0, 2.5, "5", "5.0", "abc", "ABC", b"5", 7, -3, 1e300, ""]


def _mix_write(conn: matview.Connection, rng: random.Random) -> None:
    kind = rng.randrange(10)
    value = rng.choice
    if kind < 3:
        row = (rng.randrange(8), *(value(MIX_VALUES) for _ in range(7)))
        conn.execute("INSERT OR REPLACE INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)
    elif kind < 5:
        conn.execute(
            "INSERT INTO u VALUES (?, ?, ?, ?) ON CONFLICT(k) DO UPDATE SET x = excluded.x, y = excluded.y",
            (rng.randrange(6), value(MIX_VALUES), value(MIX_VALUES), value(MIX_VALUES)),
        )
    elif kind == 5:
        conn.execute("INSERT OR REPLACE INTO w VALUES (?, ?, ?)", (value("abc"), value(MIX_VALUES), value([1, 2, 3])))
    elif kind == 6:
        conn.execute("INSERT INTO nk VALUES (?, ?)", (value(MIX_VALUES), value(MIX_VALUES)))
        conn.execute("INSERT OR REPLACE INTO np VALUES (?, ?)", (value([None, "a", "b"]), value(MIX_VALUES)))
    elif kind == 7:
        conn.execute(f"DELETE FROM {value(['t', 'u', 'nk', 'np'])} WHERE rowid % 3 = ?", (rng.randrange(3),))
    elif kind == 8:
        conn.execute("UPDATE u SET x = ? WHERE k = ?", (value(MIX_VALUES), rng.randrange(6)))
    else:
        conn.execute("UPDATE t SET a = ?, b = ? WHERE id = ?", (value(MIX_VALUES), value(MIX_VALUES), rng.randrange(8)))


@pytest.mark.fall_back_to_whole
@pytest.mark.parametrize("seed", range(2))
def test_a_conjunct_of_no_outer_row_under_a_random_write_mix(tmp_path: Path, seed: int) -> None:
    conn, live = check_write_mix(tmp_path, MIX_SETUP, MIX_NOT_BY_VALUE, _mix_write, seed, steps=10)
    for view in live:
        assert "reaches by value" not in conn.view(view).explain(), view
    conn.close()


@pytest.mark.parametrize("seed", range(2))
def test_tricky_shapes_under_a_random_write_mix(tmp_path: Path, seed: int) -> None:
    conn, live = check_write_mix(tmp_path, MIX_SETUP, MIX_VIEWS, _mix_write, seed, steps=10)
    _by_value(conn, live)
    conn.close()
