"""The view's Z-set, stored as an ordinary table ``__dbsp_view_<v>``.

One row per distinct output row: its values, an identity key (msgpack of the values,
so `1`, `1.0` and `'1'` stay distinct rows) under a unique index, and its weight (the
row's multiplicity). Applying ΔV adds weights and deletes rows that reach zero. Value
columns keep the declared types of the SELECT's columns, so the affinity users see in
comparisons is the SELECT's; users may index them through the view.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

from matview import names
from matview.db import scalar
from matview.errors import Error
from matview.keys import row_key
from matview.names import quote
from matview.plan import OutputColumn
from matview.zset import ZSet


class ViewTable:
    def __init__(self, view: str, columns: Sequence[OutputColumn]) -> None:
        self.view = view
        self.table = quote(names.view_table(view))
        self.columns = list(columns)
        cols = ", ".join(quote(c.name) for c in columns)
        marks = ", ".join("?" for _ in columns)
        key, weight = quote(names.KEY), quote(names.WEIGHT)
        self._upsert = (
            f"INSERT INTO {self.table} ({cols}, {key}, {weight}) VALUES ({marks}, ?, ?) "
            f"ON CONFLICT ({key}) DO UPDATE SET {weight} = {weight} + excluded.{weight} RETURNING {weight}"
        )
        self._delete = f"DELETE FROM {self.table} WHERE {key} = ?"
        assignments = ", ".join(f"{quote(c.name)} = ?" for c in columns)
        # A changed group is −old +new: rewrite the old row in place when it is alone.
        self._replace = f"UPDATE OR IGNORE {self.table} SET {assignments}, {key} = ? WHERE {key} = ? AND {weight} = 1"
        self._insert = f"INSERT INTO {self.table} ({cols}, {key}, {weight}) VALUES ({marks}, ?, ?)"
        self.select_columns = f"{cols}, {key}, {weight}"

    def create(self, conn: apsw.Connection) -> None:
        cols = ", ".join(f"{quote(c.name)} {c.decltype}".rstrip() for c in self.columns)
        conn.execute(
            f"CREATE TABLE {self.table} (rowid INTEGER PRIMARY KEY, {cols}, "
            f"{quote(names.KEY)} BLOB NOT NULL, {quote(names.WEIGHT)} INTEGER NOT NULL)"
        )
        conn.execute(
            f"CREATE UNIQUE INDEX {quote(names.view_key_index(self.view))} ON {self.table} ({quote(names.KEY)})"
        )

    def insert_initial(self, conn: apsw.Connection, delta: ZSet[tuple[Any, ...]]) -> None:
        conn.executemany(self._insert, ((*row, row_key(row), weight) for row, weight in delta.items()))

    def apply(self, conn: apsw.Connection, delta: ZSet[tuple[Any, ...]]) -> None:
        """V ← V + ΔV."""
        removed = [row for row, weight in delta.items() if weight == -1]
        added = [row for row, weight in delta.items() if weight == 1]
        replaced: set[tuple[Any, ...]] = set()
        for old, new in zip(removed, added):
            conn.execute(self._replace, (*new, row_key(new), row_key(old)))
            if conn.changes() == 1:
                replaced.update((old, new))
        for row, weight in delta.items():
            if row in replaced:
                continue
            key = row_key(row)
            total = scalar(conn, self._upsert, (*row, key, weight))
            if total == 0:
                conn.execute(self._delete, (key,))
            elif total < 0:
                raise Error(f"materialized view {self.view} is inconsistent (negative weight); REFRESH it")
