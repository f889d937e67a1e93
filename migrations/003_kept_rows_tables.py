"""Catalog format 3: the rows each root gave, of a partition-recompute view, in a table.

Format 2 kept them as msgpack entries of operator -1 in ``__dbsp_state_<v>`` (per root, its
stage-1 rows), compared with the rows now in Python, root by root. Format 3 keeps them as
SQLite values in ``__dbsp_kept_<v>`` (see `matview.storage.kept_rows`), compared by SQLite.
Runs inside the transaction of `matview.storage.catalog.upgrade`.
"""

from __future__ import annotations

import apsw

from matview import names
from matview.delta_terms import DeltaTerms
from matview.keys import row_of
from matview.names import quote
from matview.operators.partition import key_width, snapshot_rows_query
from matview.storage import catalog, kept_rows
from matview.storage.codec import unpack

#: the state operator of format 2's kept rows
_ROOTS_OPERATOR = -1


def upgrade(conn: apsw.Connection) -> None:
    for entry in catalog.load_views(conn).values():
        plan = entry.plan
        if not plan.root_recompute:
            continue
        state = quote(names.state_table(entry.name))
        found = list(conn.execute(f"SELECT key, value FROM {state} WHERE operator_id = ?", (_ROOTS_OPERATOR,)))
        kept = [(row_of(bytes(key)), _unpacked(value)) for key, value in found]
        rows = [row_key for _, entries in kept for row_key, _ in entries]
        if rows:
            width = len(row_of(rows[0]))
        else:
            try:
                width = kept_rows.stage1_width(conn, snapshot_rows_query(DeltaTerms(plan)), key_width(plan))
            except apsw.Error:
                # its SELECT does not prepare now (a table another client dropped, a user
                # function this connection has not registered yet): without a kept-rows table
                # the view reports a missing table, and REFRESH makes it
                continue
        kept_rows.create(conn, entry.name, width)
        keys = len(plan.outer_key)
        root = " || ',' || ".join(kept_rows.exact_text(f"?{i + 1}") for i in range(keys))
        values = ", ".join(f"?{keys + 1 + i}" for i in range(width + 1))
        insert = f"INSERT INTO main.{quote(kept_rows.table_name(entry.name))} VALUES ({root}, {values})"
        for root_values, entries in kept:
            if plan.root_key_nullable:
                # format 2 kept such a key as its columns' quote()s, comma-separated: SQL literals
                root_values = tuple(conn.execute(f"SELECT {root_values[0]}").fetchone() or ())
            for row_key, weight in entries:
                conn.execute(insert, (*root_values, *row_of(row_key), weight))
        conn.execute(f"DELETE FROM {state} WHERE operator_id = ?", (_ROOTS_OPERATOR,))
        kept_rows.index(conn, entry.name)


def _unpacked(value: bytes) -> list[tuple[bytes, int]]:
    return [(bytes(k), int(w)) for k, w in unpack(value)]
