"""Subqueries whose value does not follow SQLite's scan order, maintained rather than recomputed whole.

* `[NOT] EXISTS` over a UNION, EXCEPT, INTERSECT or DISTINCT: which of equal-but-different
  values ('x' and 'X' under NOCASE, 1 and 1.0 untyped) a set keeps follows the scan order, but
  whether it has a row does not (`subquery_values.refuse_unstable_value`).
* `group_concat(x, ',' ORDER BY … x …)` over a typed BINARY column `x`: rows that tie are the
  same text, so the concatenation leaves no choice (`subquery_values._ordered_by_its_value`);
  its ORDER BY is no longer read as an argument that names the outer row
  (`grouped_subqueries.refuse_outer_aggregate`).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from oracle import assert_refused, check_write_mix  # noqa: E402


def assert_maintained_under_writes(
    tmp_path: Path, setup: list[str], views: dict[str, str], write: Any, seed: int, steps: int
) -> None:
    """`check_write_mix` (every view equals its SELECT after every step, both modes), and every
    view maintained incrementally, not recomputed whole."""
    conn, live = check_write_mix(tmp_path, setup, views, write, seed, steps=steps)
    for view in live:
        assert "recomputed whole" not in conn.view(view).explain(), view


SETUP = [
    "CREATE TABLE c(id INTEGER PRIMARY KEY, k TEXT COLLATE NOCASE, n)",
    "CREATE TABLE a(id INTEGER PRIMARY KEY, cid INTEGER, v TEXT COLLATE NOCASE, w)",
    "CREATE TABLE b(id INTEGER PRIMARY KEY, cid INTEGER, v TEXT, w)",
    "INSERT INTO c VALUES (1, 'x', 1), (2, 'X', 1.0), (3, NULL, '1'), (4, 'y', NULL)",
    "INSERT INTO a VALUES (1, 1, 'x', 1), (2, 2, 'X', 1.0), (3, 3, 'y', '1'), (4, NULL, NULL, NULL)",
    "INSERT INTO b VALUES (1, 1, 'X', 1.0), (2, 2, 'x', 1), (3, 4, 'z', 2), (4, 1, 'a', NULL)",
]

VIEWS = {
    "union_exists": "SELECT c.id FROM c WHERE EXISTS "
    "(SELECT a.v FROM a WHERE a.cid = c.id UNION SELECT b.v FROM b WHERE b.cid = c.id)",
    "except_exists": "SELECT c.id, c.k FROM c WHERE EXISTS "
    "(SELECT a.v FROM a WHERE a.cid = c.id EXCEPT SELECT b.v FROM b WHERE b.cid = c.id)",
    "except_not_exists": "SELECT c.id FROM c WHERE NOT EXISTS "
    "(SELECT a.w FROM a WHERE a.cid = c.id EXCEPT SELECT b.w FROM b)",
    "intersect_exists": "SELECT c.id FROM c WHERE EXISTS "
    "(SELECT a.w FROM a WHERE a.cid = c.id INTERSECT SELECT b.w FROM b WHERE b.cid = c.id)",
    "distinct_exists": "SELECT c.id, CASE WHEN EXISTS (SELECT DISTINCT a.v FROM a WHERE a.v = c.k) "
    "THEN 'seen' ELSE 'new' END AS s FROM c",
    "uncorrelated_except": "SELECT c.id FROM c WHERE c.n IS NOT NULL AND EXISTS "
    "(SELECT v FROM a EXCEPT SELECT v FROM b)",
    "ordered_concat": "SELECT c.id, (SELECT group_concat(b.v, ';' ORDER BY b.v) FROM b WHERE b.cid = c.id) AS g FROM c",
    "ordered_concat_desc": "SELECT c.id, (SELECT group_concat(b.v ORDER BY b.cid, b.v DESC) FROM b "
    "WHERE b.cid >= c.id) AS g FROM c",
}


def _write(conn: object, rng: random.Random) -> None:
    values = ["'x'", "'X'", "'y'", "'z'", "1", "1.0", "'1'", "NULL", "2"]
    table = rng.choice(["c", "a", "b"])
    ident = rng.randint(1, 8)
    kind = rng.random()
    if table == "c":
        if kind < 0.4:
            conn.execute(f"INSERT OR REPLACE INTO c VALUES ({ident}, {rng.choice(values)}, {rng.choice(values)})")  # type: ignore[attr-defined]
        elif kind < 0.7:
            conn.execute(f"UPDATE c SET k = {rng.choice(values)} WHERE id = {ident}")  # type: ignore[attr-defined]
        else:
            conn.execute(f"DELETE FROM c WHERE id = {ident}")  # type: ignore[attr-defined]
        return
    cid = rng.choice(["1", "2", "3", "4", "NULL"])
    if kind < 0.45:
        row = f"{ident}, {cid}, {rng.choice(values)}, {rng.choice(values)}"
        conn.execute(f"INSERT OR REPLACE INTO {table} VALUES ({row})")  # type: ignore[attr-defined]
    elif kind < 0.75:
        column = rng.choice(["cid", "v", "w"])
        value = cid if column == "cid" else rng.choice(values)
        conn.execute(f"UPDATE {table} SET {column} = {value} WHERE id = {ident}")  # type: ignore[attr-defined]
    else:
        conn.execute(f"DELETE FROM {table} WHERE id = {ident}")  # type: ignore[attr-defined]


@pytest.mark.parametrize("seed", range(4))
def test_exists_over_sets_and_ordered_concatenations_are_maintained(tmp_path: Path, seed: int) -> None:
    assert_maintained_under_writes(tmp_path, SETUP, VIEWS, _write, seed, steps=12)


@pytest.mark.parametrize(
    "select",
    [
        # the variant a UNION keeps decides what IN compares: 'x' or 'X' against a BINARY column
        "SELECT id FROM b WHERE b.v IN (SELECT v FROM a UNION SELECT k FROM c)",
        # which of 'x' and 'X' (a NOCASE column) comes first among ties follows the scan order
        "SELECT c.id, (SELECT group_concat(a.v ORDER BY a.v) FROM a WHERE a.cid = c.id) FROM c",
        # ordered by another column: ties keep the scan order
        "SELECT c.id, (SELECT group_concat(b.v ORDER BY b.cid) FROM b WHERE b.cid = c.id) FROM c",
        # a separator that is a column differs between tied rows
        "SELECT c.id, (SELECT group_concat(b.v, b.w ORDER BY b.v) FROM b WHERE b.cid = c.id) FROM c",
        # the ORDER BY reads the outer row
        "SELECT c.id, (SELECT group_concat(b.v ORDER BY c.n) FROM b WHERE b.cid = c.id) FROM c",
    ],
)
def test_subqueries_whose_value_follows_the_scan_order_stay_refused(tmp_path: Path, select: str) -> None:
    assert_refused(tmp_path, SETUP, select)


KEYLESS_SETUP = [
    "CREATE TABLE c(id INTEGER PRIMARY KEY, k TEXT, n INTEGER)",
    "CREATE TABLE o(id INTEGER PRIMARY KEY, cid INTEGER, status TEXT)",
    "CREATE TABLE items(order_id INTEGER, product TEXT, qty INTEGER)",  # no key: rows may repeat
    "CREATE TABLE tags(product TEXT, tag TEXT)",
    "INSERT INTO c VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', NULL)",
    "INSERT INTO o VALUES (1, 1, 'open'), (2, 2, 'done'), (3, 1, 'done')",
    "INSERT INTO items VALUES (1, 'p', 2), (1, 'p', 2), (2, 'q', 1), (3, NULL, 5)",
    "INSERT INTO tags VALUES ('p', 'x'), ('q', 'y'), ('p', 'x')",
]

KEYLESS_VIEWS = {
    "exists_items": "SELECT o.id FROM o WHERE EXISTS (SELECT 1 FROM items i WHERE i.order_id = o.id AND i.qty > 1)",
    "not_exists_join": "SELECT c.id FROM c WHERE NOT EXISTS (SELECT 1 FROM items i JOIN o ON o.id = i.order_id "
    "WHERE o.cid = c.id AND o.status = 'open')",
    "in_items": "SELECT c.id, c.k FROM c WHERE c.id IN (SELECT o.cid FROM o JOIN items i ON i.order_id = o.id)",
    "count_items": "SELECT o.id, (SELECT count(*) FROM items i WHERE i.order_id = o.id) AS n, "
    "(SELECT sum(qty) FROM items i WHERE i.order_id = o.id) AS q FROM o",
    "anti_join": "SELECT o.id FROM o WHERE EXISTS (SELECT 1 FROM items i LEFT JOIN tags t ON t.product = i.product "
    "WHERE t.tag IS NULL AND i.order_id = o.id)",
    "outer_keyless": "SELECT o.id, i.qty FROM o JOIN items i ON i.order_id = o.id "
    "WHERE EXISTS (SELECT 1 FROM tags t WHERE t.product = i.product)",
    "self_keyless": "SELECT o.id, count(*) AS n FROM o, items l1 WHERE l1.order_id = o.id AND NOT EXISTS "
    "(SELECT 1 FROM items l2 WHERE l2.order_id = l1.order_id AND l2.product IS NOT l1.product) GROUP BY o.id",
    "left_chain": "SELECT c.id, count(i.qty) AS n, sum(i.qty) AS q FROM c LEFT JOIN o ON o.cid = c.id "
    "LEFT JOIN items i ON i.order_id = o.id GROUP BY c.id",
    "left_chain_is": "SELECT c.id, o.id AS oid, i.product, t.tag FROM c LEFT JOIN o ON o.cid = c.id "
    "LEFT JOIN items i ON i.order_id IS o.id LEFT JOIN tags t ON t.product IS i.product",
    "left_anti": "SELECT c.id, o.id AS oid FROM c LEFT JOIN o ON o.cid = c.id LEFT JOIN items i "
    "ON i.order_id = o.id WHERE i.order_id IS NULL",
    "left_then_subquery": "SELECT c.id, i.qty FROM c LEFT JOIN items i ON i.order_id = c.n "
    "WHERE NOT EXISTS (SELECT 1 FROM tags t WHERE t.product = i.product)",
    "two_keyless": "SELECT c.id FROM c WHERE EXISTS (SELECT 1 FROM items i, tags t WHERE t.product = i.product "
    "AND i.order_id = c.n)",
}


def _keyless_write(conn: object, rng: random.Random) -> None:
    run = conn.execute  # type: ignore[attr-defined]
    table = rng.choice(["c", "o", "items", "items", "tags"])
    kind = rng.random()
    product = rng.choice(["'p'", "'q'", "'r'", "NULL"])
    if table == "items":
        order = rng.randint(1, 4)
        if kind < 0.4:
            run(f"INSERT INTO items VALUES ({order}, {product}, {rng.choice(['1', '2', '5', 'NULL'])})")
        elif kind < 0.7:
            nth = f"(SELECT rowid FROM items LIMIT 1 OFFSET {rng.randint(0, 3)})"
            run(f"UPDATE items SET qty = {rng.randint(0, 3)} WHERE rowid IN {nth}")
        else:
            run(f"DELETE FROM items WHERE rowid IN (SELECT rowid FROM items WHERE order_id = {order} LIMIT 1)")
    elif table == "tags":
        if kind < 0.5:
            run(f"INSERT INTO tags VALUES ({product}, {rng.choice(['NULL', 'x', 'y'])!r})")
        else:
            run(f"DELETE FROM tags WHERE rowid IN (SELECT rowid FROM tags WHERE product IS {product} LIMIT 1)")
    elif table == "o":
        ident = rng.randint(1, 4)
        status = rng.choice(["'open'", "'done'"])
        if kind < 0.5:
            run(f"INSERT OR REPLACE INTO o VALUES ({ident}, {rng.randint(1, 3)}, {status})")
        else:
            run(f"DELETE FROM o WHERE id = {ident}")
    else:
        ident = rng.randint(1, 4)
        if kind < 0.6:
            run(f"INSERT OR REPLACE INTO c VALUES ({ident}, 'k', {rng.choice(['1', '2', '3', 'NULL'])})")
        else:
            run(f"DELETE FROM c WHERE id = {ident}")
    if rng.random() < 0.05:
        run("VACUUM") if conn.apsw.get_autocommit() else None  # type: ignore[attr-defined]


@pytest.mark.parametrize("seed", range(5))
def test_subqueries_over_tables_without_a_key_are_maintained(tmp_path: Path, seed: int) -> None:
    assert_maintained_under_writes(tmp_path, KEYLESS_SETUP, KEYLESS_VIEWS, _keyless_write, seed, steps=14)


GROUPED_SETUP = [
    "CREATE TABLE c(id INTEGER PRIMARY KEY, code TEXT, n INTEGER)",
    "CREATE TABLE o(id INTEGER PRIMARY KEY, cid INTEGER, tag TEXT, amt INTEGER)",
    "INSERT INTO c VALUES (1, '1', 1), (2, '01', 2), (3, 'x', NULL)",
    "INSERT INTO o VALUES (1, 1, '1', 10), (2, 1, '01', 20), (3, 2, '01', 30), (4, NULL, 'x', 5)",
]

GROUPED_VIEWS = {
    # GROUP BY a column the WHERE fixes to the outer row's value: one group, at most one row
    "count_of_own": "SELECT c.id, (SELECT count(*) FROM o WHERE o.cid = c.id GROUP BY o.cid) AS n FROM c",
    "sum_by_text": "SELECT c.id, (SELECT sum(amt) FROM o WHERE o.tag = c.code GROUP BY tag) AS s FROM c",
    "two_keys": "SELECT c.id, (SELECT max(amt) FROM o WHERE o.cid = c.n AND o.tag = 'x' GROUP BY o.cid, o.tag) AS m "
    "FROM c",
}


def _grouped_write(conn: object, rng: random.Random) -> None:
    run = conn.execute  # type: ignore[attr-defined]
    ident = rng.randint(1, 6)
    if rng.random() < 0.7:
        cid = rng.choice(["1", "2", "3", "NULL"])
        tag = rng.choice(["'1'", "'01'", "'x'", "NULL"])
        run(f"INSERT OR REPLACE INTO o VALUES ({ident}, {cid}, {tag}, {rng.randint(1, 50)})")
    elif rng.random() < 0.5:
        run(f"DELETE FROM o WHERE id = {ident}")
    else:
        run(f"UPDATE c SET code = {rng.choice(['1', '01', 'x'])!r}, n = {rng.randint(1, 3)} WHERE id = {ident % 3 + 1}")


@pytest.mark.parametrize("seed", range(3))
def test_a_subquery_grouped_by_the_column_its_where_fixes_is_one_row(tmp_path: Path, seed: int) -> None:
    assert_maintained_under_writes(tmp_path, GROUPED_SETUP, GROUPED_VIEWS, _grouped_write, seed, steps=10)


@pytest.mark.parametrize(
    "select",
    [
        # a TEXT key compared with an INTEGER column: '1' and '01' are both 1 — two groups
        "SELECT c.id, (SELECT sum(amt) FROM o WHERE o.tag = c.id GROUP BY tag) FROM c",
        # one GROUP BY column the WHERE leaves free: several groups
        "SELECT c.id, (SELECT count(*) FROM o WHERE o.cid = c.id GROUP BY o.cid, o.tag) FROM c",
    ],
)
def test_a_subquery_grouped_by_a_column_its_where_leaves_open_stays_refused(tmp_path: Path, select: str) -> None:
    assert "several rows" in assert_refused(tmp_path, GROUPED_SETUP, select)
