"""The collating sequence of an expression, as SQLite gives it (`sqlite3ExprCollSeq`): an explicit
COLLATE anywhere outside subqueries (the leftmost), else a column's own through parentheses, unary
`+` and CAST. A review found `GROUP BY +tag` and `SELECT DISTINCT CAST(tag AS TEXT)` of a NOCASE
column grouped under BINARY (a wrong view), and `max(+tag)` compared under BINARY."""

from __future__ import annotations

from oracle import run_scenario

SETUP = [
    "CREATE TABLE t(id INTEGER PRIMARY KEY, cat TEXT, tag TEXT COLLATE NOCASE, name TEXT)",
    "INSERT INTO t VALUES (1, 'a', 'x', 'p'), (2, 'a', 'X', 'q'), (3, 'b', 'y ', 'r'), (4, 'B', 'Y', 's')",
]

VIEWS = {
    "plus": "SELECT +tag, count(*) FROM t GROUP BY +tag",
    "cast": "SELECT CAST(tag AS TEXT) AS t2, count(*) FROM t GROUP BY 1",
    "distinct": "SELECT DISTINCT +tag FROM t",
    "inside_function": "SELECT lower(cat COLLATE NOCASE) AS l, count(*) FROM t GROUP BY l",
    "right_operand": "SELECT cat || '' COLLATE NOCASE AS c, count(*) FROM t GROUP BY c",
    "no_collation": "SELECT +tag || '' AS c, count(*) FROM t GROUP BY c",
    "case": "SELECT CASE WHEN tag COLLATE BINARY = 'x' THEN tag END AS c, count(*) FROM t GROUP BY c",
    "outer_collate": "SELECT cat COLLATE RTRIM COLLATE NOCASE AS c, count(*) FROM t GROUP BY c",
}

STEPS = [
    ["INSERT INTO t VALUES (5, 'A', 'x', 't'), (6, 'b ', 'Y', 'u')"],
    ["DELETE FROM t WHERE id IN (1, 4)", "UPDATE t SET tag = 'X' WHERE id = 2"],
    ["DELETE FROM t"],
    ["INSERT INTO t VALUES (7, 'a', 'Z', 'v'), (8, 'A', 'z', 'w')"],
]


def test_groups_and_distinct_follow_sqlites_collation(tmp_path):
    run_scenario(tmp_path, SETUP, VIEWS, STEPS)


def test_min_max_of_a_nocase_value_seen_through_plus_or_cast(tmp_path):
    """`max(+tag)` of a NOCASE tag compares under NOCASE (it compared BINARY before: a review
    finding): the first spelling of the extreme class SQLite meets, kept with its row."""
    views = {
        "plus": "SELECT cat, max(+tag) FROM t GROUP BY cat",
        "cast": "SELECT min(CAST(tag AS TEXT)) FROM t",
    }
    run_scenario(tmp_path, SETUP, views, STEPS)
