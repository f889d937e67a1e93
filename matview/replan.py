"""A user's CREATE INDEX, DROP INDEX or ANALYZE through a matview connection: the views stay readable.

An index or new statistics change how SQLite reads a table, and with it what some views show:
which spelling of a NOCASE group and GROUP_CONCAT's order, where they follow SQLite's scan and
matview keeps the table's rowid order (`storage.scan_order`), and which tied rows a view
recomputed whole keeps (`operators.whole.replanned_otherwise`). Made by a client without
matview, such a statement leaves those views reading as broken, naming it, until the next read
or write of a matview connection repairs them (`Registry.replan_due`). Made through a matview
connection, it runs in a transaction with their repair: a view recomputed whole
is recomputed under the new plan; an incremental one whose scan order matview no longer follows
is switched to whole recompute (the fallback, as a CREATE over that index would have made it,
ΔV = Q(I(A)) − V); the views over them are rebuilt. A view made `WITH (recompute = 'never')`,
or one with internal nodes, stays broken and says why.
"""

from __future__ import annotations

from dataclasses import replace

import apsw

from matview import fallback, rebuild
from matview.db import ENVIRONMENT_ERRORS, describe, savepoint
from matview.errors import Error
from matview.registry import Registry, View
from matview.storage import catalog


def keep_views_readable(conn: apsw.Connection, registry: Registry) -> list[View]:
    """After a statement that may change SQLite's plans, inside its write transaction: repair the
    views it changed (see the module docstring); the views whose rows changed."""
    registry.invalidate()
    views = list(registry.sync().values())
    rebuild.recompute_replanned(conn, registry, [t for v in views for t in v.entry.base_tables])
    switched: list[View] = []
    for view in registry.fold_order(list(registry.sync().values())):
        problem = fallback.repairable_order_problem(conn, view)
        if problem is None:
            continue
        try:
            with savepoint(conn):
                made = fallback.make_whole(conn, view, problem)
        except ENVIRONMENT_ERRORS:
            raise
        except (Error, apsw.Error) as exc:  # (its SELECT raises: an integer overflow, a user's function)
            made = None
            problem = f"{problem}; recomputed whole, its SELECT raises: {describe(exc)}"
        if made is not None:
            switched.append(view)
        else:  # (it reads as broken, saying why, until REFRESH: no write retries it)
            registry.invalidate()
            catalog.update_plan(conn, view.name, replace(view.entry.plan, needs_refresh=problem))
    if switched:
        registry.invalidate()
        rebuild.rebuild_sharing(conn, registry, switched, {})
    registry.invalidate()
    return switched
