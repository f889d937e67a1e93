"""`x IN (SELECT col … WHERE c)` as a whole WHERE conjunct is evaluated as `x IN (SELECT col …
WHERE (c) AND x = col)`, so SQLite searches the subquery's table per recomputed outer row instead
of building the whole set at every fold (`matview/sql/membership.py`: `correlated_membership`).
Only where SQLite's plan searches an index, only where only the truth of the test counts; the
values are the ones IN and `=` could treat differently: 1 / 1.0 / '1' under each affinity,
'a' / 'A' / 'a ' under NOCASE and RTRIM, blobs, NULLs on either side."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import check_write_mix

import matview
from matview.sql import subqueries

SETUP = [
    "CREATE TABLE o (id INTEGER PRIMARY KEY, k INTEGER, t TEXT, u, n TEXT COLLATE NOCASE, r TEXT COLLATE RTRIM)",
    "CREATE TABLE s (id INTEGER PRIMARY KEY, v, w TEXT, x INTEGER, flag INTEGER)",
    "CREATE INDEX s_v ON s (v)",
    "CREATE INDEX s_w ON s (w)",
    "CREATE INDEX s_w_nocase ON s (w COLLATE NOCASE)",
    "CREATE INDEX s_x ON s (x)",
    "CREATE TABLE p (id INTEGER PRIMARY KEY, o_id INTEGER, label TEXT)",
    "INSERT INTO o (k, t, u, n, r) VALUES (1, '1', 1, 'a', 'a'), (2, 'b', '1', 'A', 'a '), "
    "(NULL, NULL, NULL, NULL, NULL), (3, 'a', 1.0, 'b', 'b')",
    "INSERT INTO s (v, w, x, flag) VALUES (1, 'a', 1, 1), ('1', 'A', 2, 0), (1.0, 'a ', NULL, 1), (2, 'b', 3, 1)",
    "INSERT INTO p (o_id, label) VALUES (1, 'x'), (2, 'y'), (4, NULL)",
]

#: name: (SELECT, whether its IN is searched per outer row)
VIEWS = {
    # (`k = v` applies NUMERIC affinity to v, which its index does not hold: SQLite would scan)
    "untyped": ("SELECT id, k FROM o WHERE k IN (SELECT v FROM s WHERE flag = 1)", False),
    "text_to_untyped": ("SELECT id, t FROM o WHERE t IN (SELECT v FROM s)", True),
    "untyped_to_text": ("SELECT o.id, o.u FROM o WHERE o.u IN (SELECT s.w FROM s WHERE s.flag = 1)", True),
    "integer_to_integer": ("SELECT id FROM o WHERE u IN (SELECT x FROM s WHERE flag = 1) AND id > 0", True),
    "nocase": ("SELECT id FROM o WHERE n IN (SELECT w FROM s WHERE flag = 1)", True),
    "rtrim": ("SELECT id FROM o WHERE r IN (SELECT DISTINCT w FROM s)", False),
    # its WHERE has an OR: parenthesized before the conjunct is added
    "or_inside": ("SELECT id FROM o WHERE t IN (SELECT w FROM s WHERE flag = 0 OR w = 'b')", True),
    "nested_group": ("SELECT id FROM o WHERE (id > 0 AND (t IN (SELECT w FROM s WHERE flag = 1)))", True),
    # `id` inside is s.id: the outer one is qualified
    "same_name": ("SELECT id FROM o WHERE id IN (SELECT id FROM s WHERE flag = 1)", True),
    "joined": (
        "SELECT o.id, p.label FROM o JOIN p ON p.o_id = o.id WHERE o.k IN (SELECT x FROM s WHERE flag = 1)",
        True,
    ),
    "aggregated": ("SELECT t, count(*) AS n, sum(k) AS total FROM o WHERE u IN (SELECT x FROM s) GROUP BY t", True),
    # where NULL and false differ, or OR binds it: as written
    "not_in": ("SELECT id FROM o WHERE k NOT IN (SELECT v FROM s WHERE flag = 1)", False),
    "select_list": ("SELECT id, k IN (SELECT v FROM s WHERE flag = 1) AS m FROM o", False),
    "under_or": ("SELECT id FROM o WHERE id = 1 OR k IN (SELECT v FROM s WHERE flag = 1)", False),
    "compared": ("SELECT id FROM o WHERE (k IN (SELECT v FROM s)) = 0", False),
    # an alias of the subquery's own hides the outer table's name
    "shadowed": ("SELECT id FROM o WHERE k IN (SELECT v FROM s AS o WHERE flag = 1)", False),
    # no index SQLite would search by: as written (a scan per outer row would cost more)
    "unindexed": ("SELECT id FROM o WHERE t IN (SELECT label FROM p)", False),
}

VALUES = [1, 1.0, "1", 2, "a", "A", "a ", "b", None, b"a", 3, "3"]


def _write(conn: matview.Connection, rng: random.Random) -> None:
    kind = rng.randrange(8)
    if kind < 3:
        conn.execute(
            "INSERT OR REPLACE INTO s (id, v, w, x, flag) VALUES (?, ?, ?, ?, ?)",
            (rng.randrange(1, 9), *(rng.choice(VALUES) for _ in range(3)), rng.choice([0, 1, None])),
        )
    elif kind == 3:
        conn.execute("DELETE FROM s WHERE id = ?", (rng.randrange(1, 9),))
    elif kind == 4:
        conn.execute("UPDATE s SET flag = 1 - flag WHERE id = ?", (rng.randrange(1, 9),))
    elif kind == 5:
        conn.execute(
            "INSERT OR REPLACE INTO o (id, k, t, u, n, r) VALUES (?, ?, ?, ?, ?, ?)",
            (rng.randrange(1, 8), *(rng.choice(VALUES) for _ in range(5))),
        )
    elif kind == 6:
        conn.execute(
            "INSERT OR REPLACE INTO p (id, o_id, label) VALUES (?, ?, ?)",
            (rng.randrange(1, 6), rng.randrange(1, 8), rng.choice(VALUES)),
        )
    else:
        conn.execute("DELETE FROM o WHERE id = ?", (rng.randrange(1, 8),))


def _searched(conn: matview.Connection, name: str) -> bool:
    """Whether the view's evaluated SQL holds the added conjunct (a column compared by `=` to
    the outer table's, quoted as matview quotes it)."""
    plan = conn.registry.get(name).entry.plan
    text = "".join(plan.stage1[::2])
    return any(f'"{outer}".' in text.split(" IN (SELECT", 1)[-1] for outer in ("o",))


@pytest.mark.parametrize("seed", range(3))
def test_searched_memberships_keep_every_view_exact(tmp_path: Path, seed: int) -> None:
    views = {name: select for name, (select, _) in VIEWS.items()}
    conn, live = check_write_mix(tmp_path, SETUP, views, _write, seed, steps=14)
    for name, (_select, searched) in VIEWS.items():
        for mode in ("imm", "def"):
            assert _searched(conn, f"{name}_{mode}") is searched, name
    for name in live:
        assert conn.view(name).verify()


def test_the_outer_operand_stays_on_the_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sensitivity: `col = x` takes col's collation first, where `x IN (SELECT col …)` takes x's:
    written so, the NOCASE view keeps wrong rows, and the oracle sees them."""
    correlate = subqueries.correlated_membership

    def flipped(*args: object) -> str | None:
        found = correlate(*args)  # type: ignore[arg-type]
        return None if found is None else " = ".join(reversed(found.split(" = ", 1)))

    monkeypatch.setattr(subqueries, "correlated_membership", flipped)
    views = {name: select for name, (select, _) in VIEWS.items()}
    with pytest.raises(AssertionError):
        for seed in range(3):
            (tmp_path / str(seed)).mkdir()
            check_write_mix(tmp_path / str(seed), SETUP, views, _write, seed, steps=14)


def test_a_fold_searches_instead_of_scanning(tmp_path: Path) -> None:
    """The point of it: an outer row's recompute no longer reads the subquery's whole table."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, segment TEXT)")
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INT, amount INT)")
    with conn:
        conn.executemany(
            "INSERT INTO customers (segment) VALUES (?)", [("retail" if i % 3 else "corp",) for i in range(3000)]
        )
    conn.execute(
        "CREATE MATERIALIZED VIEW v AS SELECT id, amount FROM orders "
        "WHERE customer_id IN (SELECT id FROM customers WHERE segment = 'retail')"
    )
    steps: list[int] = []
    conn.apsw.set_progress_handler(lambda: steps.append(1) or False, 100)
    conn.execute("INSERT INTO orders (customer_id, amount) VALUES (5, 10)")
    conn.apsw.set_progress_handler(None)
    # (a scan of 3,000 customers alone takes well over 30,000 VM steps)
    assert len(steps) < 300
    assert conn.execute("SELECT * FROM v").fetchall() == [(1, 10)]
