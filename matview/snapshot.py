"""A new (or rebuilt) view's first rows and state: a snapshot of its base tables."""

from __future__ import annotations

from collections.abc import Callable

import apsw

from matview import names
from matview.db import scalar
from matview.names import quote
from matview.registry import View
from matview.storage import catalog
from matview.storage.state import StateStore

#: fills a new view's table and state: `populate_snapshot` (the whole base table as one delta),
#: or another source of the same snapshot (the Spark backfill writes merged partial states)
Populate = Callable[[apsw.Connection, View], None]


def set_snapshot_progress(conn: apsw.Connection, view: View) -> None:
    """A snapshot's progress marks: the end of each base table's delta log."""
    for table in view.entry.base_tables:
        hi = scalar(conn, f"SELECT max({quote(names.SEQ)}) FROM {quote(names.delta_table(table))}")
        catalog.set_progress(conn, view.name, table, hi or 0)


def populate_snapshot(conn: apsw.Connection, view: View) -> None:
    """Initial snapshot: the whole base table as one delta from the empty state, with the
    progress mark at the delta log's current end (those deltas are in the snapshot)."""
    set_snapshot_progress(conn, view)
    store = StateStore(conn, view.name, writable=True)
    delta = view.circuit.populate(conn, store)
    if delta is None:
        view.table.insert_select(conn, view.circuit.base_rows_sql)
    else:
        view.table.insert_initial(conn, delta)
    store.flush()
