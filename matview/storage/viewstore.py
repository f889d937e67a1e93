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
from matview.keys import row_of
from matview.names import quote
from matview.plan import OutputColumn
from matview.storage import readable
from matview.storage.codec import pack
from matview.zset import ZSet

ROW_KEY_FUNCTION = "__dbsp_row_key"


class Inconsistent(Error):
    """A view's stored rows disagree with its changes (a negative weight): REFRESH rebuilds it."""


def row_key_sql(*values: Any) -> bytes:
    """SQL function: the identity key of a row (as `keys.row_key`; `values` is a tuple
    already, and this runs once per row of a CREATE, so it encodes it directly)."""
    return pack(values)


class ViewTable:
    def __init__(self, view: str, columns: Sequence[OutputColumn]) -> None:
        self.view = view
        self.view_name = names.view_table(view)  # (its table's name, unquoted)
        self.table = quote(self.view_name)
        self.columns = list(columns)
        cols = ", ".join(quote(c.name) for c in columns)
        marks = ", ".join("?" for _ in columns)
        key, weight = quote(names.KEY), quote(names.WEIGHT)
        self._upsert = (
            f"INSERT INTO {self.table} ({cols}, {key}, {weight}) VALUES ({marks}, ?, ?) "
            f"ON CONFLICT ({key}) DO UPDATE SET {weight} = {weight} + excluded.{weight} RETURNING {weight}"
        )
        self._delete = f"DELETE FROM {self.table} WHERE {key} = ?"
        self._upsert_many = self._upsert.rsplit(" RETURNING", 1)[0]
        self._delete_empty = f"DELETE FROM {self.table} WHERE {key} = ? AND {weight} <= 0"
        assignments = ", ".join(f"{quote(c.name)} = ?" for c in columns)
        # A changed group is −old +new: rewrite the old row in place when it is alone.
        self._replace = f"UPDATE OR IGNORE {self.table} SET {assignments}, {key} = ? WHERE {key} = ? AND {weight} = 1"
        self._insert = f"INSERT INTO {self.table} ({cols}, {key}, {weight}) VALUES ({marks}, ?, ?)"
        self.select_columns = f"{cols}, {key}, {weight}"
        #: a user's UNIQUE index on the view table: its SELECT may give rows the index forbids, so a
        #: fold applies ΔV under a savepoint and stalls the view on a conflict (`read_constraints`)
        self.constrained = False

    def read_constraints(self, conn: apsw.Connection) -> None:
        """Note whether a user made a UNIQUE index on the view table (`constrained`)."""
        self.constrained = (
            conn.execute(
                "SELECT 1 FROM main.sqlite_master WHERE type = 'index' AND tbl_name = ? COLLATE NOCASE "
                "AND name <> ? AND upper(sql) LIKE 'CREATE UNIQUE%'",
                (self.view_name, names.view_key_index(self.view)),
            ).fetchone()
            is not None
        )

    def stored_as_made(self, conn: apsw.Connection, columns: Sequence[OutputColumn]) -> bool | None:
        """Whether the view's table in the file has the layout matview makes for `columns`
        (None: there is no such table)."""
        stored = [
            names.fold(str(row[1]))
            for row in conn.execute("SELECT * FROM main.pragma_table_info(?)", (self.view_name,))
        ]
        if not stored:
            return None
        return stored == [names.fold(n) for n in (names.ROW_ID, *(c.name for c in columns), names.KEY, names.WEIGHT)]

    def create(self, conn: apsw.Connection) -> None:
        cols = ", ".join(f"{quote(c.name)} {c.storage_type}".rstrip() for c in self.columns)
        conn.execute(
            f"CREATE TABLE {self.table} ({quote(names.ROW_ID)} INTEGER PRIMARY KEY, {cols}, "
            f"{quote(names.KEY)} BLOB NOT NULL, {quote(names.WEIGHT)} INTEGER NOT NULL)"
        )
        conn.execute(
            f"CREATE UNIQUE INDEX {quote(names.view_key_index(self.view))} ON {self.table} ({quote(names.KEY)})"
        )
        readable.create_heavy_index(conn, self.view)

    def insert_initial(self, conn: apsw.Connection, delta: ZSet[bytes]) -> None:
        conn.executemany(self._insert, ((*row_of(key), key, weight) for key, weight in delta.items()))

    def insert_select(self, conn: apsw.Connection, select: str) -> None:
        """Fill the empty table from `select` (columns c0…, the view's rows, one per base
        row), set at a time: each row keyed by the SQL function ROW_KEY_FUNCTION. Rows are inserted with
        weight 1; if the unique key finds duplicates, they are counted with a GROUP BY."""
        values = ", ".join(f"c{i}" for i in range(len(self.columns)))
        source = f"SELECT {values}, {ROW_KEY_FUNCTION}({values}) AS k FROM ({select})"
        into = f"INSERT INTO {self.table} ({self.select_columns})"
        conn.execute("SAVEPOINT __dbsp_fill")
        try:
            conn.execute(f"{into} SELECT {values}, k, 1 FROM ({source})")
        except apsw.ConstraintError:
            conn.execute("ROLLBACK TO __dbsp_fill")
            conn.execute(f"{into} SELECT {values}, k, count(*) FROM ({source}) GROUP BY k")
        conn.execute("RELEASE __dbsp_fill")

    def _undo(self, conn: apsw.Connection, pairs: list[tuple[bytes, bytes]], applied: list[tuple[bytes, int]]) -> None:
        """Take back the rows `apply` changed before it found a negative weight."""
        for key, weight in reversed(applied):
            if scalar(conn, self._upsert, (*row_of(key), key, -weight)) == 0:
                conn.execute(self._delete, (key,))
        for old, new in reversed(pairs):
            conn.execute(self._replace, (*row_of(old), old, new))

    def apply(self, conn: apsw.Connection, delta: ZSet[bytes]) -> None:
        """V ← V + ΔV."""
        removed = [key for key, weight in delta.items() if weight == -1]
        added = [key for key, weight in delta.items() if weight == 1]
        replaced: set[bytes] = set()
        pairs: list[tuple[bytes, bytes]] = []
        for old, new in zip(removed, added):
            conn.execute(self._replace, (*row_of(new), new, old))
            if conn.changes() == 1:
                replaced.update((old, new))
                pairs.append((old, new))
        # rows that shrink first: a row replacing another that a user's UNIQUE index on a view
        # column covers must not meet it (a SELECT's rows satisfy the index before and after)
        rest = sorted(((key, weight) for key, weight in delta.items() if key not in replaced), key=lambda kw: kw[1] > 0)
        if len(rest) <= 4:
            for done, (key, weight) in enumerate(rest):
                total = scalar(conn, self._upsert, (*row_of(key), key, weight))
                if total == 0:
                    conn.execute(self._delete, (key,))
                elif total < 0:
                    # undone, so that the table stays as it was and the base write commits (the
                    # view stalls: `fold.fold_view`); no savepoint for the common, consistent case
                    self._undo(conn, pairs, rest[: done + 1])
                    raise Inconsistent(f"materialized view {self.view} is inconsistent (negative weight); REFRESH it")
            return
        # many rows: set-at-a-time upserts, the rows whose weight reached zero dropped before
        # the rows that grow come in (see above)
        keyed = [(*row_of(key), key, weight) for key, weight in rest]
        shrunk = [item for item in keyed if item[-1] < 0]
        if shrunk:
            conn.executemany(self._upsert_many, shrunk)
            conn.executemany(self._delete_empty, [(item[-2],) for item in shrunk])
        conn.executemany(self._upsert_many, keyed[len(shrunk) :])
