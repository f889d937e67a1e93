"""Differential tests with extreme values, ordinary and STRICT tables, every aggregate, both modes.

Values: ±(2**63-1), -2**63, 2**53+1, ±1e308, ±DBL_MAX, ±Inf (`9e999`), NaN (SQLite stores NULL),
-0.0, denormals, small ints and reals, texts that do and do not look like numbers ('1', '1.0',
' 1', '1e999', '9223372036854775808', 'abc', ''), blobs (x'00', x'', x'31'), NULL.

Each randomized test ("lane") builds one base table (an ordinary table with INTEGER, REAL, TEXT,
NUMERIC and untyped columns, or a STRICT table with INTEGER, REAL, TEXT and ANY columns), creates a
few views over some of its columns in both maintenance modes ('immediate' and 'deferred'), runs
writes (single and multi-row INSERT, UPDATE, DELETE, bulk statements of >= 64 changed rows, explicit
transactions and `with conn:` blocks that commit or roll back, savepoints rolled back, writes by a
plain apsw connection without matview, flush, reopen, REFRESH, views created over existing rows)
and after every step checks:

* every view equals its defining SELECT run by SQLite now (`oracle.bag`: typed rows), or — where
  SQLite's own SELECT raises (`integer overflow`) — reading the view raises `matview.Error`;
* CREATE either succeeds or raises `matview.UnsupportedQuery` (the view is then skipped);
* a base write fails exactly when the same write fails on a plain copy of the table without views
  (the "shadow", an in-memory database with the same history) and with the same exception type:
  a write never fails because of a view; the base tables stay identical.

Order-dependent answers. SQLite adds SUM/TOTAL/AVG in scan order: a SUM of integers only whose
running sum leaves int64 raises `integer overflow` even when the final sum fits (a non-integer
anywhere makes it approximate instead, in every order), and a double running sum that reaches
±Inf stays there; MIN/MAX/GROUP BY/DISTINCT over equal values of different types
(1, 1.0) show whichever comes first. Before each write the shadow computes every view's SELECT
over its rows in several scan orders (`PERMUTATIONS`); a write after which the answers differ is
skipped (not sent to matview), so the randomized lanes only compare answers SQLite gives in every
order. Such order-dependent cases are in `test_order_dependent_sums_refused_on_read`: the
contract is that reading such a view raises `matview.Error` (README, Semantics).

Tests marked xfail stand for a finding still open (F5 invalid UTF-8 text,
F7 exact rounding vs SQLite's compensated sum, F11 REAL and INTEGER -2**63 in one column;
F8, the deferred read heuristic, is fixed); each deterministic test's docstring describes its
bug. F1-F4 were fixed and their tests are plain tests now. oracle.bag cannot
see the sign of a zero; only the F6 test checks it. On failure a randomized lane prints a
self-contained replay script. Shrinking is off by default (CI time while lanes are xfail); set
EXTREMES_SHRINK=1 to shrink a failing example, HYPOTHESIS_PROFILE=long for ~20x more examples.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw
import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from oracle import assert_view_matches, bag  # noqa: E402

matview: Any = pytest.importorskip("matview")
circuit: Any = pytest.importorskip("matview.circuit")

LONG = os.environ.get("HYPOTHESIS_PROFILE", "") == "long"
SHRINK = os.environ.get("EXTREMES_SHRINK", "") not in ("", "0") or LONG


def hsettings(examples: int) -> settings:
    phases = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target]
    if SHRINK:
        phases.append(Phase.shrink)
    return settings(
        max_examples=examples * (20 if LONG else 1),
        deadline=None,
        phases=phases,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
        print_blob=True,
    )


# --------------------------------------------------------------------------------------
# values

I64_MAX = 2**63 - 1
I64_MIN = -(2**63)
DBL_MAX = sys.float_info.max

EXTREME_VALUES: list[Any] = [
    I64_MAX,
    -I64_MAX,
    I64_MIN,
    2**53 + 1,
    1e308,
    -1e308,
    DBL_MAX,
    -DBL_MAX,
    math.inf,
    -math.inf,
    math.nan,  # SQLite turns NaN into NULL
    -0.0,
    5e-324,
    -5e-324,
    2.2250738585072014e-308,
    9.223372036854775807e18,  # 2**63 as a double: just outside int64
    -9.223372036854775808e18,  # -2**63 as a double: equal to I64_MIN, yet stays REAL in INTEGER columns
    "1e308",
    "1e999",
    "-1e999",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
]
ORDINARY_VALUES: list[Any] = [
    None,
    0,
    1,
    -1,
    2,
    7,
    0.0,
    1.0,
    0.5,
    -2.25,
    1.5,
    0.1,
    "1",
    "1.0",
    " 1",
    "1 ",
    "-0",
    "abc",
    "",
    "0x10",
    b"\x00",
    b"",
    b"1",
]


def sql_literal(value: Any) -> str:
    """A SQL literal SQLite reads back as `value` (NaN becomes NULL, as SQLite stores it)."""
    if value is None:
        return "NULL"
    if isinstance(value, float):
        if math.isnan(value):
            return "(9e999 + -9e999)"
        if math.isinf(value):
            return "9e999" if value > 0 else "-9e999"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return "x'" + bytes(value).hex() + "'"


def value_strategy(palette: list[Any]) -> st.SearchStrategy[Any]:
    """Values of one program: its few extreme values (so that the same extreme value meets
    itself in a sum: 1e308 + 1e308), ordinary values and small integers."""
    extreme = st.sampled_from(palette)
    return st.one_of(extreme, extreme, st.sampled_from(ORDINARY_VALUES), st.integers(-3, 3))


# --------------------------------------------------------------------------------------
# tables and views

ORDINARY_TABLE = "CREATE TABLE t (id INTEGER PRIMARY KEY, g INTEGER, i INTEGER, r REAL, s TEXT, n NUMERIC, u)"
STRICT_TABLE = "CREATE TABLE t (id INTEGER PRIMARY KEY, g INTEGER, i INTEGER, r REAL, s TEXT, a ANY) STRICT"


@dataclass(frozen=True)
class Lane:
    create: str
    columns: tuple[str, ...]  # the value columns the views read (writes touch these)


LANES = {
    "ordinary_numeric": Lane(ORDINARY_TABLE, ("i", "r", "n")),
    "ordinary_text_untyped": Lane(ORDINARY_TABLE, ("s", "u")),
    "strict_typed": Lane(STRICT_TABLE, ("i", "r", "s")),
    "strict_any": Lane(STRICT_TABLE, ("a",)),
}

AGGREGATES = [
    "COUNT(*)",
    "COUNT({c})",
    "SUM({c})",
    "TOTAL({c})",
    "AVG({c})",
    "MIN({c})",
    "MAX({c})",
    "COUNT(DISTINCT {c})",
    "SUM(DISTINCT {c})",
    "TOTAL(DISTINCT {c})",
    "AVG(DISTINCT {c})",
]


@dataclass(frozen=True)
class ViewDef:
    sql: str
    column: str
    permute: bool = True  # False for GROUP_CONCAT: its order is rowid order by contract


def view_defs(c: str) -> list[ViewDef]:
    """Every view shape over value column `c` (these templates are ours, not user text)."""
    out: list[ViewDef] = []
    for template in AGGREGATES:
        agg = template.replace("{c}", c)
        out += [
            ViewDef(f"SELECT {agg} FROM t", c),
            ViewDef(f"SELECT g, {agg} FROM t GROUP BY g", c),
            ViewDef(f"SELECT {c}, typeof({c}), {agg} FROM t GROUP BY {c}", c),
        ]
    every = f"COUNT(*), COUNT({c}), SUM({c}), TOTAL({c}), AVG({c}), MIN({c}), MAX({c})"
    out += [
        ViewDef(f"SELECT {every} FROM t", c),
        ViewDef(f"SELECT g, {every} FROM t GROUP BY g", c),
        ViewDef(
            f"SELECT g, SUM({c}) + 0, typeof(SUM({c})), TOTAL({c}) * 2, MAX({c}) - MIN({c}), AVG({c}) > 0 "
            f"FROM t GROUP BY g HAVING COUNT({c}) > 0",
            c,
        ),
        ViewDef(f"SELECT id, {c}, typeof({c}) FROM t", c),
        ViewDef(f"SELECT DISTINCT {c} FROM t", c),
        ViewDef(f"SELECT DISTINCT {c}, typeof({c}) FROM t", c),
        ViewDef(f"SELECT id, {c} FROM t WHERE {c} = 1", c),
        ViewDef(f"SELECT {c}, typeof({c}) FROM t WHERE {c} > 0", c),
        ViewDef(f"SELECT GROUP_CONCAT({c}) FROM t", c, permute=False),
        ViewDef(f"SELECT g, GROUP_CONCAT({c}, '|'), COUNT(*) FROM t GROUP BY g", c, permute=False),
    ]
    return out


#: scan orders the shadow tries: values ascending / descending (the extreme running sums),
#: integers before or after the rest (where SQLite's compensated sum starts from the exact integer part),
#: storage classes in either order (which of 1 / 1.0 / '1' a MIN/MAX/GROUP BY/DISTINCT shows)
PERMUTATIONS = [
    "id DESC",
    "{c} + 0, id",
    "{c} + 0 DESC, id",
    "typeof({c} + 0) = 'integer' DESC, {c} + 0 DESC, id",
    "typeof({c} + 0) = 'integer', {c} + 0 DESC, id",
    "typeof({c} + 0) = 'integer' DESC, {c} + 0, id",
    "typeof({c} + 0) = 'integer', {c} + 0, id",
    "typeof({c}), id",
    "typeof({c}) DESC, id DESC",
]


def outcome(conn: Any, sql: str) -> tuple[str, Any]:
    """("rows", typed bag) or ("error", message) of a SELECT run by SQLite."""
    try:
        return ("rows", bag(conn.execute(sql).fetchall()))
    except apsw.Error as exc:
        return ("error", str(exc))


def permuted(view: ViewDef, order: str) -> str:
    source = f" FROM (SELECT * FROM t ORDER BY {order.replace('{c}', view.column)}) AS t"
    return view.sql.replace(" FROM t", source, 1)


def order_dependent(conn: Any, view: ViewDef) -> str | None:
    """A description of how SQLite's answer to `view` depends on scan order now, or None."""
    natural = outcome(conn, view.sql)
    if not view.permute:
        return None
    for order in PERMUTATIONS:
        other = outcome(conn, permuted(view, order))
        if other != natural:
            return f"{view.sql}: natural scan {natural} vs ORDER BY {order}: {other}"
    return None


# --------------------------------------------------------------------------------------
# programs


@dataclass
class Program:
    lane: str
    views: list[ViewDef]
    initial_views: int  # views created on the empty table; the rest by "create" ops
    ops: list[tuple[Any, ...]]
    small_bulk: bool = False  # fold every delta set at a time (matview.circuit.BULK_ROWS = 1)


def _where(draw: Any, columns: tuple[str, ...], values: st.SearchStrategy[Any]) -> str:
    kind = draw(st.sampled_from(["id", "value", "group", "mod"]))
    if kind == "id":
        return f"id = {draw(st.integers(1, 8))}"
    if kind == "value":
        return f"{draw(st.sampled_from(columns))} IS {sql_literal(draw(values))}"
    if kind == "group":
        return f"g = {draw(st.integers(0, 2))}"
    return f"id % {draw(st.integers(2, 3))} = {draw(st.integers(0, 1))}"


@st.composite
def write_ops(draw: Any, columns: tuple[str, ...], values: st.SearchStrategy[Any]) -> tuple[Any, ...]:
    kind = draw(st.sampled_from(["insert", "insert", "insert", "update", "update_expr", "delete", "bulk"]))
    if kind == "insert":
        rows = []
        for _ in range(draw(st.integers(1, 3))):
            chosen = draw(st.lists(st.sampled_from(columns), min_size=1, max_size=2, unique=True))
            rows.append((draw(st.sampled_from([0, 1, 2, None])), {c: draw(values) for c in chosen}))
        used = sorted({c for _, row in rows for c in row})
        tuples = ", ".join(
            "(" + ", ".join([sql_literal(g)] + [sql_literal(row.get(c)) for c in used]) + ")" for g, row in rows
        )
        return ("sql", f"INSERT INTO t (g, {', '.join(used)}) VALUES {tuples}")
    if kind == "update":
        column = draw(st.sampled_from(columns))
        return ("sql", f"UPDATE t SET {column} = {sql_literal(draw(values))} WHERE {_where(draw, columns, values)}")
    if kind == "update_expr":
        column = draw(st.sampled_from(columns))
        expr = draw(st.sampled_from([f"-{column}", f"{column} * 2", f"{column} + 1", "NULL"]))
        target = draw(st.sampled_from(["g", column]))
        if target == "g":
            return ("sql", "UPDATE t SET g = (coalesce(g, 0) + 1) % 3")  # every row: a bulk fold when many
        return ("sql", f"UPDATE t SET {column} = {expr} WHERE {_where(draw, columns, values)}")
    if kind == "delete":
        return ("sql", f"DELETE FROM t WHERE {_where(draw, columns, values)}")
    # >= 64 changed rows in one statement: folds (and CREATEs after it) take the set-at-a-time path.
    # The filler is 0 and NULL: small values of both signs next to one huge value would make
    # most sums order-dependent (skipped), hiding the huge value from the differential check.
    column = draw(st.sampled_from(columns))
    first = sql_literal(draw(values))
    return (
        "sql",
        f"INSERT INTO t (g, {column}) SELECT x % 3, CASE WHEN x = 1 THEN {first} WHEN x % 4 = 0 THEN NULL ELSE 0 END "
        "FROM "
        "(WITH RECURSIVE k(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM k WHERE x < 70) SELECT x FROM k)",
    )


@st.composite
def programs(draw: Any, lane_name: str) -> Program:
    lane = LANES[lane_name]
    # Most programs read and write one column, so that extreme values meet in its aggregates.
    columns = lane.columns if draw(st.integers(0, 3)) == 0 else (draw(st.sampled_from(lane.columns)),)
    pool = [v for c in columns for v in view_defs(c)]
    views = draw(st.lists(st.sampled_from(pool), min_size=2, max_size=5, unique_by=lambda v: v.sql))
    initial = draw(st.integers(1, len(views)))
    ops: list[tuple[Any, ...]] = []
    palette = draw(st.lists(st.sampled_from(EXTREME_VALUES), min_size=1, max_size=3))
    writes = write_ops(columns, value_strategy(palette))
    for _ in range(draw(st.integers(3, 14))):
        kind = draw(
            st.sampled_from(
                ["write", "write", "write", "write", "txn", "txn", "other", "flush", "reopen", "create", "refresh"]
            )
        )
        if kind == "write":
            ops.append(draw(writes))
        elif kind == "other":
            ops.append(("other", draw(writes)[1]))  # a write by a client without matview
        elif kind == "txn":
            end = draw(st.sampled_from(["COMMIT", "ROLLBACK", "with", "with_raise", "savepoint"]))
            ops.append(("txn", end, draw(st.lists(writes, min_size=1, max_size=4))))
        else:
            ops.append((kind,))
    return Program(lane_name, views, initial, ops, draw(st.booleans()))


# --------------------------------------------------------------------------------------
# running a program


class Rollback(Exception):
    """Raised inside `with conn:` to roll it back."""


class Runner:
    """Runs a Program against matview and a plain shadow copy; checks after every step.
    Keeps a replay script (`script`) of what it did to matview."""

    def __init__(self, path: Path, program: Program) -> None:
        self.path = str(path)
        self.p = program
        self.shadow = apsw.Connection(":memory:")
        self.conn: Any = None
        self.live: dict[str, str] = {}
        self.created = 0
        self.skipped: list[str] = []
        self.lines = [
            "import os, apsw, matview",
            "from collections import Counter",
            "PATH = '/tmp/matview-extremes-repro.db'",
            "for suffix in ('', '-wal', '-shm', '-journal'):",
            "    if os.path.exists(PATH + suffix): os.remove(PATH + suffix)",
            "def typed(rows): return Counter(tuple((type(v).__name__, v) for v in r) for r in rows)",
            "def check(conn, view, sql):",
            "    try: want = typed(conn.execute(sql).fetchall())",
            "    except apsw.Error as e: want = e",
            "    try: got = typed(conn.execute(f'SELECT * FROM \"{view}\"').fetchall())",
            "    except matview.Error as e: got = e",
            "    if isinstance(want, Exception): assert isinstance(got, matview.Error), (view, want, got)",
            "    else: assert got == want, (view, sql, got, want)",
            "class Rollback(Exception): pass",
        ]

    @property
    def script(self) -> str:
        return "\n".join(self.lines)

    def emit(self, line: str) -> None:
        self.lines.append(line)

    def fail(self, message: str) -> None:
        raise AssertionError(f"{message}\n--- replay (python) ---\n{self.script}")

    # -- matview side ----------------------------------------------------------------
    def open(self) -> None:
        self.emit("conn = matview.connect(PATH)")
        self.conn = matview.connect(self.path)

    def create_next(self) -> None:
        if self.created >= len(self.p.views):
            return
        view = self.p.views[self.created]
        self.created += 1
        if order_dependent(self.shadow, view):
            self.skipped.append(f"create of {view.sql} (order-dependent now)")
            return
        for mode in ("immediate", "deferred"):
            name = f"e{self.created}_{mode[:3]}"
            sql = f"CREATE MATERIALIZED VIEW {name} WITH (maintenance = '{mode}') AS {view.sql}"
            self.emit(f"conn.execute({sql!r})")
            try:
                self.conn.execute(sql)
            except matview.UnsupportedQuery as exc:
                self.emit(f"# refused: {exc}")
                self.skipped.append(f"{view.sql}: {exc}")
                return
            except Exception as exc:
                self.fail(f"CREATE raised {type(exc).__module__}.{type(exc).__name__}: {exc}\n  {sql}")
            self.live[name] = view.sql

    def check(self) -> None:
        for name, sql in self.live.items():
            self.emit(f"check(conn, {name!r}, {sql!r})")
            want = outcome(self.conn, sql)
            try:
                got: tuple[str, Any] = ("rows", bag(self.conn.execute(f'SELECT * FROM "{name}"').fetchall()))
            except matview.Error as exc:
                got = ("error", str(exc))
            except Exception as exc:
                self.fail(f"reading view {name} raised {type(exc).__module__}.{type(exc).__name__}: {exc}")
            if want[0] == "error":
                if got[0] != "error":
                    self.fail(f"view {name}: its SELECT raises {want[1]!r} but the view returned {got[1]}\n  {sql}")
            elif got != want:
                detail = got[1] if got[0] == "error" else f"missing {want[1] - got[1]}, extra {got[1] - want[1]}"
                self.fail(f"view {name} differs from its SELECT: {detail}\n  {sql}")
        mine = self.conn.execute("SELECT * FROM t ORDER BY id").fetchall()
        theirs = self.shadow.execute("SELECT * FROM t ORDER BY id").fetchall()
        if bag(mine) != bag(theirs):
            self.fail(f"base table differs from the shadow's: {mine} != {theirs}")

    def control(self, sql: str, matview_only: bool = False) -> None:
        """Transaction control, on both sides (REFRESH: matview only)."""
        self.emit(f"conn.execute({sql!r})")
        try:
            self.conn.execute(sql).fetchall()
        except Exception as exc:
            self.fail(f"{sql} raised {type(exc).__module__}.{type(exc).__name__}: {exc}")
        if not matview_only:
            self.shadow.execute(sql)

    def write(self, sql: str, other: bool = False) -> None:
        """A base write through matview (or, `other`, through a plain apsw connection, a client
        without matview whose changes the next matview statement folds)."""
        self.shadow.execute("SAVEPOINT shadow_write")
        failed: Exception | None = None
        try:
            self.shadow.execute(sql).fetchall()
        except apsw.Error as exc:
            failed = exc
            # SQLite 3.54 leaves the rows a multi-row statement wrote before a STRICT datatype
            # error in place inside an open transaction (no statement journal), where the same
            # statement on a table with matview's triggers is atomic: undo them here.
            self.shadow.execute("ROLLBACK TO shadow_write")
        if failed is None:
            dependent = next(filter(None, (order_dependent(self.shadow, v) for v in self.p.views)), None)
            if dependent is not None:
                self.shadow.execute("ROLLBACK TO shadow_write")
                self.shadow.execute("RELEASE shadow_write")
                self.skipped.append(f"{sql} -> {dependent}")
                return
        self.shadow.execute("RELEASE shadow_write")
        client = "other" if other else "conn"
        if other:
            self.emit("other = apsw.Connection(PATH)")
        self.emit(f"try: {client}.execute({sql!r}).fetchall()")
        self.emit(
            f"except Exception as e: assert {failed is not None!r} and type(e).__name__ == "
            f"{type(failed).__name__!r}, repr(e)"
        )
        if other:
            self.emit("other.close()")
        try:
            if other:
                plain = apsw.Connection(self.path)
                plain.set_busy_timeout(5000)
                try:
                    plain.execute(sql).fetchall()
                finally:
                    plain.close()
            else:
                self.conn.execute(sql).fetchall()
        except Exception as exc:
            if failed is not None and type(exc) is type(failed):
                return
            self.fail(
                f"base write failed because of a view: {type(exc).__module__}.{type(exc).__name__}: {exc}\n  {sql}"
                + (f"\n  (without views it fails with {failed!r})" if failed else "")
            )
        if failed is not None:
            self.fail(f"write succeeded through matview but fails without views ({failed!r}): {sql}")

    def txn(self, end: str, body: list[tuple[Any, ...]]) -> None:
        if end in ("with", "with_raise"):
            self.emit("conn.__enter__()")
            self.conn.__enter__()
            self.shadow.execute("BEGIN")
            for op in body:
                self.write(op[1])
                self.check()
            if end == "with":
                self.emit("conn.__exit__(None, None, None)")
                try:
                    self.conn.__exit__(None, None, None)
                except Exception as exc:
                    self.fail(f"commit of `with conn:` raised {type(exc).__module__}.{type(exc).__name__}: {exc}")
                self.shadow.execute("COMMIT")
            else:
                self.emit("conn.__exit__(Rollback, Rollback(), None)")
                self.conn.__exit__(Rollback, Rollback(), None)
                self.shadow.execute("ROLLBACK")
            return
        self.control("BEGIN")
        if end == "savepoint":
            self.write(body[0][1])
            self.check()
            self.control("SAVEPOINT sp")
            for op in body[1:]:
                self.write(op[1])
                self.check()
            self.control("ROLLBACK TO sp")
            self.check()
            self.control("RELEASE sp")
            self.control("COMMIT")
            return
        for op in body:
            self.write(op[1])
            self.check()
        self.control(end)

    def run(self) -> None:
        self.shadow.execute(LANES[self.p.lane].create)
        self.open()
        self.emit(f"conn.execute({LANES[self.p.lane].create!r})")
        self.conn.execute(LANES[self.p.lane].create)
        for _ in range(self.p.initial_views):
            self.create_next()
        self.check()
        for op in self.p.ops:
            kind = op[0]
            if kind == "sql":
                self.write(op[1])
            elif kind == "txn":
                self.txn(op[1], op[2])
            elif kind == "flush":
                self.emit("conn.flush()")
                try:
                    self.conn.flush()
                except Exception as exc:
                    self.fail(f"flush raised {type(exc).__module__}.{type(exc).__name__}: {exc}")
            elif kind == "reopen":
                self.emit("conn.close()")
                self.conn.close()
                self.open()
            elif kind == "create":
                self.create_next()
            elif kind == "other":
                self.write(op[1], other=True)
            elif kind == "refresh":
                for name in list(self.live):
                    self.control(f"REFRESH MATERIALIZED VIEW {name}", matview_only=True)
            self.check()
        self.emit("conn.close()")
        self.conn.close()
        self.conn = None


_counter = [0]


def run_program(tmp_path_factory: pytest.TempPathFactory, program: Program) -> None:
    _counter[0] += 1
    path = tmp_path_factory.mktemp(f"extremes{_counter[0]}") / "db.sqlite"
    runner = Runner(path, program)
    bulk_rows = getattr(circuit, "BULK_ROWS", None)
    if program.small_bulk and bulk_rows is not None:
        # Folds of >= BULK_ROWS delta rows are aggregated by SQL (operators/aggregate_sql);
        # both paths must give the same views, so some programs take the SQL path for all.
        circuit.BULK_ROWS = 1
        runner.emit("import matview.circuit; matview.circuit.BULK_ROWS = 1")
    try:
        runner.run()
    finally:
        if bulk_rows is not None:
            circuit.BULK_ROWS = bulk_rows
        for line in runner.skipped:
            note(f"skipped: {line}")
        if runner.conn is not None:
            try:
                runner.conn.close()
            except Exception:
                pass
        runner.shadow.close()


# --------------------------------------------------------------------------------------
# randomized lanes
#
# A lane still marked xfail can hit a finding that is open (F7, F11: reproduced one by one in the
# deterministic tests below); strict=False, so it passes while it does not. Remove the mark
# once they are fixed.


@pytest.mark.xfail(reason="F7 (exact rounding vs SQLite's sum), F11 (-2**63 REAL and INTEGER)", strict=False)
@hsettings(20)
@given(program=programs("ordinary_numeric"))
def test_extremes_ordinary_numeric_columns(tmp_path_factory, program):
    run_program(tmp_path_factory, program)


@pytest.mark.xfail(reason="F7 (exact rounding vs SQLite's compensated sum)", strict=False)
@hsettings(20)
@given(program=programs("ordinary_text_untyped"))
def test_extremes_ordinary_text_and_untyped_columns(tmp_path_factory, program):
    run_program(tmp_path_factory, program)


@pytest.mark.xfail(reason="F7 (exact rounding vs SQLite's compensated sum: a REAL column's SUM)", strict=False)
@hsettings(20)
@given(program=programs("strict_typed"))
def test_extremes_strict_typed_columns(tmp_path_factory, program):
    run_program(tmp_path_factory, program)


@pytest.mark.xfail(reason="F7 (exact rounding vs SQLite's compensated sum: an ANY column mixes reals)", strict=False)
@hsettings(12)
@given(program=programs("strict_any"))
def test_extremes_strict_any_column(tmp_path_factory, program):
    run_program(tmp_path_factory, program)


# --------------------------------------------------------------------------------------
# deterministic reproductions, one per finding


def check_view(conn: Any, name: str, sql: str) -> None:
    """`name` equals `sql` run now as a bag of typed rows, or raises matview.Error where it raises."""
    want = outcome(conn, sql)
    try:
        got: tuple[str, Any] = ("rows", bag(conn.execute(f'SELECT * FROM "{name}"').fetchall()))
    except matview.Error as exc:
        got = ("error", str(exc))
    if want[0] == "error":
        assert got[0] == "error", f"{name}: its SELECT raises {want[1]!r}, the view returned {got[1]}"
    else:
        assert got == want, f"{name}: view {got[1]} != SELECT {want[1]}  ({sql})"


def create_views(conn: Any, mode: str, views: list[str]) -> dict[str, str]:
    """Create the views (a refusal with UnsupportedQuery skips one; anything else fails)."""
    live = {}
    for k, sql in enumerate(views):
        name = f"v{k}_{mode[:3]}"
        try:
            conn.execute(f"CREATE MATERIALIZED VIEW {name} WITH (maintenance = '{mode}') AS {sql}")
        except matview.UnsupportedQuery:
            continue
        live[name] = sql
    return live


def scenario(
    path: Path,
    setup: list[str],
    views: list[str],
    writes: list[str],
    modes: tuple[str, ...] = ("immediate", "deferred"),
    create_after: int = 0,
) -> None:
    """Run `setup` (plain SQL), create each view in each mode (after the first `create_after`
    writes), run `writes` one by one through matview, checking every view after each step.
    CREATE succeeds or raises UnsupportedQuery; no write may raise (they are all valid SQL)."""
    for mode in modes:
        conn = matview.connect(str(path.with_name(f"{path.stem}-{mode}.sqlite")))
        try:
            for sql in setup:
                conn.execute(sql)
            live: dict[str, str] = {}
            for step, sql in enumerate([*writes, None]):
                if step == create_after:
                    live = create_views(conn, mode, views)
                    for name, view_sql in live.items():
                        check_view(conn, name, view_sql)
                if sql is None:
                    break
                conn.execute(sql).fetchall()
                for name, view_sql in live.items():
                    check_view(conn, name, view_sql)
        finally:
            conn.close()


@pytest.mark.parametrize(
    "column, values",
    [
        ("r REAL", ["1e308", "1.5e308"]),
        ("r REAL", ["-1e308", "-1.7976931348623157e308"]),
        ("r TEXT", ["'1e308'", "'1.5e308'"]),  # SUM of text adds its numeric value
        ("r", ["1e308", "9223372036854775807", "1.7976931348623157e308"]),
    ],
)
def test_f1_real_sum_past_the_double_range(tmp_path, column, values):
    """Partial sums beyond DBL_MAX in one direction only: SQLite answers ±Inf in every scan
    order. matview raised OverflowError from the fold (immediate: the INSERT fails), from reads
    (deferred), and from CREATE over such rows."""
    views = [
        "SELECT SUM(r), TOTAL(r), AVG(r) FROM t",
        "SELECT g, TOTAL(r) FROM t GROUP BY g",
        "SELECT TOTAL(r) > 0, SUM(r) * 0 FROM t",  # an expression over the sum
    ]
    if column != "r":  # SUM/TOTAL/AVG(DISTINCT) of an untyped column is refused by design
        views.append("SELECT TOTAL(DISTINCT r), AVG(DISTINCT r) FROM t")
    setup = [f"CREATE TABLE t (id INTEGER PRIMARY KEY, g INTEGER, {column})"]
    writes = [f"INSERT INTO t (g, r) VALUES (1, {v})" for v in values] + ["DELETE FROM t WHERE id = 1"]
    scenario(tmp_path / "db.sqlite", setup, views, writes)
    scenario(tmp_path / "late.sqlite", setup, views, writes, create_after=len(values))


def test_f2_strict_any_column_keeps_storage_classes(tmp_path):
    """'1', ' 1', '-0', '9223372036854775807' (text), 1.0 and -0.0 (real) stay what they are in
    an ANY column of a STRICT table; folds read them back from `__dbsp_delta_<t>`, whose copy of
    the declared type ANY has NUMERIC affinity in an ordinary table and converts them."""
    scenario(
        tmp_path / "db.sqlite",
        ["CREATE TABLE t (id INTEGER PRIMARY KEY, g INTEGER, a ANY) STRICT"],
        [
            "SELECT id, a, typeof(a) FROM t",
            "SELECT DISTINCT a FROM t",
            "SELECT g, MIN(a), MAX(a), COUNT(DISTINCT a), GROUP_CONCAT(a) FROM t GROUP BY g",
            "SELECT id FROM t WHERE a = 1",
        ],
        [
            "INSERT INTO t (g, a) VALUES (1, '1'), (1, ' 1'), (1, '-0'), (1, '9223372036854775807')",
            "INSERT INTO t (g, a) VALUES (1, 1.0), (1, -0.0), (1, '-1e999')",
            "DELETE FROM t WHERE a = '1'",
        ],
    )


def test_f2_strict_any_group_column_in_expressions(tmp_path):
    """An expression over an ANY GROUP BY column is evaluated on a per-group table whose column
    copies the declared type ANY (NUMERIC affinity): typeof('1') became 'integer'."""
    scenario(
        tmp_path / "db.sqlite",
        ["CREATE TABLE t (id INTEGER PRIMARY KEY, a ANY) STRICT", "INSERT INTO t (a) VALUES ('1'), (2.0)"],
        ["SELECT a, typeof(a), COUNT(*) FROM t GROUP BY a", "SELECT a FROM t GROUP BY a HAVING typeof(a) = 'text'"],
        ["INSERT INTO t (a) VALUES ('-0')"],
    )


def test_f2_strict_any_equal_values_of_different_types(tmp_path):
    """1 and 1.0 are one group / one DISTINCT value in an ANY column; when the row shown is
    deleted SQLite shows the remaining 1.0 (README: 'Equal but different values'). The front end
    took ANY for a typed column (one variant only) and kept showing the deleted 1; it also
    accepts SUM(DISTINCT a), which the README refuses for untyped columns."""
    scenario(
        tmp_path / "db.sqlite",
        ["CREATE TABLE t (id INTEGER PRIMARY KEY, a ANY) STRICT", "INSERT INTO t (a) VALUES (1), (1.0)"],
        ["SELECT a, COUNT(*) FROM t GROUP BY a", "SELECT SUM(DISTINCT a) FROM t"],
        ["DELETE FROM t WHERE id = 1"],
    )


BRACED_VIEWS = [
    "SELECT s FROM t WHERE s <> '{weight}'",  # silently became "__dbsp_weight" / 1
    "SELECT COUNT(*) FROM t WHERE s = '{source}'",  # silently became the delta subquery's text
    "SELECT '{x}' || s FROM t",  # KeyError
    "SELECT s, json_object('k', s) FROM t WHERE json_valid('{}')",  # IndexError
    "SELECT COUNT(*) FILTER (WHERE s <> '{') FROM t",  # ValueError
    "SELECT s || '}', COUNT(*) FROM t GROUP BY s || '}'",  # ValueError
    "SELECT s AS \"{a}\" FROM t WHERE s > '{0}'",  # IndexError
    'SELECT "{t}".s FROM t AS "{t}"',  # KeyError
]


@pytest.mark.parametrize("view", BRACED_VIEWS)
def test_f3_braces_in_view_sql(tmp_path, view):
    scenario(
        tmp_path / "db.sqlite",
        ["CREATE TABLE t (id INTEGER PRIMARY KEY, s TEXT)", "INSERT INTO t (s) VALUES ('{source}'), ('{weight}')"],
        [view],
        ["INSERT INTO t (s) VALUES ('a'), ('{source}'), ('{weight}'), ('\"__dbsp_weight\"'), ('1')"],
    )


@pytest.mark.parametrize(
    "table, column",
    [('"{t}"', "v"), ("t", '"{x}"'), ("t", '"{extra}"'), ("t", '"}"')],
    ids=["table", "col", "extra", "brace"],
)
def test_f3_braces_in_table_and_column_names(tmp_path, table, column):
    scenario(
        tmp_path / "db.sqlite",
        [f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, {column} INTEGER UNIQUE)"],
        [f"SELECT {column}, COUNT(*) FROM {table} GROUP BY {column}"],
        [f"INSERT INTO {table} VALUES (1, 2)", f"INSERT OR REPLACE INTO {table} VALUES (2, 2)"],
    )


def test_f4_int64_min_deleted_in_a_bulk_fold(tmp_path):
    """A fold of >= 64 delta rows (matview.circuit.BULK_ROWS) is aggregated by SQL; deleting a
    row holding -2**63 contributes -2**63 * -1, which SQLite computes as the REAL 9.2e18: the
    exact integer sum became a lossy float (SUM 5 showed 0.0)."""
    filler = (
        "INSERT INTO t (i) SELECT 0 FROM "
        "(WITH RECURSIVE k(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM k WHERE x < 70) SELECT x FROM k)"
    )
    scenario(
        tmp_path / "db.sqlite",
        ["CREATE TABLE t (id INTEGER PRIMARY KEY, g INTEGER, i INTEGER)"],
        ["SELECT SUM(i), TOTAL(i), AVG(i) FROM t", "SELECT g, SUM(i) FROM t GROUP BY g"],
        ["INSERT INTO t (i) VALUES (-9223372036854775808), (5)", filler, "DELETE FROM t WHERE i <= 0"],
    )


def test_f5_invalid_utf8_never_blocks_writes(tmp_path):
    """SQLite stores any bytes as TEXT (CAST(x'ff' AS TEXT)), and GROUP_CONCAT casts a blob
    to TEXT. The fold decodes it in Python and raises UnicodeDecodeError: the base write fails
    (immediate), and once another client wrote such a row every later write through matview,
    to any table, fails. Reading the view may raise (SQLite's own SELECT raises through apsw
    too), but writes must not. (Fixed: the view stalls, and folds again — recomputed — once the
    row is gone.)"""
    for mode in ("immediate", "deferred"):
        path = str(tmp_path / f"{mode}.sqlite")
        conn = matview.connect(path)
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, g INTEGER, b BLOB, s TEXT)")
        conn.execute("CREATE TABLE other (x)")
        for k, sql in enumerate(
            ["SELECT g, GROUP_CONCAT(b) FROM t GROUP BY g", "SELECT s FROM t", "SELECT MAX(s) FROM t"]
        ):
            conn.execute(f"CREATE MATERIALIZED VIEW v{k} WITH (maintenance = '{mode}') AS {sql}")
        conn.execute("INSERT INTO t (g, b) VALUES (1, x'ff')")
        conn.execute("INSERT INTO t (g, s) VALUES (1, CAST(x'c0' AS TEXT))")
        plain = apsw.Connection(path)  # another client: no matview
        plain.execute("INSERT INTO t (g, b, s) VALUES (2, x'fe', CAST(x'fe' AS TEXT))")
        plain.close()
        conn.execute("INSERT INTO other VALUES (1)")
        conn.execute("DELETE FROM t")
        conn.execute("INSERT INTO t (g, s) VALUES (1, 'ok')")
        for k, sql in enumerate(
            ["SELECT g, GROUP_CONCAT(b) FROM t GROUP BY g", "SELECT s FROM t", "SELECT MAX(s) FROM t"]
        ):
            check_view(conn, f"v{k}", sql)
        conn.close()


def signed(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [tuple((v, math.copysign(1.0, v)) if isinstance(v, float) else v for v in row) for row in rows]


@pytest.mark.fall_back_to_whole
@pytest.mark.parametrize("populated", [False, True])
def test_f6_min_max_signed_zero(tmp_path, populated):
    """(F6, fixed.) -0.0 = 0.0 in SQLite, and its MIN/MAX show the value of a remaining row;
    matview kept showing a deleted -0.0 (visible to clients: apsw returns -0.0; oracle.bag
    cannot tell). -0.0 is an ordered-state entry of its own; the two tied at the extreme, SQLite
    shows the one its scan meets first, so the view is recomputed whole, as for 1 and 1.0.
    `populated`: the rows are there before CREATE (its entries written set at a time, in SQL)."""
    steps = [
        "INSERT INTO t (u) VALUES (-0.0)",
        "INSERT INTO t (u) VALUES (0.0)",
        "DELETE FROM t WHERE id = 1",
        "INSERT INTO t (u) VALUES (-0.0)",
        "DELETE FROM t WHERE id = 2",
        "UPDATE t SET u = 0.0",
        "UPDATE t SET u = -0.0",
    ]
    for mode in ("immediate", "deferred"):
        conn = matview.connect(str(tmp_path / f"{mode}-{populated}.sqlite"))
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, u, g INT DEFAULT 1)")
        create = (
            f"CREATE MATERIALIZED VIEW v WITH (maintenance = '{mode}') AS SELECT g, MIN(u), MAX(u) FROM t GROUP BY g"
        )
        if not populated:
            conn.execute(create)
        for index, sql in enumerate(steps):
            conn.execute(sql)
            if populated and index < 2:
                if index == 1:
                    conn.execute(create)
                continue
            got = signed(conn.execute("SELECT * FROM v").fetchall())
            want = signed(conn.execute("SELECT g, MIN(u), MAX(u) FROM t GROUP BY g").fetchall())
            assert got == want, f"after {sql}: {got} != {want}"
        conn.close()


def test_f6_signed_zero_alone_stays_incremental(tmp_path):
    """A group whose extreme is -0.0 alone (or 0.0 alone) is no tie: maintained, sign kept,
    whether its entry was written by CREATE (set at a time, in SQL) or by a fold."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, g INT, u)")
    conn.execute("INSERT INTO t (g, u) VALUES (1, -0.0), (1, 5), (2, 0.0), (2, -3), (3, -0.0)")
    conn.execute("CREATE MATERIALIZED VIEW v AS SELECT g, MIN(u), MAX(u) FROM t GROUP BY g")
    select = "SELECT g, MIN(u), MAX(u) FROM t GROUP BY g ORDER BY g"
    for sql in [
        "UPDATE t SET u = 7 WHERE g = 2 AND u = -3",
        "DELETE FROM t WHERE g = 1 AND u = 5",
        "INSERT INTO t (g, u) VALUES (4, -0.0)",
        "DELETE FROM t WHERE g = 3",
        "INSERT INTO t (g, u) VALUES (3, -0.0)",
        "UPDATE t SET u = -0.0 WHERE g = 2",
    ]:
        conn.execute(sql)
        want = signed(conn.execute(select).fetchall())
        assert signed(conn.execute("SELECT * FROM v ORDER BY g").fetchall()) == want, sql
    assert "recomputed whole" not in conn.view("v").explain()
    conn.close()


@pytest.mark.xfail(
    reason="F7: the correctly rounded exact sum is not SQLite's (Kahan-Babuska-Neumaier) sum", strict=False
)
@pytest.mark.parametrize("values", [(2**53 + 1, 5e-324), (2**53 + 1, 2**53 + 1, 5e-324), (2**53 + 1, "'5e-324'")])
def test_f7_sum_rounding_matches_sqlite(tmp_path, values):
    """SQLite gives 9007199254740992.0 for (2**53+1) + 5e-324 in every scan order (its error
    term 1 + 5e-324 rounds to 1, then 2**53 + 1 rounds to even); the exact sum rounds up to
    ...994. Not a cancellation, so not covered by the README's exception."""
    rows = ", ".join(f"({v})" for v in values)
    scenario(
        tmp_path / "db.sqlite",
        ["CREATE TABLE t (id INTEGER PRIMARY KEY, u)"],
        ["SELECT SUM(u), TOTAL(u), AVG(u) FROM t"],
        [f"INSERT INTO t (u) VALUES {rows}"],
    )


def test_f8_unrelated_read_never_fails_because_of_a_view(tmp_path):
    """(F8, fixed.) A read folds each deferred view whose name occurs anywhere in the
    statement's text (a view named c by every SELECT). A fold that cannot run on this
    connection (here: the view's user function is registered on another connection only)
    must not break a read that never touches the view: the view stalls instead."""
    path = str(tmp_path / "db.sqlite")
    conn = matview.connect(path)
    conn.create_scalar_function("twice", lambda x: None if x is None else 2 * x, 1, deterministic=True)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, x INTEGER)")
    conn.execute("CREATE MATERIALIZED VIEW c WITH (maintenance = 'deferred') AS SELECT SUM(twice(x)) FROM t")
    conn.close()
    conn = matview.connect(path)  # has no function twice()
    conn.execute("INSERT INTO t (x) VALUES (1)")
    assert conn.execute("SELECT x FROM t").fetchall() == [(1,)]
    conn.close()


@pytest.mark.xfail(reason="F11: schema.has_one_variant is wrong for INTEGER/NUMERIC columns at -2**63", strict=False)
def test_f11_int64_min_as_real_and_integer_in_a_typed_column(tmp_path):
    """SQLite's INTEGER/NUMERIC affinity does not turn the REAL -9223372036854775808.0 into an
    integer (the boundary is excluded), so such a column can hold the REAL and the INTEGER
    -2**63, equal values of different types. The front end assumes one variant for typed BINARY
    columns (exact_groups / exact_distinct): GROUP BY and DISTINCT kept showing a deleted one."""
    scenario(
        tmp_path / "db.sqlite",
        ["CREATE TABLE t (id INTEGER PRIMARY KEY, i INTEGER, n NUMERIC)"],
        ["SELECT i, typeof(i), COUNT(*) FROM t GROUP BY i", "SELECT DISTINCT n FROM t"],
        [
            "INSERT INTO t (i, n) VALUES (-9223372036854775808.0, -9223372036854775808.0)",
            "UPDATE t SET i = -9223372036854775808",
            "INSERT INTO t (n) VALUES (-9223372036854775808)",
            "DELETE FROM t WHERE id = 1",
        ],
    )


def test_nan_parameters_are_stored_as_null(tmp_path):
    """NaN bound as a parameter (SQLite stores NULL), through execute and executemany."""
    for mode in ("immediate", "deferred"):
        conn = matview.connect(str(tmp_path / f"{mode}.sqlite"))
        conn.execute(STRICT_TABLE)
        views = {
            "agg": "SELECT COUNT(*), COUNT(r), SUM(r), TOTAL(a), AVG(r), MIN(a), MAX(r) FROM t",
            "rows": "SELECT id, r, typeof(r), a, typeof(a) FROM t",
            "grp": "SELECT r, COUNT(*) FROM t GROUP BY r",
        }
        for name, sql in views.items():
            conn.execute(f"CREATE MATERIALIZED VIEW {name} WITH (maintenance = '{mode}') AS {sql}")
        conn.execute("INSERT INTO t (g, r, a) VALUES (?, ?, ?)", (1, math.nan, math.nan))
        conn.executemany("INSERT INTO t (g, r, a) VALUES (?, ?, ?)", [(1, math.nan, 1.5), (2, -0.0, math.nan)])
        conn.execute("UPDATE t SET r = ? WHERE id = 3", (math.nan,))
        for name, sql in views.items():
            check_view(conn, name, sql)
        conn.close()


# --------------------------------------------------------------------------------------
# order-dependent answers: the contract (README, "Running sums that overflow part-way")
#
# SQLite's SUM/TOTAL/AVG add in scan order (rowid order for these views): a SUM of integers
# only (text that looks like an integer counts as one) whose running sum leaves int64 raises
# "integer overflow" even when the final sum fits, and a double running sum that reaches ±Inf
# stays there (or turns NaN -> NULL). A non-integer anywhere makes SUM approximate in every
# order (SQLite 3.54: no error), so mixed sums are not here. The comments give SQLite's answer
# for the natural (rowid) scan; the same rows in another order give another answer. matview
# refuses to guess: reading such a view raises matview.Error naming the scan order, in both
# maintenance modes, whether the rows came before or after CREATE.

ORDER_DEPENDENT = [
    # (column type, values in rowid order, view)
    ("INTEGER", [I64_MAX, 5, -6], "SELECT SUM(x) FROM t"),  # SQLite: integer overflow
    ("INTEGER", [-6, I64_MAX, 5], "SELECT SUM(x) FROM t"),  # SQLite: 9223372036854775806
    ("INTEGER", [I64_MIN, -1, 1], "SELECT SUM(x), AVG(x) FROM t"),  # overflow
    ("REAL", [1e308, 1e308, -1e308], "SELECT SUM(x), TOTAL(x), AVG(x) FROM t"),  # Inf
    ("REAL", [1e308, -1e308, 1e308], "SELECT SUM(x), TOTAL(x), AVG(x) FROM t"),  # 1e308
    ("REAL", [-1e308, -1e308, math.inf], "SELECT TOTAL(x) FROM t"),  # -Inf + Inf: NULL
    ("REAL", [1e308, -1e308, -1e308, 1e308], "SELECT AVG(x) FROM t"),  # 0.0 (ascending: -Inf)
    ("", [I64_MAX, 1, "'-2'"], "SELECT SUM(x) FROM t"),  # text joins the integer sum: overflow
    ("", ["'-2'", I64_MAX, 1], "SELECT SUM(x) FROM t"),  # 9223372036854775806
]


@pytest.mark.parametrize("decltype, values, view", ORDER_DEPENDENT)
def test_order_dependent_sums_refused_on_read(tmp_path, decltype, values, view):
    rows = ", ".join(f"({sql_literal(v) if not isinstance(v, str) else v})" for v in values)
    for number, mode in enumerate(("immediate", "deferred")):
        conn = matview.connect(str(tmp_path / f"{mode}.sqlite"))
        conn.execute(f"CREATE TABLE t (id INTEGER PRIMARY KEY, x {decltype})")
        if number:
            conn.execute(f"INSERT INTO t (x) VALUES {rows}")  # before CREATE: the set-at-a-time path
        conn.execute(f"CREATE MATERIALIZED VIEW v WITH (maintenance = '{mode}') AS {view}")
        if not number:
            conn.execute(f"INSERT INTO t (x) VALUES {rows}")
        with pytest.raises(matview.Error, match="scan order"):
            conn.execute("SELECT * FROM v").fetchall()
        conn.execute("DELETE FROM t")  # an empty group is in range in every order again
        assert_view_matches(conn, "v", view)
        conn.close()


@pytest.mark.parametrize(
    "having",
    [
        "SELECT g FROM t GROUP BY g HAVING sum(x) > 0 AND 0",
        "SELECT g, count(*) FROM t GROUP BY g HAVING sum(x) <> 7",
        "SELECT count(*) FROM t HAVING sum(x) = 12345",
        "SELECT id FROM t2 WHERE k IN (SELECT g FROM t GROUP BY g HAVING sum(x) > 5)",
    ],
)
def test_an_overflowing_sum_read_only_by_having_raises_on_read(tmp_path, having):
    """Regression (hostile hunt F2): a group whose SUM overflows, the sum read only by HAVING,
    was kept (or dropped) silently; SQLite's SELECT raises integer overflow. Now every column
    of the group's row is the error, so reading the view raises it."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, g INTEGER, x INTEGER)")
    conn.execute("CREATE TABLE t2(id INTEGER PRIMARY KEY, k INTEGER)")
    conn.execute("INSERT INTO t2(k) VALUES (1)")
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {having}")
    with conn:
        conn.executemany("INSERT INTO t(g, x) VALUES (1, ?)", [(2**62,), (2**62,)])
    with pytest.raises(apsw.SQLError, match="integer overflow"):
        conn.execute(having).fetchall()
    with pytest.raises(matview.Error, match="integer overflow"):
        conn.execute("SELECT * FROM v").fetchall()
    conn.execute("DELETE FROM t WHERE id = 1")  # back in range: the view reads again, exact
    assert_view_matches(conn, "v", having)


@pytest.mark.parametrize("mode", ["immediate", "deferred"])
def test_a_view_stalled_by_a_raising_row_folds_again_once_the_row_is_gone(tmp_path, mode):
    """Regression (hostile hunt F5): a row whose expression raises (malformed JSON, abs of the
    least integer) stalled the view — and it stayed stalled after the row was deleted, even
    when one transaction inserted and deleted it, until REFRESH. Now a fold that raises is
    retried by recomputing the view, and a stalled view folds again once changes come."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE ev(id INTEGER PRIMARY KEY, payload TEXT, x INTEGER)")
    kinds = "SELECT json_extract(payload, '$.kind') AS kind, count(*) AS n FROM ev GROUP BY kind"
    absolute = "SELECT id, abs(x) AS ax FROM ev"
    for name, sql in (("kinds", kinds), ("absolute", absolute)):
        conn.execute(f"CREATE MATERIALIZED VIEW {name} WITH (maintenance = '{mode}') AS {sql}")
    conn.execute("""INSERT INTO ev(payload, x) VALUES ('{"kind":"click"}', 1)""")
    with conn:  # in and out in one transaction: no committed state ever had it
        conn.execute("INSERT INTO ev(payload, x) VALUES ('{}', ?)", (-(2**63),))
        conn.execute("DELETE FROM ev WHERE x < 0")
    assert_view_matches(conn, "absolute", absolute)
    conn.execute("INSERT INTO ev(payload, x) VALUES ('not json', 2)")
    with pytest.raises(matview.Error, match="malformed JSON"):
        conn.execute("SELECT * FROM kinds").fetchall()
    conn.execute("DELETE FROM ev WHERE payload = 'not json'")  # the user fixes the data
    conn.execute("""INSERT INTO ev(payload, x) VALUES ('{"kind":"view"}', 3)""")
    conn.flush()
    assert_view_matches(conn, "kinds", kinds)
    assert_view_matches(conn, "absolute", absolute)
    assert conn.view("kinds").verify()


def test_a_table_of_600_columns_stays_writable(tmp_path):
    """Found by a review of the read path (older): the capture triggers compared row images as
    one chain `a IS old.a AND b IS old.b AND …`, as deep as the table is wide; past ~500
    columns SQLite refused it ("Expression tree is too large") and every write to the table
    failed, from any client. The conjunctions are now balanced (`names.all_of`)."""
    import sqlite3

    path = str(tmp_path / "db.sqlite")
    conn = matview.connect(path)
    columns = ", ".join(f"c{i} INTEGER" for i in range(600))
    conn.execute(f"CREATE TABLE t(id INTEGER PRIMARY KEY, {columns})")
    conn.execute("CREATE MATERIALIZED VIEW v AS SELECT * FROM t")
    grouped = "SELECT c0, count(*) AS n, sum(c599) AS s FROM t GROUP BY c0"
    conn.execute(f"CREATE MATERIALIZED VIEW g AS {grouped}")
    conn.execute("INSERT INTO t(c0, c599) VALUES (2, 5)")
    conn.execute("INSERT OR REPLACE INTO t(id, c0, c599) VALUES (1, 3, 6)")
    conn.execute("UPDATE t SET c5 = 7")
    stock = sqlite3.connect(path)
    stock.execute("INSERT INTO t(c0) VALUES (9)")
    stock.commit()
    stock.close()
    assert_view_matches(conn, "v", "SELECT * FROM t")
    assert_view_matches(conn, "g", grouped)


def test_a_column_typed_hidden_is_not_hidden(tmp_path):
    """(Review of the read path, older.) A virtual table's column whose declared type holds
    the word HIDDEN is hidden: `SELECT *` over a view read through the virtual table left the
    column out."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, x HIDDEN, y TEXT COLLATE NOCASE)")
    conn.execute("INSERT INTO t(x, y) VALUES (1, 'a'), (2, 'B')")
    conn.execute("CREATE MATERIALIZED VIEW h AS SELECT x, y FROM t")
    assert_view_matches(conn, "h", "SELECT x, y FROM t")
