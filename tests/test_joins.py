"""Joins: differential tests against SQLite (every view equals its SELECT re-run, as a bag
of typed rows, after every step, in both maintenance modes), and the pitfalls of
RELATIONAL.md §1.7 that apply to inner joins, each as a named regression test."""

from __future__ import annotations

import itertools
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_view_matches, create_views_both_modes
from oracle import run_scenario as _scenario
from stock import stock_sqlite3

import matview

# key column types, and the values each may hold (1, 1.0 and '1' meet by affinity, or don't)
KEY_TYPES = {
    "INTEGER": [1, 2, 3, None],
    "REAL": [1.0, 2.0, 2.5, None],
    "TEXT": ["1", "2", "a", None],
    "TEXT COLLATE NOCASE": ["a", "A", "b", None],
    "": [1, 1.0, "1", 2, "a", None],  # untyped: no affinity
}


@dataclass
class Table:
    name: str
    key_type: str
    without_rowid: bool

    def create(self) -> str:
        if self.without_rowid:
            return (
                f"CREATE TABLE {self.name}(id INTEGER NOT NULL PRIMARY KEY, k {self.key_type}, v INTEGER, "
                "r REAL) WITHOUT ROWID"
            )
        return f"CREATE TABLE {self.name}(id INTEGER PRIMARY KEY, k {self.key_type}, v INTEGER, r REAL)"


@dataclass
class Program:
    tables: list[Table]
    views: dict[str, str]
    steps: list[list[str] | str] = field(default_factory=list)  # a transaction, or a special step
    plain_views: list[str] = field(default_factory=list)  # CREATE VIEW statements the views may read


def _views(r: random.Random, tables: list[Table]) -> dict[str, str]:
    a, b = tables[0].name, tables[1].name
    c = tables[2].name if len(tables) > 2 else a
    typed = [t for t in tables[:2] if t.key_type in ("INTEGER", "TEXT")]
    group = f"{typed[0].name}.k" if typed else f"{a}.v"
    shapes = {
        "inner": f"SELECT {a}.id, {b}.id AS bid, {a}.v + {b}.v AS s FROM {a} JOIN {b} ON {a}.k = {b}.k",
        "reverse": f"SELECT x.id, y.v FROM {b} y JOIN {a} x ON y.k = x.k WHERE x.v > 1",
        "self": f"SELECT x.id, y.id FROM {a} x JOIN {a} y ON x.k = y.k",
        "three": f"SELECT x.id, y.id, z.id FROM {a} x JOIN {b} y ON x.k = y.k JOIN {c} z ON z.v = y.v",
        "comma": f"SELECT {a}.id, {b}.v FROM {a}, {b} WHERE {a}.k = {b}.k AND {b}.v <> 2",
        "nonequi": f"SELECT {a}.id, {b}.id FROM {a} JOIN {b} ON {a}.v < {b}.v AND {b}.r > 0",
        "using": f"SELECT k, {a}.v, {b}.v FROM {a} JOIN {b} USING (k)",
        "star": f"SELECT * FROM {a} JOIN {b} ON {a}.id = {b}.v",
        "agg": (
            f"SELECT {group} AS g, count(*), sum({b}.v), total({a}.r), min({b}.v), max({a}.v) "
            f"FROM {a} JOIN {b} ON {a}.k = {b}.k GROUP BY {group}"
        ),
        "agg_all": f"SELECT count(*), sum(x.v * y.v), avg(y.r) FROM {a} x, {b} y WHERE x.v = y.v",
        "having": (
            f"SELECT x.v, count(*) AS n, sum(y.v) + 1 FROM {a} x JOIN {b} y ON x.k = y.k "
            "GROUP BY x.v HAVING count(*) > 1"
        ),
        "distinct": f"SELECT DISTINCT x.v, y.v FROM {a} x JOIN {b} y ON x.k = y.k",
        "self_agg": f"SELECT x.v, count(y.id) FROM {c} x JOIN {c} y ON x.v = y.v AND x.id <> y.id GROUP BY x.v",
        "left": f"SELECT {a}.id, {b}.id AS bid, {b}.v FROM {a} LEFT JOIN {b} ON {a}.k = {b}.k",
        "left_filter": (
            f"SELECT x.id, coalesce(y.v, -1), CASE WHEN y.id IS NULL THEN 'pad' ELSE 'row' END "
            f"FROM {a} x LEFT OUTER JOIN {b} y ON y.k = x.k AND y.v > 0 WHERE x.v IS NOT 2"
        ),
        "left_anti": f"SELECT x.id, x.v FROM {a} x LEFT JOIN {b} y ON x.k = y.k WHERE y.id IS NULL",
        "left_agg": (
            f"SELECT x.v, count(*), count(y.id), sum(y.v), max(y.r) FROM {a} x LEFT JOIN {b} y "
            "ON x.k = y.k AND x.v <= y.v GROUP BY x.v"
        ),
        "left_self": f"SELECT x.id, y.id FROM {c} x LEFT JOIN {c} y ON x.k = y.k AND x.id < y.id",
        "right": f"SELECT y.id, x.id AS xid, x.v FROM {a} x RIGHT JOIN {b} y ON x.k = y.k",
        "right_agg": (
            f"SELECT y.v, count(x.id), sum(x.v), count(*) FROM {a} x RIGHT OUTER JOIN {b} y "
            "ON x.k = y.k AND x.v > 0 WHERE y.r IS NOT 0.5 GROUP BY y.v"
        ),
        "left_chain": (
            f"SELECT x.id, y.id, z.id, z.v FROM {a} x LEFT JOIN {b} y ON x.k = y.k LEFT JOIN {c} z ON z.v = y.v"
        ),
        "left_star_agg": (
            f"SELECT x.v, count(*), count(y.id), total(z.r), max(z.v) FROM {a} x LEFT JOIN {b} y ON y.k = x.k "
            f"LEFT JOIN {c} z ON z.id = x.v GROUP BY x.v"
        ),
        "left_inner_mix": (
            f"SELECT x.id, y.id, z.id FROM {a} x JOIN {b} y ON x.v = y.v LEFT JOIN {c} z ON z.k = y.k AND z.id <> x.id"
        ),
        "left_using": f"SELECT * FROM {a} LEFT JOIN {b} USING (k)",
        "full": f"SELECT x.id, y.id, x.v, y.r FROM {a} x FULL JOIN {b} y ON x.k = y.k",
        "full_agg": (
            f"SELECT count(*), count(x.id), count(y.id), sum(y.v), total(x.r) FROM {a} x "
            f"FULL OUTER JOIN {b} y ON x.k = y.k AND y.v > 0"
        ),
        "full_self_anti": (
            f"SELECT x.id, y.id FROM {a} x FULL JOIN {a} y ON x.v = y.id WHERE x.id IS NULL OR y.id IS NULL"
        ),
        "full_group": (
            f"SELECT coalesce(x.v, y.v) AS g, count(*), max(y.id) FROM {a} x FULL JOIN {b} y ON x.v = y.v GROUP BY g"
        ),
        "left_chain_anti": (
            f"SELECT x.id, coalesce(z.v, -1) FROM {a} x LEFT JOIN {b} y ON x.k = y.k LEFT JOIN {a} z "
            "ON z.id = y.v WHERE z.id IS NULL OR x.v > 1"
        ),
    }
    chosen = r.sample(sorted(shapes), r.randint(2, 6))
    return {name: shapes[name] for name in chosen}


def _row(r: random.Random, table: Table, ident: int | None = None) -> str:
    key = r.choice(KEY_TYPES[table.key_type])
    v = r.choice([0, 1, 2, 3, None])
    real = r.choice([0.5, -1.25, 2.0, None])
    values = [ident if ident is not None else r.randint(1, 12), key, v, real]
    return "(" + ", ".join(_literal(x) for x in values) + ")"


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def _write(r: random.Random, tables: list[Table]) -> str:
    t = r.choice(tables)
    kind = r.choice(["insert", "insert", "insert", "update_key", "update_value", "delete", "delete_max", "replace"])
    if kind == "insert":
        return f"INSERT OR IGNORE INTO {t.name} VALUES {_row(r, t)}"
    if kind == "replace":
        return f"INSERT OR REPLACE INTO {t.name} VALUES {_row(r, t)}"
    if kind == "update_key":
        return f"UPDATE {t.name} SET k = {_literal(r.choice(KEY_TYPES[t.key_type]))} WHERE id % 3 = {r.randint(0, 2)}"
    if kind == "update_value":
        value = _literal(r.choice([0, 1, 2, None]))
        return f"UPDATE {t.name} SET v = {value} WHERE k IS NOT NULL AND id > {r.randint(0, 9)}"
    if kind == "delete_max":  # the next insert reuses the rowid
        return f"DELETE FROM {t.name} WHERE id = (SELECT max(id) FROM {t.name})"
    return f"DELETE FROM {t.name} WHERE id = {r.randint(1, 12)}"


def random_program(r: random.Random, views: Any = None) -> Program:
    """Tables, views (from `views(r, tables)`: a dict, or a (dict, plain views) pair) and steps."""
    count = r.randint(2, 3)
    tables = [Table(f"t{i}", r.choice(sorted(KEY_TYPES)), r.random() < 0.2) for i in range(count)]
    chosen = (views or _views)(r, tables)
    if isinstance(chosen, tuple):
        program = Program(tables, chosen[0], plain_views=chosen[1])
    else:
        program = Program(tables, chosen)
    for _ in range(r.randint(4, 9)):
        special = r.random()
        if special < 0.08:
            program.steps.append("reopen")
        elif special < 0.14:
            program.steps.append("stock")
        elif special < 0.2:
            program.steps.append("rollback")
        elif special < 0.25:
            program.steps.append("reset")
        else:
            program.steps.append([_write(r, tables) for _ in range(r.randint(1, 5))])
    return program


class Runner:
    def __init__(self, path: Path, program: Program) -> None:
        self.path, self.program = path, program
        self.conn = matview.connect(str(path))
        self.rng = random.Random(len(program.steps))
        for table in program.tables:
            self.conn.execute(table.create())
            for ident in range(1, 6):
                self.conn.execute(f"INSERT INTO {table.name} VALUES {_row(self.rng, table, ident)}")
        for statement in program.plain_views:
            self.conn.execute(statement)
        self.live = create_views_both_modes(self.conn, program.views)
        self.check()

    def check(self) -> None:
        for view, sql in self.live.items():
            assert_view_matches(self.conn, view, sql)

    def run(self) -> None:
        for step in self.program.steps:
            if step == "reopen":
                self.conn.close()
                self.conn = matview.connect(str(self.path))
            elif step == "stock":
                self.conn.close()
                writes = [_write(self.rng, self.program.tables) for _ in range(3)]
                stock_sqlite3(self.path, writes)
                self.conn = matview.connect(str(self.path))
            elif step == "rollback":
                self.conn.execute("BEGIN")
                for _ in range(3):
                    self.conn.execute(_write(self.rng, self.program.tables))
                self.conn.execute("SAVEPOINT s")
                self.conn.execute(_write(self.rng, self.program.tables))
                self.check()  # reads inside the transaction see its writes
                self.conn.execute("ROLLBACK TO s")
                self.check()
                self.conn.execute("ROLLBACK")
            elif step == "reset":
                with self.conn:  # delete everything on both sides, then reinsert
                    for table in self.program.tables:
                        self.conn.execute(f"DELETE FROM {table.name}")
                    for table in self.program.tables:
                        self.conn.execute(f"INSERT INTO {table.name} VALUES {_row(self.rng, table, 1)}")
            else:
                with self.conn:
                    for sql in step:
                        self.conn.execute(sql)
            self.check()
        self.conn.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_random_join_views_and_writes(tmp_path_factory, seed):
    path = tmp_path_factory.mktemp("joins") / "db.sqlite"
    program = random_program(random.Random(seed))
    Runner(path, program).run()


@pytest.mark.parametrize("seed", range(12))
def test_seeded_join_programs(tmp_path, seed):
    Runner(tmp_path / "db.sqlite", random_program(random.Random(1000 + seed))).run()


# --------------------------------------------------------------------------------------
# pitfalls of RELATIONAL.md §1.7 (inner joins)


def test_pitfall_1_self_join_counts_a_new_row_once(tmp_path):
    conn = _scenario(
        tmp_path,
        ["CREATE TABLE t(id INTEGER PRIMARY KEY, k, v)"],
        {"s": "SELECT x.v, y.v FROM t x JOIN t y ON x.k = y.k"},
        [["INSERT INTO t(k, v) VALUES (7, 'new')"], ["INSERT INTO t(k, v) VALUES (7, 'b'), (7, 'c')"]],
    )
    assert conn.execute("SELECT count(*) FROM s_imm").fetchone() == (9,)


def test_pitfall_2_both_sides_in_one_transaction(tmp_path):
    conn = _scenario(
        tmp_path,
        ["CREATE TABLE a(id INTEGER PRIMARY KEY, k, x)", "CREATE TABLE b(id INTEGER PRIMARY KEY, k, y)"],
        {"j": "SELECT x, y FROM a JOIN b ON a.k = b.k"},
        [
            ["INSERT INTO a(k, x) VALUES (1, 'a')", "INSERT INTO b(k, y) VALUES (1, 'b')"],
            ["DELETE FROM a", "DELETE FROM b"],
            ["INSERT INTO a(k, x) VALUES (2, 'a')", "INSERT INTO b(k, y) VALUES (2, 'b')", "DELETE FROM a"],
        ],
    )
    assert conn.execute("SELECT count(*) FROM j_imm").fetchone() == (0,)


def test_pitfall_3_null_keys_never_join(tmp_path):
    _scenario(
        tmp_path,
        ["CREATE TABLE a(id INTEGER PRIMARY KEY, k, x)", "CREATE TABLE b(id INTEGER PRIMARY KEY, k, y)"],
        {"j": "SELECT x, y FROM a JOIN b ON a.k = b.k", "n": "SELECT x, y FROM a JOIN b ON a.k IS b.k"},
        [["INSERT INTO a(k, x) VALUES (NULL, 1)", "INSERT INTO b(k, y) VALUES (NULL, 2)"], ["UPDATE b SET k = 1"]],
    )


def test_pitfall_4_storage_classes_and_affinity(tmp_path):
    _scenario(
        tmp_path,
        [
            "CREATE TABLE i(id INTEGER PRIMARY KEY, k INTEGER)",
            "CREATE TABLE r(id INTEGER PRIMARY KEY, k REAL)",
            "CREATE TABLE s(id INTEGER PRIMARY KEY, k TEXT)",
            "CREATE TABLE u(id INTEGER PRIMARY KEY, k)",
        ],
        {
            "ir": "SELECT i.id, r.id FROM i JOIN r ON i.k = r.k",
            "is_": "SELECT i.id, s.id FROM i JOIN s ON i.k = s.k",
            "us": "SELECT u.id, s.id FROM u JOIN s ON u.k = s.k",
            "ui": "SELECT u.id, i.id, typeof(u.k) FROM u JOIN i ON u.k = i.k",
        },
        [
            ["INSERT INTO i(k) VALUES (1)", "INSERT INTO r(k) VALUES (1.0)", "INSERT INTO s(k) VALUES ('1')"],
            ["INSERT INTO u(k) VALUES (1), ('1'), (1.0)", "INSERT INTO s(k) VALUES ('1.0')"],
            ["DELETE FROM i", "INSERT INTO i(k) VALUES ('1')"],
        ],
    )


def test_pitfall_5_collation_of_the_left_operand(tmp_path):
    _scenario(
        tmp_path,
        ["CREATE TABLE a(id INTEGER PRIMARY KEY, x TEXT COLLATE NOCASE)", "CREATE TABLE b(id INTEGER PRIMARY KEY, y)"],
        {
            "left_nocase": "SELECT a.id, b.id FROM a JOIN b ON a.x = b.y",
            "right_nocase": "SELECT a.id, b.id FROM a JOIN b ON b.y = a.x",
        },
        [["INSERT INTO a(x) VALUES ('A')", "INSERT INTO b(y) VALUES ('a'), ('A')"], ["UPDATE b SET y = 'B'"]],
    )


def test_pitfall_6_using_and_natural(tmp_path):
    _scenario(
        tmp_path,
        ["CREATE TABLE a(id INTEGER PRIMARY KEY, k, x)", "CREATE TABLE b(bid INTEGER PRIMARY KEY, k, x)"],
        {
            "using": "SELECT k, a.x, b.x FROM a JOIN b USING (k)",
            "star": "SELECT * FROM a JOIN b USING (k)",
            "natural": "SELECT * FROM a NATURAL JOIN b",
        },
        [["INSERT INTO a(k, x) VALUES (1, 1), (NULL, 2)", "INSERT INTO b(k, x) VALUES (1, 1), (NULL, 2), (1, 3)"]],
    )


def test_pitfall_8_join_key_update(tmp_path):
    _scenario(
        tmp_path,
        ["CREATE TABLE a(id INTEGER PRIMARY KEY, k)", "CREATE TABLE b(id INTEGER PRIMARY KEY, k)"],
        {"j": "SELECT a.id, b.id FROM a JOIN b ON a.k = b.k"},
        [
            ["INSERT INTO a(k) VALUES (1), (2)", "INSERT INTO b(k) VALUES (1), (2), (2)"],
            ["UPDATE a SET k = 3 - k", "UPDATE b SET k = k + 1 WHERE id = 1"],
        ],
    )


def test_pitfall_9_and_10_cancelling_changes_and_rowid_reuse(tmp_path):
    _scenario(
        tmp_path,
        ["CREATE TABLE a(id INTEGER PRIMARY KEY, k)", "CREATE TABLE b(k, v)"],
        {
            "j": "SELECT a.id, b.v FROM a JOIN b ON a.k = b.k",
            "g": "SELECT b.v, count(*) FROM a, b WHERE a.k = b.k GROUP BY b.v",
        },
        [
            ["INSERT INTO a(k) VALUES (1)", "INSERT INTO b VALUES (1, 'x')"],
            ["DELETE FROM b", "INSERT INTO b VALUES (1, 'y')", "INSERT INTO a(k) VALUES (1)", "DELETE FROM a"],
            ["DELETE FROM a WHERE id = (SELECT max(id) FROM a)", "INSERT INTO a(k) VALUES (1)"],
            ["UPDATE b SET v = 'z'", "UPDATE b SET v = 'y'"],
        ],
    )


def test_pitfall_16_many_tables_changed_in_one_transaction(tmp_path):
    tables = [f"t{i}" for i in range(8)]
    setup = [f"CREATE TABLE {t}(id INTEGER PRIMARY KEY, k INTEGER, v INTEGER)" for t in tables]
    setup += [f"INSERT INTO {t}(k, v) VALUES (1, {i}), (2, {i})" for i, t in enumerate(tables)]
    join = ", ".join(tables) + ", t0 AS again"
    where = " AND ".join(f"{a}.k = {b}.k" for a, b in itertools.pairwise(tables)) + " AND again.k = t7.k"
    _scenario(
        tmp_path,
        setup,
        {"wide": f"SELECT t0.k, count(*), sum(t3.v + again.v) FROM {join} WHERE {where} GROUP BY t0.k"},
        [[f"INSERT INTO {t}(k, v) VALUES (1, 9)" for t in tables], [f"DELETE FROM {t} WHERE v = 9" for t in tables]],
    )


def test_join_refusals_name_the_construct(tmp_path):
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE a(id INTEGER PRIMARY KEY, k)")
    conn.execute("CREATE TABLE b(k, v)")
    conn.execute("CREATE VIEW pv AS SELECT * FROM a")
    for sql, words in [
        ("SELECT * FROM a FULL OUTER JOIN b USING (k)", "FULL JOIN"),
        ("SELECT * FROM a FULL JOIN b ON a.k = b.k JOIN a c ON c.k = b.k", "FULL JOIN"),
        ("SELECT * FROM a RIGHT JOIN b USING (k)", "RIGHT JOIN"),
        ("SELECT * FROM a LEFT JOIN (SELECT k, count(*) FROM b GROUP BY k) s ON a.k = s.k", "equal but different"),
        ("SELECT * FROM (SELECT k FROM pv) s RIGHT JOIN a ON a.k = s.k", "outer join with a FROM-subquery"),
        ("SELECT group_concat(v) FROM a JOIN b ON a.k = b.k", "GROUP_CONCAT"),
        ("SELECT b.rowid FROM a JOIN b ON a.k = b.k", "VACUUM"),
    ]:
        with pytest.raises(matview.UnsupportedQuery, match=words):
            conn.execute(f"CREATE MATERIALIZED VIEW v AS {sql}")
    with pytest.raises(matview.Error, match="ambiguous"):
        conn.execute("CREATE MATERIALIZED VIEW v AS SELECT k FROM a JOIN b ON a.k = b.k")
    assert conn.views() == []
    conn.execute("INSERT INTO b VALUES (1, 2)")
    conn.close()


def test_drop_table_under_a_join_view_is_refused(tmp_path):
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE a(id INTEGER PRIMARY KEY, k)")
    conn.execute("CREATE TABLE b(id INTEGER PRIMARY KEY, k)")
    conn.execute("CREATE MATERIALIZED VIEW j AS SELECT a.id FROM a JOIN b ON a.k = b.k")
    for ddl in ("DROP TABLE b", "ALTER TABLE a RENAME COLUMN k TO z"):
        with pytest.raises(matview.Error, match="used by materialized view"):
            conn.execute(ddl)
    conn.execute("ALTER TABLE a ADD COLUMN z")  # (maintained: the views over a are rebuilt)
    conn.execute("DROP MATERIALIZED VIEW j")
    conn.execute("DROP TABLE b")
    assert not conn.execute("SELECT name FROM sqlite_master WHERE name LIKE '__dbsp_%_b'").fetchall()
    conn.close()


# --------------------------------------------------------------------------------------
# LEFT JOIN (rule R2: inner join plus padded antijoin)


def test_left_join_padding_flips_both_ways(tmp_path):
    """The first match of a preserved row removes its padded row; deleting the last match
    brings it back; NULL keys never match, so a NULL-key row stays padded (pitfall 3)."""
    _scenario(
        tmp_path,
        ["CREATE TABLE c(id INTEGER PRIMARY KEY, k)", "CREATE TABLE o(id INTEGER PRIMARY KEY, k, v)"],
        {
            "rows": "SELECT c.id, o.v FROM c LEFT JOIN o ON o.k = c.k",
            "counted": "SELECT c.id, count(o.id), count(*), sum(o.v) FROM c LEFT JOIN o ON o.k = c.k GROUP BY c.id",
            "anti": "SELECT c.id FROM c LEFT JOIN o ON o.k = c.k WHERE o.id IS NULL",
            "shaped": (
                "SELECT c.id, coalesce(o.v, 'none'), CASE WHEN o.id IS NULL THEN 'padded' ELSE 'matched' END "
                "FROM c LEFT OUTER JOIN o ON o.k = c.k AND o.v > 1"
            ),
        },
        [
            ["INSERT INTO c(k) VALUES (1), (2), (NULL)"],
            ["INSERT INTO o(k, v) VALUES (1, 5)", "INSERT INTO o(k, v) VALUES (NULL, 7)"],
            ["INSERT INTO o(k, v) VALUES (1, 0), (2, 3)"],
            ["DELETE FROM o WHERE k = 1"],
            ["UPDATE o SET k = 1 WHERE k = 2", "INSERT INTO c(k) VALUES (1)"],
            ["UPDATE c SET k = 3 WHERE k = 1", "DELETE FROM o"],
            ["INSERT INTO o(k, v) VALUES (3, 2)", "DELETE FROM c WHERE k = 3", "INSERT INTO c(k) VALUES (3)"],
        ],
    )


def test_left_join_both_sides_in_one_transaction_and_self(tmp_path):
    _scenario(
        tmp_path,
        [
            "CREATE TABLE t(id INTEGER PRIMARY KEY, k, v)",
            "CREATE TABLE w(k INTEGER NOT NULL PRIMARY KEY, x) WITHOUT ROWID",
        ],
        {
            "self": "SELECT a.id, b.id FROM t a LEFT JOIN t b ON a.k = b.k AND a.id < b.id",
            "wr": "SELECT w.k, w.x, t.v FROM w LEFT JOIN t ON t.k = w.k",
            "agg": "SELECT a.k, count(b.id), max(b.v) FROM t a LEFT JOIN t b ON b.v > a.v GROUP BY a.k",
        },
        [
            ["INSERT INTO t(k, v) VALUES (1, 1), (1, 2)", "INSERT INTO w VALUES (1, 'a'), (2, 'b')"],
            ["INSERT INTO t(k, v) VALUES (2, 3)", "DELETE FROM w WHERE k = 1", "INSERT INTO w VALUES (1, 'c')"],
            ["UPDATE t SET k = 2", "UPDATE w SET k = 5 WHERE k = 2"],
            ["DELETE FROM t WHERE v < 3", "INSERT INTO t(k, v) VALUES (5, 0)"],
        ],
    )


def test_columns_qualified_by_schema_main(tmp_path):
    """`main.t.c` is `t.c` (SQLite's three-part column name): maintained, not refused."""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE c(id INTEGER PRIMARY KEY, name TEXT, city TEXT)")
    conn.execute("CREATE TABLE o(id INTEGER PRIMARY KEY, cid INT)")
    views = {
        "names": "SELECT main.c.name FROM main.c WHERE main.c.id > 1",
        "cities": "SELECT main.c.city, count(*) FROM main.c JOIN main.o ON main.o.cid = main.c.id GROUP BY main.c.city",
        "literal": "SELECT 'main.c.x' AS s, c.name FROM c",
    }
    for name, sql in views.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
    with conn:
        conn.execute("INSERT INTO c(name, city) VALUES ('a', 'x'), ('b', 'y'), ('c', 'x')")
        conn.execute("INSERT INTO o(cid) VALUES (1), (3), (3), (2)")
    with conn:
        conn.execute("DELETE FROM o WHERE cid = 3")
        conn.execute("UPDATE c SET city = 'y' WHERE id = 1")
    for name, sql in views.items():
        assert_view_matches(conn, name, sql)
