"""Expressions over values that live in no table of the user's file — aggregate results
per group — evaluated by SQLite itself on an isolated in-memory connection.

Each view gets a table there shaped like its per-group row: its GROUP BY columns with
the base columns' declared types and collations (so affinity and collation apply as in
the original query) and one untyped column per aggregate. A batch of changed groups is
inserted and the post-aggregation expressions and HAVING are selected back in one
statement. User functions registered through matview are mirrored onto the connection.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import apsw

from matview.db import scalar
from matview.names import quote
from matview.plan import Plan


class Evaluator:
    """The isolated connection of one matview Connection."""

    def __init__(self) -> None:
        self.conn = apsw.Connection(":memory:")
        self._tables: dict[str, tuple[str, str, str]] = {}
        self._table_numbers = itertools.count()
        self._sum_cache: dict[Any, Any] = {}

    def register_function(self, name: str, function: Callable[..., Any], nargs: int, deterministic: bool) -> None:
        self.conn.create_scalar_function(name, function, nargs, deterministic=deterministic)

    def numeric_sum_term(self, value: Any) -> Any:
        """What SQLite's sum() adds for a TEXT or BLOB value: int, or float (never raises)."""
        key = (type(value), value)
        if key not in self._sum_cache:
            self._sum_cache[key] = scalar(self.conn, "SELECT sum(?)", (value,))
        return self._sum_cache[key]

    def _prepare(self, view: str, plan: Plan) -> tuple[str, str, str]:
        found = self._tables.get(view)
        if found is not None:
            return found
        table = quote(f"post_{next(self._table_numbers)}")
        columns = ", ".join(f"{quote(c.name)} {c.decltype} COLLATE {quote(c.collation)}" for c in plan.post_columns)
        self.conn.execute(f"CREATE TABLE {table} ({columns or '__unused'})")
        placeholders = ", ".join("?" for _ in plan.post_columns) or "NULL"
        names = ", ".join(quote(c.name) for c in plan.post_columns) or "__unused"
        insert = f"INSERT INTO {table} (rowid, {names}) VALUES (?, {placeholders})"
        selected = [*plan.post_exprs, f"({plan.having}) IS TRUE" if plan.having else "1"]
        expressions = ", ".join(f"({e})" for e in selected)
        # plans of format 1 name GROUP BY columns by their base names, qualified by the table's alias
        alias = f" AS {quote(plan.post_alias)}" if plan.post_alias else ""
        select = f"SELECT rowid, {expressions} FROM {table}{alias} ORDER BY rowid"
        found = (table, insert, select)
        self._tables[view] = found
        return found

    def evaluate(self, view: str, plan: Plan, rows: Sequence[Sequence[Any]]) -> list[tuple[list[Any], bool]]:
        """For each per-group row (values of plan.post_columns): (post_exprs values, HAVING)."""
        table, insert, select = self._prepare(view, plan)
        with self.conn:
            self.conn.execute(f"DELETE FROM {table}")
            self.conn.executemany(insert, [(i, *row) for i, row in enumerate(rows)])
            out = [(list(r[1:-1]), bool(r[-1])) for r in self.conn.execute(select)]
        return out

    def forget(self, view: str) -> None:
        found = self._tables.pop(view, None)
        if found is not None:
            self.conn.execute(f"DROP TABLE IF EXISTS {found[0]}")
