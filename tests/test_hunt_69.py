"""Hunt 69: the DDL guard's `instead` slot (`storage.ddl_guard.authorizing_instead`), through
which matview's own authorizer checks now go — a whole view's fold (`operators.whole._only_reads`),
CREATE's record of what a SELECT reads (`sql.whole._read_objects`), and matview's own statements
inside a user's (`db.own_statements`: a view's TEMP shadow's Connect/BestIndex/Filter) — where
they set the connection's authorizer before (which expired every prepared statement), and the
512-statement cache of `matview.connect`.

Tried (both maintenance modes, checked against SQLite's own SELECT with `oracle`):

* an application authorizer (denying reads of a `secret` table, counting calls) set before
  `matview.install` (chained after the guard) and after it (replacing the guard: matview then
  swaps the connection's authorizer): window, LIMIT, aggregate and join views, a window view over
  an aggregate view and a LIMIT view over a deferred one (the fold prepares the SELECT under
  `_only_reads` while the shadow's BestIndex runs `own_statements`), read through matview and
  through the apsw connection (the shadows' Filter, with pending deferred changes); after every
  step no guard is left in `instead`, DROP/ALTER of a base table is still refused (the API's
  message naming the views, SQLite's AuthError on the apsw connection), `secret` is still denied;
* two matview Connections installed on one apsw connection (two chained guards), writing in turn;
* exceptions while `instead` is set: a user function raising inside a window view's SELECT (the
  view reports "cannot be folded", in both modes, through matview and apsw), a function the
  reopened connection has not registered (the fold's EXPLAIN fails to prepare), one-shot
  interrupts from a progress handler at 118 points of writes and folds (101 of them inside a
  Filter's `own_statements`), a write lock held by another connection (BusyError), then a stock
  `sqlite3` writer, reopen, savepoints released and rolled back around a read through apsw;
* a TEMP table named like the base table while window/LIMIT views fold (reported "cannot be
  folded … would read a TEMP table", never read; incremental views unaffected);
* CREATE of whole views reading `pragma_table_info`/`pragma_index_list`, an attached database, a
  TEMP view, a TEMP table (in the LIMIT too): refused with UnsupportedQuery, guard intact after;
* CREATE text with a trailing `; DROP TABLE t` (a script: the DROP is refused, naming the views).

Found:

1. (today's change) A statement prepared inside matview's own-statements window stays in apsw's
   statement cache authorized by `_allow`. Before today, restoring the connection's authorizer
   expired it, so its next use was prepared again under the guard and the application's
   authorizer. A view's SQL function that runs SQL on the connection (run by a read of a deferred
   view through apsw: Filter merges the pending changes) thus leaves (a) a read the application's
   authorizer denies, readable afterwards by anyone running the same text, and (b) a `DROP TABLE`
   of a base table a view reads, prepared but not run (a BindingsError), which later runs past the
   DDL guard and drops the table.
2. (older) With two matview Connections on one apsw connection, a refusal by the second's guard
   of a DROP run on the apsw connection stays in that guard; the first Connection's `execute`
   clears only its own guard, so the application authorizer's later AuthError on the first
   Connection is reported as the stale "table t is used by materialized view(s) v".

Fixed: `authorizing_instead` sets the connection's authorizer again at the end of a block in
which a statement was prepared (SQLite then expires what the block prepared, as before today),
and only then; a whole view's fold checks what its SELECT reads once per main and temp schema
version (`operators.whole._check_only_reads`), so its folds still prepare nothing under another
authorizer. `Connection.execute`/`executemany` forget the refusals of every guard on the
connection before a statement.

Not a matview bug: a progress handler that keeps returning True after its first interrupt also
interrupts the ROLLBACK of `with conn:`, leaving the transaction open (writes after it never
commit) — plain apsw's `with conn:` does the same.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_view_matches, assert_views_match, bag, create_views_both_modes
from stock import stock_sqlite3

import matview
from matview.storage.ddl_guard import DdlGuard

SETUP = [
    "CREATE TABLE t(id INTEGER PRIMARY KEY, g INT, x)",
    "CREATE TABLE u(g INTEGER PRIMARY KEY, name TEXT)",
    "CREATE TABLE secret(k INTEGER PRIMARY KEY, y INT)",
    "INSERT INTO secret VALUES (1, 42)",
    "INSERT INTO u VALUES (1, 'a'), (2, 'b'), (3, 'c')",
    "INSERT INTO t VALUES (1, 1, 1), (2, 2, 2.5), (3, 1, 'x'), (4, 3, NULL)",
]

WINDOW = "SELECT id, g, sum(x) OVER (PARTITION BY g ORDER BY id) AS run FROM t"
TOP = "SELECT id, x FROM t ORDER BY x DESC, id LIMIT 2"
AGG = "SELECT g, count(*) AS n, sum(x) AS s FROM t GROUP BY g"
JOIN = "SELECT t.id, u.name FROM t JOIN u ON u.g = t.g"
RANKED = "SELECT g, n, rank() OVER (ORDER BY n DESC, g) AS r FROM {agg}"
TOP_OVER = "SELECT g, s FROM {agg} ORDER BY s DESC, g LIMIT 2"


def _connect(path: Path) -> matview.Connection:
    conn = matview.connect(str(path))
    for sql in SETUP:
        conn.execute(sql)
    return conn


def _guards(raw: apsw.Connection) -> list[DdlGuard]:
    guard = raw.authorizer
    return guard.chain() if isinstance(guard, DdlGuard) else []


def _no_guard_instead(raw: apsw.Connection) -> None:
    for guard in _guards(raw):
        assert getattr(guard, "instead", None) is None


def _check_guard(conn: matview.Connection, table: str = "t") -> None:
    """No guard left in 'instead', and the guard still refuses DROP/ALTER of a base table."""
    _no_guard_instead(conn.apsw)
    with pytest.raises(matview.Error, match="used by materialized view"):
        conn.execute(f"DROP TABLE {table}")
    with pytest.raises(apsw.AuthError):
        conn.apsw.execute(f"DROP TABLE {table}")
    with pytest.raises(apsw.AuthError):
        conn.apsw.execute(f"ALTER TABLE {table} RENAME TO {table}_renamed")
    assert conn.apsw.execute("SELECT count(*) FROM main.sqlite_master WHERE name = ?", (table,)).fetchone() == (1,)


def _deny_secret(log: list[int]) -> Callable[..., int]:
    def authorizer(action: int, arg1: str | None, *_rest: str | None) -> int:
        log.append(action)
        if action == apsw.SQLITE_READ and arg1 == "secret":
            return apsw.SQLITE_DENY
        return apsw.SQLITE_OK

    return authorizer


def _write(conn: Any, rng: random.Random) -> None:
    k = rng.randint(1, 12)
    choice = rng.random()
    if choice < 0.4:
        value = rng.choice([1, 2.5, "7", None, k])
        conn.execute("INSERT OR REPLACE INTO t VALUES (?, ?, ?)", (k, rng.randint(1, 3), value))
    elif choice < 0.7:
        conn.execute("UPDATE t SET x = ? WHERE id = ?", (rng.randint(-3, 9), k))
    elif choice < 0.85:
        conn.execute("DELETE FROM t WHERE id = ?", (k,))
    else:
        conn.execute("UPDATE u SET name = ? WHERE g = ?", (rng.choice("abcz"), rng.randint(1, 3)))


def _assert_raw_reads_match(raw: apsw.Connection, live: dict[str, str]) -> None:
    """Each view read on the apsw connection (its TEMP shadow: Filter merges pending changes)."""
    for view, sql in live.items():
        assert bag(raw.execute(f"SELECT * FROM {view}")) == bag(raw.execute(sql)), view


# ------------------------------------------------------------------ coverage: authorizers around the slot


@pytest.mark.parametrize("when", ["before install", "after install"])
def test_an_applications_authorizer_around_whole_views_and_views_over_them(tmp_path: Path, when: str) -> None:
    raw = apsw.Connection(str(tmp_path / "db.sqlite"))
    for sql in SETUP:
        raw.execute(sql)
    log: list[int] = []
    app = _deny_secret(log)
    if when == "before install":
        raw.authorizer = app
    conn = matview.install(raw)
    live = create_views_both_modes(conn, {"win": WINDOW, "top": TOP, "agg": AGG, "join": JOIN})
    live.update(create_views_both_modes(conn, {"ranked": RANKED.format(agg="agg_imm")}))
    live.update(create_views_both_modes(conn, {"top_over": TOP_OVER.format(agg="agg_def")}))
    if when == "after install":
        raw.authorizer = app  # (replaces the guard: matview swaps the connection's authorizer)
    rng = random.Random(69)
    for step in range(10):
        with conn:
            for _ in range(rng.randint(1, 4)):
                _write(conn, rng)
        _assert_raw_reads_match(raw, live)
        assert_views_match(conn, live)
        if when == "before install":
            assert isinstance(raw.authorizer, DdlGuard)
            _check_guard(conn)
        else:
            assert raw.authorizer is app
        log.clear()
        conn.execute(f"INSERT INTO u VALUES ({100 + step}, 'new')")  # (a new text: prepared, the app asked)
        assert apsw.SQLITE_INSERT in log
        with pytest.raises(apsw.AuthError):
            raw.execute("SELECT y FROM secret").fetchall()
        with pytest.raises(apsw.AuthError):
            conn.execute("SELECT y FROM secret").fetchall()


def test_two_matview_connections_on_one_apsw_connection(tmp_path: Path) -> None:
    first = _connect(tmp_path / "db.sqlite")
    live = create_views_both_modes(first, {"win": WINDOW, "agg": AGG})
    second = matview.install(first.apsw)
    live.update(create_views_both_modes(second, {"top": TOP, "ranked": RANKED.format(agg="agg_def")}))
    assert len(_guards(first.apsw)) == 2
    rng = random.Random(7)
    for step in range(8):
        who = first if step % 2 else second
        with who:
            for _ in range(rng.randint(1, 4)):
                _write(who, rng)
        _assert_raw_reads_match(first.apsw, live)
        assert_views_match(first, live)
        assert_views_match(second, live)
        _check_guard(first)
        _check_guard(second)


# ------------------------------------------------------------------ coverage: exceptions inside the slot


def test_a_function_raising_inside_a_window_views_select(tmp_path: Path) -> None:
    conn = _connect(tmp_path / "db.sqlite")
    boom = {"on": False}

    def f(x: Any) -> Any:
        if boom["on"]:
            raise ValueError("boom")
        return x

    conn.apsw.create_scalar_function("f", f, 1, deterministic=True)
    select = "SELECT id, f(x) AS fx, row_number() OVER (ORDER BY id) AS rn FROM t"
    live = create_views_both_modes(conn, {"fw": select, "agg": AGG})
    boom["on"] = True
    with conn:
        conn.execute("INSERT INTO t VALUES (20, 1, 5)")  # (the window views stall; the rest fold)
    _check_guard(conn)
    for view in ("fw_imm", "fw_def"):
        for run in (conn.execute, conn.apsw.execute):
            with pytest.raises(matview.Error, match=f"{view} cannot be folded: ValueError: boom"):
                run(f"SELECT * FROM {view}").fetchall()
            _check_guard(conn)
    boom["on"] = False
    conn.execute("INSERT INTO t VALUES (21, 2, 5)")
    assert_views_match(conn, live)
    _check_guard(conn)


def test_a_function_the_reopened_connection_lacks(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    conn = _connect(path)
    conn.apsw.create_scalar_function("f", lambda x: x, 1, deterministic=True)
    select = "SELECT id, f(x) AS fx, row_number() OVER (ORDER BY id) AS rn FROM t"
    live = create_views_both_modes(conn, {"fw": select, "win": WINDOW})
    conn.close()
    conn = matview.connect(str(path))
    conn.execute("INSERT INTO t VALUES (31, 1, 5)")
    _check_guard(conn)
    for view in ("fw_imm", "fw_def"):
        for run in (conn.execute, conn.apsw.execute):
            with pytest.raises(matview.Error, match="uses f\\(\\), which this connection has not registered"):
                run(f"SELECT * FROM {view}").fetchall()
            _check_guard(conn)
    assert_views_match(conn, {v: s for v, s in live.items() if v.startswith("win")})
    conn.apsw.create_scalar_function("f", lambda x: x, 1, deterministic=True)
    assert_views_match(conn, live)


@pytest.mark.parametrize("mode", ["immediate", "deferred"])
def test_one_interrupt_at_each_point_of_writes_folds_and_reads(tmp_path: Path, mode: str) -> None:
    conn = _connect(tmp_path / "db.sqlite")
    live = {"agg": AGG, "win": WINDOW, "ranked": RANKED.format(agg="agg")}
    for name, sql in live.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} WITH (maintenance='{mode}') AS {sql}")
    inside: list[bool] = []
    interrupted = 0

    def interrupting_at(limit: int) -> Callable[[], bool]:
        calls = [0]

        def progress() -> bool:
            calls[0] += 1
            if calls[0] == limit:  # (one interrupt, as one Ctrl-C)
                inside.append(any(g.instead is not None for g in _guards(conn.apsw)))
                return True
            return False

        return progress

    for limit in range(1, 3400, 29):
        conn.apsw.set_progress_handler(interrupting_at(limit), 1)
        try:
            with conn:
                conn.execute("INSERT INTO t(g, x) VALUES (?, ?)", (limit % 3 + 1, limit))
            if mode == "deferred":
                for view in live:
                    conn.apsw.execute(f"SELECT * FROM {view}").fetchall()
        except apsw.InterruptError:
            interrupted += 1
        finally:
            conn.apsw.set_progress_handler(None)
        _no_guard_instead(conn.apsw)
        assert_views_match(conn, live)
    assert interrupted > 0
    if mode == "deferred":
        assert inside.count(True) > 10  # (interrupted inside a Filter's own statements)
    _check_guard(conn)


def test_busy_stock_writer_reopen_and_savepoints(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    conn = _connect(path)
    live = create_views_both_modes(conn, {"win": WINDOW, "agg": AGG})
    live.update(create_views_both_modes(conn, {"ranked": RANKED.format(agg="agg_def")}))
    conn.execute("INSERT INTO t(g, x) VALUES (1, 50)")
    other = apsw.Connection(str(path))
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO u VALUES (9, 'z')")
    with pytest.raises(apsw.BusyError):
        conn.execute("INSERT INTO t(g, x) VALUES (2, 51)")
    _no_guard_instead(conn.apsw)
    for view in live:  # (reads while another holds the write lock: pending changes merged)
        assert_view_matches(conn, view, live[view])
        assert bag(conn.apsw.execute(f"SELECT * FROM {view}")) == bag(conn.apsw.execute(live[view]))
        _no_guard_instead(conn.apsw)
    other.execute("ROLLBACK")
    other.close()
    assert_views_match(conn, live)
    stock_sqlite3(path, ["INSERT INTO t(g, x) VALUES (3, 60)", "DELETE FROM t WHERE id = 1", "UPDATE u SET name = 'q'"])
    assert_views_match(conn, live)
    _check_guard(conn)
    conn.close()
    conn = matview.connect(str(path))
    with conn:
        with conn:
            conn.execute("INSERT INTO t(g, x) VALUES (1, 70)")
        with pytest.raises(KeyError), conn:
            conn.execute("DELETE FROM t WHERE g = 1")
            _assert_raw_reads_match(conn.apsw, live)
            raise KeyError
        assert_views_match(conn, live)
    assert_views_match(conn, live)
    _check_guard(conn)


# ------------------------------------------------------------------ coverage: TEMP namesakes, CREATE's reads


def test_a_temp_namesake_while_whole_views_fold_is_reported_never_read(tmp_path: Path) -> None:
    conn = _connect(tmp_path / "db.sqlite")
    live = create_views_both_modes(conn, {"win": WINDOW, "top": TOP, "agg": AGG, "join": JOIN})
    live.update(create_views_both_modes(conn, {"ranked": RANKED.format(agg="agg_def")}))
    conn.execute("CREATE TEMP TABLE t(id INTEGER PRIMARY KEY, g INT, x)")
    conn.execute("INSERT INTO temp.t VALUES (100, 9, 999)")
    for step in range(3):
        with conn:
            conn.execute("INSERT INTO main.t VALUES (?, 1, ?)", (40 + step, step))
        _check_guard(conn, "u")
        for view, sql in live.items():
            if view.startswith(("win", "top")):
                with pytest.raises(matview.Error, match="would read a TEMP table"):
                    conn.execute(f"SELECT * FROM {view}").fetchall()
            else:
                want = bag(conn.execute(sql.replace("FROM t", "FROM main.t")))
                assert bag(conn.execute(f"SELECT * FROM {view}")) == want, view
            _no_guard_instead(conn.apsw)
    conn.execute("DROP TABLE temp.t")
    assert_views_match(conn, live)
    _check_guard(conn)


@pytest.mark.parametrize(
    ("select", "match"),
    [
        ("SELECT name, row_number() OVER () FROM pragma_table_info('t')", "pragma_table_info"),
        ("SELECT id, (SELECT count(*) FROM pragma_index_list('t')) FROM t LIMIT 3", "pragma_index_list"),
        ("SELECT * FROM aux.a ORDER BY 1 LIMIT 2", "attached database aux"),
        ("SELECT x, rank() OVER (ORDER BY x) FROM tv", "temporary table \\(tv\\)"),
        ("SELECT id, row_number() OVER (ORDER BY id) FROM tt", "temporary table \\(tt\\)"),
        ("SELECT id FROM t ORDER BY id LIMIT (SELECT count(*) FROM tt)", "temporary table \\(tt\\)"),
    ],
)
def test_create_of_whole_views_reading_more_than_main(tmp_path: Path, select: str, match: str) -> None:
    conn = _connect(tmp_path / "db.sqlite")
    conn.execute(f"ATTACH '{tmp_path / 'aux.db'}' AS aux")
    conn.execute("CREATE TABLE aux.a(z)")
    conn.execute("CREATE TEMP VIEW tv AS SELECT x FROM main.t")
    conn.execute("CREATE TEMP TABLE tt(id)")
    conn.execute(f"CREATE MATERIALIZED VIEW keep AS {AGG}")
    with pytest.raises(matview.UnsupportedQuery, match=match):
        conn.execute(f"CREATE MATERIALIZED VIEW v AS {select}")
    _check_guard(conn)
    conn.execute("INSERT INTO t VALUES (50, 2, 3)")
    assert_view_matches(conn, "keep", AGG)


def test_create_text_with_a_trailing_drop(tmp_path: Path) -> None:
    conn = _connect(tmp_path / "db.sqlite")
    conn.execute(f"CREATE MATERIALIZED VIEW keep AS {AGG}")
    with pytest.raises(matview.Error, match="table t is used by materialized view"):
        conn.execute("CREATE MATERIALIZED VIEW v AS SELECT id FROM t ORDER BY id LIMIT 1; DROP TABLE t")
    _check_guard(conn)
    assert_views_match(conn, {"keep": AGG, "v": "SELECT id FROM t ORDER BY id LIMIT 1"})


# ------------------------------------------------------------------ found: statements prepared in the slot stay cached


def _function_running_sql(tmp_path: Path, authorizer: Callable[..., int] | None) -> tuple[matview.Connection, dict]:
    """A deferred view calling `lookup`, a function that runs `hook["sql"]` on the connection,
    with a pending change: a read through apsw runs it inside matview's own statements."""
    raw = apsw.Connection(str(tmp_path / "db.sqlite"))
    for sql in SETUP:
        raw.execute(sql)
    if authorizer is not None:
        raw.authorizer = authorizer
    conn = matview.install(raw)
    hook: dict[str, Any] = {"sql": None, "bindings": ()}

    def lookup(x: Any) -> Any:
        if hook["sql"] is not None:
            try:
                raw.execute(hook["sql"], hook["bindings"]).fetchall()
            except apsw.BindingsError:
                pass
        return x

    raw.create_scalar_function("lookup", lookup, 1, deterministic=True)
    view = "SELECT g, sum(lookup(x)) AS s FROM t GROUP BY g"
    conn.execute(f"CREATE MATERIALIZED VIEW v WITH (maintenance='deferred') AS {view}")
    conn.execute("INSERT INTO t VALUES (10, 1, 5)")
    return conn, hook


def test_a_read_a_views_function_prepared_inside_a_read_stays_denied_afterwards(tmp_path: Path) -> None:
    conn, hook = _function_running_sql(tmp_path, _deny_secret([]))
    with pytest.raises(apsw.AuthError):
        conn.apsw.execute("SELECT y FROM secret").fetchall()
    hook["sql"] = "SELECT y FROM secret"
    assert bag(conn.apsw.execute("SELECT * FROM v")) == bag(conn.apsw.execute("SELECT g, sum(x) FROM t GROUP BY g"))
    hook["sql"] = None
    _no_guard_instead(conn.apsw)
    with pytest.raises(apsw.AuthError):
        conn.apsw.execute("SELECT y FROM secret").fetchall()  # got: [(42,)]


def test_a_drop_prepared_inside_a_read_is_still_refused_afterwards(tmp_path: Path) -> None:
    conn, hook = _function_running_sql(tmp_path, None)
    hook["sql"], hook["bindings"] = "DROP TABLE t", (1,)  # (a BindingsError: prepared, never run)
    conn.apsw.execute("SELECT * FROM v").fetchall()
    hook["sql"] = None
    _no_guard_instead(conn.apsw)
    with pytest.raises(apsw.AuthError):
        conn.apsw.execute("DROP TABLE t")  # got: t dropped, view v reads a table that is gone
    assert conn.apsw.execute("SELECT count(*) FROM main.sqlite_master WHERE name = 't'").fetchone() == (1,)


# ------------------------------------------------------------------ found: a stale refusal of another guard


def test_an_applications_refusal_on_the_first_of_two_installs_is_its_own(tmp_path: Path) -> None:
    raw = apsw.Connection(str(tmp_path / "db.sqlite"))
    for sql in SETUP:
        raw.execute(sql)
    raw.authorizer = _deny_secret([])
    first = matview.install(raw)
    first.execute(f"CREATE MATERIALIZED VIEW v AS {AGG}")
    matview.install(raw)
    with pytest.raises(apsw.AuthError):
        raw.execute("DROP TABLE t")  # (refused by the second install's guard)
    with pytest.raises(apsw.AuthError, match="secret"):
        first.execute("SELECT y FROM secret").fetchall()  # got: Error "table t is used by … v"
