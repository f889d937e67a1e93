"""Views over materialized views: an upstream view read as a source of a downstream one.

A downstream view reads an upstream materialized view as it reads a base table
(RELATIONAL.md §1.6), with two differences:

* Its integral is the upstream's stored Z-set ``__dbsp_view_<up>``, whose rows carry a
  weight (their multiplicity); its Δ is the upstream's ΔV of the same fold, written to
  ``temp.__dbsp_dv_<up>`` before the downstream's delta terms run (see `fold`). A delta
  term multiplies the weights of every upstream occurrence, new, old or Δ alike.
* Both are read through a projection that gives each column what the upstream's virtual
  table declares, because the oracle of a view over a view is a SELECT over that virtual
  table: its affinity (a stored expression column is untyped, see
  `OutputColumn.storage_type`, so a CAST column is read as the same CAST again, which is
  idempotent on CAST results; any other typed expression column — a set operation's column,
  typed by its first arm — holds values no SQL can give that affinity unchanged, and a view
  over it is refused) and its collation (a subquery's column collation is implicit
  to the outer query, as a table column's is). An aggregate result stored as an error
  marker (an integer overflow) raises SQLite's own error when a downstream term reads it,
  as reading the upstream view does.

The fold applies an upstream's ΔV before its downstream views compute theirs, so there its
storage is the *new* state (old = stored ⊎ −ΔV); a reader computes without writing, so
there the storage is *old* (new = stored ⊎ ΔV).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

import apsw

from matview import names
from matview.db import scalar
from matview.errors import Error, UnsupportedQuery
from matview.keys import row_of
from matview.names import fold, is_node, quote
from matview.operators.accumulators import RESULT_ERRORS, VARIANT_DEPENDENT, result_error_markers_sql
from matview.plan import OutputColumn, Upstream
from matview.sql.row_keys import keeps_a_key
from matview.storage import catalog
from matview.storage.catalog import ViewEntry
from matview.storage.schema import Column, TableInfo, affinity, read_table
from matview.zset import ZSet

#: the SQL function a projection calls where a stored value cannot be shown as declared
UNREADABLE_FUNCTION = "__dbsp_unreadable"


def unreadable(view: str, column: str, value: object) -> NoReturn:
    """SQL function: a stored aggregate result that is an error (see `RESULT_ERRORS`) raises
    it where a downstream view reads it, as reading the upstream does."""
    reason = RESULT_ERRORS.get(value, "") if isinstance(value, bytes) else ""
    if is_node(view):  # (an internal node: the user named no such view)
        raise Error(f"an aggregate of the query: {reason or 'unreadable value'}")
    raise Error(f"materialized view {view}, column {column}: {reason or 'unreadable value'}")


def upstream_info(conn: apsw.Connection, name: str) -> TableInfo | None:
    """The columns a materialized view `name` shows its readers, as a source's TableInfo;
    None when `name` is no materialized view of this file."""
    entry = find_entry(conn, name)
    if entry is None:
        return None
    columns = tuple(Column(c.name, c.decltype, c.collation, no_affinity=c.no_affinity) for c in entry.plan.columns)
    plan = entry.plan
    # an aggregate's rows are its groups': unique when every group key is an output column
    grouped = plan.kind == "aggregate" and all(("group", j) in plan.outputs for j in range(plan.group_count))
    # (a select-project view keeping its one table's key: `SELECT * FROM orders WHERE …`)
    keyed = plan.kind == "rows" and len(plan.sources) == 1 and not plan.upstreams and keeps_a_key(conn, entry.sql)
    unique = grouped or plan.distinct or bool(plan.set_operation) or keyed
    return TableInfo(entry.name, columns, False, None, (), materialized=True, unique_rows=unique)


def read_source(conn: apsw.Connection, name: str) -> TableInfo:
    """What a FROM name reads: a materialized view (as its readers see it), or a base table."""
    return upstream_info(conn, name) or read_table(conn, name)


def describe_upstream(conn: apsw.Connection, name: str) -> Upstream:
    entry = find_entry(conn, name)
    assert entry is not None
    found = Upstream(entry.name, entry.plan.kind == "aggregate", entry.plan.columns)
    refuse_unrestorable(found)
    return found


def find_entry(conn: apsw.Connection, name: str) -> ViewEntry | None:
    if not catalog.has_catalog(conn):
        return None
    return next((e for e in catalog.load_views(conn).values() if fold(e.name) == fold(name)), None)


def _read_as_declared(view: str, column: OutputColumn, aggregate: bool) -> str:
    """A stored column as the upstream's virtual table shows it (see the module docstring)."""
    expression = quote(column.name)
    if aggregate and not column.is_column:
        markers = result_error_markers_sql()
        arguments = f"{_literal(view)}, {_literal(column.name)}, {expression}"
        expression = (
            f"CASE WHEN {expression} IN ({markers}) THEN {UNREADABLE_FUNCTION}({arguments}) ELSE {expression} END"
        )
    kind = affinity(column.decltype)
    if column.is_cast and kind != "BLOB":
        expression = f"CAST({expression} AS {kind})"
    elif column.no_affinity:  # (stored without a type, BLOB affinity: an expression's has none)
        expression = f"+{expression}"
    if column.collation.upper() != "BINARY":
        expression = f"{expression} COLLATE {quote(column.collation)}"
    return f"{expression} AS {quote(column.name)}"


def refuse_unrestorable(upstream: Upstream) -> None:
    """A column whose readers see an affinity its stored values have not passed through (a
    UNION's column typed by its first arm, say) could only be read back by converting values."""
    internal = is_node(upstream.name)
    where = "a set operation inside the query" if internal else f"FROM {upstream.name}"
    for column in upstream.columns:
        if not (column.is_column or column.is_cast or affinity(column.decltype) == "BLOB"):
            raise UnsupportedQuery(
                f"{where}: its column {column.name} is declared {column.decltype} but holds "
                "values SQLite did not convert to that type (a set operation's column, say); a view over it "
                "is not supported yet"
            )


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class UpstreamSource:
    """The SQL that reads one upstream view as a delta term's source: its stored Z-set, its
    ΔV, and the state (old or new) the term asks for."""

    def __init__(self, upstream: Upstream) -> None:
        view = self.view = upstream.name
        names_ = ", ".join(quote(c.name) for c in upstream.columns)
        weight = quote(names.WEIGHT)
        self._shown = ", ".join(_read_as_declared(view, c, upstream.aggregate) for c in upstream.columns)
        # a row whose spelling SQLite would pick by scan order (VARIANT_DEPENDENT in every column)
        # raises where a downstream term reads it, whichever column it reads
        first = quote(upstream.columns[0].name)
        marker = f"X'{VARIANT_DEPENDENT.hex()}'"
        arguments = f"{_literal(view)}, {_literal(upstream.columns[0].name)}, {first}"
        self._variant_check = f" WHERE CASE WHEN {first} IS {marker} THEN {UNREADABLE_FUNCTION}({arguments}) ELSE 1 END"
        self._stored = f"SELECT {names_}, {weight} FROM main.{quote(names.view_table(view))}"
        self._delta = f"SELECT {names_}, {weight} FROM temp.{quote(names.view_delta_table(view))}"
        self._negated_delta = f"SELECT {names_}, -{weight} FROM temp.{quote(names.view_delta_table(view))}"
        self.columns = names_
        self._column_names = [quote(c.name) for c in upstream.columns]

    def _project(self, inner: str) -> str:
        return f"(SELECT {self._shown}, {quote(names.WEIGHT)} FROM ({inner}){self._variant_check})"

    def delta(self) -> str:
        return self._project(self._delta)

    def state(self, new: bool, applied: bool) -> str:
        """The upstream's old or new state; `applied`: its storage already holds ΔV (the fold)."""
        if new == applied:
            return self._project(self._stored)
        extra = self._delta if new else self._negated_delta
        return self._project(f"{self._stored} UNION ALL {extra}")

    def real_state(self, new: bool, applied: bool) -> str:
        """The old or new state as real rows (each once, weight 1), for terms that test rows
        with EXISTS, IN, counts or outer-join padding, where signed copies would not cancel.
        Only for views whose rows never repeat (`TableInfo.unique_rows`): images identify rows."""
        if new == applied:
            return self._project(self._stored)
        same = " AND ".join(
            f"d.{c} IS s.{c} COLLATE BINARY AND typeof(d.{c}) = typeof(s.{c})" for c in self._column_names
        )
        gone, came = ("< 0", "> 0") if new else ("> 0", "< 0")
        weight = quote(names.WEIGHT)
        dv = f"temp.{quote(names.view_delta_table(self.view))}"
        kept = (
            f"SELECT {self._qualified('s')}, 1 AS {weight} FROM main.{quote(names.view_table(self.view))} AS s "
            f"WHERE NOT EXISTS (SELECT 1 FROM {dv} AS d WHERE d.{weight} {gone} AND {same})"
        )
        added = f"SELECT {self.columns}, 1 FROM {dv} WHERE {weight} {came}"
        return self._project(f"{kept} UNION ALL {added}")

    def _qualified(self, alias: str) -> str:
        return ", ".join(f"{alias}.{c}" for c in self._column_names)

    def empty(self) -> str:
        return self._project(f"{self._stored} LIMIT 0")


def ensure_delta_table(
    conn: apsw.Connection, view: str, columns: Sequence[OutputColumn], check_width: bool = False
) -> None:
    """Create the temp table of an upstream's ΔV (temp DDL: never from inside a read), its
    columns typed as the view table's are (a plain column keeps its affinity). `check_width`
    (after a schema change): one left by a view of that name another connection dropped and
    created again with other columns is made again."""
    table = quote(names.view_delta_table(view))
    if check_width:
        width = scalar(conn, "SELECT count(*) FROM pragma_table_info(?, 'temp')", (names.view_delta_table(view),))
        if width and width != len(columns) + 1:
            conn.execute(f"DROP TABLE temp.{table}")
    cols = ", ".join(f"{quote(c.name)} {c.storage_type}".rstrip() for c in columns)
    conn.execute(
        f"CREATE TEMP TABLE IF NOT EXISTS {quote(names.view_delta_table(view))} ({cols}, {quote(names.WEIGHT)})"
    )


def write_delta(conn: apsw.Connection, view: str, width: int, delta: ZSet[bytes]) -> None:
    """Put an upstream's ΔV where its downstream views' delta terms read it."""
    table = f"temp.{quote(names.view_delta_table(view))}"
    conn.execute(f"DELETE FROM {table}")
    if delta:
        rows = [(*row_of(key), weight) for key, weight in delta.items()]
        for row in rows:
            if row[0] == VARIANT_DEPENDENT and row[-1] > 0:
                unreadable(view, "", row[0])  # (a whole row in doubt: every reader reads it)
        if is_node(view):
            # an internal node's row that is an error (an overflowing aggregate) fails its view
            # as the user's one SELECT would, even where no delta term reads the column (a user's
            # materialized view read by another is a view: a reader that reads not its column
            # is fine, as SQLite's SELECT over a view that omits the column is)
            for row in rows:
                failed = next((v for v in row[:-1] if type(v) is bytes and v in RESULT_ERRORS), None)
                if failed is not None and row[-1] > 0:
                    unreadable(view, "", failed)
        marks = ", ".join("?" for _ in range(width + 1))
        conn.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
