"""Change capture: plain-SQL triggers that log every base-table change as a delta.

For a base table ``t`` the triggers append ``(t's columns…, weight ±1)`` to
``__dbsp_delta_t`` in the writer's own transaction, so any client (the sqlite3 shell,
stdlib ``sqlite3``) is captured, and ROLLBACK / ROLLBACK TO undo deltas with the rows.
An UPDATE logs ``−old`` and ``+new``.

``INSERT OR REPLACE`` (and ``UPDATE OR REPLACE``, ``ON CONFLICT REPLACE`` constraints)
deletes conflicting rows *without* firing DELETE triggers unless the writer enabled
``recursive_triggers``. So a BEFORE trigger copies the rows the new row could conflict
with into ``__dbsp_preimage_t``, and the AFTER trigger logs ``−row`` for each of them
that vanished. An ignored insert (OR IGNORE, DO NOTHING) fires no AFTER trigger and
leaves a stale preimage; its rows still exist where they were, so they never count as
vanished, and the next write's AFTER trigger clears them. A DELETE removes its row from
the preimage (with ``recursive_triggers`` on, a REPLACE fires it and logs ``−old``
itself), so a stale entry can never stand for a row that is gone.
"""

from __future__ import annotations

import apsw

from matview import names
from matview.db import scalar
from matview.names import quote
from matview.schema import TableInfo

CAPTURE_EVENTS = (
    "before_insert",
    "insert",
    "replaced_by_insert",
    "before_update",
    "update",
    "replaced_by_update",
    "delete",
    "deleted_preimage",
)


def delta_columns_sql(table: TableInfo) -> str:
    """Column definitions mirroring the base table's types and collations, so expressions
    evaluated over deltas behave exactly as over the base table."""
    return ", ".join(
        f"{quote(c.name)} {c.decltype} COLLATE {quote(c.collation)}".replace("  ", " ") for c in table.columns
    )


def install_capture(conn: apsw.Connection, table: TableInfo) -> None:
    """Create the delta log, preimage table and triggers of `table` (idempotent)."""
    t = table.name
    delta, pre = quote(names.delta_table(t)), quote(names.preimage_table(t))
    cols = delta_columns_sql(table)
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {delta} ({quote(names.SEQ)} INTEGER PRIMARY KEY, "
        f"{quote(names.ROWID)} INTEGER, {cols}, {quote(names.WEIGHT)} INTEGER NOT NULL)"
    )
    conn.execute(f"CREATE TABLE IF NOT EXISTS {pre} ({quote(names.ROWID)} INTEGER, {cols})")
    column_list = ", ".join(quote(c.name) for c in table.columns)
    target = f"{delta} ({quote(names.ROWID)}, {column_list}, {quote(names.WEIGHT)})"
    rowid = "rowid" if table.has_rowid else "NULL"

    def values(prefix: str, weight: int) -> str:
        row = ", ".join(f"{prefix}.{quote(c.name)}" for c in table.columns)
        return f"VALUES ({prefix}.{rowid}, {row}, {weight})" if table.has_rowid else f"VALUES (NULL, {row}, {weight})"

    identity = [("rowid",)] if table.has_rowid else [table.primary_key]
    conflict_keys = identity + [k for k in table.unique_keys if k not in identity]

    def conflicts(exclude_old: bool) -> str:
        alternatives = [
            "(" + " AND ".join(f"{quote_key(k)} = new.{quote_key(k)}" for k in key) + ")" for key in conflict_keys
        ]
        condition = " OR ".join(alternatives)
        if exclude_old:
            condition = f"({condition}) AND NOT ({same_row('old', t)})"
        return condition

    def same_row(prefix: str, alias: str) -> str:
        if table.has_rowid:
            return f"{quote(alias)}.rowid = {prefix}.rowid"
        return " AND ".join(f"{quote(alias)}.{quote(k)} IS {prefix}.{quote(k)}" for k in table.primary_key)

    def vanished(prefix_new: str) -> str:
        # A preimage row vanished if no row with its identity remains, or if the new row
        # took over its identity (REPLACE on the primary key itself).
        if table.has_rowid:
            gone = f"NOT EXISTS (SELECT 1 FROM {quote(t)} WHERE rowid = p.{quote(names.ROWID)})"
            took = f"p.{quote(names.ROWID)} = {prefix_new}.rowid"
        else:
            match = " AND ".join(f"x.{quote(k)} IS p.{quote(k)}" for k in table.primary_key)
            gone = f"NOT EXISTS (SELECT 1 FROM {quote(t)} x WHERE {match})"
            took = " AND ".join(f"p.{quote(k)} IS {prefix_new}.{quote(k)}" for k in table.primary_key)
        return f"{gone} OR ({took})"

    pre_select = f"SELECT {rowid}, {column_list} FROM {quote(t)}"
    p_cols = ", ".join(f"p.{quote(c.name)}" for c in table.columns)
    if table.has_rowid:
        preimage_of_old = f"{quote(names.ROWID)} = old.rowid"
        not_old = f"NOT (p.{quote(names.ROWID)} IS old.rowid)"
    else:
        preimage_of_old = " AND ".join(f"{quote(k)} IS old.{quote(k)}" for k in table.primary_key)
        not_old = "NOT (" + " AND ".join(f"p.{quote(k)} IS old.{quote(k)}" for k in table.primary_key) + ")"
    trg = {e: quote(names.trigger(t, e)) for e in CAPTURE_EVENTS}
    # Only a write that conflicts with an existing row runs the preimage statements; the
    # common write pays one index probe (BEFORE) and one probe of the empty preimage (AFTER).
    conn.execute(
        f"""
        CREATE TRIGGER IF NOT EXISTS {trg["before_insert"]} BEFORE INSERT ON {quote(t)}
        WHEN EXISTS (SELECT 1 FROM {quote(t)} WHERE {conflicts(False)}) BEGIN
          DELETE FROM {pre};
          INSERT INTO {pre} {pre_select} WHERE {conflicts(False)};
        END;
        CREATE TRIGGER IF NOT EXISTS {trg["insert"]} AFTER INSERT ON {quote(t)} BEGIN
          INSERT INTO {target} {values("new", 1)};
        END;
        CREATE TRIGGER IF NOT EXISTS {trg["replaced_by_insert"]} AFTER INSERT ON {quote(t)}
        WHEN EXISTS (SELECT 1 FROM {pre}) BEGIN
          INSERT INTO {target} SELECT p.{quote(names.ROWID)}, {p_cols}, -1 FROM {pre} p WHERE {vanished("new")};
          DELETE FROM {pre};
        END;
        CREATE TRIGGER IF NOT EXISTS {trg["before_update"]} BEFORE UPDATE ON {quote(t)}
        WHEN EXISTS (SELECT 1 FROM {quote(t)} WHERE {conflicts(True)}) BEGIN
          DELETE FROM {pre};
          INSERT INTO {pre} {pre_select} WHERE {conflicts(True)};
        END;
        CREATE TRIGGER IF NOT EXISTS {trg["update"]} AFTER UPDATE ON {quote(t)} BEGIN
          INSERT INTO {target} {values("old", -1)};
          INSERT INTO {target} {values("new", 1)};
        END;
        CREATE TRIGGER IF NOT EXISTS {trg["replaced_by_update"]} AFTER UPDATE ON {quote(t)}
        WHEN EXISTS (SELECT 1 FROM {pre}) BEGIN
          INSERT INTO {target} SELECT p.{quote(names.ROWID)}, {p_cols}, -1 FROM {pre} p
            WHERE ({vanished("new")}) AND {not_old};
          DELETE FROM {pre};
        END;
        CREATE TRIGGER IF NOT EXISTS {trg["delete"]} AFTER DELETE ON {quote(t)} BEGIN
          INSERT INTO {target} {values("old", -1)};
        END;
        CREATE TRIGGER IF NOT EXISTS {trg["deleted_preimage"]} AFTER DELETE ON {quote(t)}
        WHEN EXISTS (SELECT 1 FROM {pre}) BEGIN
          DELETE FROM {pre} WHERE {preimage_of_old};
        END;
        """
    )


def quote_key(column: str) -> str:
    return "rowid" if column == "rowid" else quote(column)


def remove_capture(conn: apsw.Connection, table: str) -> None:
    """Drop the triggers and logs of `table` once no view reads it."""
    for event in CAPTURE_EVENTS:
        conn.execute(f"DROP TRIGGER IF EXISTS {quote(names.trigger(table, event))}")
    conn.execute(f"DROP TABLE IF EXISTS {quote(names.delta_table(table))}")
    conn.execute(f"DROP TABLE IF EXISTS {quote(names.preimage_table(table))}")


def capture_installed(conn: apsw.Connection, table: str) -> bool:
    """True when every capture trigger of `table` exists (a DROP TABLE removes them)."""
    wanted = [names.trigger(table, e) for e in CAPTURE_EVENTS]
    marks = ", ".join("?" * len(wanted))
    found = scalar(
        conn, f"SELECT count(*) FROM main.sqlite_master WHERE type = 'trigger' AND name IN ({marks})", wanted
    )
    return bool(found == len(wanted))
