"""GROUP BY names a select item by number as SQLite reads it: through unary `+` and parentheses
(`GROUP BY +1`, `(1)`) and as a hex literal (`0x1`); `1e0`, `1 + 0` are constants. A review found
`GROUP BY +1` grouped by the constant (one group) once bare columns were maintained."""

from __future__ import annotations

import pytest
from oracle import assert_refused, run_scenario

SETUP = [
    "CREATE TABLE t(id INTEGER PRIMARY KEY, cat TEXT, n INTEGER)",
    "INSERT INTO t VALUES (1, 'a', 1), (2, 'a', 2), (3, 'b', 3)",
]

VIEWS = {
    "plus": "SELECT cat, count(*) FROM t GROUP BY +1",
    "plus_second": "SELECT cat, n, count(*) FROM t GROUP BY 1, +2",
    "parenthesized": "SELECT cat, count(*) FROM t GROUP BY (+(1))",
    "hex": "SELECT cat, count(*) FROM t GROUP BY 0x1",
    "real_constant": "SELECT cat, count(*) FROM t GROUP BY 1e0",
    "expression_constant": "SELECT cat, count(*) FROM t GROUP BY (1) + (0)",
    "double_negation": "SELECT cat, count(*) FROM t GROUP BY -(-1)",
    "double_negation_second": "SELECT n, cat, count(*) FROM t GROUP BY - -2",
    "beyond_32_bits": "SELECT cat, count(*) FROM t GROUP BY 4294967297",
}


def test_ordinals_as_sqlite_reads_them(tmp_path):
    steps = [
        ["INSERT INTO t VALUES (4, 'b', 1)"],
        ["DELETE FROM t WHERE id = 1", "UPDATE t SET cat = 'c' WHERE id = 3"],
    ]
    run_scenario(tmp_path, SETUP, VIEWS, steps)


@pytest.mark.parametrize("select", ["SELECT cat, count(*) FROM t GROUP BY 1 COLLATE NOCASE"])
def test_a_collated_ordinal_is_refused(tmp_path, select):
    assert_refused(tmp_path, SETUP, select, match="by number under another collation")


def test_a_group_term_containing_another_is_matched_whole(tmp_path):
    """`(c0 % c1)` in the select list is the GROUP BY term `c0 % c1`, though `c0` is a term too
    (the long differential profile found it refused: `c0` was replaced first, leaving `c1` bare)."""
    setup = ["CREATE TABLE t (c0 INTEGER, c1 INTEGER)", "INSERT INTO t VALUES (0, NULL), (1, NULL), (0, 3), (5, 2)"]
    views = {
        "nested": "SELECT count(*), (c0 % c1) || ':' || count(*) FROM t GROUP BY c0, c0 % c1",
        "reversed": "SELECT c1 * c0 + 1, count(*) FROM t GROUP BY c1, c1 * c0",
    }
    steps = [["INSERT INTO t VALUES (5, 3), (5, 2)"], ["UPDATE t SET c1 = c1 + 1", "DELETE FROM t WHERE c0 = 1"]]
    run_scenario(tmp_path, setup, views, steps)
