"""Hostile and damaged files: a precise matview.Error, never a crash, never anything executed
but a re-validated SELECT; `matview verify` (a real process) finds the damage and REFRESH
restores the view from its SELECT. A missing internal table (view, state, delta log) is a
`SchemaChanged` naming it that never blocks a base write; REFRESH re-creates it.

(The catalog from a newer format, a garbage plan blob, a missing format version and a dropped
catalog are in tests/test_bad_input.py; names that need quoting in test_names_that_need_quoting_work.)
"""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

_HERE = Path(__file__).resolve().parent
for _p in (str(_HERE), str(_HERE.parent)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from oracle import assert_view_matches  # noqa: E402
from reliability_workload import VIEWS, setup  # noqa: E402

import matview  # noqa: E402

ROOT = _HERE.parent


def damaged_file(tmp_path: Path, *damage: str) -> Path:
    """The workload's file with 20 transactions, then `damage` run by stock sqlite3."""
    path = tmp_path / "hostile.db"
    setup(path, "WAL")
    conn = matview.connect(str(path))
    with conn:
        for i in range(20):
            conn.execute(
                "INSERT INTO t(txn, n, grp, val, note) VALUES (?, 1, ?, ?, ?)", (i + 1, i % 5, i * 7 - 50, f"n{i}")
            )
    conn.close()
    raw = sqlite3.connect(path)
    for sql in damage:
        raw.execute(sql)
    raw.commit()
    raw.close()
    return path


def base_rows(path: Path) -> list[tuple[object, ...]]:
    raw = sqlite3.connect(path)
    try:
        return raw.execute("SELECT * FROM t WHERE txn > 0 ORDER BY id").fetchall()
    finally:
        raw.close()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return subprocess.run(
        [sys.executable, "-m", "matview.cli", *args], capture_output=True, text=True, env=env, timeout=120
    )


def all_views_exact(path: Path) -> None:
    conn = matview.connect(str(path))
    try:
        for name, (_, sql) in VIEWS.items():
            assert_view_matches(conn, name, sql)
    finally:
        conn.close()


# ------------------------------------------------------------------- damage matview reports and repairs


STATE = "__dbsp_state_v_agg"


@pytest.mark.parametrize(
    "damage",
    [
        f"UPDATE {STATE} SET value = x'c1c1c1'",  # garbage msgpack
        f"UPDATE {STATE} SET value = substr(value, 1, length(value) / 2)",  # truncated msgpack
        f"UPDATE {STATE} SET value = 'text, not msgpack'",
    ],
    ids=["garbage", "truncated", "text"],
)
def test_damaged_state_is_a_precise_error_verify_finds_it_and_refresh_restores(tmp_path: Path, damage: str) -> None:
    path = damaged_file(tmp_path, damage)
    before = base_rows(path)
    conn = matview.connect(str(path))
    try:
        with conn:  # a base write is never blocked by a view that cannot fold
            conn.execute("INSERT INTO t(txn, n, grp, val, note) VALUES (100, 1, 1, 1, 'w')")
        with pytest.raises(matview.Error, match="v_agg"):
            conn.execute("SELECT * FROM v_agg").fetchall()
        for name, (_, sql) in VIEWS.items():  # the others fold and read as usual
            if name not in ("v_agg", "v_over"):
                assert_view_matches(conn, name, sql)
    finally:
        conn.close()
    found = cli("verify", str(path))
    assert found.returncode == 1, found.stdout + found.stderr
    assert "v_agg" in found.stdout and "Traceback" not in found.stderr, found.stdout + found.stderr
    assert cli("refresh", str(path), "v_agg").returncode == 0
    all_views_exact(path)
    assert base_rows(path)[: len(before)] == before
    assert cli("verify", str(path)).returncode == 0


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM t",
        "SELECT grp FROM t; DELETE FROM t",
        "SELECT 1; DROP TABLE t",
        "DROP TABLE t",
        "WITH x AS (SELECT 1) DELETE FROM t",
        "UPDATE t SET val = 0 RETURNING *",
        "ATTACH 'elsewhere.db' AS e",
    ],
)
def test_a_catalog_sql_that_is_not_a_select_is_never_executed(tmp_path: Path, sql: str) -> None:
    """Regression: `matview verify` (ViewInfo.verify) ran the catalog's `sql` column as it
    was: a file whose catalog row held `DELETE FROM t` lost every row of t to a verify."""
    path = damaged_file(
        tmp_path, f"UPDATE __dbsp_catalog SET sql = '{sql.replace(chr(39), chr(39) * 2)}' WHERE name = 'v_agg'"
    )
    before = base_rows(path)
    found = cli("verify", str(path))
    assert found.returncode == 1 and "Traceback" not in found.stderr, found.stdout + found.stderr
    conn = matview.connect(str(path))
    try:
        with pytest.raises(matview.Error):
            conn.view("v_agg").verify()
        with pytest.raises(matview.Error):
            conn.execute("REFRESH MATERIALIZED VIEW v_agg")
        conn.execute("INSERT INTO t(txn, n, grp, val, note) VALUES (100, 1, 1, 1, 'w')")
    finally:
        conn.close()
    assert base_rows(path)[: len(before)] == before
    assert not (tmp_path / "elsewhere.db").exists()


def test_verify_and_refresh_of_progress_damage(tmp_path: Path) -> None:
    """A progress row deleted or moved ahead makes the view wrong in a way no read can see;
    verify does, and REFRESH restores."""
    path = damaged_file(
        tmp_path,
        "DELETE FROM __dbsp_progress WHERE view = 'v_agg'",
        "UPDATE __dbsp_progress SET seq = seq + 1000000 WHERE view = 'v_minmax'",
    )
    conn = matview.connect(str(path))
    conn.execute("INSERT INTO t(txn, n, grp, val, note) VALUES (100, 1, 1, 1, 'w')")
    conn.close()
    found = cli("verify", str(path), "v_agg", "v_minmax")
    assert found.returncode == 1, found.stdout + found.stderr
    for view in ("v_agg", "v_minmax"):
        assert cli("refresh", str(path), view).returncode == 0
    all_views_exact(path)


def test_fuzzed_catalog_rows_raise_matview_errors_only(tmp_path: Path) -> None:
    """Random byte flips, truncations and extensions of a catalog row's plan and base-table
    blobs: opening, reading, writing and refreshing either work or raise matview.Error;
    base rows are never lost."""
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    pristine = damaged_file(tmp_path)
    raw = sqlite3.connect(pristine)
    rows = raw.execute("SELECT name, plan, base_tables FROM __dbsp_catalog").fetchall()
    raw.close()
    blob_of = {
        (name, column): blob for name, plan, bases in rows for column, blob in (("plan", plan), ("base_tables", bases))
    }
    keys = sorted(blob_of)
    outcomes: dict[str, int] = {}
    for attempt in range(24):
        name, column = rng.choice(keys)
        blob = bytearray(blob_of[(name, column)])
        how = rng.choice(["flip", "truncate", "extend"])
        if how == "flip":
            for _ in range(rng.randint(1, 4)):
                blob[rng.randrange(len(blob))] = rng.randrange(256)
        elif how == "truncate":
            del blob[rng.randrange(len(blob)) :]
        else:
            blob += bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        path = tmp_path / f"fuzz{attempt}.db"
        path.write_bytes(pristine.read_bytes())
        raw = sqlite3.connect(path)
        raw.execute(f"UPDATE __dbsp_catalog SET {column} = ? WHERE name = ?", (bytes(blob), name))
        raw.commit()
        raw.close()
        before = base_rows(path)
        context = f"seed={seed} attempt {attempt}: {how} of {name}.{column}"
        steps = [
            ("read", [f"SELECT * FROM {v}" for v in VIEWS]),
            ("write", ["INSERT INTO t(txn, n, grp, val, note) VALUES (100, 1, 1, 1, 'w')"]),
            ("refresh", [f"REFRESH MATERIALIZED VIEW {name}"]),
        ]
        try:
            conn = matview.connect(str(path))
        except matview.Error:
            outcomes["refused at open"] = outcomes.get("refused at open", 0) + 1
            continue
        try:
            for step, sqls in steps:
                try:
                    for sql in sqls:
                        conn.execute(sql).fetchall()
                except matview.Error:
                    outcomes[f"{step}: matview.Error"] = outcomes.get(f"{step}: matview.Error", 0) + 1
                except apsw.Error as exc:
                    if step == "write":  # (a base write may fail only as stock SQLite's would)
                        continue
                    pytest.fail(f"{context}: {step} raised a raw {type(exc).__name__}: {exc}")
        finally:
            conn.close()
        assert base_rows(path)[: len(before)] == before, context


# ------------------------------------------------------------------- missing internal tables, catalog tampering


def test_refresh_restores_a_missing_state_table(tmp_path: Path) -> None:
    """(Pinned by the reliability review; fixed: REFRESH re-creates missing state tables.)"""
    path = damaged_file(tmp_path, f"DROP TABLE {STATE}")
    conn = matview.connect(str(path))
    try:
        conn.execute("REFRESH MATERIALIZED VIEW v_agg")
        assert_view_matches(conn, "v_agg", VIEWS["v_agg"][1])
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("table", "view"),
    [
        ("__dbsp_ostate_v_minmax", "v_minmax"),
        ("__dbsp_state_v_minmax", "v_minmax"),
        ("__dbsp_view_v_minmax", "v_minmax"),
        ("__dbsp_kept_v_sub", "v_sub"),
    ],
    ids=["ostate", "state", "view", "kept rows"],
)
def test_a_missing_internal_table_is_schema_changed_and_refresh_restores(tmp_path: Path, table: str, view: str) -> None:
    """Regression: a missing ordered-state table was read as a raw apsw.SQLError (the fold
    before the read wrote to it); a missing view table failed every base write. Now the view
    cannot be maintained: its reads say which table is missing, base writes go on, the other
    views stay exact, verify finds it and REFRESH re-creates it."""
    path = damaged_file(tmp_path, f"DROP TABLE {table}")
    before = base_rows(path)
    conn = matview.connect(str(path))
    try:
        with conn:  # a base write is never blocked by a view that cannot be maintained
            conn.execute("INSERT INTO t(txn, n, grp, val, note) VALUES (100, 1, 1, -9999, 'w')")
        conn.execute("INSERT INTO t(txn, n, grp, val, note) VALUES (101, 1, 2, 9999, 'w')")
        with pytest.raises(matview.SchemaChanged, match=f"{view}.*{table}.*REFRESH"):
            conn.execute(f"SELECT * FROM {view}").fetchall()
        for name, (_, sql) in VIEWS.items():
            if name != view:
                assert_view_matches(conn, name, sql)
    finally:
        conn.close()
    found = cli("verify", str(path))
    assert found.returncode == 1 and view in found.stdout, found.stdout + found.stderr
    assert "Traceback" not in found.stderr, found.stderr
    assert cli("refresh", str(path), view).returncode == 0
    all_views_exact(path)
    assert base_rows(path)[: len(before)] == before
    assert cli("verify", str(path)).returncode == 0


def test_a_missing_view_table_never_blocks_base_writes(tmp_path: Path) -> None:
    """Regression: with a view's table (and its plain view) dropped, every base write through
    matview failed with a raw apsw.SQLError (the fold wrote to the missing table)."""
    path = damaged_file(tmp_path, "DROP VIEW v_agg", "DROP TABLE __dbsp_view_v_agg")
    conn = matview.connect(str(path))
    try:
        conn.execute("INSERT INTO t(txn, n, grp, val, note) VALUES (100, 1, 1, 1, 'w')")
        with pytest.raises(matview.SchemaChanged, match="__dbsp_view_v_agg"):
            conn.view("v_agg").verify()
        conn.execute("REFRESH MATERIALIZED VIEW v_agg")
        conn.execute("INSERT INTO t(txn, n, grp, val, note) VALUES (101, 1, 1, 1, 'w')")
    finally:
        conn.close()
    all_views_exact(path)


@pytest.mark.parametrize("table", ["__dbsp_delta_t", "__dbsp_preimage_t"], ids=["delta", "preimage"])
def test_refresh_restores_a_missing_delta_table(tmp_path: Path, table: str) -> None:
    """Regression: REFRESH did not re-create a missing delta log (its fold before the rebuild
    read it: a raw SQLError). Every view of the table says what is missing; REFRESH of any of
    them re-creates the capture and rebuilds them all (their pending deltas were lost)."""
    path = damaged_file(tmp_path, f"DROP TABLE {table}")
    before = base_rows(path)
    conn = matview.connect(str(path))
    try:
        for name in ("v_agg", "v_minmax", "v_join", "v_over"):
            with pytest.raises(matview.SchemaChanged, match=f"{table}.*REFRESH"):
                conn.execute(f"SELECT * FROM {name}").fetchall()
        conn.execute("REFRESH MATERIALIZED VIEW v_agg")
        conn.execute("INSERT INTO t(txn, n, grp, val, note) VALUES (100, 1, 1, 1, 'w')")
    finally:
        conn.close()
    all_views_exact(path)
    assert base_rows(path)[: len(before)] == before
    assert cli("verify", str(path)).returncode == 0


def test_a_missing_delta_table_never_blocks_base_writes(tmp_path: Path) -> None:
    """With a base table's delta log gone and its triggers left, SQLite fails every write of
    the table (the triggers name the log). A write through matview re-creates the log first
    and marks the table's views as needing REFRESH (their pending deltas are lost): the
    write goes on, the views say what they need, REFRESH restores each."""
    path = damaged_file(tmp_path, "DROP TABLE __dbsp_delta_t")
    conn = matview.connect(str(path))
    try:
        conn.execute("INSERT INTO t(txn, n, grp, val, note) VALUES (100, 1, 1, 1, 'w')")
        with conn:
            conn.executemany("INSERT INTO t(txn, n, grp, val, note) VALUES (?, 1, 2, 2, 'w')", [(101,), (102,)])
        for name in ("v_agg", "v_minmax", "v_join", "v_over"):
            with pytest.raises(matview.SchemaChanged, match="REFRESH"):
                conn.execute(f"SELECT * FROM {name}").fetchall()
        for name in VIEWS:
            conn.execute(f"REFRESH MATERIALIZED VIEW {name}")
    finally:
        conn.close()
    assert [r[1] for r in base_rows(path)][-3:] == [100, 101, 102]
    all_views_exact(path)
    assert cli("verify", str(path)).returncode == 0


def test_a_statement_appended_to_a_plan_fragment_is_refused(tmp_path: Path) -> None:
    """The stored plan holds the pieces of the view's SQL that SQLite evaluates; a file whose
    plan was edited to append a statement to one is refused as a CatalogError. (Found by the
    reliability review: the appended `DELETE FROM t` ran — apsw runs every statement of a
    string — and t was emptied; now a `;` outside a literal in any fragment is refused at load.)"""
    from matview.storage.codec import pack, unpack

    path = damaged_file(tmp_path)
    raw = sqlite3.connect(path)
    plan = unpack(raw.execute("SELECT plan FROM __dbsp_catalog WHERE name = 'v_agg'").fetchone()[0])
    plan["stage1"][-1] += "; DELETE FROM t"
    raw.execute("UPDATE __dbsp_catalog SET plan = ? WHERE name = 'v_agg'", (pack(plan),))
    raw.commit()
    raw.close()
    before = base_rows(path)
    try:
        with pytest.raises(matview.CatalogError):
            conn = matview.connect(str(path))
            try:
                conn.execute("INSERT INTO t(txn, n, grp, val, note) VALUES (100, 1, 1, 1, 'w')")
                conn.execute("SELECT * FROM v_agg").fetchall()
            finally:
                conn.close()
    finally:
        assert base_rows(path)[: len(before)] == before


def test_a_catalog_row_naming_a_table_without_capture_is_damaged(tmp_path: Path) -> None:
    """Regression (found by the fuzzer): a catalog row whose base-table list names a table
    with no change capture made a read of the deferred view raise a raw apsw.SQLError (the
    fold before the read counted that table's pending changes)."""
    from matview.storage.codec import pack

    path = damaged_file(
        tmp_path, f"UPDATE __dbsp_catalog SET base_tables = x'{pack(['d']).hex()}' WHERE name = 'v_minmax'"
    )
    conn = matview.connect(str(path))
    try:
        # (a list without the plan's own tables is a damaged entry: `catalog.DamagedEntry`)
        with pytest.raises(matview.CatalogError, match="v_minmax"):
            conn.execute("SELECT * FROM v_minmax").fetchall()
        assert_view_matches(conn, "v_agg", VIEWS["v_agg"][1])
    finally:
        conn.close()
    assert cli("verify", str(path)).returncode == 1


def test_semicolons_in_literals_and_names_are_not_statements(tmp_path: Path) -> None:
    """The check for appended statements reads tokens: a `;` in a string literal, a quoted
    alias or column name, or a stored message is no second statement."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute('CREATE TABLE "t;x"(id INTEGER PRIMARY KEY, "a;b" TEXT)')
    sql = """SELECT id, "a;b" AS "c;d", 'x;y' AS lit FROM "t;x" AS "s;t" WHERE "a;b" <> ';' """
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {sql}")
    conn.execute("""INSERT INTO "t;x" VALUES (1, 'p;q')""")
    conn.close()
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    assert conn.execute("SELECT * FROM v").fetchall() == [(1, "p;q", "x;y")]
    conn.close()


def test_a_plan_with_a_damaged_placeholder_or_column_name(tmp_path: Path) -> None:
    """Found by the catalog fuzzer (seeds 63 and 375 of a loop over it): a flipped byte in a
    placeholder of the plan's stage-1 template failed the open with a raw KeyError; a flipped
    byte in a column name failed the fold before a read with a raw SQLError. Now the first is a
    corrupt catalog entry (CatalogError), the second a view that says its catalog row does not
    match its table, which REFRESH rebuilds."""
    from matview.storage.codec import pack, unpack

    for damage in ("placeholder", "column"):
        (tmp_path / damage).mkdir()
        path = damaged_file(tmp_path / damage)
        raw = sqlite3.connect(path)
        (blob,) = raw.execute("SELECT plan FROM __dbsp_catalog WHERE name = 'v_minmax'").fetchone()
        plan = unpack(blob)
        if damage == "placeholder":
            plan["stage1"] = [("sou\x10ce0" if part == "source0" else part) for part in plan["stage1"]]
        else:
            plan["columns"][0]["name"] = plan["columns"][0]["name"] + "x"
        raw.execute("UPDATE __dbsp_catalog SET plan = ? WHERE name = 'v_minmax'", (pack(plan),))
        raw.commit()
        raw.close()
        conn = matview.connect(str(path))
        if damage == "placeholder":  # (a damaged catalog entry: that view alone, `catalog.DamagedEntry`)
            with pytest.raises(matview.CatalogError, match="catalog entry of view v_minmax is corrupt"):
                conn.execute("SELECT * FROM v_minmax").fetchall()
        else:
            with pytest.raises(matview.SchemaChanged, match="does not match its table"):
                conn.execute("SELECT * FROM v_minmax").fetchall()
        conn.execute("INSERT INTO t(txn, n, grp, val, note) VALUES (100, 1, 1, 1, 'w')")
        conn.close()


def test_a_catalog_whose_base_tables_are_not_names_is_refused(tmp_path):
    """A catalog row whose base-table list holds something else than names (found by the catalog
    fuzz: a list was bound as a parameter, a raw TypeError) is a corrupt catalog: matview.Error."""
    from matview.storage.codec import pack

    path = tmp_path / "db.sqlite"
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE t(a)")
    conn.execute("CREATE MATERIALIZED VIEW v AS SELECT a FROM t")
    conn.close()
    raw = sqlite3.connect(path)
    raw.execute("UPDATE __dbsp_catalog SET base_tables = ?", (pack(["t", ["x"]]),))
    raw.commit()
    raw.close()
    conn = matview.connect(str(path))  # (the other views, and writes, go on: `catalog.DamagedEntry`)
    with pytest.raises(matview.CatalogError, match="base tables are not all names"):
        conn.execute("SELECT * FROM v").fetchall()
