"""Names of matview's internal objects, and SQL quoting.

Everything matview creates in a user's file starts with ``__dbsp_``. User names may
contain quotes, spaces, unicode and keywords, so every name is quoted everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable

PREFIX = "__dbsp_"
#: matview's index that keeps a key-less table's rowids across VACUUM (`rowid_guard_index`)
ROWID_GUARD_PREFIX = f"{PREFIX}rowids_"
#: internal nodes: hidden materialized views a view reads (`matview.sql.nodes`)
NODE_PREFIX = f"{PREFIX}node_"
CATALOG = "__dbsp_catalog"
META = "__dbsp_meta"
PROGRESS = "__dbsp_progress"


def quote(name: str) -> str:
    """Quote an identifier for SQLite."""
    return '"' + name.replace('"', '""') + '"'


_ASCII_LOWER = {ord(c): ord(c) + 32 for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}


def fold(name: str) -> str:
    """An identifier as SQLite compares names: case-insensitive for the 26 ASCII letters only
    (`"É"` and `"é"` are two columns, `"A"` and `"a"` one)."""
    return name.translate(_ASCII_LOWER)


def taken_by_matview(columns: Iterable[str], ours: Iterable[str]) -> str | None:
    """The first of `columns` named like one of matview's own columns `ours` of the table it
    makes beside them (SQLite would say "duplicate column name"); None when none is."""
    own = {fold(name) for name in ours}
    return next((name for name in columns if fold(name) in own), None)


def is_internal(name: str) -> bool:
    return name.lower().startswith(PREFIX)


def view_table(view: str) -> str:
    return f"{PREFIX}view_{view}"


def state_table(view: str) -> str:
    return f"{PREFIX}state_{view}"


def ordered_state_table(view: str) -> str:
    return f"{PREFIX}ostate_{view}"


def delta_table(table: str) -> str:
    return f"{PREFIX}delta_{table}"


def view_delta_table(view: str) -> str:
    """The temp table holding an upstream view's ΔV while the views over it fold."""
    return f"{PREFIX}dv_{view}"


def pending_rows(view: str) -> str:
    """This connection's temp virtual table of a view's rows that pending changes touch
    (see `storage.readable.shadow_view_sql`)."""
    return f"{PREFIX}pending_{view}"


def all_rows(view: str) -> str:
    """This connection's temp virtual table of all a view's rows, read through the temp view
    that gives its expression columns no affinity (see `storage.readable.create_shadow`)."""
    return f"{PREFIX}rows_{view}"


def preimage_table(table: str) -> str:
    return f"{PREFIX}preimage_{table}"


def trigger(table: str, event: str) -> str:
    # The event comes first: `trg_<table>_<event>` made table `a` + `before_insert`
    # the same name as table `a_before` + `insert`.
    return f"{PREFIX}trg_{event}_{table}"


def view_key_index(view: str) -> str:
    return f"{PREFIX}key_{view}"


def rowid_guard_index(table: str) -> str:
    """matview's empty index that keeps `table`'s rowids across VACUUM (`indexes.keep_rowids`)."""
    return f"{ROWID_GUARD_PREFIX}{table}"


def guarded_table(index: str) -> str:
    """The table a `rowid_guard_index` name is for."""
    return index[len(ROWID_GUARD_PREFIX) :]


def heavy_index(view: str) -> str:
    """The partial index of a view table's rows of weight > 1 (see matview.storage.readable)."""
    return f"{PREFIX}heavy_{view}"


# Columns matview adds; the prefix keeps them from colliding with user columns.
SEQ = "__dbsp_seq"
ROWID = "__dbsp_rowid"
WEIGHT = "__dbsp_weight"
KEY = "__dbsp_key"
ROW_ID = "__dbsp_id"  # the view table's own INTEGER PRIMARY KEY (a view column may be named rowid)


def kept_rows_table(view: str) -> str:
    """The rows each root gave, of a partition-recompute view (see matview.storage.kept_rows)."""
    return f"{PREFIX}kept_{view}"


def kept_rows_index(view: str) -> str:
    # (not `kept_…`: the kept-rows table of a view named `root_x` would take the name)
    return f"{PREFIX}keptidx_{view}"


def all_of(terms: list[str]) -> str:
    """The conjunction of SQL `terms`, nested as a balanced tree: a chain `a AND b AND …` is as
    deep as it is long, and SQLite refuses expressions deeper than 1,000 (a table of 500 columns
    compared column by column)."""
    if len(terms) <= 2:
        return " AND ".join(terms) or "1"
    middle = len(terms) // 2
    return f"({all_of(terms[:middle])}) AND ({all_of(terms[middle:])})"


def is_node(name: str) -> bool:
    """Whether a materialized view is an internal node of another view (`matview.sql.nodes`)."""
    return fold(name).startswith(NODE_PREFIX)
