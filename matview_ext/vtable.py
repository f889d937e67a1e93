"""The `matview` virtual-table module: reading a view exactly.

Each matview connection has one such table per view, ``temp.<v>``, shadowing the plain
view ``main.<v>`` that other clients read (see `matview.storage.readable`); files of catalog
format 1 had it in main instead, which this module still serves until they are upgraded.
A read returns the persisted Z-set ``__dbsp_view_<v>`` merged with ΔV of the deltas
not folded yet (computed without writing), so it is exact inside an open transaction
and after writes by clients that never fold. Equality and range constraints that compare
a number with a BINARY column of numeric affinity are pushed down into the SELECT on the
view table, where its indexes serve them (`_narrows`). SQLite re-checks every constraint
(none is marked omitted), so pushdown may only narrow, never decide, the result.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

import apsw

from matview import names
from matview.db import ENVIRONMENT_ERRORS, describe, own_statements
from matview.errors import Error, SchemaChanged
from matview.keys import row_of
from matview.names import all_rows, fold, pending_rows, quote
from matview.operators.accumulators import RESULT_ERRORS
from matview.pending_read import pending_view_delta
from matview.registry import Registry, View
from matview.storage import readable
from matview.storage.schema import affinity
from matview.zset import ZSet

_OPS = {
    apsw.SQLITE_INDEX_CONSTRAINT_EQ: "=",
    apsw.SQLITE_INDEX_CONSTRAINT_GT: ">",
    apsw.SQLITE_INDEX_CONSTRAINT_GE: ">=",
    apsw.SQLITE_INDEX_CONSTRAINT_LT: "<",
    apsw.SQLITE_INDEX_CONSTRAINT_LE: "<=",
    apsw.SQLITE_INDEX_CONSTRAINT_IS: "IS",
}


#: a declared type of plain words and numbers (`VARCHAR(10)`, `DECIMAL(15, 2)`, `DOUBLE PRECISION`)
_PLAIN_TYPE = re.compile(r"[A-Za-z0-9_ ]*(\([0-9 ,+-]*\))?")


class Module:
    """Registered on each matview connection as module ``matview``."""

    def __init__(self, conn: apsw.Connection, registry: Registry) -> None:
        self.conn, self.registry = conn, registry
        #: views whose shadow was declared without a collation this connection lacks (by
        #: lower-cased name): every read of one says which; `create_collation` re-creates them
        self.lacking: dict[str, str] = {}

    def Create(self, db: Any, modulename: str, dbname: str, tablename: str, *args: str) -> tuple[str, Table]:
        # SQLite reconnects virtual tables in the middle of ALTER TABLE, when running SQL
        # fails: answer from the registry's cache when it knows the view.
        prefix = pending_rows("")
        pending = fold(tablename).startswith(fold(prefix))
        name = tablename[len(prefix) :] if pending else tablename
        if fold(name).startswith(fold(all_rows(""))):  # (read through a temp view: `readable.create_shadow`)
            name = name[len(all_rows("")) :]
        view = self.registry.views.get(fold(name)) or self.registry.get(name)
        if view is None:
            raise Error(f"{tablename}: create materialized views with CREATE MATERIALIZED VIEW")
        columns_list = []
        for c in view.entry.plan.columns:
            # a virtual table's column whose type holds the word HIDDEN is hidden (left out of
            # `*`): such a type is declared as its affinity's name, which compares the same
            # (and a type that is not plain words — a damaged catalog's — as its affinity's name too:
            # SQLite would refuse to declare the table, and with it open the connection)
            plain = _PLAIN_TYPE.fullmatch(c.decltype) is not None
            decltype = affinity(c.decltype) if "HIDDEN" in c.decltype.upper().split() or not plain else c.decltype
            if self._has_collation(c.collation):
                columns_list.append(f"{quote(c.name)} {decltype} COLLATE {quote(c.collation)}")
                continue
            # (declared with it, SQLite would refuse the shadow, and with it the connection)
            self.lacking[fold(view.name)] = c.collation
            columns_list.append(f"{quote(c.name)} {decltype}")
        columns = ", ".join(columns_list)
        if pending:
            extra = (
                f"{quote(names.KEY)} BLOB, {quote(readable.KEEP)} INTEGER, "
                f"{quote(readable.ANY_PENDING)} HIDDEN, {quote(readable.ANY_HEAVY)} HIDDEN, "
                f"{quote(readable.SCHEMA_VERSION)} HIDDEN"
            )
            return f"CREATE TABLE x({columns}, {extra})", PendingTable(self, view.name, len(view.entry.plan.columns))
        return f"CREATE TABLE x({columns})", Table(self, view.name)

    def _has_collation(self, name: str) -> bool:
        """Whether this connection can compare with collation `name` (`PRAGMA collation_list`
        also lists names SQLite has merely seen in a schema)."""
        if name.upper() in ("BINARY", "NOCASE", "RTRIM"):
            return True
        try:
            self.conn.execute(f"SELECT 'a' < 'b' COLLATE {quote(name)}").fetchall()
        except apsw.SQLError:
            return False
        return True

    def Connect(self, db: Any, modulename: str, dbname: str, tablename: str, *args: str) -> tuple[str, Table]:
        try:
            with own_statements(self.conn):
                return self.Create(db, modulename, dbname, tablename, *args)
        except Error:
            if dbname != "temp":
                raise
        # A temp shadow of a view another connection dropped: connectable, so that it can
        # be dropped (SQLite connects a virtual table to destroy it); every read refuses.
        return "CREATE TABLE x(gone)", Table(self, tablename)


class Table:
    def __init__(self, module: Module, name: str) -> None:
        self.module, self.name = module, name

    def view(self, schema_version: int | None = None) -> View:
        """The view, checked readable; `schema_version`: main's, as the statement read it (the
        registry's is then not asked again when it is the same)."""
        try:
            registry = self.module.registry
            if schema_version is not None and schema_version == registry.schema_version:
                view = registry.views.get(names.fold(self.name))
            else:
                view = registry.get(self.name)
        except apsw.SchemaChangeError:
            # Another connection changed the schema and this statement touches only temp (a
            # shadow), so SQLite cannot re-read main's schema while preparing it. A statement
            # through the matview connection re-reads it first.
            raise SchemaChanged(
                f"materialized view {self.name}: another connection changed the database schema; "
                "run the statement again through the matview connection"
            ) from None
        if view is None:
            raise Error(f"no such materialized view: {self.name} (it was dropped)")
        lacking = self.module.lacking.get(fold(self.name))
        if lacking is not None:
            raise Error(
                f"materialized view {self.name} compares with collation {lacking}, which this connection has "
                f"not registered: call create_collation({lacking!r}, function) on it first"
            )
        view.check()
        return view

    def _indexed_columns(self, view: View) -> set[int]:
        conn = self.module.conn
        storage = view.table.table
        indexed: set[int] = set()
        names = [c.name.lower() for c in view.entry.plan.columns]
        for _seq, index_name, *_rest in conn.execute(f"PRAGMA index_list({storage})"):
            first = conn.execute(f"PRAGMA index_info({quote(index_name)})").fetchone()
            if first and first[2] and first[2].lower() in names:
                indexed.add(names.index(first[2].lower()))
        return indexed

    def BestIndex(self, constraints: Sequence[tuple[int, int]], orderbys: Sequence[tuple[int, bool]]) -> Any:
        with own_statements(self.module.conn):
            view = self.view()
            indexed = self._indexed_columns(view)
        columns = view.entry.plan.columns
        used: list[Any] = []
        plan: list[str] = []
        cost = 1_000_000.0
        for column, op in constraints:
            # push down only where the view table compares as the view does (same affinity, BINARY)
            # whatever the other operand is: see `_narrows`
            if (
                column < 0
                or op not in _OPS
                or columns[column].collation != "BINARY"
                or columns[column].storage_type != columns[column].decltype
                or affinity(columns[column].decltype) not in _NUMERIC
            ):
                used.append(None)
                continue
            plan.append(f"{column}:{_OPS[op]}")
            used.append((len(plan) - 1, False))
            if column in indexed:
                cost = min(
                    cost, 10.0 if op in (apsw.SQLITE_INDEX_CONSTRAINT_EQ, apsw.SQLITE_INDEX_CONSTRAINT_IS) else 1000.0
                )
            else:
                cost = min(cost, 500_000.0)
        return (used, 0, ",".join(plan), False, cost)

    def _read_only(self, *_args: Any) -> Any:
        raise Error(
            f"materialized view {self.name} is read-only: write its base tables (it follows them), "
            "or REFRESH MATERIALIZED VIEW"
        )

    UpdateInsertRow = UpdateChangeRow = UpdateDeleteRow = _read_only

    def Open(self) -> Cursor:
        return Cursor(self)

    def Disconnect(self) -> None:
        pass

    Destroy = Disconnect


class Cursor:
    def __init__(self, table: Table) -> None:
        self.table = table
        self.rows: list[tuple[Any, ...]] = []
        #: each row's rowid, the same in every Filter of one statement (SQLite's RIGHT JOIN marks
        #: the right table's matched rows by rowid in one scan and skips them in another): a stored
        #: row's id and copy, or for a row only pending changes hold, a hash of its key and copy
        self.ids: list[int] = []
        self.position = 0

    def Filter(self, indexnum: int, indexname: str, constraintargs: Sequence[Any]) -> None:
        with own_statements(self.table.module.conn):
            try:
                self._filter(indexname, constraintargs)
            except TypeError as exc:  # (a weight another client wrote as text or a REAL)
                raise Error(
                    f"materialized view {self.table.name} cannot be read: its table holds a value matview did not "
                    f"write ({exc}: a damaged file); REFRESH MATERIALIZED VIEW rebuilds it"
                ) from None

    def _filter(self, indexname: str, constraintargs: Sequence[Any]) -> None:
        view = self.table.view()
        conn = self.table.module.conn
        columns = view.entry.plan.columns
        conditions, arguments = [], []
        for term, argument in zip(indexname.split(",") if indexname else [], constraintargs):
            column, op = term.split(":")
            if _narrows(argument):
                conditions.append(f"{quote(columns[int(column)].name)} {op} ?")
                arguments.append(argument)
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        stored: list[Any] = conn.execute(
            f"SELECT {view.table.select_columns}, {quote(names.ROW_ID)} FROM {view.table.table}{where}",
            tuple(arguments),
        ).fetchall()
        try:
            pending = pending_view_delta(conn, self.table.module.registry, view)
        except ENVIRONMENT_ERRORS:
            raise
        except Exception as exc:
            # the fold of this view stalled (or would): its changes are pending, not lost
            raise Error(view.stalled or f"materialized view {view.name} cannot be read: {describe(exc)}") from exc
        width = len(columns)
        rows: list[tuple[Any, ...]] = []
        ids: list[int] = []
        changes = {key: (row_of(key), w) for key, w in pending.items()} if pending else {}
        for row in stored:
            values, key, weight, stored_id = row[:width], row[width], row[width + 1], row[width + 2]
            change = changes.pop(key, None)
            if change is not None:
                weight += change[1]
            if weight > 0:
                rows.extend([values] * weight)
                ids.extend(_stored_row_id(stored_id, key, copy) for copy in range(weight))
        for key, (values, weight) in changes.items():
            if weight > 0:
                rows.extend([values] * weight)
                ids.extend(_pending_row_id(key, copy) for copy in range(weight))
        self.rows, self.ids, self.position = rows, ids, 0

    def Eof(self) -> bool:
        return self.position >= len(self.rows)

    def Rowid(self) -> int:
        return self.ids[self.position] if self.ids else self.position

    def Column(self, number: int) -> Any:
        if number == -1:
            return self.Rowid()
        value = self.rows[self.position][number]
        if type(value) is bytes and value in RESULT_ERRORS:
            raise Error(f"materialized view {self.table.name}: {RESULT_ERRORS[value]}")
        return value

    def Next(self) -> None:
        self.position += 1

    def Close(self) -> None:
        self.rows, self.ids = [], []


_NUMERIC = ("INTEGER", "REAL", "NUMERIC")


def _narrows(argument: Any) -> bool:
    """Whether a constraint `column op argument` on a column of numeric affinity (`BestIndex`)
    may narrow the stored rows read: where the argument is a number. SQLite compares a number
    with such a column the same whatever the other operand's affinity and collation (a TEXT
    value never equals a number, and a collation compares only texts); a text argument may
    come with a collation the pushdown cannot see (`x = v.c COLLATE NOCASE`), and a column
    without numeric affinity may be converted by the other operand's (`'1.0' = 1` against a
    NUMERIC column). SQLite checks every constraint again, so leaving one out only reads more."""
    return type(argument) in (int, float)


_COPY_BITS = 16  # copies of one stored row told apart in its rowid (beyond: by hash, as pending rows)


def _stored_row_id(stored_id: int, key: bytes, copy: int) -> int:
    """A stored row's rowid in the virtual table: its storage id and copy (non-negative)."""
    if copy < 1 << _COPY_BITS and 0 <= stored_id < 1 << (62 - _COPY_BITS):
        return (stored_id << _COPY_BITS) | copy
    return _pending_row_id(key, copy)


def _pending_row_id(key: bytes, copy: int) -> int:
    """A row only pending changes hold: a negative id from its key and copy (stable across
    Filters; 62 bits of hash)."""
    digest = hashlib.blake2b(key + copy.to_bytes(8, "little"), digest_size=8).digest()
    return -1 - (int.from_bytes(digest, "little") >> 2)


class PendingTable(Table):
    """temp.<names.pending_rows(v)>: what of a view SQLite cannot read from its stored table
    alone, for the shadow view (`readable.shadow_view_sql`): the rows of the keys pending
    changes touch (stored rows merged with ΔV: one row per copy a key keeps; a key left with
    no row has one row with KEEP = 0, which only hides its stored row), and the untouched
    stored rows of weight > 1, one row per copy. SQLite passes whether anything is pending
    (`readable.pending_sql`) and whether some stored row has a weight > 1 as the hidden
    columns ANY_PENDING and ANY_HEAVY: with both false it reads nothing."""

    def __init__(self, module: Module, name: str, width: int) -> None:
        super().__init__(module, name)
        self.width = width

    def BestIndex(self, constraints: Sequence[tuple[int, int]], orderbys: Sequence[tuple[int, bool]]) -> Any:
        # No SQL here: SQLite plans again whenever a bound value may change the plan (STAT4).
        used: list[Any] = [None] * len(constraints)
        flags: list[str] = []
        for number, (column, op) in enumerate(constraints):
            flag = {self.width + 2: "pending", self.width + 3: "heavy", self.width + 4: "schema"}.get(column)
            if flag is not None and flag not in flags and op == apsw.SQLITE_INDEX_CONSTRAINT_EQ:
                used[number] = (len(flags), True)
                flags.append(flag)
        return (used, 0, ",".join(flags), False, 10.0 / (1 + len(flags)))

    def Open(self) -> Cursor:
        return PendingCursor(self)


#: keys looked up in one statement when merging pending changes with their stored rows
_KEYS_PER_LOOKUP = 400


class PendingCursor(Cursor):
    def _filter(self, indexname: str, constraintargs: Sequence[Any]) -> None:
        told = dict(zip(indexname.split(",") if indexname else [], constraintargs))
        view = self.table.view(told.get("schema"))  # (raises when the view cannot be read)
        conn = self.table.module.conn
        self.rows, self.position = [], 0
        pending: ZSet[bytes] = ZSet()
        if told.get("pending", True):
            try:
                pending = pending_view_delta(conn, self.table.module.registry, view)
            except ENVIRONMENT_ERRORS:
                raise
            except Exception as exc:
                message = view.stalled or f"materialized view {view.name} cannot be read: {describe(exc)}"
                raise Error(message) from exc
        rows: list[tuple[Any, ...]] = []
        if pending:
            stored = _stored_rows(conn, view, f"{quote(names.KEY)} IN", list(pending))
            for key, change in pending.items():
                values, weight = stored.get(key, (row_of(key), 0))
                weight += change
                if weight > 0:
                    rows.extend([(*values, key, 1)] * weight)
                else:
                    rows.append((*values, key, 0))
        if told.get("heavy", True):
            for key, (values, weight) in _stored_rows(conn, view, f"{quote(names.WEIGHT)} > 1").items():
                if key not in pending:
                    rows.extend([(*values, key, 1)] * weight)
        self.rows = rows


def _stored_rows(
    conn: apsw.Connection, view: View, where: str, keys: list[bytes] | None = None
) -> dict[bytes, tuple[tuple[Any, ...], int]]:
    """The stored values and weight of the rows `where` selects, by key; `where` ends with
    `key IN` when `keys` are given."""
    width = len(view.entry.plan.columns)
    select = f"SELECT {view.table.select_columns} FROM {view.table.table} WHERE {where}"
    found: dict[bytes, tuple[tuple[Any, ...], int]] = {}
    if keys is None:
        batches: list[tuple[str, list[bytes]]] = [(select, [])]
    else:
        chunks = [keys[start : start + _KEYS_PER_LOOKUP] for start in range(0, len(keys), _KEYS_PER_LOOKUP)]
        batches = [(f"{select} ({', '.join('?' * len(chunk))})", chunk) for chunk in chunks]
    for sql, args in batches:
        for row in conn.execute(sql, args):
            found[row[width]] = (row[:width], row[-1])
    return found


def result_error(view: str, value: Any) -> Any:
    """SQL function `readable.RESULT_ERROR_FUNCTION`: a stored result error read from a view
    through its shadow view raises as a read through the virtual table does."""
    message = RESULT_ERRORS.get(value) if type(value) is bytes else None
    if message is None:
        return value
    raise Error(f"materialized view {view}: {message}")
