"""Catalog format 2: every view becomes readable by any SQLite client.

Format 1 kept a view as ``CREATE VIRTUAL TABLE main.<v> USING matview``, which a client
without the module (the sqlite3 shell, stdlib sqlite3, Datasette) cannot even read past:
"no such module: matview". Format 2 keeps a plain SQL view ``main.<v>`` over the stored
Z-set instead (see `matview.readable`), and matview connections shadow it with a temp
virtual table. This is per-view work SQL cannot express, hence a Python step.

Runs on a matview connection, where the module is registered (so SQLite can destroy the
old virtual tables), inside the transaction of `matview.catalog.upgrade`.
"""

from __future__ import annotations

import apsw

from matview.storage import catalog, readable


def upgrade(conn: apsw.Connection) -> None:
    for entry in catalog.load_views(conn).values():
        readable.create_heavy_index(conn, entry.name)
        readable.create_plain_view(conn, entry.name, entry.plan)
