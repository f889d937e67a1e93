"""Hunt 54: statement patterns (comments, names, schemas), executemany of DDL, TEMP shadows,
case-renamed tables, UNIQUE indexes on views, index names from EXPLAIN QUERY PLAN, and
CREATE MATERIALIZED VIEW IF NOT EXISTS's syntax check — the fixes of hunt 51, attacked.

Its 13 findings are fixed, each test failing before its fix: unquoted names past ASCII read
whole (`t😀`, `x·y`: SQLite's identifier characters); no space needed before a quoted name
(`DROP TABLE"t"`); a block comment over several lines before a statement's first word (a
script's next statement was read as blank and skipped by the guard); executemany of a script;
an index on a view takes its columns only (`g -> '$'`, a WHERE with a call or a JSON arrow, an
unknown column refused; `'g'` read as the column g), and is SQLite's for another schema;
ADD COLUMN under a view a UNIQUE index stalls; a TEMP view named like a base table the
SELECT names; DROP VIEW of a TEMP view named like a base table."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_view_matches

import matview

pytestmark = pytest.mark.fall_back_to_whole


# ------------------------------------------------------------------ unquoted names SQLite reads whole
# SQLite's tokenizer takes every character >= 0x80 as an identifier character; the pattern
# `[^\W\d][\w$]*` ends (or never starts) a name at one that is not a Python word character
# (an emoji, a middle dot, a combining accent, a non-ASCII digit first).


def test_drop_table_unquoted_emoji_name_under_a_view_is_refused(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute('CREATE TABLE "t😀" (id INTEGER PRIMARY KEY, g TEXT, v INT)')
    conn.execute("INSERT INTO \"t😀\" VALUES (1, 'a', 1)")
    conn.execute('CREATE MATERIALIZED VIEW w AS SELECT g, sum(v) AS s FROM "t😀" GROUP BY g')
    with pytest.raises(matview.Error, match="used by materialized view"):
        conn.execute("DROP TABLE t😀")


def test_drop_table_unquoted_middle_dot_name_under_a_view_is_refused(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute('CREATE TABLE "x·y" (id INTEGER PRIMARY KEY, g TEXT, v INT)')
    conn.execute('CREATE MATERIALIZED VIEW w AS SELECT g, sum(v) AS s FROM "x·y" GROUP BY g')
    with pytest.raises(matview.Error, match="used by materialized view"):
        conn.execute("DROP TABLE x·y")


def test_rename_unquoted_euro_name_under_a_view_is_refused(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute('CREATE TABLE "€t" (id INTEGER PRIMARY KEY, g TEXT, v INT)')
    conn.execute('CREATE MATERIALIZED VIEW w AS SELECT g, sum(v) AS s FROM "€t" GROUP BY g')
    with pytest.raises(matview.Error, match="used by materialized view"):
        conn.execute("ALTER TABLE €t RENAME TO u")


def test_ddl_of_an_unrelated_emoji_table_is_not_refused(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, g TEXT, v INT)")
    conn.execute('CREATE TABLE "t😀" (id INTEGER PRIMARY KEY, g TEXT, v INT)')
    conn.execute("CREATE MATERIALIZED VIEW w AS SELECT g, sum(v) AS s FROM t GROUP BY g")
    conn.execute("ALTER TABLE t😀 RENAME TO u")
    conn.execute("DROP TABLE u")


def test_add_column_unquoted_emoji_name_is_maintained(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute('CREATE TABLE "t😀" (id INTEGER PRIMARY KEY, g TEXT, v INT)')
    conn.execute("INSERT INTO \"t😀\" VALUES (1, 'a', 1)")
    conn.execute('CREATE MATERIALIZED VIEW w AS SELECT g, sum(v) AS s FROM "t😀" GROUP BY g')
    conn.execute("ALTER TABLE t😀 ADD COLUMN z DEFAULT 5")
    conn.execute("INSERT INTO \"t😀\" VALUES (2, 'b', 2, 7)")
    assert_view_matches(conn, "w", 'SELECT g, sum(v) AS s FROM "t😀" GROUP BY g')


@pytest.mark.parametrize("name", ["v😀", "١v", "café", "v$1", "_x"])
def test_materialized_view_statements_with_unquoted_non_ascii_names(tmp_path: Path, name: str) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, g TEXT, v INT)")
    conn.execute(f"CREATE MATERIALIZED VIEW {name} AS SELECT g, sum(v) AS s FROM t GROUP BY g")
    conn.execute(f"CREATE INDEX i1 ON {name} (g)")
    conn.execute("INSERT INTO t VALUES (1, 'a', 1)")
    conn.execute(f"REFRESH MATERIALIZED VIEW {name}")
    assert_view_matches(conn, name, "SELECT g, sum(v) AS s FROM t GROUP BY g")
    conn.execute(f"DROP MATERIALIZED VIEW {name}")


# ------------------------------------------------------------------ a quoted name needs no space around it
# SQLite ends a keyword at a quote (`DROP TABLE"t"`, `IF EXISTS[t]`, `[t]ADD`); the patterns ask
# for whitespace (`\s+`) between the keyword and the name, so these spellings are not recognized.

SETUP = [
    "CREATE TABLE t (id INTEGER PRIMARY KEY, g TEXT, v INT)",
    "INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 2)",
]
VIEW = "SELECT g, sum(v) AS s FROM t GROUP BY g"


def _db(tmp_path: Path) -> matview.Connection:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in SETUP:
        conn.execute(sql)
    conn.execute(f"CREATE MATERIALIZED VIEW w AS {VIEW}")
    return conn


@pytest.mark.parametrize(
    "ddl", ['DROP TABLE"t"', "DROP TABLE IF EXISTS[t]", "ALTER TABLE'main'.'t'RENAME TO x", "DROP TABLE`t`"]
)
def test_ddl_without_a_space_before_a_quoted_base_table_is_refused(tmp_path: Path, ddl: str) -> None:
    conn = _db(tmp_path)
    with pytest.raises(matview.Error, match="used by materialized view"):
        conn.execute(ddl)


def test_add_column_without_spaces_around_a_quoted_name_is_maintained(tmp_path: Path) -> None:
    conn = _db(tmp_path)
    conn.execute('ALTER TABLE"t"ADD COLUMN z')
    conn.execute("INSERT INTO t (id, g, v) VALUES (3, 'c', 3)")
    assert_view_matches(conn, "w", VIEW)


@pytest.mark.parametrize("ddl", ["ALTER TABLE [t]ADD z", "ALTER TABLE 't'ADD z"])
def test_add_column_with_a_quoted_name_before_add_is_not_refused(tmp_path: Path, ddl: str) -> None:
    conn = _db(tmp_path)
    conn.execute(ddl)
    conn.execute("INSERT INTO t (id, g, v) VALUES (3, 'c', 3)")
    assert_view_matches(conn, "w", VIEW)


@pytest.mark.parametrize(
    "sql",
    ['CREATE MATERIALIZED VIEW"x"AS SELECT g FROM t', 'REFRESH MATERIALIZED VIEW"w"', "DROP MATERIALIZED VIEW[w]"],
)
def test_materialized_view_statements_with_a_quoted_name_and_no_space(tmp_path: Path, sql: str) -> None:
    conn = _db(tmp_path)
    conn.execute(sql)


@pytest.mark.parametrize("sql", ['CREATE INDEX i ON"w"(g)', 'CREATE INDEX"i"ON w (g)'])
def test_create_index_on_a_view_with_a_quoted_name_and_no_space(tmp_path: Path, sql: str) -> None:
    conn = _db(tmp_path)
    conn.execute(sql)
    conn.execute("INSERT INTO t VALUES (3, 'c', 3)")
    assert_view_matches(conn, "w", VIEW)


@pytest.mark.parametrize(
    "ddl",
    [
        'DROP TABLE main."t"',
        'DROP TABLE "main".t',
        "DROP TABLE MAIN.T",
        "DROP TABLE [main].[t]",
        "DROP TABLE `main`.`t`",
        "DROP TABLE IF EXISTS main . t",
        "DROP/**/TABLE/**/t",
        "DROP TABLE--x\nt",
        "DROP TABLE t;--",
        "DROP TABLE t /*",
        "ALTER TABLE\tmain.t RENAME COLUMN v TO v2",
        "ALTER TABLE t DROP COLUMN v",
        'DROP TABLE IF EXISTS "T"',
    ],
)
def test_odd_spellings_of_ddl_on_a_base_table_are_refused(tmp_path: Path, ddl: str) -> None:
    conn = _db(tmp_path)
    with pytest.raises(matview.Error, match="used by materialized view"):
        conn.execute(ddl)
    assert_view_matches(conn, "w", VIEW)


# ------------------------------------------------------------------ a TEMP view shadowing a base table


@pytest.mark.parametrize(
    "select", ["SELECT g, v FROM t", "SELECT count(*) AS c FROM t", "SELECT g, count(*) AS c FROM t GROUP BY g"]
)
def test_a_view_over_a_temp_view_shadowing_a_base_table(tmp_path: Path, select: str) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, g TEXT, v INT)")
    conn.execute("INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 5)")
    conn.execute("CREATE TEMP VIEW t AS SELECT * FROM main.t WHERE v > 2")
    try:
        conn.execute(f"CREATE MATERIALIZED VIEW w AS {select}")
    except matview.UnsupportedQuery:
        return
    assert_view_matches(conn, "w", select)


# ------------------------------------------------------------------ executemany


@pytest.mark.parametrize(
    "sql, seq",
    [
        ("INSERT INTO u VALUES (?); DROP TABLE t", [(1,)]),
        ("SAVEPOINT a; DROP TABLE t; RELEASE a", [()]),
        ("INSERT INTO u VALUES (?); ALTER TABLE t RENAME TO t2", [(1,)]),
    ],
)
def test_executemany_of_a_script_hiding_ddl_does_not_drop_a_base_table(tmp_path: Path, sql: str, seq: list) -> None:
    conn = _db(tmp_path)
    conn.execute("CREATE TABLE u (x)")
    try:
        conn.executemany(sql, seq)
    except matview.Error:
        pass
    assert_view_matches(conn, "w", VIEW)


@pytest.mark.parametrize(
    "sql, seq",
    [
        ("DROP TABLE t", []),
        ("DROP TABLE IF EXISTS nosuch", [(), ()]),
        ("CREATE TEMP TABLE IF NOT EXISTS x (a)", [(), ()]),
        ("/* c */ INSERT INTO t (g, v) VALUES (?, ?)", [("a", 1), ("z", 2)]),
        ("UPDATE t SET v = v + ? WHERE g = ?", [(1, "a"), (5, "b")]),
        ("REFRESH MATERIALIZED VIEW w", [()]),
        ("ANALYZE", [()]),
    ],
)
def test_executemany_that_holds(tmp_path: Path, sql: str, seq: list) -> None:
    conn = _db(tmp_path)
    conn.executemany(sql, seq)
    assert_view_matches(conn, "w", VIEW)


def test_executemany_transaction_control_and_savepoints(tmp_path: Path) -> None:
    conn = _db(tmp_path)
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO t (g, v) VALUES (?, ?)", [("a", 1), ("c", 2)])
    conn.executemany("SAVEPOINT s", [()])
    conn.executemany("INSERT INTO t (g, v) VALUES (?, ?)", [("d", 1)])
    conn.executemany("ROLLBACK TO s", [()])
    conn.executemany("RELEASE s", [()])
    conn.executemany("COMMIT", [()])
    assert_view_matches(conn, "w", VIEW)
    assert conn.execute("SELECT count(*) FROM t WHERE g = 'd'").fetchall() == [(0,)]


# ------------------------------------------------------------------ CREATE INDEX on a view


def test_an_index_on_a_view_naming_no_column_is_refused(tmp_path: Path) -> None:
    conn = _db(tmp_path)
    with pytest.raises(matview.Error):
        conn.execute("CREATE UNIQUE INDEX j ON w (nosuch)")


def test_create_index_in_an_attached_schema_is_not_taken_for_the_views(tmp_path: Path) -> None:
    conn = _db(tmp_path)
    conn.execute(f"ATTACH '{tmp_path / 'aux.sqlite'}' AS aux")
    conn.execute("CREATE TABLE aux.w (g TEXT, x INT)")
    conn.execute("CREATE INDEX aux.i ON w (g)")
    assert conn.execute("SELECT tbl_name FROM aux.sqlite_master WHERE name = 'i'").fetchall() == [("w",)]


def test_an_index_on_a_view_column_written_as_a_string(tmp_path: Path) -> None:
    conn = _db(tmp_path)
    conn.execute("CREATE INDEX i ON w ('g')")


@pytest.mark.parametrize(
    "columns", ["g", '"g"', "[g]", "`g`", "G", "g COLLATE NOCASE", 'g COLLATE "nocase" DESC', '"s" DESC, g']
)
def test_a_plain_index_on_a_view_serves_lookups(tmp_path: Path, columns: str) -> None:
    conn = _db(tmp_path)
    conn.execute(f"CREATE INDEX /* c */ i -- x\n ON main . w ({columns})")
    conn.execute("INSERT INTO t VALUES (3, 'c', 3)")
    assert_view_matches(conn, "w", VIEW)
    assert conn.execute("SELECT s FROM w WHERE g = 'c'").fetchall() == [(3,)]


@pytest.mark.parametrize("columns", ["+g", "(g)", "json(g)", "lower(g)"])
def test_an_expression_index_on_a_view_is_refused(tmp_path: Path, columns: str) -> None:
    conn = _db(tmp_path)
    with pytest.raises(matview.Error, match="not an expression"):
        conn.execute(f"CREATE INDEX i ON w ({columns})")


@pytest.mark.parametrize("columns", ["g -> '$'", "g ->> '$'", "s DESC, g -> 1"])
def test_a_json_operator_index_on_a_view_never_fails_a_base_write(tmp_path: Path, columns: str) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, g TEXT, v INT)")
    conn.execute("INSERT INTO t VALUES (1, '[1]', 1)")
    conn.execute("CREATE MATERIALIZED VIEW w AS SELECT g, v AS s FROM t")
    try:
        conn.execute(f"CREATE INDEX i ON w ({columns})")
    except matview.Error:
        return  # (refused, as json(g) is)
    try:
        conn.execute("INSERT INTO t VALUES (2, 'not json', 2)")
    except matview.Error:
        pass
    assert conn.execute("SELECT count(*) FROM t").fetchall() == [(2,)]


@pytest.mark.parametrize("where", ["json(g) IS NOT NULL", "g -> '$' IS NOT NULL"])
def test_a_partial_index_on_a_view_whose_where_can_fail_never_fails_a_base_write(tmp_path: Path, where: str) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, g TEXT, v INT)")
    conn.execute("INSERT INTO t VALUES (1, '[1]', 1)")
    conn.execute("CREATE MATERIALIZED VIEW w AS SELECT g, v FROM t")
    try:
        conn.execute(f"CREATE INDEX i ON w (v) WHERE {where}")
    except matview.Error:
        return
    try:
        conn.execute("INSERT INTO t VALUES (2, 'not json', 2)")
    except matview.Error:
        pass
    assert conn.execute("SELECT count(*) FROM t").fetchall() == [(2,)]


# ------------------------------------------------------------------ a view stalled by a user's UNIQUE index


def test_add_column_while_a_view_is_stalled_by_a_unique_index(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    for sql in SETUP:
        conn.execute(sql)  # (p the only view over t: with another one beside it, a matview.Error)
    conn.execute("CREATE MATERIALIZED VIEW p AS SELECT v, g FROM t")
    conn.execute("CREATE UNIQUE INDEX pv ON p (v)")
    conn.execute("INSERT INTO t VALUES (3, 'z', 1)")  # (commits; p stalls)
    try:
        conn.execute("ALTER TABLE t ADD COLUMN z INT")
    except matview.Error:
        return  # (refused in matview's words, nothing changed, would do)
    conn.execute("INSERT INTO t (id, g, v) VALUES (4, 'w', 4)")
    assert_view_matches(conn, "p", "SELECT v, g FROM t")


@pytest.mark.parametrize("mode", ["immediate", "deferred"])
def test_a_stalled_view_catches_up_when_its_unique_index_is_dropped(tmp_path: Path, mode: str) -> None:
    conn = _db(tmp_path)
    conn.execute(f"CREATE MATERIALIZED VIEW p WITH (maintenance = '{mode}', recompute = 'never') AS SELECT v, g FROM t")
    conn.execute(
        f"CREATE MATERIALIZED VIEW q WITH (maintenance = '{mode}', recompute = 'never') AS "
        "SELECT v, count(*) AS n FROM p GROUP BY v"
    )
    conn.execute("CREATE UNIQUE INDEX pv ON p (v)")
    conn.execute("INSERT INTO t VALUES (3, 'z', 1)")
    with conn:
        conn.execute("INSERT INTO t VALUES (4, 'w', 5)")
        conn.execute("UPDATE t SET g = 'yy' WHERE id = 2")
    assert_view_matches(conn, "p", "SELECT v, g FROM t")
    assert_view_matches(conn, "q", "SELECT v, count(*) AS n FROM t GROUP BY v")
    conn.execute("DROP INDEX pv")
    conn.flush()
    assert conn.view("p").pending() == 0 and conn.view("q").pending() == 0
    assert_view_matches(conn, "p", "SELECT v, g FROM t")


@pytest.mark.parametrize("mode", ["immediate", "deferred"])
def test_unique_indexes_on_group_keys_stay_incremental_through_swaps(tmp_path: Path, mode: str) -> None:
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, g TEXT, v INT, name TEXT UNIQUE)")
    conn.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", [(i, "abc"[i % 3], i, f"n{i}") for i in range(1, 13)])
    views = {
        "g1": "SELECT g, count(*) AS n, sum(v) AS s FROM t GROUP BY g",
        "r1": "SELECT id, name, g FROM t",
    }
    for name, select in views.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} WITH (maintenance = '{mode}', recompute = 'never') AS {select}")
    conn.execute("CREATE UNIQUE INDEX ug ON g1 (g)")
    conn.execute("CREATE UNIQUE INDEX un ON r1 (name)")
    for a, b in [(1, 2), (3, 7), (5, 6), (2, 9)]:
        with conn:  # (swap the names and the groups of rows a and b)
            na, ga = conn.execute("SELECT name, g FROM t WHERE id = ?", (a,)).fetchone()
            nb, gb = conn.execute("SELECT name, g FROM t WHERE id = ?", (b,)).fetchone()
            conn.execute("UPDATE t SET name = NULL WHERE id = ?", (a,))
            conn.execute("UPDATE t SET name = ?, g = ? WHERE id = ?", (na, ga, b))
            conn.execute("UPDATE t SET name = ?, g = ? WHERE id = ?", (nb, gb, a))
    conn.flush()
    for name, select in views.items():
        assert conn.view(name).pending() == 0
        assert_view_matches(conn, name, select)


def test_drop_view_of_a_temp_view_shadowing_a_base_table(tmp_path: Path) -> None:
    conn = _db(tmp_path)
    conn.execute("CREATE TEMP VIEW t AS SELECT 1 AS x")
    conn.execute("DROP VIEW t")
    assert conn.execute("SELECT count(*) FROM temp.sqlite_master WHERE name = 't'").fetchall() == [(0,)]
    assert_view_matches(conn, "w", VIEW)


def test_a_view_over_main_t_beside_a_temp_view_t(tmp_path: Path) -> None:
    conn = _db(tmp_path)
    conn.execute("CREATE TEMP VIEW t AS SELECT * FROM main.t WHERE v > 1")
    select = "SELECT g, count(*) AS c FROM main.t GROUP BY g"
    conn.execute(f"CREATE MATERIALIZED VIEW x AS {select}")
    conn.execute("INSERT INTO main.t VALUES (3, 'c', 7), (4, 'a', 0)")
    assert_view_matches(conn, "x", select)
    assert_view_matches(conn, "w", VIEW.replace("FROM t", "FROM main.t"))


# ------------------------------------------------------------------ a block comment over several lines
# `first_word` reads raw text with `_LEAD`, whose `/\*.*?\*/` is compiled without DOTALL: a block
# comment holding a newline before the first word hides the word (execute reads the comment-free
# text; a script's statements and executemany do not).


@pytest.mark.parametrize(
    "script", ["INSERT INTO u VALUES (1); /* a\n b */ DROP TABLE t", "SELECT 1; /*\n*/ ALTER TABLE t RENAME TO x"]
)
def test_a_script_with_a_multiline_comment_before_ddl_keeps_the_guard(tmp_path: Path, script: str) -> None:
    conn = _db(tmp_path)
    conn.execute("CREATE TABLE u (x)")
    with pytest.raises(matview.Error, match="used by materialized view"):
        conn.execute(script)
    assert_view_matches(conn, "w", VIEW)


@pytest.mark.parametrize(
    "ddl", ["/* a\n b */ DROP TABLE t", "/* a\n*/ALTER TABLE t RENAME TO x", "/*\n*/ ALTER TABLE t ADD COLUMN z"]
)
def test_executemany_of_ddl_after_a_multiline_comment(tmp_path: Path, ddl: str) -> None:
    conn = _db(tmp_path)
    try:
        conn.executemany(ddl, [()])
    except matview.Error:
        pass
    conn.execute("INSERT INTO t (id, g, v) VALUES (3, 'c', 3)")
    assert_view_matches(conn, "w", VIEW)


def test_executemany_of_create_materialized_view_after_a_multiline_comment(tmp_path: Path) -> None:
    conn = _db(tmp_path)
    conn.executemany("/*\n*/ CREATE MATERIALIZED VIEW q AS SELECT g FROM t", [()])
    assert_view_matches(conn, "q", "SELECT g FROM t")
