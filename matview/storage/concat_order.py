"""The order SQLite meets a group's rows in — GROUP_CONCAT's order, and which of a class's
variants it shows — and whether matview keeps it.

SQLite's `group_concat` joins a group's values in the order its plan visits the rows. matview
keeps each group's values by rowid (`accumulators`: GROUP_CONCAT needs an INTEGER PRIMARY KEY),
which is SQLite's order when it scans the table (or an index on just the GROUP BY columns,
whose entries for one group follow the rowid). An index with other columns — a user's
`CREATE INDEX ON tracks(album, name)`, made before the view or after — makes SQLite visit a
group's rows in that index's order, which is not kept: refused at CREATE, and a view whose
file gained such an index later reads as broken, naming it (never a wrong order).
"""

from __future__ import annotations

import re

import apsw

from matview.errors import Error
from matview.names import PREFIX, fold, quote
from matview.plan import Plan
from matview.sql.sqltext import split_clauses, split_top_level, tokenize
from matview.sql.validate import one_statement

_INDEX_USED = re.compile(r"USING (?:COVERING )?INDEX (\S+)")


def concat_order_problem(conn: apsw.Connection, plan: Plan, sql: str) -> str | None:
    """Why SQLite's GROUP_CONCAT order for the view `sql` is not the rowid order matview keeps
    (the index it reads the aggregated table through), or None."""
    if not any(a.func == "group_concat" for a in plan.aggs) or not plan.sources or plan.upstreams:
        return None  # (over a materialized view: EXPLAIN would read the view's module again)
    try:
        grouped = _group_columns(sql)
    except Error:
        grouped = set()
    return _index_out_of_rowid_order(conn, plan, sql, grouped)


def rowid_order_within_classes(conn: apsw.Connection, plan: Plan, sql: str) -> bool:
    """Whether SQLite meets the rows of one GROUP BY or DISTINCT class of the view `sql` (over
    one table) in rowid order — a table scan, or an index on some of the class's columns — so
    the variant it shows ('a' or 'A' under NOCASE) is its least rowid's (`Circuit._first_row`).
    An index with other columns (`(email, last_name)`) orders a class by those."""
    if not plan.sources:
        return False
    try:
        columns = _group_columns(sql) if plan.kind == "aggregate" else _select_columns(sql)
    except Error:  # (not one plain SELECT: `WITH …`, a set operation) — no index is known to keep it
        columns = set()
    return _index_out_of_rowid_order(conn, plan, sql, columns) is None


def _index_out_of_rowid_order(conn: apsw.Connection, plan: Plan, sql: str, grouped: set[str]) -> str | None:
    table = fold(plan.sources[0])
    for detail in query_plan(conn, sql):
        for index in _INDEX_USED.findall(detail):
            owner = conn.execute(
                "SELECT tbl_name FROM main.sqlite_master WHERE type = 'index' AND name = ?", (index,)
            ).fetchone()
            if owner is None or fold(str(owner[0])) != table:
                continue
            columns = [str(row[2]) for row in conn.execute(f"PRAGMA main.index_info({quote(index)})")]
            if not columns or not {fold(c) for c in columns} <= grouped:
                shown = (
                    "an index matview made for another view"
                    if index.lower().startswith(f"{PREFIX}ix_")
                    else f"index {index}"
                )
                return (
                    f"GROUP_CONCAT: SQLite reads {plan.sources[0]} through {shown} ({', '.join(columns)}), "
                    "so it concatenates each group's values in that index's order; matview keeps them in "
                    "rowid order (the table's own). Drop that index, or aggregate without GROUP_CONCAT"
                )
    return None


def query_plan(conn: apsw.Connection, sql: str) -> list[str]:
    """The lines of SQLite's query plan for a view's SELECT `sql` (from the catalog: a damaged
    or hostile file may hold several statements there, and apsw would run every one after the
    first — so only one statement is ever explained); [] when it does not prepare."""
    try:
        select, _tokens = one_statement(sql)
        # prepared anew: a cached EXPLAIN reads no table, so SQLite never finds it stale after
        # another connection's CREATE INDEX, and would answer with the plan it first made
        return [str(row[3]) for row in conn.cursor().execute(f"EXPLAIN QUERY PLAN {select}", can_cache=False)]
    except (Error, apsw.Error):
        return []


def _select_columns(sql: str) -> set[str]:
    """The plain column names a SELECT's items are (`e`, `t.e`, `e AS x`)."""
    tokens = tokenize(sql)
    clauses = split_clauses(sql, tokens)
    found = set()
    for item in split_top_level(sql, clauses.select.tokens):
        toks = item.tokens
        if len(toks) >= 3 and toks[-2].text.upper() == "AS":
            toks = toks[:-2]
        elif len(toks) in (2, 4) and toks[-2].text != ".":
            toks = toks[:-1]
        if len(toks) == 1 or (len(toks) == 3 and toks[1].text == "."):
            found.add(fold(toks[-1].text))
    return found


def _group_columns(sql: str) -> set[str]:
    """The plain column names the SELECT's GROUP BY terms are (`g`, `t.g`)."""
    tokens = tokenize(sql)
    clauses = split_clauses(sql, tokens)
    found = set()
    for term in split_top_level(sql, clauses.group.tokens) if clauses.group else []:
        toks = term.tokens
        if len(toks) == 1 or (len(toks) == 3 and toks[1].text == "."):
            found.add(fold(toks[-1].text))
    return found
