"""The test oracle: a materialized view must equal its defining SELECT, re-run by SQLite, as a bag."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import matview


def typed(value: Any) -> tuple[str, Any]:
    """A value tagged with its SQLite storage class, so 3 and 3.0 (or '3') never compare equal."""
    if value is None:
        return ("null", None)
    if isinstance(value, bool):
        return ("integer", int(value))
    if isinstance(value, int):
        return ("integer", value)
    if isinstance(value, float):
        return ("real", value)
    if isinstance(value, str):
        return ("text", value)
    return ("blob", bytes(value))


def bag(rows: Iterable[Iterable[Any]]) -> Counter[tuple[tuple[str, Any], ...]]:
    return Counter(tuple(typed(v) for v in row) for row in rows)


def column_names(cursor: Any) -> list[str]:
    return [d[0] for d in cursor.getdescription()]


def assert_view_matches(conn: Any, view: str, select_sql: str, check_names: bool = True) -> None:
    """Assert `SELECT * FROM view` equals `select_sql` run now, as a multiset of typed rows.

    `conn` is a matview.Connection (or anything with .execute returning apsw cursors)."""
    view_cur = conn.execute(f'SELECT * FROM "{view}"')
    view_rows = view_cur.fetchall()
    want_cur = conn.execute(select_sql)
    want_rows = want_cur.fetchall()
    got, want = bag(view_rows), bag(want_rows)
    if got != want:
        missing = want - got
        extra = got - want
        raise AssertionError(
            f"view {view!r} differs from its SELECT\n  missing (in SELECT, not in view): "
            f"{list(missing.items())[:10]}\n  extra (in view, not in SELECT): {list(extra.items())[:10]}\n"
            f"  view rows={len(view_rows)} select rows={len(want_rows)}"
        )


MODES = ("immediate", "deferred")


def create_views_both_modes(conn: Any, defs: dict[str, str]) -> dict[str, str]:
    """CREATE each view twice, `<name>_imm` and `<name>_def`; {view name: its SELECT}."""
    live = {}
    for base, sql in defs.items():
        for mode in MODES:
            name = f"{base}_{mode[:3]}"
            conn.execute(f"CREATE MATERIALIZED VIEW {name} WITH (maintenance = '{mode}') AS {sql}")
            live[name] = sql
    return live


def assert_views_match(conn: Any, live: dict[str, str]) -> None:
    for name, sql in live.items():
        assert_view_matches(conn, name, sql)


def assert_filters_match(conn: Any, live: dict[str, str], filters: Iterable[str]) -> None:
    """Each view read through each WHERE `filters` gives what the same filter over its SELECT
    gives: its columns compare under the SELECT's collations and affinities."""
    for view, select in live.items():
        for where in filters:
            want = bag(conn.execute(f"SELECT * FROM ({select}) WHERE {where}"))
            assert bag(conn.execute(f"SELECT * FROM {view} WHERE {where}")) == want, (view, where)


def run_scenario(tmp_path: Path, setup: list[str], views: dict[str, str], steps: list[list[str]]) -> Any:
    """Run `setup`, create `views` in both modes, run each step as one transaction and check
    every view after each; the open connection."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in setup:
        conn.execute(sql)
    live = create_views_both_modes(conn, views)
    for step in [[], *steps]:
        with conn:
            for sql in step:
                conn.execute(sql)
        for view, sql in live.items():
            assert_view_matches(conn, view, sql)
    return conn


def drive_write_mix(
    path: Path,
    conn: Any,
    live: dict[str, str],
    write: Callable[[Any, random.Random], None],
    rng: random.Random,
    steps: int = 14,
    rolled_back_at: int = 5,
) -> Any:
    """`steps` transactions of 1–6 random `write`s, checking every view after each: one more
    transaction rolled back at step `rolled_back_at`, the connection reopened every 6 steps;
    the open connection."""
    assert_views_match(conn, live)
    for step in range(steps):
        if step == rolled_back_at:
            conn.execute("BEGIN")
            for _ in range(4):
                write(conn, rng)
            conn.execute("ROLLBACK")
        with conn:
            for _ in range(rng.randint(1, 6)):
                write(conn, rng)
        if step % 6 == 5:
            conn.close()
            conn = matview.connect(str(path))
        assert_views_match(conn, live)
    return conn


def check_write_mix(
    tmp_path: Path,
    setup: list[str],
    views: dict[str, str],
    write: Callable[[Any, random.Random], None],
    seed: int,
    steps: int = 14,
) -> Any:
    """Run `setup`, create `views` in both modes, then `drive_write_mix` with `write` from
    `seed`, checking every view against its SELECT; the open connection and the views."""
    path = tmp_path / "db.sqlite"
    conn = matview.connect(str(path))
    for sql in setup:
        conn.execute(sql)
    live = create_views_both_modes(conn, views)
    return drive_write_mix(path, conn, live, write, random.Random(seed), steps=steps), live


def assert_refused(tmp_path: Path, setup: list[str], select: str, match: str | None = None) -> str:
    """CREATE MATERIALIZED VIEW of `select` after `setup` raises UnsupportedQuery; its message."""
    import pytest

    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in setup:
        conn.execute(sql)
    with pytest.raises(matview.UnsupportedQuery, match=match) as raised:
        conn.execute(f"CREATE MATERIALIZED VIEW v AS {select}")
    return str(raised.value)


def assert_recomputed_whole(conn: Any, select: str, name: str = "whole") -> dict[str, str]:
    """CREATE `select` in both modes as a view recomputed whole (`matview.sql.whole`: a LIMIT or
    a window, refused before), equal to its SELECT; {view name: its SELECT}."""
    live = create_views_both_modes(conn, {name: select})
    for view in live:
        assert "recomputed whole" in conn.view(view).explain()
    assert_views_match(conn, live)
    return live


class _RolledBack(Exception):
    pass


def savepoints_released_and_rolled_back(
    conn: Any, write: Callable[[Any], None], inside: Callable[[Any], None] | None = None
) -> None:
    """One transaction: a savepoint whose `write(conn)` is released, then one whose `write(conn)`
    is rolled back; `inside(conn)` runs before the transaction commits (a read inside it)."""
    with conn:
        with conn:
            write(conn)
        try:
            with conn:
                write(conn)
                raise _RolledBack
        except _RolledBack:
            pass
        if inside is not None:
            inside(conn)
