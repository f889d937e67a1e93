"""GROUP_CONCAT(DISTINCT x) and GROUP_CONCAT/string_agg(x, sep ORDER BY …) over one table with an
INTEGER PRIMARY KEY: SQLite keeps each class's first value in scan (rowid) order, and sorts
stably (ties in rowid order) by the terms with their collations, DESC and NULLS FIRST/LAST."""

from __future__ import annotations

import random

import pytest
from oracle import assert_refused, check_write_mix

SETUP = [
    "CREATE TABLE t(id INTEGER PRIMARY KEY, g INT, v, w TEXT COLLATE NOCASE)",
    "INSERT INTO t VALUES (1, 1, 'b', 'b'), (2, 1, 'a', 'B'), (3, 1, 'b', 'a'), (4, 1, 1, 'A'), (5, 1, '1', 'c'), "
    "(6, 1, 1.0, 'b'), (7, 1, NULL, NULL), (8, 2, 'x', 'x')",
]

VIEWS = {
    "distinct": "SELECT g, group_concat(DISTINCT v) FROM t GROUP BY g",
    "distinct_nocase": "SELECT g, group_concat(DISTINCT w) AS ws FROM t GROUP BY g",
    "ordered": "SELECT g, group_concat(v, ';' ORDER BY v) FROM t GROUP BY g",
    "by_collated": "SELECT g, group_concat(v ORDER BY w) FROM t GROUP BY g",
    "string_agg": "SELECT g, string_agg(v, '|' ORDER BY w DESC, id DESC) FROM t GROUP BY g",
    "nulls": "SELECT group_concat(w ORDER BY v NULLS LAST, w COLLATE BINARY DESC NULLS FIRST) FROM t",
    "mixed": "SELECT g, group_concat(DISTINCT v) FILTER (WHERE id > 1), group_concat(v ORDER BY length(w) DESC), "
    "count(*) FROM t GROUP BY g",
    # inside expressions and HAVING (a review finding: the separator and terms were read at the wrong offsets)
    "in_expression": "SELECT g, 123456789, group_concat(v, '-' ORDER BY w) || '' AS c FROM t GROUP BY g "
    "HAVING group_concat(v ORDER BY id) IS NOT NULL",
}

VALUES = [None, 1, 1.0, "a", "A", "b", "1", "x ", "x", b"\x01", 2.5]


def _write(conn, rng: random.Random) -> None:
    action = rng.random()
    if action < 0.5:
        conn.execute(
            "INSERT INTO t(g, v, w) VALUES (?, ?, ?)", (rng.randint(1, 3), rng.choice(VALUES), rng.choice(VALUES[:8]))
        )
    elif action < 0.75:
        conn.execute("DELETE FROM t WHERE id = (SELECT id FROM t ORDER BY random() LIMIT 1)")
    else:
        conn.execute(
            "UPDATE t SET v = ?, w = ? WHERE id = (SELECT id FROM t ORDER BY random() LIMIT 1)",
            (rng.choice(VALUES), rng.choice(VALUES[:8])),
        )


@pytest.mark.parametrize("seed", range(3))
def test_distinct_and_ordered_concatenations_stay_exact(tmp_path, seed):
    check_write_mix(tmp_path, SETUP, VIEWS, _write, seed, steps=12)


@pytest.mark.parametrize(
    ("select", "match"),
    [
        ("SELECT g, group_concat(DISTINCT v ORDER BY v) FROM t GROUP BY g", "DISTINCT … ORDER BY"),
        ("SELECT g, sum(v ORDER BY w) FROM t GROUP BY g", "ORDER BY inside"),
        ("SELECT a.g, group_concat(b.v ORDER BY b.v) FROM t a JOIN t b ON a.id = b.g GROUP BY a.g", "join"),
        ("SELECT g, group_concat(DISTINCT v) FROM u GROUP BY g", "INTEGER PRIMARY KEY"),
    ],
)
def test_what_stays_refused(tmp_path, select, match):
    assert_refused(tmp_path, [*SETUP, "CREATE TABLE u(g, v)"], select, match=match)


def test_a_without_rowid_table_is_concatenated_in_its_key_order(tmp_path):
    """SQLite meets a WITHOUT ROWID table's rows in its primary key's order (DESC and collation
    included): GROUP_CONCAT's order, and its ties under ORDER BY, follow it (refused before: no
    INTEGER PRIMARY KEY)."""
    setup = [
        "CREATE TABLE oi(order_id INT, product_id INT, qty INT, note TEXT COLLATE NOCASE, "
        "PRIMARY KEY (order_id, product_id DESC)) WITHOUT ROWID",
        "CREATE TABLE tags(name TEXT COLLATE NOCASE PRIMARY KEY, grp INT) WITHOUT ROWID",
        "INSERT INTO oi VALUES (1, 1, 2, 'a'), (1, 5, 1, 'A'), (2, 3, NULL, 'b')",
        "INSERT INTO tags VALUES ('x', 1), ('Zed', 1), ('a', 2)",
    ]
    views = {
        "products": "SELECT order_id, string_agg(product_id, ',') FROM oi GROUP BY order_id",
        "ties": "SELECT order_id, group_concat(qty ORDER BY qty) FROM oi GROUP BY order_id",
        "distinct": "SELECT group_concat(DISTINCT note) FROM oi",
        "nocase_key": "SELECT grp, group_concat(name, '|') FROM tags GROUP BY grp",
    }

    def write(conn, rng: random.Random) -> None:
        action = rng.random()
        if action < 0.5:
            values = (rng.randint(1, 3), rng.randint(1, 9), rng.choice([1, 2, 2.0, None]), rng.choice(["a", "A", None]))
            conn.execute("INSERT OR REPLACE INTO oi VALUES (?, ?, ?, ?)", values)
        elif action < 0.7:
            conn.execute(
                "DELETE FROM oi WHERE (order_id, product_id) = "
                "(SELECT order_id, product_id FROM oi ORDER BY random() LIMIT 1)"
            )
        elif action < 0.9:
            values = (rng.choice(["x", "X", "y", "Zed", "a"]), rng.randint(1, 2))
            conn.execute("INSERT OR REPLACE INTO tags VALUES (?, ?)", values)
        else:
            conn.execute("DELETE FROM tags WHERE name = ?", (rng.choice(["x", "y", "a"]),))

    check_write_mix(tmp_path, setup, views, write, seed=5, steps=12)
