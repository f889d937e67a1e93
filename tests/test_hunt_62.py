# ruff: noqa: E501  (each query stays on one line, as an application writes it)
"""Hunt 62: the set-at-a-time aggregation path after its REAL lane, its stage-1 TEMP table and
its MIN/MAX delete-pass skip (`operators.aggregate_sql`, `operators.real_sums`).

Tried: random aggregate views (GROUP BY 0–3 terms — NULL groups, typed and untyped columns,
expressions —, no GROUP BY, HAVING, FILTER, SUM/TOTAL/AVG/COUNT/MIN/MAX of REAL, INTEGER, TEXT
and untyped columns and of expressions: x*(1-d), x/3, CAST, CASE, products across tables) over
one table, joins of two and three tables, LEFT JOINs both ways, views over aggregate and
over repeating non-aggregate views, FROM-subqueries and CTEs, post-expressions (typeof(SUM(y)),
ROUND(AVG(x), 2), MAX−MIN, printf of TOTAL) and DISTINCT over aggregates; values at the lane's
edges (2^-10 and a ulp either side, 2^53−1, 2^53, 2^52+0.5, ±0.0, 1e-5, integers in REAL
columns, '12.5' and 'abc' in untyped columns, NULL), random doubles up to 2^53, 1e-300, 1e250;
bulk transactions of 64–5000 rows (inserts only, deletes only, mixed, updates moving rows
between groups, updates of the join's other table), executemany in autocommit, ROLLBACK and
ROLLBACK TO around bulk changes, folds inside a transaction (RELEASE) that is then rolled back,
REFRESH inside a transaction, reads inside a transaction with a bulk change pending, a second
matview connection writing, close and reopen, both maintenance modes; a user function raising
(and malformed JSON) in a group term, an argument or a FILTER during a bulk fold and at CREATE;
an int64 overflow of the integer partials (the fallback after the TEMP table was filled); a
progress-handler interrupt during the fold; an application's authorizer refusing table creation
(or all DDL, set after the shadows exist). Compared each view with its SELECT re-run with
exact sums (functions adding the doubles as fractions: F7, SQLite's own rounding, kept apart)
and zero signs told apart, and the msgpack state and ordered multisets of views fed the same
rows three ways: a few rows per transaction (the per-row path), CREATE over the filled tables,
and one bulk fold — then the same deletes and updates.

Found: one regression of the stage-1 TEMP table. With an application's authorizer that
refuses creating tables (set on the apsw connection before `matview.install`, the documented way;
matview's own TEMP views and virtual tables pass it), a transaction of 64+ rows stalls a joined
view with MIN/MAX or REAL sums — "cannot be folded: not authorized" — where before this change
it folded: `_Stage1Rows.reread` runs `CREATE TEMP TABLE IF NOT EXISTS` inside the fold, the
AuthError reaches `fold.fold_view`, whose recompute (`populate`, the same set-at-a-time path)
meets it again. The view stays stalled at every later commit; reads through matview merge the
pending changes and are right, but the stored table — `main.v`, what clients without matview
read — stays stale (empty). The TEMP table is an optimization: its CREATE/INSERT failing
could just leave the passes reading the stage-1 SELECT. Fixed so: a refused TEMP table
(authorizer, full or unopenable temp store) leaves the passes reading the stage-1 SELECT. No wrong answer through matview, no
state differing from the per-row path's, no raw apsw exception but the user's own interrupt
(`apsw.InterruptError`, the transaction rolled back, the view right afterwards).

Held: everything above; the TEMP table is left empty after every fold, including one stalled
by a raising function and one that fell back to the per-row path."""

from __future__ import annotations

import math
import random
import sys
from collections import Counter
from fractions import Fraction
from pathlib import Path
from typing import Any

import apsw
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_view_matches, typed

import matview
from matview.circuit import BULK_ROWS
from matview.storage.codec import unpack

MODES = ("immediate", "deferred")

#: doubles at and around the lane's edges (2^-10 <= |v| < 2^53, ±0.0) and a few outside it
EDGES = [
    0.0,
    -0.0,
    2.0**-10,
    2.0**-10 - 2.0**-62,
    2.0**-10 + 2.0**-62,
    2.0**-11,
    2.0**53 - 1,
    2.0**53,
    2.0**53 + 2,
    2.0**52 + 0.5,
    1e-5,
    0.1,
    1 / 3,
    7.0,
    123456789.123,
    1e-300,
]


def _value(rng: random.Random, untyped: bool = False) -> object:
    pick = rng.random()
    if pick < 0.06:
        return None
    if pick < 0.4:
        return rng.choice(EDGES) * rng.choice([1, -1])
    if untyped and pick < 0.5:
        return rng.choice(["12.5", "3", "abc", -4, 9])
    if pick < 0.6:
        return rng.uniform(-(2.0**53), 2.0**53)
    return round(rng.uniform(-50, 1000), rng.choice([1, 2, 3]))


# ------------------------------------------------------------------ the oracle: exact sums


def _numeric(value: Any) -> Any:
    """sqlite3_value_numeric_type of the values used here; None for "adds 0.0, turns REAL"."""
    if isinstance(value, str):
        for kind in (int, float):
            try:
                return kind(value.strip())
            except ValueError:
                pass
        return None
    return None if isinstance(value, bytes) else value


class _ExactSum:
    """SUM/TOTAL/AVG with SQLite's types and the correctly rounded exact sum of the doubles
    (where SQLite's own sum rounds in scan order: F7, not a finding)."""

    def __init__(self, kind: str) -> None:
        self.kind, self.n, self.real, self.total = kind, 0, False, Fraction(0)

    def step(self, value: Any) -> None:
        if value is None:
            return
        self.n += 1
        number = _numeric(value)
        if not isinstance(number, int):
            self.real = True
        if number is not None:
            self.total += Fraction(number)

    def final(self) -> Any:
        if self.kind == "sum" and self.n == 0:
            return None
        total = float(self.total) if self.real or self.kind != "sum" else int(self.total)
        if self.kind == "avg":
            return None if self.n == 0 else total / self.n
        return total


def _register(conn: matview.Connection) -> None:
    for kind in ("sum", "total", "avg"):

        def factory(kind: str = kind) -> Any:
            state = _ExactSum(kind)
            return state, (lambda _ctx, value: state.step(value)), (lambda _ctx: state.final())

        conn.apsw.create_aggregate_function(f"exact_{kind}", factory, 1)


def _exact(sql: str) -> str:
    for kind in ("SUM", "TOTAL", "AVG"):
        sql = sql.replace(f"{kind}(", f"exact_{kind.lower()}(")
    return sql


def _bag(rows: Any) -> Counter[Any]:
    """Typed rows, the sign of a zero told apart."""
    return Counter(
        tuple((*typed(v), math.copysign(1.0, v)) if isinstance(v, float) else typed(v) for v in r) for r in rows
    )


def _assert_exact(conn: matview.Connection, view: str, select: str) -> None:
    got = _bag(conn.execute(f"SELECT * FROM {view}"))
    assert got == _bag(conn.execute(_exact(select))), (view, select)


def _stage1_rows_left(conn: matview.Connection) -> int:
    tables = [r[0] for r in conn.apsw.execute("SELECT name FROM temp.sqlite_master WHERE name LIKE '__dbsp_stage1_%'")]
    return sum(conn.apsw.execute(f'SELECT count(*) FROM temp."{t}"').fetchone()[0] for t in tables)


def _tables(conn: matview.Connection, rng: random.Random) -> None:
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, g TEXT, h INT, x REAL, y, d REAL, n INT, uid INT)")
    conn.execute("CREATE TABLE u(id INTEGER PRIMARY KEY, k TEXT, r REAL)")
    with conn:
        conn.executemany(
            "INSERT INTO u VALUES (?, ?, ?)", [(i, rng.choice(["k1", "k2", None]), _value(rng)) for i in range(8)]
        )


def _t_rows(rng: random.Random, count: int, start: int | None = None) -> list[tuple[Any, ...]]:
    return [
        (
            None if start is None else start + i,
            rng.choice(["a", "b", None]),
            rng.choice([1, 2, None]),
            _value(rng),
            _value(rng, untyped=True),
            rng.choice([0.1, 0.25, 0.0, -0.5, None, 1 / 3]),
            rng.randint(-3, 5),
            rng.randrange(9),
        )
        for i in range(count)
    ]


T_INSERT = "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?)"

# ------------------------------------------------------------------ held: views against exact sums

VIEWS = {
    "single": "SELECT t.g, t.h, SUM(t.x) AS s, TOTAL(t.y) AS ty, AVG(t.x * (1 - t.d)) AS a, MIN(t.x) AS mn, MAX(t.y) AS mx, COUNT(t.y) AS c FROM t GROUP BY t.g, t.h",
    "filtered": "SELECT t.g, SUM(t.x) FILTER (WHERE t.n > 1) AS s, TOTAL(t.x / 3) AS t3, SUM(CAST(t.y AS REAL)) AS sc, SUM(CASE WHEN t.n > 2 THEN t.x ELSE t.y END) AS sw FROM t GROUP BY t.g HAVING COUNT(*) > 2",
    "joined": "SELECT u.k, SUM(t.x * u.r) AS p, TOTAL(t.x) AS tx, AVG(u.r) AS ar, MIN(t.x) AS mn, MAX(u.r) AS mx FROM t JOIN u ON t.uid = u.id GROUP BY u.k",
    "outer": "SELECT t.g, SUM(u.r) AS s, MIN(u.r) AS mn, COUNT(u.k) AS c FROM t LEFT JOIN u ON t.uid = u.id GROUP BY t.g",
    "whole": "SELECT SUM(t.x) AS s, AVG(t.y) AS a, MAX(t.x) AS mx, COUNT(*) AS n FROM t JOIN u ON t.uid = u.id",
    "derived": "SELECT s.g, SUM(s.v) AS sv, MIN(s.v) AS mn FROM (SELECT t.g AS g, t.x * (1 - t.d) AS v FROM t WHERE t.n > 0) AS s GROUP BY s.g",
    "post": "SELECT t.h, typeof(SUM(t.y)) AS ty, ROUND(AVG(t.x), 2) AS ra, MAX(t.x) - MIN(t.x) AS span, printf('%.4f', TOTAL(t.x)) AS pt FROM t GROUP BY t.h",
}
OVER = {
    "over": "SELECT joined.k IS NULL AS nk, SUM(joined.p) AS sp, MIN(joined.tx) AS mn, COUNT(*) AS n FROM joined GROUP BY 1"
}


@pytest.mark.parametrize("seed", range(2))
def test_views_hold_the_exact_sums_through_bulk_writes(tmp_path: Path, seed: int) -> None:
    rng = random.Random(62 + seed)
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    _register(conn)
    _tables(conn, rng)
    with conn:
        conn.executemany(T_INSERT, _t_rows(rng, 3 * BULK_ROWS))
    live = {}
    for name, sql in {**VIEWS, **OVER}.items():
        mode = MODES[(seed + len(live)) % 2]
        conn.execute(f"CREATE MATERIALIZED VIEW {name} WITH (maintenance = '{mode}') AS {sql}")
        live[name] = sql
    other = matview.connect(str(tmp_path / "db.sqlite"))  # a second connection writes too
    for step in range(10):
        writer = other if step % 4 == 3 else conn
        try:
            with writer:
                kind = step % 5
                if kind == 0:
                    writer.executemany(T_INSERT, _t_rows(rng, 2 * BULK_ROWS))
                elif kind == 1:
                    writer.execute("DELETE FROM t WHERE id % ? = ?", (rng.randrange(2, 4), rng.randrange(2)))
                elif kind == 2:
                    writer.execute(
                        "UPDATE t SET g = ?, x = -x, uid = (uid + 1) % 9 WHERE id % 3 = ?",
                        (rng.choice("ab"), rng.randrange(3)),
                    )
                    writer.execute(
                        "UPDATE u SET r = ?, k = ? WHERE id % 2 = ?",
                        (_value(rng), rng.choice(["k1", "k2", None]), rng.randrange(2)),
                    )
                elif kind == 3:
                    writer.executemany(T_INSERT, _t_rows(rng, BULK_ROWS))
                    writer.execute("SAVEPOINT s")
                    writer.execute("DELETE FROM t WHERE id % 2 = 0")
                    writer.execute("RELEASE s")  # (folds inside the transaction)
                    writer.execute("DELETE FROM t WHERE id % 5 = 0")
                else:
                    writer.executemany(T_INSERT, _t_rows(rng, 2 * BULK_ROWS))
                    for name, sql in live.items():  # (a read with the bulk change pending)
                        assert_view_matches(writer, name, sql)
                if step % 3 == 2:
                    raise KeyError("roll back")
        except KeyError:
            pass
        for name, sql in live.items():
            _assert_exact(conn, name, sql)
        assert _stage1_rows_left(conn) == 0
    conn.close()
    other.close()
    reopened = matview.connect(str(tmp_path / "db.sqlite"))
    _register(reopened)
    for name, sql in live.items():
        _assert_exact(reopened, name, sql)


# ------------------------------------------------------------------ held: the per-row path's state


def _state(conn: matview.Connection, view: str) -> tuple[list[Any], list[Any]]:
    rows = conn.apsw.execute(f"SELECT operator_id, key, value FROM __dbsp_state_{view} ORDER BY operator_id, key")
    ordered = conn.apsw.execute(f"SELECT * FROM __dbsp_ostate_{view} ORDER BY 1, 2, 3, 4").fetchall()
    return [(op, key, unpack(value)) for op, key, value in rows], ordered


STATE_VIEWS = {
    "j": "SELECT u.k, t.h, SUM(t.x) AS s, TOTAL(t.y) AS ty, AVG(t.x * (1 - t.d)) AS a, SUM(t.y) FILTER (WHERE t.n > 1) AS sf, MIN(t.x) AS mn, MAX(t.y) AS mx, COUNT(*) AS c FROM t JOIN u ON t.uid = u.id GROUP BY u.k, t.h",
    "s": "SELECT t.g, SUM(t.x) AS s, SUM(t.x * u.r) AS p, MIN(u.r) AS mn FROM t LEFT JOIN u ON t.uid = u.id GROUP BY t.g",
    "w": "SELECT SUM(t.x) AS s, TOTAL(t.y) AS ty, MAX(t.x) AS mx FROM t",
}


def test_bulk_state_is_the_per_row_state_over_joins(tmp_path: Path) -> None:
    """The same rows a few per transaction (per-row path), before CREATE (CREATE's bulk path,
    the TEMP table for the joins) and in one transaction (a bulk fold): identical states and
    ordered multisets, entry for entry; then the same deletes and updates, likewise."""
    rng = random.Random(6202)
    rows = _t_rows(rng, 5 * BULK_ROWS, start=1)
    deleted = [(r[0],) for r in rows if rng.random() < 0.4]
    moved = [(rng.choice("ab"), _value(rng), r[0]) for r in rows if rng.random() < 0.3]
    conns = []
    for name in ("per_row", "create", "fold"):
        conn = matview.connect(str(tmp_path / f"{name}.db"))
        _tables(conn, random.Random(1))
        conns.append(conn)
    per_row, create, fold = conns
    with create:
        create.executemany(T_INSERT, rows)
    for conn in conns:
        for name, sql in STATE_VIEWS.items():
            conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
    for start in range(0, len(rows), 3):
        with per_row:
            per_row.executemany(T_INSERT, rows[start : start + 3])
    with fold:
        fold.executemany(T_INSERT, rows)
    for change, params in (("DELETE FROM t WHERE id = ?", deleted), ("UPDATE t SET g = ?, x = ? WHERE id = ?", moved)):
        for name in STATE_VIEWS:
            want = _state(per_row, name)
            assert _state(create, name) == want, name
            assert _state(fold, name) == want, name
        for start in range(0, len(params), 3):
            with per_row:
                per_row.executemany(change, params[start : start + 3])
        for conn in (create, fold):
            with conn:
                conn.executemany(change, params)
    for name, sql in STATE_VIEWS.items():
        assert _state(create, name) == _state(per_row, name) == _state(fold, name), name
        for conn in conns:
            assert_view_matches(conn, name, sql)


# ------------------------------------------------------------------ held: errors during the fold


@pytest.mark.parametrize("mode", MODES)
def test_a_raising_function_stalls_the_bulk_fold_and_leaves_no_stage1_rows(tmp_path: Path, mode: str) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    armed = [False]

    def checked(x: Any) -> Any:
        if armed[0] and x == 13.5:
            raise ValueError("boom")
        return x

    conn.apsw.create_scalar_function("checked", checked, 1, deterministic=True)
    conn.execute("CREATE TABLE c(id INTEGER PRIMARY KEY, region TEXT)")
    conn.execute("CREATE TABLE o(id INTEGER PRIMARY KEY, cid INT, amt REAL)")
    conn.executemany("INSERT INTO c VALUES (?, ?)", [(i, "NS"[i % 2]) for i in range(5)])
    sql = "SELECT c.region, SUM(checked(o.amt)) AS s, MIN(o.amt) AS m, TOTAL(o.amt / 3) AS t3 FROM o JOIN c ON o.cid = c.id GROUP BY c.region"
    conn.execute(f"CREATE MATERIALIZED VIEW v WITH (maintenance = '{mode}') AS {sql}")
    with conn:
        conn.executemany("INSERT INTO o(cid, amt) VALUES (?, ?)", [(i % 5, i + 0.25) for i in range(100)])
    armed[0] = True
    with conn:  # (the base write commits; the view stalls)
        conn.executemany("INSERT INTO o(cid, amt) VALUES (?, ?)", [(i % 5, i + 0.5) for i in range(100)])
    assert conn.execute("SELECT count(*) FROM o").fetchone()[0] == 200
    with pytest.raises(matview.Error, match="cannot be folded: ValueError: boom"):
        conn.execute("SELECT * FROM v").fetchall()
    assert _stage1_rows_left(conn) == 0
    with conn:
        conn.execute("DELETE FROM o WHERE amt = 13.5")
    armed[0] = False
    with conn:
        conn.executemany("INSERT INTO o(cid, amt) VALUES (?, ?)", [(i % 5, i + 0.125) for i in range(100)])
    assert_view_matches(conn, "v", sql)
    assert _stage1_rows_left(conn) == 0


@pytest.mark.parametrize("mode", MODES)
def test_integer_partials_overflowing_after_the_stage1_table_fall_back(tmp_path: Path, mode: str) -> None:
    """The integer partials leave int64 (the delta's Σ of positive arguments: rows set to 2^62
    and back within one transaction) after the joined stage-1 rows were copied into the TEMP
    table: the per-row path takes over, the table is emptied."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, uid INT, n INT, x REAL)")
    conn.execute("CREATE TABLE u(id INTEGER PRIMARY KEY, k TEXT)")
    conn.executemany("INSERT INTO u VALUES (?, ?)", [(i, "ab"[i % 2]) for i in range(4)])
    sql = "SELECT u.k, SUM(t.n) AS s, TOTAL(t.n) AS tn, MIN(t.n) AS mn, SUM(t.x) AS sx, COUNT(*) AS c FROM t JOIN u ON t.uid = u.id GROUP BY u.k"
    conn.execute(f"CREATE MATERIALIZED VIEW v WITH (maintenance = '{mode}') AS {sql}")
    with conn:
        conn.executemany("INSERT INTO t(uid, n, x) VALUES (?, ?, ?)", [(i % 4, i, i + 0.5) for i in range(100)])
    with conn:
        conn.execute("UPDATE t SET n = ?", (2**62,))
        conn.execute("UPDATE t SET n = -id")
    assert_view_matches(conn, "v", sql)
    assert _stage1_rows_left(conn) == 0


@pytest.mark.parametrize("end", ["ROLLBACK", "COMMIT"])
def test_refresh_and_a_fold_inside_a_transaction_then_its_end(tmp_path: Path, end: str) -> None:
    """REFRESH (CREATE's bulk path) and a RELEASE's fold inside a transaction, which then rolls
    back or commits: the TEMP table made inside it may vanish with it; later folds are right."""
    rng = random.Random(7)
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    _tables(conn, rng)
    with conn:
        conn.executemany(T_INSERT, _t_rows(rng, 3 * BULK_ROWS))
    live = {"joined": VIEWS["joined"], **OVER}
    for name, sql in live.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
    conn.execute("BEGIN")
    conn.executemany(T_INSERT, _t_rows(rng, 2 * BULK_ROWS))
    conn.execute("REFRESH MATERIALIZED VIEW joined")
    conn.execute("SAVEPOINT s")
    conn.executemany(T_INSERT, _t_rows(rng, 2 * BULK_ROWS))
    conn.execute("DELETE FROM t WHERE id % 3 = 0")
    conn.execute("RELEASE s")
    for name, sql in live.items():
        assert_view_matches(conn, name, sql)
    conn.execute(end)
    with conn:
        conn.executemany(T_INSERT, _t_rows(rng, 2 * BULK_ROWS))
        conn.execute("UPDATE u SET r = -r")
    for name, sql in live.items():
        assert_view_matches(conn, name, sql)
    assert _stage1_rows_left(conn) == 0


def test_zero_signs_through_bulk_folds(tmp_path: Path) -> None:
    """±0.0 (the lane only counts them) beside 0 and ±1 in an untyped column: SUM/TOTAL/AVG and
    a GROUP BY of y * 1.0, the sign of zero compared. (A MIN/MAX tied across 0 and ±0.0 is the
    documented "extreme tied across types" refusal.)"""
    rng = random.Random(0)
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    _register(conn)
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, g INT, y)")
    conn.execute("CREATE TABLE u(id INTEGER PRIMARY KEY, k INT)")
    conn.executemany("INSERT INTO u VALUES (?, ?)", [(i, i % 2) for i in range(4)])
    values = [-0.0, 0.0, 0, 1.0, -1.0, None]
    live = {
        "a": "SELECT g, SUM(y) AS s, TOTAL(y) AS tt, AVG(y) AS av, COUNT(y) AS n FROM t GROUP BY g",
        "b": "SELECT u.k AS k, SUM(t.y) AS s, TOTAL(t.y) AS tt, MIN(t.g) AS mn FROM t JOIN u ON t.g = u.id GROUP BY u.k",
        "c": "SELECT y * 1.0 AS yy, COUNT(*) AS n FROM t GROUP BY y * 1.0",
    }
    for name, sql in live.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
    for step in range(6):
        with conn:
            if step % 3 == 0:
                conn.executemany(
                    "INSERT INTO t(g, y) VALUES (?, ?)", [(rng.randrange(3), rng.choice(values)) for _ in range(80)]
                )
            elif step % 3 == 1:
                conn.execute("DELETE FROM t WHERE id % ? = 0", (rng.randint(2, 5),))
            else:
                conn.execute("UPDATE t SET y = ? WHERE id % 3 = ?", (rng.choice(values), rng.randrange(3)))
        for name, sql in live.items():
            _assert_exact(conn, name, sql)


def test_the_users_interrupt_during_a_bulk_fold(tmp_path: Path) -> None:
    """(the one apsw exception seen: the user's own interrupt, which rolls the transaction back)"""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE c(id INTEGER PRIMARY KEY, region TEXT)")
    conn.execute("CREATE TABLE o(id INTEGER PRIMARY KEY, cid INT, amt REAL)")
    conn.executemany("INSERT INTO c VALUES (?, ?)", [(i, "NS"[i % 2]) for i in range(5)])
    sql = (
        "SELECT c.region, SUM(o.amt), MIN(o.amt), MAX(o.amt), COUNT(*) FROM o JOIN c ON o.cid = c.id GROUP BY c.region"
    )
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {sql}")
    armed = [False]
    conn.apsw.set_progress_handler(lambda: 1 if armed[0] else 0, 1000)
    with pytest.raises(apsw.InterruptError), conn:
        conn.executemany("INSERT INTO o(cid, amt) VALUES (?, ?)", [(i % 5, i + 0.25) for i in range(300)])
        armed[0] = True
    armed[0] = False
    assert conn.execute("SELECT count(*) FROM o").fetchone()[0] == 0
    assert_view_matches(conn, "v", sql)
    with conn:
        conn.executemany("INSERT INTO o(cid, amt) VALUES (?, ?)", [(i % 5, i + 0.25) for i in range(300)])
    assert_view_matches(conn, "v", sql)
    assert _stage1_rows_left(conn) == 0


def test_many_sums_past_the_lane_statements_column_limit(tmp_path: Path) -> None:
    """170 sums: the lane's one statement (12 columns a sum) passes SQLite's 2000 columns and
    fails; the exponent split then adds each sum's REALs, as exactly."""
    rng = random.Random(3)
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    _register(conn)
    _tables(conn, rng)
    items = [f"SUM(t.x * {i + 1}) AS s{i}" if i % 3 else f"TOTAL(t.y + {i}) AS s{i}" for i in range(170)]
    sql = f"SELECT u.k, {', '.join(items)}, MIN(t.x) AS mn FROM t JOIN u ON t.uid = u.id GROUP BY u.k"
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {sql}")
    with conn:
        conn.executemany(T_INSERT, _t_rows(rng, 3 * BULK_ROWS))
    _assert_exact(conn, "v", sql)
    with conn:
        conn.execute("DELETE FROM t WHERE id % 2 = 0")
    _assert_exact(conn, "v", sql)


# ------------------------------------------------------------------ found: an authorizer refusing tables


def test_an_authorizer_refusing_tables_does_not_stall_a_bulk_fold(tmp_path: Path) -> None:
    path = str(tmp_path / "db.sqlite")
    admin = matview.connect(path)
    admin.execute("CREATE TABLE c(id INTEGER PRIMARY KEY, region TEXT)")
    admin.execute("CREATE TABLE o(id INTEGER PRIMARY KEY, cid INT, amt REAL)")
    admin.executemany("INSERT INTO c VALUES (?, ?)", [(i, "NS"[i % 2]) for i in range(4)])
    sql = "SELECT c.region, MIN(o.amt) AS lo, COUNT(*) AS n FROM o JOIN c ON o.cid = c.id GROUP BY c.region"
    admin.execute(f"CREATE MATERIALIZED VIEW v AS {sql}")
    admin.close()
    raw = apsw.Connection(path)
    refused = {apsw.SQLITE_CREATE_TABLE, apsw.SQLITE_CREATE_TEMP_TABLE}  # ("no new tables")
    raw.authorizer = lambda action, *_: apsw.SQLITE_DENY if action in refused else apsw.SQLITE_OK
    conn = matview.install(raw)
    with conn:
        conn.executemany("INSERT INTO o(cid, amt) VALUES (?, ?)", [(i % 4, i + 0.5) for i in range(BULK_ROWS)])
    assert_view_matches(conn, "v", sql)  # (holds: the read merges the pending changes)
    # what clients without matview read: [] (the fold stalled: "cannot be folded: not authorized")
    assert _bag(conn.apsw.execute("SELECT * FROM main.v")) == _bag(conn.apsw.execute(sql))
