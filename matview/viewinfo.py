"""A handle on one materialized view: its definition, pending count, circuit, and a check."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import apsw

from matview import explain
from matview.errors import Error
from matview.fold import pending_count
from matview.names import quote
from matview.registry import View
from matview.sql.validate import one_statement
from matview.storage import readable

if TYPE_CHECKING:
    from matview.api import Connection


class ViewInfo:
    """A handle on one materialized view."""

    def __init__(self, connection: Connection, view: View) -> None:
        self._connection, self._view = connection, view
        self.name = view.name
        self.sql = view.entry.sql
        self.maintenance = view.entry.maintenance
        self.columns = [c.name for c in view.entry.plan.columns]

    def __repr__(self) -> str:
        return f"<materialized view {self.name} ({self.maintenance}): {self.sql}>"

    def pending(self) -> int:
        """How many delta rows wait to be folded into this view."""
        return pending_count(self._connection.apsw, self._view)

    def circuit(self) -> explain.Circuit:
        """The view's operator DAG with its rules, state sizes and pending counts (see `matview.explain`)."""
        return explain.describe(self._connection.apsw, self._connection.registry, self._view)

    def explain(self, format: str = "text") -> str:
        """The view's circuit: a text tree (``"text"``), Graphviz source (``"dot"``) or JSON
        (``"json"``). `matview.explain.render_image` draws it as SVG or PNG."""
        circuit = self.circuit()
        if format == "text":
            return explain.as_text(circuit)
        if format == "dot":
            return explain.as_dot(circuit)
        if format == "json":
            return json.dumps(explain.as_dict(circuit), indent=2)
        raise Error(f"unknown explain format {format!r}: text, dot or json")

    def verify(self) -> bool:
        """True when the view read through this connection equals its SELECT re-run now, and
        the plain view other clients read equals the stored rows (the last fold), each as a
        bag of typed rows."""

        def typed(rows: Iterable[tuple[Any, ...]]) -> Counter[tuple[Any, ...]]:
            return Counter(tuple((type(v).__name__, v) for v in row) for row in rows)

        conn = self._connection.apsw
        got = typed(conn.execute(f"SELECT * FROM temp.{quote(self.name)}"))
        # The SELECT comes from the file: re-validated as one statement and run as a subquery,
        # so a catalog row edited to hold anything but a SELECT is an error, never executed
        select, _ = one_statement(self.sql)
        try:
            want = typed(conn.execute(f"SELECT * FROM (\n{select}\n)"))
        except apsw.SQLError as exc:
            raise Error(f"materialized view {self.name}: its SELECT in the catalog is invalid: {exc}") from None
        if got != want:
            return False
        found = readable.main_object(conn, self.name)
        if found is not None and readable.is_matview_vtable(found[1]):
            return True  # catalog format 1, not upgraded yet: main holds the virtual table
        if found is None or found[0] != "view":
            return False
        table = self._view.table
        stored: Counter[tuple[Any, ...]] = Counter()
        for row in conn.execute(f"SELECT {table.select_columns} FROM {table.table}"):
            stored[tuple((type(v).__name__, v) for v in row[: len(table.columns)])] += row[-1]
        try:
            stock = typed(conn.execute(f"SELECT * FROM main.{quote(self.name)}"))
        except apsw.SQLError:
            return False
        return stock == stored
