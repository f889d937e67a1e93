"""Operator state of one view, persisted in the user's file.

* accumulators: ``__dbsp_state_<v>(operator_id, key, value, weight)``, msgpack values
  keyed by (operator, group key);
* ordered multisets: ``__dbsp_ostate_<v>(operator_id, key, ord, value, weight)``, kept in
  SQLite's own value order (no affinity, BINARY), so MIN/MAX are an index seek.

Every change is buffered here first. A fold (`writable=True`) writes the buffer when the
step is done; a reader merging pending deltas uses the same code and drops the buffer,
so reads never write and both paths compute identical results.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from typing import Any

import apsw

from matview import names
from matview.keys import canonical
from matview.names import quote
from matview.storage.codec import pack, unpack


def sqlite_order(value: Any) -> tuple[int, Any]:
    """Sort key reproducing SQLite's BINARY order: NULL < numbers < text < blob."""
    if value is None:
        return (0, 0)
    if isinstance(value, (int, float)):
        return (1, value)
    if isinstance(value, str):
        return (2, value)  # code point order equals UTF-8 byte order
    return (3, bytes(value))


#: one group's entries of the ordered state. SQLite (built with STAT4, as apsw's is) prepares a
#: statement again at every binding when its ORDER BY meets ``column = ?``; ``= +?`` compares
#: alike (a parameter has no affinity either way) and keeps the prepared plan: a MIN/MAX
#: lookup cost ~7 µs and seven authorizer calls, now ~2 µs and none
_GROUP = "operator_id = +? AND key = +?"

#: keys per query of `StateStore.read_many`
_READ_MANY = 500

UNKNOWN = -1  # persisted weight of an entry changed by `add`, which never reads it

#: `storage_kind`'s codes of numbers (3 text, 4 blob): -0.0 is a REAL of its own (SQLite's
#: `atan2(v, -1)` is the one built-in that tells its sign)
STORAGE_KIND_INTEGER, STORAGE_KIND_REAL, STORAGE_KIND_NEGATIVE_ZERO = 1, 2, 5
NUMERIC_KINDS = (STORAGE_KIND_INTEGER, STORAGE_KIND_REAL, STORAGE_KIND_NEGATIVE_ZERO)


def identical(a: Any, b: Any) -> bool:
    """Whether two values are the same to a client: equal, of one storage class, and zeros of
    one sign (Python calls 1 and 1.0, -0.0 and 0.0 equal)."""
    return a == b and type(a) is type(b) and storage_kind(a) == storage_kind(b)


def storage_kind(value: Any) -> int:
    """The storage class of a value as the `kind` of an exact ordered-state entry. MIN/MAX
    keep `3` and `3.0` apart (SQLite shows whichever remains), and `-0.0` from `0.0` (equal,
    but a client sees the sign); DISTINCT entries use kind 0, merging values SQLite calls equal."""
    if isinstance(value, int):
        return STORAGE_KIND_INTEGER
    if isinstance(value, float):
        return STORAGE_KIND_NEGATIVE_ZERO if value == 0 and math.copysign(1.0, value) < 0 else STORAGE_KIND_REAL
    return 3 if isinstance(value, str) else 4


_ENTRY = "operator_id = ? AND key = ? AND ord = ? AND kind = ?"  # one ordered-state entry

#: what `first` returns when the extreme is tied between storage classes (1 and 1.0)
TIED = b"\x00matview: extreme tied across types"

#: the same, in SQL, for entries written set at a time
STORAGE_KIND_SQL = (
    "CASE typeof({v}) WHEN 'integer' THEN 1 WHEN 'real' THEN "
    "CASE WHEN {v} = 0 AND atan2({v}, -1) < 0 THEN 5 ELSE 2 END WHEN 'text' THEN 3 ELSE 4 END"
)


class _Entry:
    __slots__ = ("delta", "kind", "ord", "persisted", "value", "value_changed")

    def __init__(self, ord_: Any, kind: int, value: Any, persisted: int) -> None:
        self.ord, self.kind, self.value, self.persisted, self.delta = ord_, kind, value, persisted, 0
        self.value_changed = False


class StateStore:
    def __init__(self, conn: apsw.Connection, view: str, writable: bool) -> None:
        self.conn, self.writable, self.view = conn, writable, view
        self.state = quote(names.state_table(view))
        self.ostate = quote(names.ordered_state_table(view))
        self._values: dict[tuple[int, bytes], Any] = {}
        self._dirty: set[tuple[int, bytes]] = set()
        self._ordered: dict[tuple[int, bytes], dict[Any, _Entry]] = {}
        self._read_whole: set[int] = set()  # operators whose persisted entries are all in `_values`
        #: what an operator works out once per fold (`Circuit._first_row`'s first rows)
        self.memo: dict[Any, Any] = {}

    # -- accumulators ---------------------------------------------------------------
    def get(self, op: int, key: bytes) -> Any:
        slot = (op, key)
        if slot not in self._values:
            if op in self._read_whole:
                return None
            row = self.conn.execute(
                f"SELECT value FROM {self.state} WHERE operator_id = ? AND key = ?", slot
            ).fetchone()
            self._values[slot] = None if row is None else unpack(row[0])
        return self._values[slot]

    def read_many(self, op: int, keys: Iterable[bytes]) -> None:
        """Read the persisted entries of `keys` in few queries, so that `get` of each is free (a
        set-at-a-time fold touches hundreds of groups: one query each cost ~3 µs, 500 in one ~1.5)."""
        if op in self._read_whole:
            return
        wanted = [key for key in dict.fromkeys(keys) if (op, key) not in self._values]
        for start in range(0, len(wanted), _READ_MANY):
            chunk = wanted[start : start + _READ_MANY]
            for key in chunk:
                self._values[(op, key)] = None  # (no entry, unless the query finds one)
            for key, value in self.conn.execute(
                f"SELECT key, value FROM {self.state} WHERE operator_id = ? "
                "AND key IN (SELECT unhex(value) FROM json_each(?))",
                (op, json.dumps([key.hex() for key in chunk])),
            ):
                self._values[(op, bytes(key))] = unpack(value)

    def keys(self, op: int) -> set[bytes]:
        """Every key operator `op` has an entry for (persisted, or set since); the persisted
        entries are read in one query and kept, so `get` of each is free."""
        for key, value in self.conn.execute(f"SELECT key, value FROM {self.state} WHERE operator_id = ?", (op,)):
            self._values.setdefault((op, bytes(key)), unpack(value))
        self._read_whole.add(op)
        return {key for (slot_op, key), value in self._values.items() if slot_op == op and value is not None}

    def put(self, op: int, key: bytes, value: Any) -> None:
        """Set the accumulator; None deletes it."""
        self._values[(op, key)] = value
        self._dirty.add((op, key))

    # -- ordered multisets ----------------------------------------------------------
    def adjust(self, op: int, key: bytes, ord_: Any, value: Any, weight: int, kind: int = 0) -> tuple[int, int]:
        """Add `weight` to entry (`ord_`, `kind`) of multiset (op, key); its (old, new) weight."""
        entries = self._ordered.setdefault((op, key), {})
        slot = (kind, canonical(ord_))
        entry = entries.get(slot)
        if entry is None:
            row = self.conn.execute(
                f"SELECT ord, value, weight FROM {self.ostate} WHERE {_ENTRY}",
                (op, key, ord_, kind),
            ).fetchone()
            entry = _Entry(ord_, kind, value, 0) if row is None else _Entry(row[0], kind, row[1], row[2])
            entries[slot] = entry
        old = entry.persisted + entry.delta
        entry.delta += weight
        if weight > 0 and value is not None and not identical(value, entry.value):
            # An entry keyed by base rowid (GROUP_CONCAT) takes the value of its newest
            # insert: an UPDATE is −old then +new on the same rowid, in delta order.
            entry.value, entry.value_changed = value, True
        return old, old + weight

    def add(self, op: int, key: bytes, ord_: Any, weight: int, kind: int = 0) -> None:
        """Add `weight` to entry `ord_` without reading it (its old weight is not needed).
        Such entries are written by upsert; an entry that reaches zero is deleted."""
        entries = self._ordered.setdefault((op, key), {})
        slot = (kind, canonical(ord_))
        entry = entries.get(slot)
        if entry is None:
            entry = entries[slot] = _Entry(ord_, kind, None, UNKNOWN)
        entry.delta += weight

    def first(self, op: int, key: bytes, descending: bool) -> Any:
        """The least (or greatest) ord with positive weight, or None; `TIED` when values of two
        storage classes share it (1 and 1.0: SQLite returns the one its scan meets first)."""
        pending = self._ordered.get((op, key), {})
        found: list[tuple[Any, int]] = []  # (ord, kind) of the best, and of the next after it
        order = "DESC" if descending else "ASC"
        for ord_, kind, weight in self.conn.execute(
            f"SELECT ord, kind, weight FROM {self.ostate} WHERE {_GROUP} ORDER BY ord {order}",
            (op, key),
        ):
            entry = pending.get((kind, canonical(ord_)))
            if weight + (entry.delta if entry else 0) > 0:
                found.append((ord_, kind))
                if len(found) == 2:
                    break
        for entry in pending.values():
            # an entry not (known to be) stored is a candidate when its delta is positive
            if entry.persisted in (0, UNKNOWN) and entry.delta > 0:
                found.append((entry.ord, entry.kind))
        if not found:
            return None
        best, kind = found[0]
        for ord_, other in found[1:]:
            if _better(ord_, best, descending):
                best, kind = ord_, other
        numeric = NUMERIC_KINDS  # (a DISTINCT aggregate's own entries have kind 0)
        if kind in numeric and any(ord_ == best and other in numeric and other != kind for ord_, other in found):
            return TIED
        return best

    def first_entry(self, op: int, key: bytes, descending: bool) -> Any:
        """The value of the entry with positive weight least (or greatest) in (ord, kind)
        order, or None: for entries whose kind orders equal ords (`bare_columns`: a rowid),
        not a storage class. Equal ords of two classes (1 and 1.0) are equal here, as in
        SQLite's index."""
        pending = self._ordered.get((op, key), {})
        order = "DESC" if descending else "ASC"
        best: tuple[Any, int, Any] | None = None
        for ord_, kind, value, weight in self.conn.execute(
            f"SELECT ord, kind, value, weight FROM {self.ostate} WHERE {_GROUP} ORDER BY ord {order}, kind {order}",
            (op, key),
        ):
            entry = pending.get((kind, canonical(ord_)))
            if weight + (entry.delta if entry else 0) > 0:
                best = (ord_, kind, entry.value if entry else value)
                break
        for entry in pending.values():
            # an entry not stored is a candidate when its delta is positive
            if entry.persisted == 0 and entry.delta > 0:
                candidate = (entry.ord, entry.kind, entry.value)
                if best is None or _entry_before(candidate, best, descending):
                    best = candidate
        return None if best is None else best[2]

    def entries(self, op: int, key: bytes) -> Iterator[tuple[Any, Any, int]]:
        """(ord, value, weight) with positive weight, in ord order."""
        pending = dict(self._ordered.get((op, key), {}))
        merged: list[tuple[Any, Any, int]] = []
        for ord_, kind, value, weight in self.conn.execute(
            f"SELECT ord, kind, value, weight FROM {self.ostate} WHERE {_GROUP} ORDER BY ord",
            (op, key),
        ):
            entry = pending.pop((kind, canonical(ord_)), None)
            total = weight + (entry.delta if entry else 0)
            if total > 0:
                merged.append((ord_, entry.value if entry else value, total))
        extra = [(e.ord, e.value, e.delta) for e in pending.values() if e.persisted == 0 and e.delta > 0]
        if extra:
            merged = sorted(merged + extra, key=lambda item: sqlite_order(item[0]))
        return iter(merged)

    # -- persistence ----------------------------------------------------------------
    def flush(self) -> None:
        """Write buffered changes (folds only); readers never call this."""
        if not self.writable:
            raise RuntimeError("read-only state store")
        upserts, deletes = [], []
        for op, key in self._dirty:
            value = self._values[(op, key)]
            if value is None:
                deletes.append((op, key))
            else:
                upserts.append((op, key, pack(value)))
        if deletes:
            self.conn.executemany(f"DELETE FROM {self.state} WHERE operator_id = ? AND key = ?", deletes)
        if upserts:
            self.conn.executemany(
                f"INSERT OR REPLACE INTO {self.state} (operator_id, key, value, weight) VALUES (?, ?, ?, 1)", upserts
            )
        inserts, updates, removes, upserts_blind, drops_blind = [], [], [], [], []
        for (op, key), entries in self._ordered.items():
            for entry in entries.values():
                if entry.persisted == UNKNOWN:
                    if entry.delta:
                        upserts_blind.append((op, key, entry.ord, entry.kind, entry.delta))
                        if entry.delta < 0:
                            drops_blind.append((op, key, entry.ord, entry.kind))
                    continue
                total = entry.persisted + entry.delta
                if entry.delta == 0 and not entry.value_changed:
                    continue
                if total == 0:
                    if entry.persisted:
                        removes.append((op, key, entry.ord, entry.kind))
                elif entry.persisted == 0:
                    inserts.append((op, key, entry.ord, entry.kind, entry.value, total))
                else:
                    updates.append((total, entry.value, op, key, entry.ord, entry.kind))
        if removes:
            self.conn.executemany(
                f"DELETE FROM {self.ostate} WHERE operator_id = ? AND key = ? AND ord = ? AND kind = ?", removes
            )
        if updates:
            self.conn.executemany(
                f"UPDATE {self.ostate} SET weight = ?, value = ? WHERE {_ENTRY}",
                updates,
            )
        if inserts:
            self.conn.executemany(
                f"INSERT INTO {self.ostate} (operator_id, key, ord, kind, value, weight) VALUES (?, ?, ?, ?, ?, ?)",
                inserts,
            )
        if upserts_blind:
            self.conn.executemany(
                f"INSERT INTO {self.ostate} (operator_id, key, ord, kind, value, weight) VALUES (?, ?, ?, ?, NULL, ?) "
                "ON CONFLICT (operator_id, key, ord, kind) DO UPDATE SET weight = weight + excluded.weight",
                upserts_blind,
            )
        if drops_blind:
            self.conn.executemany(
                f"DELETE FROM {self.ostate} WHERE {_ENTRY} AND weight <= 0",
                drops_blind,
            )
        self._dirty.clear()
        self._ordered.clear()


def _better(candidate: Any, best: Any, descending: bool) -> bool:
    a, b = sqlite_order(candidate), sqlite_order(best)
    return a > b if descending else a < b


def _entry_before(candidate: tuple[Any, int, Any], best: tuple[Any, int, Any], descending: bool) -> bool:
    a, b = (sqlite_order(candidate[0]), candidate[1]), (sqlite_order(best[0]), best[1])
    return a > b if descending else a < b


def create_state_tables(conn: apsw.Connection, view: str, if_missing: bool = False) -> None:
    """The view's two state tables; `if_missing`: only those that are not there (REFRESH of a
    damaged file)."""
    create = "CREATE TABLE IF NOT EXISTS" if if_missing else "CREATE TABLE"
    conn.execute(
        f"{create} {quote(names.state_table(view))} (operator_id INTEGER NOT NULL, key BLOB NOT NULL, "
        "value BLOB NOT NULL, weight INTEGER NOT NULL, PRIMARY KEY (operator_id, key)) WITHOUT ROWID"
    )
    conn.execute(
        f"{create} {quote(names.ordered_state_table(view))} (operator_id INTEGER NOT NULL, key BLOB NOT NULL, "
        "ord NOT NULL, kind INTEGER NOT NULL, value, weight INTEGER NOT NULL, "
        "PRIMARY KEY (operator_id, key, ord, kind)) WITHOUT ROWID"
    )


def clear_state_tables(conn: apsw.Connection, view: str) -> None:
    """Empty the view's two state tables (a rebuild fills them again, as CREATE does)."""
    conn.execute(f"DELETE FROM {quote(names.state_table(view))}")
    conn.execute(f"DELETE FROM {quote(names.ordered_state_table(view))}")
