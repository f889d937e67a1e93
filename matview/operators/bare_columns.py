"""Bare columns: the row SQLite takes them from, beside one MIN() or MAX() or beside none (DBSP
§7.2 per group, with the ordered state of MIN/MAX, §7.3).

SQLite documents that in `SELECT cat, name, max(price) FROM t GROUP BY cat` the bare column
`name` comes from a row holding the maximum. Which one is decided by how its max() steps: a row
replaces the kept one only with a strictly greater value (7 after 7.0 does not), and while every
value so far is NULL each row replaces it. Over one rowid table read in rowid order (the order
`storage.scan_order` checks SQLite keeps, or refuses the view) that is, exactly:

* the least rowid among the rows with the extreme value (equal as SQLite compares: 7 and 7.0);
* in a group whose values are all NULL, the greatest rowid;
* beside no MIN/MAX, the least rowid (SQLite loads bare columns at a group's first row only;
  its documentation calls the row arbitrary, its program does not);
* in any order, where the argument and the GROUP BY columns hold a NOT NULL key of the table
  (`Plan.extreme_unique`: one row of a group has the extreme), on any table, WITHOUT ROWID too.

So each group keeps its rows in two ordered multisets: rows with a value by (value, rowid) —
for MAX by (value, ~rowid), so that one descending seek meets the greatest value's least rowid —
and rows with NULL by rowid (beside no MIN/MAX, every row by rowid). Each entry holds the row's
(value, bare values), and MIN/MAX's own result is that value: the one SQLite keeps (7.0 above,
never a guess between 7 and 7.0). The GROUP BY values SQLite shows come from that row too, so
where a group has several spellings ('a' and 'A' under NOCASE) the entry holds the row's
(`Plan.extreme_spelling`). An insert or a delete changes one entry (Thm 3.3: the operator is linear
in its multisets); the result is one index seek per touched group.
"""

from __future__ import annotations

from typing import Any

from matview.keys import canonical
from matview.plan import Plan
from matview.storage.codec import pack, unpack
from matview.storage.state import StateStore

ROWS_OP = 1_000_002  # rows whose MIN/MAX argument is not NULL, by (value, rowid); beside none, all by rowid
NULL_ROWS_OP = 1_000_003  # rows whose argument is NULL, by rowid


class BareColumns:
    """The row one MIN/MAX aggregate keeps (or a group's first), for the bare columns (`AggSpec`
    "bare") beside it."""

    def __init__(self, plan: Plan) -> None:
        self.extreme = next((i for i, a in enumerate(plan.aggs) if a.func in ("min", "max")), None)
        spec = plan.aggs[self.extreme] if self.extreme is not None else None
        self.argument = spec.arg if spec is not None else None
        self.descending = spec is not None and spec.func == "max"
        #: the collation MIN/MAX compares by: its entries are ordered by the canonical spelling
        #: (`'a'` for 'A' under NOCASE), each holding the row's own
        self.collation = spec.collation if spec is not None else "BINARY"
        self.bare = [i for i, a in enumerate(plan.aggs) if a.func == "bare"]
        self.columns = [plan.aggs[i].arg for i in self.bare]
        #: the row's GROUP BY values are kept where a group may have several spellings
        self.spellings = plan.group_count if plan.extreme_spelling else 0
        #: the extreme row is unique in its group (`Plan.extreme_unique`): entries keyed by value alone
        self.unique = plan.extreme_unique
        #: the aggregates whose results come from here (not from their own accumulators)
        self.covers = {*self.bare} if self.extreme is None else {self.extreme, *self.bare}

    @classmethod
    def of(cls, plan: Plan) -> BareColumns | None:
        return cls(plan) if plan.extreme_row else None

    def update(self, store: StateStore, key: bytes, row: tuple[Any, ...], weight: int, rowid: Any) -> None:
        """Add a stage-1 row (weight ±n) of group `key`."""
        value = row[self.argument] if self.argument is not None else None
        entry = pack([value, *(row[c] for c in self.columns if c is not None), *row[: self.spellings]])
        if self.argument is None:
            store.adjust(ROWS_OP, key, rowid, entry, weight)
        elif value is None:
            # (no rowid: the extreme row is unique (`Plan.extreme_unique`), and a NULL one is its
            # group's only row — a NOT NULL key holds the GROUP BY columns — so any order will do)
            store.adjust(NULL_ROWS_OP, key, 0 if rowid is None else rowid, entry, weight)
        else:
            order = 0 if self.unique else ~rowid if self.descending else rowid
            compared = value if self.collation == "BINARY" else canonical(value, self.collation)
            store.adjust(ROWS_OP, key, compared, entry, weight, order)

    def fill(self, results: list[Any], store: StateStore, key: bytes) -> list[Any] | None:
        """Put the kept row's MIN/MAX value and bare values into `results` (per aggregate);
        the row's GROUP BY values where they are kept, else None."""
        found = store.first_entry(ROWS_OP, key, self.descending)
        if found is None and self.extreme is not None:
            found = store.first_entry(NULL_ROWS_OP, key, descending=True)
        values = [None] * (1 + len(self.bare)) if found is None else unpack(found)
        if self.extreme is not None:
            results[self.extreme] = values[0]
        for index, value in zip(self.bare, values[1 : 1 + len(self.bare)], strict=True):
            results[index] = value
        return values[1 + len(self.bare) :] if self.spellings and found is not None else None
