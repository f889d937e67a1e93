"""Change capture: plain-SQL triggers that log every base-table change as a delta.

For a base table ``t`` the triggers append ``(t's columns…, weight ±1)`` to
``__dbsp_delta_t`` in the writer's own transaction, so any client (the sqlite3 shell,
stdlib ``sqlite3``) is captured, and ROLLBACK / ROLLBACK TO undo deltas with the rows.
An UPDATE logs ``−old`` and ``+new``.

``INSERT OR REPLACE`` (and ``UPDATE OR REPLACE``, ``ON CONFLICT REPLACE`` constraints)
deletes conflicting rows *without* firing DELETE triggers unless the writer enabled
``recursive_triggers``. So a BEFORE trigger copies the rows the new row could conflict
with into ``__dbsp_preimage_t``, and the AFTER trigger logs ``−row`` for each of them
that vanished. An ignored insert (OR IGNORE, DO NOTHING) fires no AFTER trigger and
leaves a stale preimage; its rows still exist where they were, so they never count as
vanished, and the next write's AFTER trigger clears them. A DELETE removes its row from
the preimage (with ``recursive_triggers`` on, a REPLACE fires it and logs ``−old``
itself), so a stale entry can never stand for a row that is gone.
"""

from __future__ import annotations

import functools

import apsw
from sqlglot.tokens import TokenType

from matview import names
from matview.db import scalar
from matview.errors import Error
from matview.names import all_of, fold, quote
from matview.sql.sqltext import depth_walk, tokenize
from matview.storage.ddl_guard import own_ddl
from matview.storage.schema import ROWID_KEY, TableInfo, read_table

CAPTURE_EVENTS = (
    "before_insert",
    "insert",
    "replaced_by_insert",
    "before_update",
    "update",
    "replaced_by_update",
    "delete",
    "deleted_preimage",
)


def delta_columns_sql(table: TableInfo) -> str:
    """Column definitions mirroring the base table's types and collations, so expressions
    evaluated over deltas behave exactly as over the base table."""
    return ", ".join(
        f"{quote(c.name)} {c.decltype} COLLATE {quote(c.collation)}".replace("  ", " ") for c in table.columns
    )


def install_capture(conn: apsw.Connection, table: TableInfo) -> None:
    """Create the delta log, preimage table and triggers of `table` (idempotent)."""
    try:
        _install_capture(conn, table)
    except apsw.SQLError as exc:
        if "no such collation sequence" not in str(exc):
            raise
        raise Error(
            f"table {table.name}: a column declares a collation this connection has not registered ({exc}); "
            "register it with create_collation() first"
        ) from None


def _install_capture(conn: apsw.Connection, table: TableInfo) -> None:
    reserved = names.taken_by_matview((c.name for c in table.columns), (names.SEQ, names.ROWID, names.WEIGHT))
    if reserved is not None:  # (the delta log's own columns)
        raise Error(
            f"table {table.name}: its column {reserved} has a name matview keeps for a column of its "
            "own; rename the column to make views over the table"
        )
    t = quote(table.name)
    delta, pre = quote(names.delta_table(table.name)), quote(names.preimage_table(table.name))
    cols = delta_columns_sql(table)
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {delta} ({quote(names.SEQ)} INTEGER PRIMARY KEY, "
        f"{quote(names.ROWID)} INTEGER, {cols}, {quote(names.WEIGHT)} INTEGER NOT NULL)"
    )
    conn.execute(f"CREATE TABLE IF NOT EXISTS {pre} ({quote(names.ROWID)} INTEGER, {cols})")
    logs = (
        (names.delta_table(table.name), (names.SEQ, names.ROWID, names.WEIGHT)),
        (names.preimage_table(table.name), (names.ROWID,)),
    )
    for log, own in logs:
        # (a table of that name made by someone else is not matview's: writes would fail on it)
        have = {fold(str(row[1])) for row in conn.execute("SELECT name, name FROM main.pragma_table_info(?)", (log,))}
        if not {fold(c) for c in own} <= have:
            raise Error(
                f"table {log} is in the way of table {table.name}'s change capture (matview keeps the "
                f"name for it, and it is not matview's): rename or drop it to make views over {table.name}"
            )
    # A row whose conflict IGNORE / DO NOTHING skipped leaves its preimage behind (no AFTER trigger
    # runs; the row's delete or update removes it later): every later write of the table probes
    # the preimage table, by this index rather than by a scan of whatever was left there.
    # (one index per key a conflict can be on, so SQLite probes each term of the triggers' ORs)
    probes: list[tuple[str, ...]] = [(names.ROWID,)] if table.has_rowid else []
    probes += [key for key in (table.primary_key, *table.unique_keys) if key and key not in probes]
    for number, key in enumerate(probes):
        index = quote(f"{names.PREFIX}pre_{table.name}_{number}")
        conn.execute(f"CREATE INDEX IF NOT EXISTS {index} ON {pre} ({', '.join(quote(c) for c in key)})")
    rid = table.rowid_name
    user_columns = [quote(c.name) for c in table.columns]
    column_list = ", ".join(user_columns)
    target = f"{delta} ({quote(names.ROWID)}, {column_list}, {quote(names.WEIGHT)})"

    def row(prefix: str) -> str:
        """The delta columns of `prefix`'s row (a preimage row "p" keeps its rowid in a column)."""
        if not table.has_rowid:
            identity = "NULL"
        elif prefix == "p":
            identity = f"p.{quote(names.ROWID)}"
        else:
            identity = f"{prefix}.{rid}"
        return ", ".join([identity, *(f"{prefix}.{c}" for c in user_columns)])

    # A row's identity is its rowid, or the primary key of a WITHOUT ROWID table; a preimage
    # row keeps its rowid in the __dbsp_rowid column. Alias "p" is a preimage row; "" is one
    # in a DELETE/UPDATE of the preimage table itself, which stays unaliased (older SQLite,
    # such as the stdlib's, cannot read `DELETE FROM x AS p` inside a trigger).
    def qualified(alias: str, column: str) -> str:
        return f"{alias}.{column}" if alias else column

    def identity_of(alias: str) -> list[str]:
        if table.has_rowid:
            return [qualified(alias, quote(names.ROWID)) if alias in ("p", "") else f"{alias}.{rid}"]
        return [qualified(alias, quote(k)) for k in table.primary_key]

    # a key compares its columns as its index collates them, not as the columns declare:
    # `PRIMARY KEY (b COLLATE BINARY)` over a NOCASE b holds 'u' and 'U' as two rows
    identity_collations = (
        ("BINARY",)
        if table.has_rowid
        else tuple(
            k if k != _declared(table, c) else ""
            for c, k in zip(table.primary_key, table.key_collations(table.primary_key), strict=True)
        )
    )

    defaults = dict(table.null_defaults)

    def key_term(alias: str, column: str) -> str:
        if column == ROWID_KEY:
            return qualified(alias, quote(names.ROWID)) if alias in ("p", "") else f"{alias}.{rid}"
        if alias == "new" and column in defaults:  # (a NULL REPLACE stores as the default: that conflicts)
            return f"coalesce(new.{quote(column)}, ({defaults[column]}))"
        return qualified(alias, quote(column))

    keys = _conflict_keys(table)

    def conflicts(alias: str) -> str:
        """`alias`'s row shares a unique key with new (NULLs never conflict)."""
        return " OR ".join(
            "("
            + all_of(
                [
                    f"{key_term(alias, c)} = {key_term('new', c)}{_collate(k, _declared(table, c))}"
                    for c, k in zip(key, table.key_collations(key), strict=True)
                ]
            )
            + ")"
            for key in keys
        )

    def same(alias: str, other: str) -> str:
        pairs = zip(identity_of(alias), identity_of(other), identity_collations, strict=True)
        return all_of([f"{a} IS {b}{_collate(k, '')}" for a, b, k in pairs])

    # Row images compare BINARY: identical values, and no user collation a column may declare
    # (every client writing the table would otherwise need it to prepare its statements).
    same_values = all_of([same("", "old"), *(f"{c} IS old.{c} COLLATE BINARY" for c in user_columns)])
    already = all_of([same("p", "t0"), *(f"p.{c} IS t0.{c} COLLATE BINARY" for c in user_columns)])
    gone = f"NOT EXISTS (SELECT 1 FROM {t} AS t0 WHERE {same('t0', 'p')})"
    took_key = same("p", "new")
    # A preimage row follows its row through updates (a user's trigger may update it between
    # capture and the REPLACE that deletes it). It takes the row's *current* image, not
    # new's: a user's AFTER UPDATE trigger fires before ours and may already have updated or
    # deleted the row again, and an entry must never stand for a row that is gone.
    image_columns = [quote(names.ROWID), *user_columns]
    current_row = f"SELECT {row('t0')} FROM {t} AS t0 WHERE {same('t0', 'new')}"
    follow = f"({', '.join(image_columns)}) = ({current_row})"
    row_gone = f"NOT EXISTS (SELECT 1 FROM {t} AS t0 WHERE {same('t0', 'new')})"
    # (named in main: an unqualified name would put a trigger on a TEMP table `t` shadowing it)
    trg = {e: f"main.{quote(names.trigger(table.name, e))}" for e in CAPTURE_EVENTS}

    def capture(extra: str = "") -> str:
        return (
            f"INSERT INTO {pre} SELECT {row('t0')} FROM {t} AS t0 WHERE ({conflicts('t0')}) {extra}"
            f"AND NOT EXISTS (SELECT 1 FROM {pre} AS p WHERE {already});"
        )

    # The preimage holds rows a REPLACE may delete without firing DELETE triggers. Each
    # trigger only adds, and handles only the rows conflicting with its own new row, so the
    # writes of users' triggers nested inside a statement never disturb each other.
    conn.execute(
        f"""
        CREATE TRIGGER IF NOT EXISTS {trg["before_insert"]} BEFORE INSERT ON {t}
        WHEN EXISTS (SELECT 1 FROM {t} AS t0 WHERE {conflicts("t0")}) BEGIN
          {capture()}
        END;
        CREATE TRIGGER IF NOT EXISTS {trg["insert"]} AFTER INSERT ON {t} BEGIN
          INSERT INTO {target} VALUES ({row("new")}, 1);
        END;
        CREATE TRIGGER IF NOT EXISTS {trg["replaced_by_insert"]} AFTER INSERT ON {t}
        WHEN EXISTS (SELECT 1 FROM {pre}) BEGIN
          INSERT INTO {target} SELECT {row("p")}, -1 FROM {pre} AS p
            WHERE ({conflicts("p")}) AND ({gone} OR ({took_key}));
          DELETE FROM {pre} WHERE {conflicts("")};
        END;
        CREATE TRIGGER IF NOT EXISTS {trg["before_update"]} BEFORE UPDATE ON {t}
        WHEN EXISTS (SELECT 1 FROM {t} AS t0 WHERE ({conflicts("t0")}) AND NOT ({same("t0", "old")})) BEGIN
          {capture(f"AND NOT ({same('t0', 'old')}) ")}
        END;
        CREATE TRIGGER IF NOT EXISTS {trg["update"]} AFTER UPDATE ON {t} BEGIN
          INSERT INTO {target} VALUES ({row("old")}, -1);
          INSERT INTO {target} VALUES ({row("new")}, 1);
        END;
        CREATE TRIGGER IF NOT EXISTS {trg["replaced_by_update"]} AFTER UPDATE ON {t}
        WHEN EXISTS (SELECT 1 FROM {pre}) BEGIN
          INSERT INTO {target} SELECT {row("p")}, -1 FROM {pre} AS p
            WHERE ({conflicts("p")}) AND NOT ({same("p", "old")}) AND ({gone} OR ({took_key}));
          DELETE FROM {pre} WHERE ({conflicts("")}) AND NOT ({same("", "old")});
          DELETE FROM {pre} WHERE {same("", "old")} AND {row_gone};
          UPDATE {pre} SET {follow} WHERE {same("", "old")};
        END;
        CREATE TRIGGER IF NOT EXISTS {trg["delete"]} AFTER DELETE ON {t} BEGIN
          INSERT INTO {target} VALUES ({row("old")}, -1);
        END;
        CREATE TRIGGER IF NOT EXISTS {trg["deleted_preimage"]} AFTER DELETE ON {t}
        WHEN EXISTS (SELECT 1 FROM {pre}) BEGIN
          DELETE FROM {pre} WHERE {same_values};
        END;
        """
    )


def remove_capture(conn: apsw.Connection, table: str) -> None:
    """Drop the triggers and logs of `table` once no view reads it."""
    _drop_triggers(conn, table)
    with own_ddl(conn):
        conn.execute(f"DROP TABLE IF EXISTS {quote(names.delta_table(table))}")
        conn.execute(f"DROP TABLE IF EXISTS {quote(names.preimage_table(table))}")


def missing_tables(conn: apsw.Connection, wanted: list[str]) -> list[str]:
    """Those of `wanted` (matview's tables) that are not in main (a damaged file)."""
    marks = ", ".join("?" * len(wanted))
    found = {
        names.fold(str(name))
        for (name,) in conn.execute(
            f"SELECT name FROM main.sqlite_master WHERE type = 'table' AND name COLLATE NOCASE IN ({marks})", wanted
        )
    }
    return [name for name in wanted if names.fold(name) not in found]


def missing_capture_tables(conn: apsw.Connection, table: str) -> list[str]:
    """The delta log and preimage table of `table` that are gone while its triggers stay:
    every write of `table` then fails in SQLite (the triggers name them), and the deltas not
    yet folded are lost."""
    return missing_tables(conn, [names.delta_table(table), names.preimage_table(table)])


def captured_tables(conn: apsw.Connection) -> list[str]:
    """The main tables with a capture trigger of matview's on them."""
    event = CAPTURE_EVENTS[0]
    return [
        str(table)
        for name, table in conn.execute("SELECT name, tbl_name FROM main.sqlite_master WHERE type = 'trigger'")
        if fold(str(name)) == fold(names.trigger(str(table), event))
    ]


def capture_installed(conn: apsw.Connection, table: str) -> bool:
    """True when every capture trigger of `table` exists on it (a DROP TABLE removes them; an
    `ALTER TABLE … RENAME TO` by another client takes them to the renamed table)."""
    wanted = [names.trigger(table, e) for e in CAPTURE_EVENTS]
    marks = ", ".join("?" * len(wanted))
    found = scalar(
        conn,
        f"SELECT count(*) FROM main.sqlite_master WHERE type = 'trigger' AND name COLLATE NOCASE IN ({marks}) "
        f"AND tbl_name = ? COLLATE NOCASE",
        (*wanted, table),
    )
    return bool(found == len(wanted))


def capture_is_stale(conn: apsw.Connection, table: TableInfo) -> bool:
    """Whether `table`'s delta log mirrors other columns than the table has now (another
    connection added, renamed or retyped one): its triggers log the old column list, so a view
    over the new one would miss its changes."""
    logged = [
        (names.fold(str(row[1])), str(row[2]).upper())
        for row in conn.execute("SELECT * FROM pragma_table_info(?)", (names.delta_table(table.name),))
    ][2:-1]  # (less the sequence number, the rowid and the weight)
    if logged != [(names.fold(c.name), c.decltype.upper()) for c in table.columns]:
        return True
    trigger = _before_insert_sql(conn, table.name)
    if trigger is not None and (_unprobed(table, trigger) is not None or _defaults_unprobed(table, trigger)):
        return True
    # a key collating a column otherwise than the column: triggers made before that was kept
    expected = recollated_keys(table)
    if not expected:
        return False
    return trigger is None or not all(fragment in trigger for fragment in expected)


def _conflict_keys(table: TableInfo) -> list[tuple[str, ...]]:
    """The keys a REPLACE may delete a row of `table` by: its rowid (or a WITHOUT ROWID table's
    primary key), then each unique key."""
    keys = [(ROWID_KEY,)] if table.has_rowid else [table.primary_key]
    return keys + [k for k in table.unique_keys if k not in keys]


def _before_insert_sql(conn: apsw.Connection, table: str) -> str | None:
    """The text of `table`'s BEFORE INSERT capture trigger (the one probing for conflicts)."""
    row = conn.execute(
        "SELECT sql FROM main.sqlite_master WHERE type = 'trigger' AND name = ? COLLATE NOCASE",
        (names.trigger(table, "before_insert"),),
    ).fetchone()
    return None if row is None else str(row[0])


def _collate(collation: str, declared: str) -> str:
    """` COLLATE <name>` where a key's index collates a column otherwise than the column declares
    (a built-in collation: a user's would be needed by every client writing the table to run the
    triggers, and the column's own then compares); "" where they agree (the column's compares)."""
    if not collation or collation == declared or collation not in ("BINARY", "NOCASE", "RTRIM"):
        return ""
    return f" COLLATE {collation}"


def _declared(table: TableInfo, column: str) -> str:
    """A key column's declared collation (a rowid: BINARY)."""
    found = table.column(column) if column != ROWID_KEY else None
    return found.collation.upper() if found is not None else "BINARY"


def recollated_keys(table: TableInfo) -> list[str]:
    """The comparisons the triggers make where a unique key collates a column otherwise than the
    column declares (`… = new."b" COLLATE BINARY`): a capture installed before keys were
    compared so lacks them (`capture_is_stale`)."""
    found = []
    for key in (table.primary_key, *table.unique_keys):
        for column, collation in zip(key, table.key_collations(key), strict=False):
            clause = _collate(collation, _declared(table, column))
            if clause and column != ROWID_KEY:
                found.append(f"= new.{quote(column)}{clause}")
    return found


@functools.lru_cache(maxsize=256)
def _probed_keys(trigger_sql: str) -> tuple[frozenset[str], ...] | None:
    """The keys a BEFORE INSERT capture trigger probes for rows a REPLACE may delete: per OR'd
    term of its WHEN clause, the columns it compares with new's (folded); None where the text is
    not as matview writes it. (Cached by text: every view over a table asks at each catalog load.)"""
    tokens = tokenize(trigger_sql)
    when = next((i for i, t in enumerate(tokens) if t.kind == TokenType.WHEN), len(tokens))
    start = next((i + 1 for i in range(when, len(tokens)) if tokens[i].kind == TokenType.WHERE), len(tokens))
    end = next((i for i in range(start, len(tokens)) if tokens[i].text.upper() == "BEGIN"), len(tokens))
    if end == len(tokens) or tokens[end - 1].kind != TokenType.R_PAREN:
        return None
    condition = tokens[start : end - 1]  # (less the EXISTS' closing parenthesis)
    groups: list[set[str]] = [set()]
    for index, (token, depth) in enumerate(zip(condition, depth_walk(condition))):
        if depth == 0 and token.kind == TokenType.OR:
            groups.append(set())
        elif token.text.lower() == "new" and index + 2 < len(condition) and condition[index + 1].kind == TokenType.DOT:
            groups[-1].add(names.fold(condition[index + 2].text))
    return tuple(frozenset(g) for g in groups) if all(groups) else None


def unprobed_key(conn: apsw.Connection, table: TableInfo) -> tuple[str, ...] | None:
    """A unique key of `table` its capture triggers do not probe (a UNIQUE index made after
    them): a REPLACE that deletes a row through it would go unlogged."""
    trigger = _before_insert_sql(conn, table.name)
    return None if trigger is None else _unprobed(table, trigger)


def _unprobed(table: TableInfo, trigger: str) -> tuple[str, ...] | None:
    """The first key of `table` the BEFORE INSERT trigger `trigger` does not probe. A key is
    probed where the trigger compares a part of it (equal on the key, a row is equal on that part)."""
    probed = _probed_keys(trigger)
    if probed is None:
        return None
    for key in _conflict_keys(table):
        # (an INTEGER PRIMARY KEY is the rowid, which the triggers probe under its own name)
        columns = {names.fold(table.rowid_name if c in (ROWID_KEY, table.ipk) else c) for c in key}
        if not any(group <= columns for group in probed):
            return key
    return None


def follow_new_keys(conn: apsw.Connection, tables: list[str]) -> None:
    """Re-make the capture triggers of those `tables` that gained a unique key since (a CREATE
    UNIQUE INDEX this connection just ran: no write came between, so no view missed a row)."""
    for name in tables:
        if not capture_installed(conn, name):
            continue
        try:
            info = read_table(conn, name)
        except Error:
            continue  # (the views over it say why at their next look: `view_health.view_problem`)
        if capture_is_stale(conn, info):  # (a new key, or a key collating a column otherwise)
            _drop_triggers(conn, name)
            install_capture(conn, info)


def _drop_triggers(conn: apsw.Connection, table: str) -> None:
    with own_ddl(conn):
        for event in CAPTURE_EVENTS:
            conn.execute(f"DROP TRIGGER IF EXISTS main.{quote(names.trigger(table, event))}")


def _defaults_unprobed(table: TableInfo, trigger: str) -> bool:
    """Whether the BEFORE INSERT trigger `trigger` was made before a key column's NOT NULL
    DEFAULT was probed (`coalesce(new.k, default)`, which REPLACE stores for a NULL)."""
    keyed = {c for key in (table.primary_key, *table.unique_keys) for c in key}
    return any(column in keyed for column, _default in table.null_defaults) and "coalesce(new." not in trigger
