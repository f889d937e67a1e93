"""What the database says about a base table: columns, types, collations, keys."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

import apsw
from sqlglot.tokens import TokenType

from matview.db import scalar
from matview.errors import Error, UnsupportedQuery
from matview.names import ROWID_GUARD_PREFIX, fold, guarded_table, is_internal, is_node, quote
from matview.sql.sqltext import matching_paren, tokenize


def affinity(decltype: str) -> str:
    """SQLite's column affinity of a declared type (§3.1 of its datatype rules)."""
    upper = decltype.upper()
    if "INT" in upper:
        return "INTEGER"
    if any(word in upper for word in ("CHAR", "CLOB", "TEXT")):
        return "TEXT"
    if not upper or "BLOB" in upper:
        return "BLOB"
    if any(word in upper for word in ("REAL", "FLOA", "DOUB")):
        return "REAL"
    return "NUMERIC"


def has_one_variant(decltype: str, collation: str) -> bool:
    """True when values SQLite calls equal are identical in such a column: its affinity
    turns 3.0 into 3 (or 3 into 3.0) on storage, and BINARY never equates different text."""
    return affinity(decltype) != "BLOB" and collation.upper() == "BINARY"


@dataclass(frozen=True)
class Column:
    name: str
    decltype: str  # as declared (STRICT's ANY as no type): decides affinity
    collation: str  # BINARY, NOCASE, RTRIM, or a user collation
    #: a materialized view's column that is an expression (`count(*)`): no affinity, where a
    #: column without a type has BLOB affinity (its readers read it as `+column`)
    no_affinity: bool = False


ROWID_NAMES = ("rowid", "_rowid_", "oid")  # SQLite's names of the rowid, where no column shadows them
ROWID_KEY = "\x00rowid"  # in a unique key: the real rowid (a user column may be named rowid)


@dataclass(frozen=True)
class TableInfo:
    name: str
    columns: tuple[Column, ...]
    has_rowid: bool
    ipk: str | None  # the INTEGER PRIMARY KEY column, which aliases rowid
    primary_key: tuple[str, ...]  # WITHOUT ROWID tables: their key columns
    unique_keys: tuple[tuple[str, ...], ...] = field(default=())
    rowid_name: str = "rowid"  # an alias of the real rowid that no user column shadows
    pk_not_null: bool = False  # every PRIMARY KEY column is NOT NULL (a rowid table's PK may hold NULLs)
    strict: bool = False  # a STRICT table: an INTEGER column holds only integers
    materialized: bool = False  # a materialized view read as a source (see `matview.upstream`)
    unique_rows: bool = False  # a materialized view whose rows never repeat (grouped, DISTINCT)
    #: per unique key (as `unique_keys`): the collation its index compares each column by — a
    #: key may collate a column otherwise than the column does (`PRIMARY KEY (b COLLATE BINARY)`)
    unique_collations: tuple[tuple[str, ...], ...] = field(default=())
    #: per unique key (as `unique_keys`): whether its index is partial (it keeps apart only the
    #: rows its WHERE takes)
    unique_partial: tuple[bool, ...] = field(default=())
    #: (column, its DEFAULT's text) of each NOT NULL column with a default: where REPLACE resolves
    #: a NULL written there (`INSERT OR REPLACE`, `NOT NULL ON CONFLICT REPLACE`) the default is
    #: stored, after the BEFORE triggers saw the NULL
    null_defaults: tuple[tuple[str, str], ...] = field(default=())

    def full_unique_keys(self) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
        """(columns, the collation its index compares each by) of each unique key that keeps
        every row apart: not a partial index's, and of columns only (not the rowid)."""
        return [
            (key, collations)
            for key, collations, partial in zip(
                self.unique_keys, self.unique_collations, self.unique_partial, strict=True
            )
            if not partial and ROWID_KEY not in key
        ]

    def key_collations(self, key: tuple[str, ...]) -> tuple[str, ...]:
        """The collations unique key `key` compares its columns by (BINARY where unknown)."""
        for known, collations in zip(self.unique_keys, self.unique_collations, strict=False):
            if known == key:
                return collations
        return ("BINARY",) * len(key)

    @property
    def stable_key(self) -> tuple[str, ...] | None:
        """What identifies a row across VACUUM (which renumbers rowids that are not an INTEGER
        PRIMARY KEY): a rowid name, or the primary key columns (a rowid table's may hold NULLs:
        rows with NULL keys then count as one); None when nothing does."""
        if self.has_rowid and self.ipk is not None:
            return (self.rowid_name,)
        return self.primary_key or None

    @property
    def image_key(self) -> tuple[str, ...] | None:
        """Columns whose values, none NULL, pick out exactly one row at any moment, other than
        the rowid: a PRIMARY KEY (unique under its columns' affinity and collation; a rowid
        table's may hold NULLs, and rows with NULLs in it may repeat: `key_may_be_null`)."""
        if self.has_rowid and self.ipk is not None:
            return None
        return self.primary_key or None

    @property
    def key_may_be_null(self) -> bool:
        """Whether `stable_key` may hold NULLs (a rowid table's PRIMARY KEY without NOT NULL)."""
        return self.has_rowid and self.ipk is None and not self.pk_not_null

    def column(self, name: str) -> Column | None:
        lowered = fold(name)
        for column in self.columns:
            if fold(column.name) == lowered:
                return column
        return None

    @property
    def signature(self) -> list[list[str]]:
        """What must stay the same for views over this table to remain valid."""
        return [[c.name, c.decltype, c.collation] for c in self.columns]


def image_keys(tables: list[TableInfo]) -> tuple[tuple[str, tuple[str, ...], bool], ...]:
    """(table, its `image_key`, whether it may hold NULLs) for each distinct base table that has
    one (`Plan.image_keys`)."""
    found: dict[str, tuple[str, tuple[str, ...], bool]] = {}
    for table in tables:
        key = None if table.materialized else table.image_key
        if key is not None:
            found.setdefault(table.name, (table.name, key, table.key_may_be_null))
    return tuple(found.values())


def refuse_unstable_identity(table: TableInfo, what: str) -> None:
    """Views maintained per row (LEFT JOIN chains, subqueries) identify rows by a key: an
    INTEGER PRIMARY KEY or another PRIMARY KEY; or, in a table without one, the rowid
    (`kept_by_rowid`); a materialized view's rows are their own key where they never repeat."""
    if table.materialized:
        if table.unique_rows:
            return  # its rows are their own key
        if is_node(table.name):
            raise UnsupportedQuery(
                f"{what} over a FROM-subquery, CTE or subquery whose rows may repeat (an aggregate without "
                "every GROUP BY term in its select list, a UNION ALL) is not supported yet"
            )
        raise UnsupportedQuery(
            f"{what} over materialized view {table.name}, whose rows may repeat, is not supported yet "
            "(it is maintained per row; a grouped or DISTINCT view is)"
        )


def kept_by_rowid(table: TableInfo) -> bool:
    """Whether a view maintained per row of `table` knows its rows by rowid: a table without a
    PRIMARY KEY. VACUUM renumbers the rowids of a table without any index (it copies index
    entries, which hold rowids, as they are), so matview keeps an empty index on such a table
    while a view needs it (`indexes.keep_rowids`); a rowid that changes otherwise (an UPDATE
    of rowid, a REPLACE) is a change its triggers see."""
    return not table.materialized and table.stable_key is None


def index_table(conn: apsw.Connection, index: str) -> str | None:
    """The table index `index` of main is on; None when there is no such index."""
    found = conn.execute(
        "SELECT tbl_name FROM main.sqlite_master WHERE type = 'index' AND name = ? COLLATE NOCASE", (index,)
    ).fetchone()
    return None if found is None else str(found[0])


def lost_rowid_guard(conn: apsw.Connection, indexes: tuple[str, ...]) -> str | None:
    """The first of a plan's `indexes` that is a rowid guard (`indexes.guard_rowids`) and not in
    main on its own table — dropped, or carried away by a RENAME of the table; None if none is."""
    for name in indexes:
        if name.startswith(ROWID_GUARD_PREFIX):
            table = index_table(conn, name)
            if table is None or fold(table) != fold(guarded_table(name)):
                return name
    return None


def refuse_view_root(table: TableInfo, what: str) -> None:
    """Views maintained per row of their root need its key: a materialized view (or node) whose
    rows may repeat has none (one whose rows never repeat is its own: all its columns)."""
    if table.materialized and not table.unique_rows:
        first = (
            "an aggregating or DISTINCT FROM-subquery, CTE or view"
            if is_node(table.name)
            else f"materialized view {table.name}"
        )
        raise UnsupportedQuery(f"{what} whose first table is {first} is not supported yet (put a base table first)")


def view_sql(conn: apsw.Connection, name: str) -> str | None:
    """The CREATE VIEW text of view `name` of the main schema, or None when there is none."""
    row = conn.execute(
        "SELECT sql FROM main.sqlite_master WHERE type = 'view' AND name = ? COLLATE NOCASE", (name,)
    ).fetchone()
    return None if row is None else str(row[0])


def table_kind(conn: apsw.Connection, name: str) -> str | None:
    """'table', 'view', 'virtual', or None when `name` is no table or view in main."""
    row = conn.execute(
        "SELECT type, sql FROM main.sqlite_master WHERE type IN ('table','view') AND name = ? COLLATE NOCASE",
        (name,),
    ).fetchone()
    if row is None:
        return None
    kind, sql = row
    if kind == "table" and (sql or "").lstrip().upper().startswith("CREATE VIRTUAL"):
        return "virtual"
    return str(kind)


def read_table(conn: apsw.Connection, name: str) -> TableInfo:
    """Introspect base table `name` of the main schema, refusing what triggers cannot watch."""
    if name.lower() in ("sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema"):
        raise UnsupportedQuery(f"FROM {name}: the schema table cannot be maintained (no trigger sees its changes)")
    if name.lower().startswith("sqlite_"):
        raise UnsupportedQuery(f"FROM {name}: SQLite's own table cannot be maintained (no trigger may watch it)")
    # (a shadow table is named `<virtual table>_<suffix>`; `pragma_table_list` would open every
    # virtual table to tell, matview's own too)
    shadow = (
        "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND upper(sql) LIKE 'CREATE VIRTUAL TABLE%' "
        "AND lower(substr(?1, 1, length(name) + 1)) = lower(name) || '_'"
    )
    if conn.execute(shadow, (name,)).fetchone():
        # (a virtual table writes it from inside its own statements: a trigger there recurses)
        raise UnsupportedQuery(f"FROM {name}: a virtual table's shadow table cannot be maintained")
    kind = table_kind(conn, name)
    if kind is None:
        if conn.execute("SELECT 1 FROM temp.sqlite_master WHERE name = ? COLLATE NOCASE", (name,)).fetchone():
            raise UnsupportedQuery(f"table {name}: temporary tables cannot be maintained")
        raise Error(f"no such table: {name}")
    if kind != "table":
        # a materialized view is a plain view in main (its exact reader is a temp shadow)
        what = "a virtual table" if kind == "virtual" else "a view (materialized or not)"
        raise UnsupportedQuery(f"FROM {name}: {what} as a base table is not supported yet")
    if is_internal(name):
        raise UnsupportedQuery(f"FROM {name}: matview's internal tables cannot be a view's base table")
    real_name = str(
        scalar(conn, "SELECT name FROM main.sqlite_master WHERE type='table' AND name = ? COLLATE NOCASE", (name,))
    )
    columns: list[Column] = []
    pk_cols: list[tuple[int, str]] = []
    nullable_pk = False
    strict = _is_strict(str(scalar(conn, "SELECT sql FROM main.sqlite_master WHERE name = ?", (real_name,))))
    null_defaults: list[tuple[str, str]] = []
    for _cid, col, decltype, notnull, default, pk, hidden in conn.execute(
        f"PRAGMA main.table_xinfo({quote(real_name)})"
    ):
        if hidden == 1:
            continue
        if notnull and default is not None:
            null_defaults.append((col, str(default)))
        collation = conn.column_metadata("main", real_name, col)[1] or "BINARY"
        columns.append(Column(col, _mirror_type(decltype or "", strict), collation.upper()))
        if pk:
            pk_cols.append((pk, col))
            nullable_pk = nullable_pk or not notnull
    pk_names = tuple(c for _, c in sorted(pk_cols))
    pk_index = bool(conn.execute("SELECT 1 FROM pragma_index_list(?) WHERE origin = 'pk'", (real_name,)).fetchone())
    without_rowid = pk_index and _is_without_rowid(conn, real_name, columns)
    ipk = None
    # (`INTEGER PRIMARY KEY DESC` is no rowid alias: SQLite gives it an index of its own)
    if not without_rowid and len(pk_names) == 1 and not pk_index:
        column = next(c for c in columns if c.name == pk_names[0])
        if column.decltype.upper() == "INTEGER":
            ipk = column.name
    unique_keys: list[tuple[str, ...]] = []
    unique_collations: list[tuple[str, ...]] = []
    unique_partial: list[bool] = []
    for _seq, index_name, unique, _origin, partial in conn.execute(f"PRAGMA main.index_list({quote(real_name)})"):
        if not unique:
            continue
        key_columns: list[str] = []
        key_collations: list[str] = []
        for _seqno, cid, col, _desc, coll, is_key in conn.execute(f"PRAGMA main.index_xinfo({quote(index_name)})"):
            if not is_key:
                continue
            if cid == -2:
                raise UnsupportedQuery(
                    f"table {real_name}: unique index {index_name} on an expression (INSERT OR REPLACE "
                    "through it could not be captured)"
                )
            key_columns.append(col if cid >= 0 else ROWID_KEY)
            key_collations.append(str(coll or "BINARY").upper())
        unique_keys.append(tuple(key_columns))
        unique_collations.append(tuple(key_collations))
        unique_partial.append(bool(partial))
    rowid_name = "rowid"
    if not without_rowid:
        taken = {fold(c.name) for c in columns}
        free = [alias for alias in ROWID_NAMES if alias not in taken]
        if not free:
            raise UnsupportedQuery(f"table {real_name}: its columns rowid, _rowid_ and oid hide the rowid")
        rowid_name = free[0]
    return TableInfo(
        real_name,
        tuple(columns),
        not without_rowid,
        ipk,
        pk_names,
        tuple(unique_keys),
        rowid_name,
        not nullable_pk,
        strict,
        unique_collations=tuple(unique_collations),
        unique_partial=tuple(unique_partial),
        null_defaults=tuple(null_defaults),
    )


@functools.lru_cache(maxsize=512)
def _is_strict(create_sql: str) -> bool:
    """Whether a CREATE TABLE has the STRICT option (after its column list). Read from the
    text: `pragma_table_list` connects every virtual table of the schema, matview's own too.
    (Cached by text: each view over a table reads it at every catalog load.)"""
    tokens = tokenize(create_sql)
    opening = next((i for i, t in enumerate(tokens) if t.kind == TokenType.L_PAREN), None)
    if opening is None:
        return False  # CREATE TABLE … AS SELECT
    return any(t.text.upper() == "STRICT" and not t.is_quoted for t in tokens[matching_paren(tokens, opening) + 1 :])


def _mirror_type(decltype: str, strict: bool) -> str:
    """The declared type that gives a column of an ordinary table (a delta log, a view table,
    the evaluator's per-group table) the same affinity. Only STRICT's ANY differs: it keeps
    every value as given, where an ordinary column declared ANY has NUMERIC affinity."""
    return "" if strict and decltype.upper() == "ANY" else decltype


def _is_without_rowid(conn: apsw.Connection, name: str, columns: list[Column]) -> bool:
    """Whether SQLite finds no rowid, asked under a rowid name no column takes (`SELECT rowid`
    read the column of a WITHOUT ROWID table that has one named rowid: it was taken for a rowid
    table, and every write failed). With all three names taken, the table's SQL says."""
    taken = {fold(c.name) for c in columns}
    for alias in ROWID_NAMES:
        if alias not in taken:
            try:
                conn.execute(f"SELECT {alias} FROM main.{quote(name)} LIMIT 0").fetchall()
            except apsw.SQLError:
                return True
            return False
    sql = scalar(conn, "SELECT sql FROM main.sqlite_master WHERE type = 'table' AND name = ?", (name,))
    return bool(re.search(r"\)\s*(STRICT\s*,\s*)?WITHOUT\s+ROWID", str(sql or ""), re.IGNORECASE))


def unique_key_columns(conn: apsw.Connection, table: TableInfo) -> set[str] | None:
    """The columns (folded names) no two rows of `table` share values of under the columns' own
    collations — what GROUP BY, DISTINCT and joins compare by: its INTEGER PRIMARY KEY, or a NOT
    NULL primary key whose index collates each column as the column does (`k TEXT COLLATE NOCASE,
    PRIMARY KEY (k COLLATE BINARY)` holds 'x' and 'X', one NOCASE group); None when none does."""
    if table.has_rowid and table.ipk is not None:
        return {fold(table.ipk)}
    if not table.primary_key or table.key_may_be_null:
        return None
    for _seq, index, _unique, origin, _partial in conn.execute(f"PRAGMA main.index_list({quote(table.name)})"):
        if origin != "pk":
            continue
        for row in conn.execute(f"PRAGMA main.index_xinfo({quote(str(index))})"):
            column = table.column(str(row[2])) if row[5] and row[2] is not None else None
            if column is not None and str(row[4]).upper() != column.collation.upper():
                return None
        return {fold(c) for c in table.primary_key}
    return None


def primary_key_order(conn: apsw.Connection, table: TableInfo) -> list[tuple[str, bool, str]]:
    """A WITHOUT ROWID table's primary key as the order its rows are stored (and scanned) in:
    per key column, (name, descending, collation); [] for a rowid table."""
    if table.has_rowid or table.materialized:
        return []
    for _seq, index, _unique, origin, _partial in conn.execute(f"PRAGMA main.index_list({quote(table.name)})"):
        if origin == "pk":
            rows = conn.execute(f"PRAGMA main.index_xinfo({quote(str(index))})").fetchall()
            return [(str(row[2]), bool(row[3]), str(row[4]).upper()) for row in rows if row[5] and row[2] is not None]
    return []
