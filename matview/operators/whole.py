"""ΔV of a view recomputed whole (`sql.whole`): DBSP's defining identity ΔV = Q(I(A)) − V.

The base tables are the integrals I(A); running the view's own SELECT over them gives the new
rows, as a Z-set (each distinct row with its count), and subtracting the rows stored gives the
change — the same ΔV every fold of an incremental view gives, so the view's table, the views
over it and its readers are maintained alike. The SELECT is the user's statement as written:
its ties (which rows a LIMIT keeps, a window's order among peers) are resolved by SQLite exactly
as when the SELECT is re-run. Nothing is written here: a reader computes it too.
"""

from __future__ import annotations

import apsw

from matview import names
from matview.keys import row_key
from matview.names import quote
from matview.zset import ZSet

#: what SQLite may do while it prepares a view's SELECT: read (a statement that writes, or runs
#: a PRAGMA, is refused by SQLite before it runs — a damaged catalog cannot make a fold write)
READ_ACTIONS = frozenset({apsw.SQLITE_SELECT, apsw.SQLITE_READ, apsw.SQLITE_FUNCTION, apsw.SQLITE_RECURSIVE})


def _only_reads(action: int, *_details: str | None) -> int:
    return apsw.SQLITE_OK if action in READ_ACTIONS else apsw.SQLITE_DENY


def whole_rows(conn: apsw.Connection, select: str) -> ZSet[bytes]:
    """The rows of `select` now, as a Z-set keyed by row identity."""
    rows: ZSet[bytes] = ZSet()
    previous = conn.authorizer
    conn.authorizer = _only_reads
    try:
        cursor = conn.execute(select)
    finally:
        conn.authorizer = previous
    for row in cursor:
        rows.add(row_key(tuple(row)), 1)
    return rows


def whole_delta(conn: apsw.Connection, view: str, select: str) -> ZSet[bytes]:
    """ΔV = Q(I(A)) − V: the rows of `select` now, less those view `view` stores."""
    delta = whole_rows(conn, select)
    key, weight = quote(names.KEY), quote(names.WEIGHT)
    for stored, count in conn.execute(f"SELECT {key}, {weight} FROM {quote(names.view_table(view))}"):
        delta.add(bytes(stored), -count)
    return delta
