"""What hunt 35 (a second reading and fuzzing of session 26's changes) found about collations.

* `sqltext.explicit_collation` took the leftmost COLLATE of an expression; SQLite lets an outer
  one win (`(b COLLATE RTRIM) COLLATE NOCASE` is NOCASE) and sees none in a window's OVER (…),
  a FILTER (…) or an aggregate's ORDER BY: a filter on such a view column compared otherwise
  than on its SELECT.
* A view recomputed whole took its columns' collations from what their values come from: a
  scalar subquery's column (SQLite: BINARY), a set operation inside a derived table or CTE
  (SQLite: its first arm's), a column beside `*`. They are now read from SQLite's own program
  for `column = ?` over the SELECT (`sql/collations.py`).
* `x IN (SELECT (y COLLATE NOCASE) …)`, `trim(y COLLATE NOCASE)`, `IN (VALUES ('A' COLLATE
  NOCASE))` escaped the refusal of collated IN subqueries (session 26, hunt 34).
(Its findings about the plain-write path are in `test_plain_writes.py`.)

Hunt 36 (a last check of the session's passes): the mixed-collation chain pass missed chains
spelled with INNER/LEFT/CROSS JOIN, USING, `IS`, parentheses, row values, a unary `+`, doubled
COLLATEs, and a constant compared under another collation; and EXPLAIN shows only 18
characters of a collation's name, which made a view over a longer-named collation fail.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
for _p in (str(_HERE), str(_HERE.parent)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from oracle import assert_filters_match, assert_refused, assert_views_match, create_views_both_modes  # noqa: E402

import matview  # noqa: E402
from matview.sql.collations import shown_collations  # noqa: E402
from matview.sql.sqltext import explicit_collation, tokenize  # noqa: E402


@pytest.mark.parametrize(
    "expression",
    [
        "b COLLATE RTRIM",
        "(b COLLATE RTRIM) COLLATE NOCASE",
        "((b COLLATE RTRIM)) COLLATE NOCASE",
        "lower(b COLLATE RTRIM) COLLATE NOCASE",
        "lower(b COLLATE RTRIM)",
        "b COLLATE RTRIM || n COLLATE NOCASE",
        "b || n COLLATE NOCASE",
        "b COLLATE RTRIM COLLATE NOCASE",
        "coalesce(b, n COLLATE NOCASE)",
        "max(b) OVER (PARTITION BY n COLLATE NOCASE)",
        "group_concat(b ORDER BY n COLLATE NOCASE)",
        "count(*) FILTER (WHERE b COLLATE NOCASE = 'a')",
        "(b || 1) COLLATE RTRIM || n COLLATE NOCASE",
        "b IN (SELECT n COLLATE NOCASE FROM t)",
    ],
)
def test_explicit_collation_is_sqlites(expression: str) -> None:
    conn = matview.connect(":memory:")
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, b TEXT, n TEXT)")
    sqlite = shown_collations(conn.apsw, f"SELECT {expression} AS x FROM t", 1)
    assert (explicit_collation(tokenize(expression)) or "BINARY") == sqlite[0]


FILTERED = {
    "outer": "SELECT id, (b COLLATE RTRIM) COLLATE NOCASE AS c FROM t",
    "filtered": "SELECT id, group_concat(b) FILTER (WHERE n COLLATE NOCASE = 'a') AS c FROM t GROUP BY id",
    "ordered": "SELECT id, group_concat(b ORDER BY n COLLATE NOCASE) AS c FROM t GROUP BY id",
    "window": "SELECT id, max(b) OVER (PARTITION BY n COLLATE NOCASE) AS c FROM t",
    "scalar": "SELECT id, (SELECT s.n FROM s WHERE s.id = t.id) AS c FROM t ORDER BY id LIMIT 5",
    "derived": "SELECT * FROM (SELECT n AS c FROM s UNION SELECT b FROM t) LIMIT 5",
    "cte": "WITH q(c) AS (SELECT n FROM s UNION SELECT b FROM t) SELECT c FROM q",
    "star": "SELECT *, b COLLATE NOCASE AS c FROM t ORDER BY id LIMIT 5",
}


@pytest.mark.fall_back_to_whole
def test_a_filter_on_a_view_compares_as_on_its_select(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "filters.db"))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, b TEXT, n TEXT)")
    conn.execute("CREATE TABLE s(id INTEGER PRIMARY KEY, n TEXT COLLATE NOCASE)")
    conn.execute("INSERT INTO t VALUES (1, 'X', 'a'), (2, 'x', 'b'), (3, 'x ', 'A')")
    conn.execute("INSERT INTO s VALUES (1, 'X'), (2, 'x')")
    live = create_views_both_modes(conn, FILTERED)
    assert_views_match(conn, live)
    assert_filters_match(conn, live, ["c = 'x'", "c = 'X '", "c > 'W'"])


@pytest.mark.parametrize(
    "select",
    [
        "SELECT id FROM o WHERE s IN (SELECT (st COLLATE NOCASE) FROM t)",
        "SELECT id FROM o WHERE s IN (SELECT trim(st COLLATE NOCASE) FROM t)",
        "SELECT id FROM o WHERE s IN (SELECT coalesce(st COLLATE NOCASE, '') FROM t)",
        "SELECT id FROM o WHERE s IN (VALUES ('A' COLLATE NOCASE))",
    ],
)
def test_every_spelling_of_a_collated_in_subquery_is_refused(tmp_path: Path, select: str) -> None:
    setup = ["CREATE TABLE o(id INTEGER PRIMARY KEY, s TEXT)", "CREATE TABLE t(id INTEGER PRIMARY KEY, st TEXT)"]
    assert_refused(tmp_path, setup, select, match="COLLATE")


CHAINS = {
    "inner": "SELECT x.k AS xk, y.k AS yk, z.k AS zk FROM c x JOIN b y ON x.k = y.k INNER JOIN a z ON z.k = y.k",
    "using": "SELECT x.k AS xk, z.k AS zk FROM a x JOIN a2 y USING (k) JOIN c z ON z.k = y.k",
    "is": "SELECT x.k AS xk, y.k AS yk, z.k AS zk FROM c x JOIN b y ON x.k IS y.k JOIN a z ON z.k IS y.k",
    "parens": "SELECT x.k AS xk, z.k AS zk FROM c x JOIN b y ON (x.k) = y.k JOIN a z ON z.k = (y.k)",
    "row": "SELECT x.k AS xk, z.k AS zk FROM c x JOIN b y ON (x.k, x.id) = (y.k, y.id) JOIN a z ON z.k = y.k",
    "plus": "SELECT x.k AS xk, z.k AS zk FROM c x JOIN b y ON x.k = y.k JOIN a z ON +z.k = y.k",
    "collates": "SELECT x.k AS xk, z.k AS zk FROM c x JOIN b y ON x.k = y.k COLLATE NOCASE COLLATE RTRIM "
    "JOIN a z ON z.k = y.k",
    "constant": "SELECT x.k AS xk, z.k AS zk FROM c x JOIN c2 z ON z.k = x.k WHERE x.k = 'a' COLLATE NOCASE",
}


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_every_spelling_of_a_mixed_collation_chain_is_refused(tmp_path: Path, name: str) -> None:
    setup = [
        "CREATE TABLE a(id INTEGER PRIMARY KEY, k COLLATE NOCASE)",
        "CREATE TABLE a2(id INTEGER PRIMARY KEY, k COLLATE NOCASE)",
        "CREATE TABLE b(id INTEGER PRIMARY KEY, k COLLATE NOCASE)",
        "CREATE TABLE c(id INTEGER PRIMARY KEY, k TEXT COLLATE RTRIM)",
        "CREATE TABLE c2(id INTEGER PRIMARY KEY, k TEXT COLLATE RTRIM)",
    ]
    assert_refused(tmp_path, setup, CHAINS[name], match="two collations in one chain")


def test_a_collation_with_a_long_name_is_kept(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "long.db"))
    conn.create_collation("caseless_collation_v2", lambda a, b: (a.lower() > b.lower()) - (a.lower() < b.lower()))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, n TEXT COLLATE caseless_collation_v2)")
    conn.execute("INSERT INTO t(n) VALUES ('a'), ('A')")
    conn.execute("CREATE MATERIALIZED VIEW v AS SELECT id, n FROM t")
    assert "recomputed whole" not in conn.view("v").explain()
    conn.execute("INSERT INTO t(n) VALUES ('B')")
    assert_filters_match(conn, {"v": "SELECT id, n FROM t"}, ["n = 'b'", "n > 'a'"])
