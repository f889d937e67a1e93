"""Adversarial hunt over views with subqueries (EXISTS, IN, scalar; partition recompute per
root row). The h-tests reproduce views the first version accepted and then maintained
differently from SQLite (fixed: maintained exactly, or refused where the value depends on
SQLite's scan order); the others are hostile cases that held, kept as regressions."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_view_matches

import matview

MODES = ("immediate", "deferred")


def _run(
    tmp_path: Path, setup: list[str], view: str, steps: list[list[str]], modes=MODES, refusal_ok: bool = False
) -> None:
    """Create the view in each mode, check it, then run each step as a transaction and
    compare with the SELECT after each. With `refusal_ok`, an UnsupportedQuery at CREATE is
    the fix of a finding (refused, never wrong)."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    try:
        for sql in setup:
            conn.execute(sql)
        for mode in modes:
            try:
                conn.execute(f"CREATE MATERIALIZED VIEW v_{mode[:3]} WITH (maintenance = '{mode}') AS {view}")
            except matview.UnsupportedQuery:
                if not refusal_ok:
                    raise
                return
        for mode in modes:
            assert_view_matches(conn, f"v_{mode[:3]}", view)
        for step in steps:
            with conn:
                for sql in step:
                    conn.execute(sql)
            for mode in modes:
                assert_view_matches(conn, f"v_{mode[:3]}", view)
    finally:
        conn.close()


ABC = [
    "CREATE TABLE a(id INTEGER PRIMARY KEY, k INTEGER, v INTEGER)",
    "CREATE TABLE b(id INTEGER PRIMARY KEY, k INTEGER, v INTEGER, zz INTEGER)",
    "CREATE TABLE c(id INTEGER PRIMARY KEY, k INTEGER, v INTEGER)",
]


# --------------------------------------------------------------------------------------
# confirmed failures


def test_h1_select_alias_inside_subquery_is_captured_by_the_inner_table(tmp_path):
    """`w` in the subquery is the outer select-list alias `k AS w`, i.e. a.k (SQLite resolves
    it in the outer scope). matview substitutes the text `k` there, which inside the subquery
    binds to b.k. With a(1, k=1) and b(k=5, v=1): SQLite gives [(1,)], the view [] — already
    at CREATE."""
    _run(
        tmp_path,
        [*ABC, "INSERT INTO a VALUES (1, 1, 1)", "INSERT INTO b VALUES (1, 5, 1, 0)"],
        "SELECT k AS w FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.v = w)",
        [["INSERT INTO a VALUES (2, 2, 2)"]],
        refusal_ok=True,
    )


def test_h1b_inner_column_shadowing_an_outer_alias_is_replaced(tmp_path):
    """`zz` inside the subquery is b.zz (the inner scope wins); matview replaces it by the
    outer alias's expression `v` (→ b.v). SQLite: [(2, 2)] (b.zz = 2 holds for b(k=2));
    view: [] — already at CREATE. The qualified-alias variant
    `SELECT a.k AS w FROM a WHERE EXISTS (SELECT 1 FROM b a WHERE a.v = w)` fails the same way."""
    _run(
        tmp_path,
        [*ABC, "INSERT INTO a VALUES (1, 1, 1), (2, 2, 2)", "INSERT INTO b VALUES (1, 2, 9, 2)"],
        "SELECT id, v AS zz FROM a WHERE v IN (SELECT k FROM b WHERE zz = 2)",
        [["INSERT INTO b VALUES (2, 1, 9, 2)"]],
        refusal_ok=True,
    )


def test_h2_left_join_inside_subquery_delete_of_the_padded_side(tmp_path):
    """The subquery's reach is its FROM … WHERE with Δc in c's place; with c the right side
    of a LEFT JOIN, deleting c's matching row *creates* a padded row (c.id IS NULL) that Δc
    never produces (b matches the deleted row, so c.id is not NULL there). After
    `DELETE FROM c`: SQLite [(1,)], view []."""
    _run(
        tmp_path,
        [*ABC, "INSERT INTO a VALUES (1, 0, 1)", "INSERT INTO b VALUES (1, 1, 1, 0)", "INSERT INTO c VALUES (1, 1, 0)"],
        "SELECT id FROM a WHERE EXISTS (SELECT 1 FROM b LEFT JOIN c ON c.k = b.k WHERE c.id IS NULL AND b.v = a.v)",
        [["DELETE FROM c"]],
    )


def test_h2b_left_join_inside_subquery_insert_into_the_padded_side(tmp_path):
    """As h2, the other way: inserting the first match removes the padded row. After
    `INSERT INTO c`: SQLite [], view [(1,)] (stale)."""
    _run(
        tmp_path,
        [*ABC, "INSERT INTO a VALUES (1, 0, 1)", "INSERT INTO b VALUES (1, 1, 1, 0)"],
        "SELECT id FROM a WHERE EXISTS (SELECT 1 FROM b LEFT JOIN c ON c.k = b.k WHERE c.id IS NULL AND b.v = a.v)",
        [["INSERT INTO c VALUES (1, 1, 5)"]],
    )


def test_h3_self_join_inside_subquery_deleted_row_matching_itself(tmp_path):
    """b(1, k=7, v=7) joins itself (b1.k = b2.v). The reach puts Δb in one occurrence and the
    *new* state in the other (`_states` adds the old state only when another table changed),
    so the deleted pair (old row, old row) is never seen. After `DELETE FROM b`:
    SQLite [(1, 0, 0), (2, 0, 0)]; the view keeps root 1 as (1, 1, 1)."""
    _run(
        tmp_path,
        [
            *ABC,
            "INSERT INTO a VALUES (1, 0, 1), (2, 0, 2)",
            "INSERT INTO b VALUES (1, 7, 7, 0)",
        ],
        "SELECT id, (SELECT count(*) FROM b b1, b b2 WHERE b1.k = b2.v AND b2.id = a.v), "
        "EXISTS (SELECT 1 FROM b b1 JOIN b b2 ON b1.k = b2.v WHERE b1.id = a.v) FROM a",
        [["DELETE FROM b WHERE id = 1"]],
    )


def _index_changes_the_answer(tmp_path: Path, view: str, index: str) -> None:
    """CREATE INDEX changes the scan order SQLite uses for the subquery; a value that
    depends on it (which the refusals are meant to exclude) then differs from the stored
    one, and rows recomputed later mix both orders."""
    _run(
        tmp_path,
        [
            *ABC,
            "INSERT INTO a VALUES (1, 1, 1), (2, 2, 2), (3, 3, NULL)",
            "INSERT INTO b VALUES (1, 1, 10, 0), (2, 5, 5, 0)",
        ],
        view,
        [[index], ["INSERT INTO a VALUES (4, 1, 1)"]],
        refusal_ok=True,
    )


def test_h4_scalar_lookup_with_or_returns_several_rows(tmp_path):
    """`single_row.unique_lookup` sees the conjunct `b.id = a.k OR a.v > 0` as `key = expr`, but it
    returns every row of b when a.v > 0 (SQLite takes the first, in scan order). The view
    stores b.k of the first row in rowid order (1); after `CREATE INDEX bk ON b(k DESC)`
    SQLite answers 5 for ids 1, 2 while the view keeps 1."""
    _index_changes_the_answer(
        tmp_path,
        "SELECT a.id, (SELECT b.k FROM b WHERE b.id = a.k OR a.v > 0) FROM a",
        "CREATE INDEX bk ON b(k DESC)",
    )


def test_h5_bare_column_in_aggregate_subquery(tmp_path):
    """`(SELECT count(*) + b.k FROM b)` is one row (an aggregate), but the bare b.k comes from
    an arbitrary row in scan order. View stores 2 + 1 = 3 (rowid order); after
    `CREATE INDEX bk ON b(k DESC)` SQLite gives 2 + 5 = 7 and the view keeps 3."""
    _index_changes_the_answer(
        tmp_path,
        "SELECT a.id, (SELECT count(*) + b.k FROM b) FROM a",
        "CREATE INDEX bk ON b(k DESC)",
    )


# --------------------------------------------------------------------------------------
# hostile cases that hold


WRITES = [
    ["INSERT INTO b VALUES (10, 3, 3, 0)"],
    ["UPDATE b SET k = 4 WHERE id = 1"],
    ["DELETE FROM b WHERE k = 2"],
    ["INSERT INTO a VALUES (10, 5, 5)"],
    ["UPDATE a SET k = 1"],
    ["INSERT INTO c VALUES (5, 2, 2), (6, 3, 3)"],
    ["DELETE FROM c"],
    ["UPDATE b SET v = NULL"],
    ["DELETE FROM a WHERE id = 1", "INSERT INTO b VALUES (11, 1, 1, 1)"],
    ["DELETE FROM b"],
    ["INSERT INTO b VALUES (20, 1, 1, 1), (21, 2, 2, 2), (22, NULL, NULL, NULL)"],
]
DATA = [
    *ABC,
    "INSERT INTO a VALUES (1, 1, 1), (2, 2, 2), (3, 3, NULL), (4, NULL, 4)",
    "INSERT INTO b VALUES (1, 1, 10, 1), (2, 2, NULL, 2), (3, 5, 5, 3)",
    "INSERT INTO c VALUES (1, 1, 1), (2, 5, 2)",
]


@pytest.mark.parametrize(
    "view",
    [
        # inner alias equal to the outer alias, the same table inside and out
        "SELECT x.id FROM a x WHERE EXISTS (SELECT 1 FROM b x WHERE x.k = 2)",
        "SELECT a.id FROM a WHERE a.v IN (SELECT a.k FROM a)",
        "SELECT x.id FROM a x WHERE EXISTS (SELECT 1 FROM a y WHERE y.k = x.v AND y.id <> x.id)",
        # correlation through a non-root table, alias clash with it
        "SELECT a.id, b.id FROM a JOIN b ON a.k = b.k WHERE EXISTS (SELECT 1 FROM c WHERE c.v = b.v)",
        "SELECT x.id FROM a x, b y WHERE x.k = y.k AND EXISTS (SELECT 1 FROM c y WHERE y.k = x.v)",
        # in ON of an inner and of a LEFT JOIN
        "SELECT a.id, b.id FROM a JOIN b ON a.k = b.k AND EXISTS (SELECT 1 FROM c WHERE c.k = b.k)",
        "SELECT a.id, b.id FROM a LEFT JOIN b ON b.k = (SELECT max(c.k) FROM c WHERE c.v = a.v)",
        # three deep, the innermost correlated with the root
        "SELECT id FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.k = a.k AND EXISTS (SELECT 1 FROM c "
        "WHERE c.k = b.v AND c.id IN (SELECT id FROM a a2 WHERE a2.v IS NOT NULL)))",
        # NULLs, row values, a lookup with no row, aggregate arguments, DISTINCT
        "SELECT id, k NOT IN (SELECT v FROM b), (k, v) IN (SELECT k, v FROM c) FROM a",
        "SELECT a.id, (SELECT b.v FROM b WHERE b.id = a.k) FROM a",
        "SELECT sum(CASE WHEN EXISTS (SELECT 1 FROM b WHERE b.k = a.k) THEN 1 END), count(*) FROM a",
        "SELECT DISTINCT (SELECT count(*) FROM b WHERE b.k = a.k) FROM a",
        # an inner join (not LEFT) inside the subquery
        "SELECT id FROM a WHERE EXISTS (SELECT 1 FROM b JOIN c ON b.k = c.k WHERE c.v = a.v)",
    ],
)
def test_hostile_shapes_hold(tmp_path, view):
    _run(tmp_path, DATA, view, WRITES)


def test_many_rows_triggers_and_upserts_hold(tmp_path):
    """>64 rows per transaction, user triggers writing the subquery's tables, upsert/replace,
    delete-all and reinsert."""
    series = "WITH RECURSIVE n(i) AS (SELECT {lo} UNION ALL SELECT i + 1 FROM n WHERE i < {hi}) "
    _run(
        tmp_path,
        [
            *ABC,
            "CREATE TRIGGER ta AFTER INSERT ON a BEGIN INSERT INTO b(k, v) VALUES (new.k, new.v); "
            "DELETE FROM c WHERE k = new.k; END",
            "CREATE TRIGGER tb AFTER DELETE ON b BEGIN UPDATE a SET v = coalesce(v, 0) + 1 WHERE k = old.k; END",
            series.format(lo=1, hi=200) + "INSERT INTO c SELECT i, i % 7, i % 5 FROM n",
        ],
        "SELECT x.v, count(*), sum(CASE WHEN EXISTS (SELECT 1 FROM b y WHERE y.k = x.k) THEN 1 END), "
        "sum((SELECT count(*) FROM c WHERE c.k = x.k AND c.v = x.v)) FROM a x GROUP BY x.v",
        [
            [series.format(lo=10, hi=150) + "INSERT INTO a SELECT i, i % 9, i % 4 FROM n"],
            ["DELETE FROM b WHERE k < 4", "UPDATE c SET v = v + 1 WHERE id % 2 = 0"],
            ["DELETE FROM a", "DELETE FROM b", "DELETE FROM c"],
            [series.format(lo=1, hi=100) + "INSERT INTO c SELECT i, i % 7, i % 3 FROM n"],
            ["INSERT INTO a VALUES (10, 7, 7) ON CONFLICT(id) DO UPDATE SET k = excluded.k, v = a.v + 1"],
            ["REPLACE INTO b VALUES (1, 100, 100, 0)", "REPLACE INTO c VALUES (1, 8, 8)"],
        ],
    )


def test_without_rowid_composite_root_and_nocase_key(tmp_path):
    _run(
        tmp_path,
        [
            "CREATE TABLE a(p TEXT COLLATE NOCASE, q INTEGER, k INTEGER, v INTEGER, PRIMARY KEY (p, q)) WITHOUT ROWID",
            "CREATE TABLE b(x TEXT, y INTEGER, k INTEGER, v INTEGER, PRIMARY KEY (x, y)) WITHOUT ROWID",
            "INSERT INTO a VALUES ('a', 1, 1, 1), ('b', 1, 2, 2), ('C', 2, 3, NULL)",
            "INSERT INTO b VALUES ('a', 1, 1, 10), ('A', 1, 2, NULL), ('b', 2, 5, 5)",
        ],
        "SELECT p, q, (SELECT count(*) FROM b WHERE b.k = a.k) FROM a WHERE (p, q) IN (SELECT x, y FROM b) "
        "OR EXISTS (SELECT 1 FROM b WHERE b.x = a.p)",
        [
            ["UPDATE a SET p = 'A' WHERE p = 'a'"],
            ["UPDATE b SET x = 'B' WHERE x = 'b'", "INSERT OR REPLACE INTO a VALUES ('c', 2, 1, 1)"],
            ["DELETE FROM a", "INSERT INTO a VALUES ('a', 1, 1, 1)"],
        ],
    )
