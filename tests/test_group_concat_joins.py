"""GROUP_CONCAT / string_agg over a join, with an ORDER BY that decides the text ("tags per
post"): SQLite breaks the ORDER BY's ties in the join's loop order, which matview does not
know, so the ORDER BY must leave no tie whose rows concatenate different texts — the value
itself under BINARY (typed), or the INTEGER PRIMARY KEY of the one table the value reads
(`AggregateCalls._order_decides_text`). Maintained in both modes under random multi-table
writes, a bulk transaction and reopen; the others refused by name."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_refused, run_scenario

SETUP = [
    "CREATE TABLE posts(id INTEGER PRIMARY KEY, title TEXT)",
    "CREATE TABLE tags(id INTEGER PRIMARY KEY, name TEXT, n)",
    "CREATE TABLE post_tags(post_id INT, tag_id INT, PRIMARY KEY (post_id, tag_id))",
    "INSERT INTO posts VALUES (1, 'x'), (2, 'y'), (3, 'x')",
    "INSERT INTO tags VALUES (1, 'b', 1), (2, 'a', 1.0), (3, 'B', '1'), (4, NULL, 2)",
    "INSERT INTO post_tags VALUES (1, 1), (1, 2), (2, 2), (3, 1), (3, 4)",
]

VIEWS = {
    "tags_per_post": (
        "SELECT pt.post_id, GROUP_CONCAT(t.name, ',' ORDER BY t.name) AS tags "
        "FROM post_tags pt JOIN tags t ON t.id = pt.tag_id GROUP BY pt.post_id"
    ),
    "left_string_agg": (
        "SELECT p.id, string_agg(t.name, '; ' ORDER BY t.name DESC, t.id) FROM posts p "
        "LEFT JOIN post_tags pt ON pt.post_id = p.id LEFT JOIN tags t ON t.id = pt.tag_id GROUP BY p.id"
    ),
    # one tag joined to several posts of one title: tied rows, the same text
    "by_key_repeated": (
        "SELECT p.title, group_concat(t.n ORDER BY t.id) AS ns FROM posts p "
        "JOIN post_tags pt ON pt.post_id = p.id JOIN tags t ON t.id = pt.tag_id GROUP BY p.title"
    ),
    "by_rowid": (
        "SELECT p.id, group_concat(t.name ORDER BY t.rowid) FROM posts p "
        "JOIN post_tags pt ON pt.post_id = p.id JOIN tags t ON t.id = pt.tag_id GROUP BY p.id"
    ),
    "padded_coalesce": (
        "SELECT p.id, group_concat(coalesce(t.name, '-') ORDER BY t.id DESC) FROM posts p "
        "LEFT JOIN post_tags pt ON pt.post_id = p.id LEFT JOIN tags t ON t.id = pt.tag_id GROUP BY p.id"
    ),
    "whole_join": (
        "SELECT group_concat(upper(t.name) || '#' || t.id, '|' ORDER BY t.id), count(*) FROM post_tags pt "
        "JOIN tags t ON t.id = pt.tag_id"
    ),
}


def _writes(rng: random.Random) -> list[list[str]]:
    steps = []
    for number in range(14):
        step = []
        for _ in range(rng.randrange(1, 6)):
            kind = rng.randrange(6)
            if kind == 0:
                step.append(f"INSERT OR REPLACE INTO posts VALUES ({rng.randrange(6)}, '{rng.choice('xyz')}')")
            elif kind == 1:
                name = rng.choice(["'a'", "'b'", "'B'", "'c'", "NULL"])
                n = rng.choice(["1", "1.0", "'1'", "2", "NULL", "2.5"])
                step.append(f"INSERT OR REPLACE INTO tags VALUES ({rng.randrange(8)}, {name}, {n})")
            elif kind == 2:
                step.append(f"INSERT OR IGNORE INTO post_tags VALUES ({rng.randrange(6)}, {rng.randrange(8)})")
            elif kind == 3:
                step.append(
                    f"DELETE FROM post_tags WHERE tag_id = {rng.randrange(8)} AND post_id % 2 = {rng.randrange(2)}"
                )
            elif kind == 4:
                step.append(f"UPDATE tags SET name = '{rng.choice('abq')}' WHERE id = {rng.randrange(8)}")
            else:
                step.append(f"DELETE FROM tags WHERE id = {rng.randrange(8)}")
        if number == 7:  # a bulk transaction (set at a time)
            series = "WITH RECURSIVE s(v) AS (SELECT 0 UNION ALL SELECT v + 1 FROM s WHERE v < 60) "
            step += [
                f"INSERT OR IGNORE INTO post_tags {series}SELECT a.v + 100, b.v FROM s a, s b WHERE b.v <= 40",
                f"INSERT OR IGNORE INTO posts {series}SELECT v + 100, 'p' || (v % 3) FROM s",
                f"INSERT OR IGNORE INTO tags {series}SELECT v + 9, 't' || (v % 7), v % 5 FROM s WHERE v <= 31",
            ]
        steps.append(step)
    return steps


@pytest.mark.parametrize("seed", range(3))
def test_group_concat_over_joins_is_maintained(tmp_path, seed):
    conn = run_scenario(tmp_path, SETUP, VIEWS, _writes(random.Random(seed)))
    conn.close()


@pytest.mark.parametrize(
    "sql",
    [
        # the value reads two tables, the order one of them: ties differ
        "SELECT group_concat(p.title || t.name ORDER BY p.id) FROM posts p JOIN post_tags pt ON pt.post_id = p.id "
        "JOIN tags t ON t.id = pt.tag_id",
        # an untyped value: 1 and 1.0 tie and differ
        "SELECT group_concat(t.n ORDER BY t.n) FROM post_tags pt JOIN tags t ON t.id = pt.tag_id",
        # NOCASE ties 'a' and 'A'
        "SELECT group_concat(t.name ORDER BY t.name COLLATE NOCASE) FROM post_tags pt JOIN tags t ON t.id = pt.tag_id",
        # no ORDER BY, or DISTINCT
        "SELECT pt.post_id, group_concat(t.name) FROM post_tags pt JOIN tags t ON t.id = pt.tag_id GROUP BY pt.post_id",
        "SELECT group_concat(DISTINCT t.name) FROM post_tags pt JOIN tags t ON t.id = pt.tag_id",
    ],
)
def test_undecided_order_over_a_join_is_refused(tmp_path, sql):
    assert_refused(tmp_path, SETUP, sql, "over a join")
