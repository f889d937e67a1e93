"""The driver's snapshot of a partitioned view: merged partial states written with the engine's
own code, so the file holds exactly what a local ``CREATE MATERIALIZED VIEW`` stores.

* aggregate: the ordered state (MIN/MAX multisets) of every partition goes in first, weights
  summed by SQLite's GROUP BY over the part files under the ordered state's own key — by
  Spark tasks, one key range each, copied here in key order, or else here over the attached
  part files; then the merged group states go through `Aggregate.emit` — which re-seeks MIN/MAX, computes SUM/AVG from
  the exact sums, evaluates HAVING and post-aggregation expressions — exactly as the local
  set-at-a-time CREATE ends (`aggregate_sql.sql_step` → `emit`);
* SELECT DISTINCT: each row's merged count and representative; its shown row once;
* a row view: its rows with their merged weights.

Progress marks are set at the end of each base table's delta log, as `snapshot.populate_snapshot` does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import apsw

from matview import names
from matview.keys import row_key, row_of
from matview.names import quote
from matview.operators.aggregate import GROUPS_OP
from matview.operators.distinct import DISTINCT_OP
from matview.registry import View
from matview.snapshot import Populate, set_snapshot_progress
from matview.storage.codec import unpack
from matview.storage.state import StateStore
from matview.zset import ZSet


def ordered_merge_sql(target: str, ostate: str, parts: Sequence[str], lower: bool = False, upper: bool = False) -> str:
    """INSERT into `target` the ordered-state table `ostate` of the attached databases `parts`,
    weights summed per entry. Each part's table is WITHOUT ROWID, so each arm is read in key
    order: with the ORDER BY, SQLite merges the arms (MERGE (UNION ALL)) and groups the merged
    stream as it comes, with no sorter (no temp B-tree over every row). `lower`/`upper`: each
    arm keeps only the keys ≥ the first four parameters / < the next four (row values, read
    as a range of the table's primary key)."""
    columns = "(operator_id, key, ord, kind)"
    first, second = "(?1, ?2, ?3, ?4)", "(?5, ?6, ?7, ?8)"
    bounds = [f"{columns} >= {first}"] if lower else []
    bounds += [f"{columns} < {second if lower else first}"] if upper else []
    where = f" WHERE {' AND '.join(bounds)}" if bounds else ""
    arms = " UNION ALL ".join(
        f"SELECT operator_id, key, ord, kind, weight FROM {alias}.{quote(ostate)}{where}" for alias in parts
    )
    return (
        f"INSERT INTO {target} (operator_id, key, ord, kind, value, weight) "
        f"SELECT operator_id, key, ord, kind, NULL, sum(weight) AS w "
        f"FROM ({arms} ORDER BY operator_id, key, ord, kind) "
        "GROUP BY operator_id, key, ord, kind HAVING w <> 0"
    )


def merged_populate(
    aliases: Sequence[str], loaded: Sequence[str], view_name: str, ordered: Sequence[str] = ()
) -> Populate:
    """A `Populate` reading `view_name`'s merged states from the attached merged part files
    `aliases`, and its ordered state from the attached range files `ordered` (merged by Spark,
    in key order) or else from the attached load part files `loaded` (merged here)."""

    def states(conn: apsw.Connection, op: int) -> Iterator[tuple[bytes, Any]]:
        for alias in aliases:
            for key, value in conn.execute(
                f"SELECT key, value FROM {alias}.state WHERE view = ? AND op = ?", (view_name, op)
            ):
                yield bytes(key), unpack(value)

    def populate(conn: apsw.Connection, view: View) -> None:
        set_snapshot_progress(conn, view)
        store = StateStore(conn, view.name, writable=True)
        circuit = view.circuit
        if circuit.aggregate is not None:
            aggregate = circuit.aggregate
            # the multisets of all partitions: weights summed under the ordered state's own key
            # (SQLite equality of ord, BINARY, and the storage kind), as one table would hold them
            ostate = names.ordered_state_table(view.name)
            if ordered:
                # merged by Spark tasks, one key range each (`tasks.merge_ordered`): copied in key
                # order, the first range whole into the empty table (SQLite's transfer
                # optimization: records as they are, no decoding, no seeks)
                for alias in ordered:
                    conn.execute(f"INSERT INTO main.{quote(ostate)} SELECT * FROM {alias}.{quote(ostate)}")
            elif loaded:
                conn.execute(ordered_merge_sql(f"main.{quote(ostate)}", ostate, loaded))
            groups = dict(states(conn, GROUPS_OP))
            if not view.entry.plan.has_group_by and aggregate.empty_key not in groups:
                groups[aggregate.empty_key] = aggregate.fresh_group(())
            delta = aggregate.emit(groups, store)
            view.table.insert_initial(conn, delta)
        elif circuit.distinct is not None:
            shown: ZSet[bytes] = ZSet()
            for key, state in states(conn, DISTINCT_OP):
                store.put(DISTINCT_OP, key, state)
                shown.add(row_key(state[1]), 1)
            view.table.insert_initial(conn, shown)
        else:
            marks = ", ".join("?" for _ in range(len(view.table.columns) + 2))
            insert = f"INSERT INTO {view.table.table} ({view.table.select_columns}) VALUES ({marks})"
            for alias in aliases:
                rows = conn.cursor().execute(f"SELECT key, weight FROM {alias}.rows WHERE view = ?", (view_name,))
                conn.executemany(insert, ((*row_of(bytes(key)), bytes(key), weight) for key, weight in rows))
        store.flush()

    return populate
