"""The collation SQLite gives each column of a SELECT, asked of SQLite itself.

A view's column must compare as the same column of its SELECT read as a derived table does
(`WHERE c = 'x'` on the view and on the SELECT): an explicit COLLATE (the outermost), a table
column's, a set operation's first arm's, BINARY for a scalar subquery or a window's value. The
rules have corners (`sqlite3ExprCollSeq`); SQLite answers exactly in the program it compiles for
`c = :probe` over the SELECT: the collating sequence of the comparison that reads the parameter.
Views recomputed whole take their columns' collations from here; an incremental view whose
front end reads one otherwise is refused (`refuse_other_collations`), so it is recomputed whole
rather than filtered otherwise than its SELECT.
"""

from __future__ import annotations

import apsw

from matview.errors import Error, UnsupportedQuery
from matview.plan import Plan

_COMPARISONS = {"Eq", "Ne", "Lt", "Le", "Gt", "Ge"}


def shown_collations(conn: apsw.Connection, select: str, width: int) -> list[str | None]:
    """Per column of `select` (`width` of them), its collation as SQLite compares it; None
    where the program does not tell; [] where the probe cannot be prepared."""
    columns = ", ".join(f"c{i}" for i in range(width))
    found: list[str | None] = []
    for number in range(width):
        probe = f"EXPLAIN WITH __dbsp_probe({columns}) AS ({select}) SELECT c{number} = :probe FROM __dbsp_probe"
        try:
            program = conn.execute(probe, {"probe": None}).fetchall()
        except (apsw.Error, Error):  # (a view it reads that cannot be read: the SELECT says so itself)
            return []
        # (addr, opcode, p1, p2, p3, p4, p5, comment): the register the parameter is loaded into,
        # then the comparison that reads it
        registers = {row[3] for row in program if row[1] == "Variable" and row[2] == 1}
        compared = [
            row[5] for row in program if row[1] in _COMPARISONS and (row[2] in registers or row[4] in registers)
        ]
        name = (str(compared[0]).rsplit("-", 1)[0].upper() if compared[0] else "BINARY") if len(compared) == 1 else None
        # (EXPLAIN shows at most 18 characters of a name: a longer one is not told)
        found.append(None if name is None or len(name) >= _SHOWN else name)
    return found


_SHOWN = 18  # the characters of a collation's name EXPLAIN shows ("%.18s-enc")


def refuse_other_collations(conn: apsw.Connection, select: str, plan: Plan) -> None:
    """Raise `UnsupportedQuery` where the plan gives a column another collation than SQLite
    gives the SELECT's (see the module docstring)."""
    shown = shown_collations(conn, select, len(plan.columns))
    if len(shown) != len(plan.columns):
        return
    for column, collation in zip(plan.columns, shown):
        if collation is not None and collation != column.collation.upper():
            raise UnsupportedQuery(
                f"column {column.name}: matview reads its collation as {column.collation.upper()}, "
                f"SQLite compares it under {collation}"
            )
