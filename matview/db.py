"""Small helpers over apsw connections."""

from __future__ import annotations

from typing import Any

import apsw


def scalar(conn: apsw.Connection, sql: str, params: Any = ()) -> Any:
    """The first column of the first row of `sql`, or None when there is no row."""
    row = conn.execute(sql, params).fetchone()
    return None if row is None else row[0]
