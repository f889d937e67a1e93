"""The catalog: which views exist in a file, their plans and their progress.

Created and upgraded by the numbered steps of ``migrations/``: ``NNN_*.sql`` files run as
SQL; ``NNN_*.py`` modules, for work SQL alone cannot do (one step per view), run their
``upgrade(conn)``. The file's format version lives in ``__dbsp_meta``; a file written by a
newer matview is refused rather than misread.
"""

from __future__ import annotations

import datetime
import functools
import importlib
import importlib.util
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import apsw
from sqlglot.tokens import TokenType

from matview import names
from matview.errors import CatalogError
from matview.names import fold, quote
from matview.plan import PLAN_FORMAT, Plan
from matview.sql.sqltext import tokenize
from matview.storage.codec import pack, unpack

#: 1: the view is a virtual table main.<v>; 2: a plain view main.<v> (read by any client),
#: shadowed on matview connections by a temp virtual table; 3: a partition-recompute view keeps
#: its rows per root in a table (`kept_rows`), no longer as msgpack state
FORMAT_VERSION = 3
_MIGRATION_NAME = re.compile(r"^(\d+)_.*\.(sql|py)$")
Step = Callable[[apsw.Connection], None]


@dataclass
class ViewEntry:
    name: str
    sql: str
    plan: Plan
    maintenance: str  # "immediate" | "deferred"
    base_tables: list[str]


@dataclass(frozen=True)
class DamagedEntry:
    """A view whose catalog entry cannot be read: reads of it raise `reason` until REFRESH
    (which compiles its SELECT again, where `sql` survived) or DROP."""

    name: str
    sql: str | None
    maintenance: str | None
    reason: str
    base_tables: list[str]  # (as far as they can be read: the DDL guard keeps them)


def _sql_step(text: str) -> Step:
    def run(conn: apsw.Connection) -> None:
        conn.execute(text)

    return run


def _python_step(name: str, path: Path | None) -> Step:
    """The `upgrade` function of migration module `name` (from the installed package
    ``matview_migrations``, or from `path` in a source checkout)."""
    module: ModuleType
    if path is None:
        module = importlib.import_module(f"matview_migrations.{name}")
    else:
        spec = importlib.util.spec_from_file_location(f"matview_migrations_{name}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return cast(Step, module.upgrade)


#: the migrations beside this package in a source checkout; they win over an installed
#: ``matview_migrations``, which may belong to another checkout of matview
_SOURCE_MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"


@functools.cache
def _migrations() -> list[tuple[int, Step]]:
    """The migration steps, in order: (format version they bring the file to, step)."""
    found: list[tuple[int, str, Step]] = []
    if (_SOURCE_MIGRATIONS / "001_catalog.sql").is_file():
        for path in _SOURCE_MIGRATIONS.iterdir():
            match = _MIGRATION_NAME.match(path.name)
            if match:
                step = _sql_step(path.read_text()) if match.group(2) == "sql" else _python_step(path.stem, path)
                found.append((int(match.group(1)), path.name, step))
    else:
        for entry in resources.files("matview_migrations").iterdir():
            match = _MIGRATION_NAME.match(entry.name)
            if match:
                sql = match.group(2) == "sql"
                step = _sql_step(entry.read_text()) if sql else _python_step(entry.name[:-3], None)
                found.append((int(match.group(1)), entry.name, step))
    numbers = [number for number, _, _ in found]
    if len(set(numbers)) != len(numbers):
        raise CatalogError(f"two migrations share a number: {sorted(name for _, name, _ in found)}")
    return [(number, step) for number, _, step in sorted(found, key=lambda item: item[0])]


def has_catalog(conn: apsw.Connection) -> bool:
    """Whether the file has matview's catalog (a CatalogError when its catalog table stands
    without its meta table: another client dropped it, and the views would silently go stale)."""
    found = {
        str(row[0])
        for row in conn.execute(
            "SELECT name FROM main.sqlite_master WHERE type = 'table' AND name IN (?, ?)", (names.META, names.CATALOG)
        )
    }
    if names.CATALOG in found and names.META not in found:
        raise CatalogError(f"matview catalog is corrupt: {names.CATALOG} stands without {names.META}")
    return names.META in found


def file_version(conn: apsw.Connection) -> int:
    if not has_catalog(conn):
        return 0
    try:
        row = conn.execute(f"SELECT value FROM {quote(names.META)} WHERE key='format_version'").fetchone()
    except apsw.SQLError as exc:
        raise CatalogError(f"matview catalog is corrupt: {exc}") from None
    if row is None or not isinstance(row[0], int):
        raise CatalogError("matview catalog is corrupt: no format_version in __dbsp_meta")
    return int(row[0])


def check_version(conn: apsw.Connection) -> int:
    version = file_version(conn)
    if version > FORMAT_VERSION:
        raise CatalogError(
            f"this database's materialized views were written by a newer matview (catalog format {version}, "
            f"this matview reads up to {FORMAT_VERSION}); upgrade matview to use them"
        )
    return version


def ensure_catalog(conn: apsw.Connection) -> None:
    """Create or upgrade the catalog; call inside a transaction (and on a matview
    connection: a step may need the module registered)."""
    version = check_version(conn)
    for number, step in _migrations():
        if number > version:
            step(conn)
            conn.execute(
                f"INSERT OR REPLACE INTO {quote(names.META)} (key, value) VALUES ('format_version', ?)", (number,)
            )


def upgrade(conn: apsw.Connection) -> bool:
    """Bring a file written by an older matview to this format, in a transaction of its own,
    when this connection can write now. A read-only connection (or one that finds the file
    busy, or is inside a transaction) reads the older format as it is; a later connection
    upgrades it. True when the file was upgraded."""
    version = check_version(conn)
    if version in (0, FORMAT_VERSION) or conn.readonly("main") or not conn.get_autocommit():
        return False
    try:
        conn.execute("BEGIN IMMEDIATE")
    except (apsw.BusyError, apsw.ReadOnlyError):
        return False
    try:
        ensure_catalog(conn)  # re-reads the version: another connection may have upgraded first
        conn.execute("COMMIT")
    except BaseException:
        if not conn.get_autocommit():
            conn.execute("ROLLBACK")
        raise
    return True


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def load_views(conn: apsw.Connection) -> dict[str, ViewEntry]:
    """Every view in the file whose catalog entry can be read, by lower-cased name."""
    return load_catalog(conn)[0]


def load_catalog(conn: apsw.Connection) -> tuple[dict[str, ViewEntry], dict[str, DamagedEntry]]:
    """Every view in the file, by lower-cased name: those whose entry can be read, and those
    whose entry is damaged (another client's edit), which block no other view."""
    if check_version(conn) == 0:
        return {}, {}
    views: dict[str, ViewEntry] = {}
    damaged: dict[str, DamagedEntry] = {}
    try:
        rows = cast(
            list[Any],
            conn.execute(
                f"SELECT name, sql, plan, format, maintenance, base_tables FROM {quote(names.CATALOG)}"
            ).fetchall(),
        )
    except apsw.SQLError as exc:
        raise CatalogError(f"matview catalog is corrupt: {exc}") from None
    for name, sql, plan_blob, plan_format, maintenance, base_blob in rows:
        if not isinstance(name, str) or not name:
            continue  # (a row that names no view: its view, if any, is found below without one)
        if type(plan_format) is int and plan_format > PLAN_FORMAT:
            raise CatalogError(f"view {name} was compiled by a newer matview (plan format {plan_format})")
        try:
            if type(plan_format) is not int:
                raise ValueError(f"its plan format is {plan_format!r}")
            data = unpack(plan_blob)
            _refuse_statement_separators(data)
            plan = Plan.from_dict(data)
            _refuse_unknown_placeholders(plan)
            base_tables = _names(base_blob)
            if base_tables is None:
                raise ValueError("its base tables are not all names")
            if not isinstance(sql, str) or maintenance not in ("immediate", "deferred"):
                raise ValueError("its SELECT or maintenance mode is not readable")
        except Exception as exc:
            reason = f"matview catalog entry of view {name} is corrupt: {exc}"
            damaged[fold(name)] = DamagedEntry(
                name,
                sql if isinstance(sql, str) else None,
                maintenance if isinstance(maintenance, str) else None,
                reason,
                _names(base_blob) or [],
            )
            continue
        views[fold(name)] = ViewEntry(name, sql, plan, maintenance, base_tables)
    for key, entry in list(views.items()):
        problem = _base_tables_problem(entry, views)
        if problem is not None:
            del views[key]
            bad = f"matview catalog entry of view {entry.name} is corrupt: {problem}"
            damaged[key] = DamagedEntry(entry.name, entry.sql, entry.maintenance, bad, entry.base_tables)
    for name in _views_without_entry(conn, {*views, *damaged}):
        reason = f"materialized view {name} has no matview catalog entry (another client deleted or renamed it)"
        damaged[fold(name)] = DamagedEntry(name, None, None, reason, [])
    return views, damaged


def _base_tables_problem(entry: ViewEntry, views: dict[str, ViewEntry]) -> str | None:
    """Why a view's base-table list is not the one CREATE stores (its plan's tables and those
    of the views it reads: `lifecycle.create_view`), or None; a list another client edited
    would make folds read the wrong delta logs, or none."""
    wanted = {fold(t) for t in entry.plan.base_tables}
    for upstream in entry.plan.upstream_views:
        found = views.get(fold(upstream))
        if found is None:
            return None  # (a view it reads is damaged or gone: the view says so itself)
        wanted |= {fold(t) for t in found.base_tables}
    listed = {fold(t) for t in entry.base_tables}
    if listed == wanted:
        return None
    missing, extra = sorted(wanted - listed), sorted(listed - wanted)
    return "its base tables " + "; ".join(
        [*([f"do not list {', '.join(missing)}"] if missing else []), *([f"list {', '.join(extra)}"] if extra else [])]
    )


def _names(blob: Any) -> list[str] | None:
    """A stored list of table names (None: not one)."""
    try:
        found = unpack(blob)
    except Exception:
        return None
    if not isinstance(found, (list, tuple)) or not all(isinstance(name, str) for name in found):
        return None
    return list(found)


def _views_without_entry(conn: apsw.Connection, known: set[str]) -> list[str]:
    """The views whose plain view (`readable.plain_view_sql`: it reads `__dbsp_view_<name>`)
    stands in main but whose catalog row is gone."""
    found = []
    tables = {fold(str(t)) for (t,) in conn.execute("SELECT name FROM main.sqlite_master WHERE type = 'table'")}
    for name, sql in conn.execute(
        "SELECT name, sql FROM main.sqlite_master WHERE type = 'view' AND instr(sql, '\"__dbsp_s\"') > 0"
    ):
        if not isinstance(name, str) or fold(name) in known or fold(names.view_table(name)) not in tables:
            continue
        # (as `plain_view_sql` writes it: a user's view that only mentions such text is theirs)
        head = f"CREATE VIEW {quote(name)} AS SELECT "  # (SQLite keeps no `main.` in the text)
        body = f" FROM {quote(names.view_table(name))} AS {quote('__dbsp_s')} WHERE {quote(names.WEIGHT)} = 1"
        if str(sql).startswith(head) and body in str(sql):
            found.append(name)
    return found


#: the plan's fields that hold pieces of the user's SQL, run as they are (names are quoted)
_SQL_FRAGMENTS = ("stage1", "post_exprs", "having", "outer_on", "from_template", "subquery_reach", "reach_filter")


_PLACEHOLDER = re.compile(r"^(source\d+|weight\d*|outer|reach)$")


def _refuse_unknown_placeholders(plan: Plan) -> None:
    """Every placeholder of the plan's templates is one `render` fills (a damaged blob may
    name another, which would fail every statement of the file with a KeyError)."""
    templates = [plan.stage1, plan.from_template, *(reach.template for reach in plan.subquery_reach)]
    templates += [template for reach in plan.subquery_reach if reach.value is not None for template in reach.value]
    for template in templates:
        for placeholder in template[1::2]:
            if not _PLACEHOLDER.match(placeholder):
                raise ValueError(f"unknown placeholder {placeholder!r}")


def _refuse_statement_separators(plan: dict[str, Any]) -> None:
    """A stored plan holds pieces of one SQL statement each; a `;` outside a literal in one
    (a file edited by hand or by an attacker) would make apsw run a statement of its own."""
    for name in _SQL_FRAGMENTS:
        _refuse_separators_in(plan.get(name))


def _refuse_separators_in(value: Any) -> None:
    if isinstance(value, str):
        if ";" in value and any(t.kind == TokenType.SEMICOLON for t in tokenize(value)):
            raise ValueError(f"a plan fragment holds a second statement: {value[-60:]!r}")
    elif isinstance(value, list | tuple):
        for item in value:
            _refuse_separators_in(item)


def save_view(conn: apsw.Connection, entry: ViewEntry) -> None:
    now = _now()
    conn.execute(
        f"INSERT INTO {quote(names.CATALOG)} (name, sql, plan, format, maintenance, base_tables, created_at, "
        "refreshed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            entry.name,
            entry.sql,
            pack(entry.plan.to_dict()),
            entry.plan.format,
            entry.maintenance,
            pack(entry.base_tables),
            now,
            now,
        ),
    )


def update_plan(conn: apsw.Connection, name: str, plan: Plan) -> None:
    """Store a recompiled plan (REFRESH) and the time of the refresh."""
    conn.execute(
        f"UPDATE {quote(names.CATALOG)} SET plan = ?, format = ?, refreshed_at = ? WHERE name = ?",
        (pack(plan.to_dict()), plan.format, _now(), name),
    )


def delete_view(conn: apsw.Connection, name: str) -> None:
    conn.execute(f"DELETE FROM {quote(names.CATALOG)} WHERE name = ?", (name,))
    conn.execute(f"DELETE FROM {quote(names.PROGRESS)} WHERE view = ?", (name,))


def get_progress(conn: apsw.Connection, view: str, table: str) -> int:
    row = conn.execute(
        f"SELECT seq FROM {quote(names.PROGRESS)} WHERE view = ? AND base_table = ?", (view, table)
    ).fetchone()
    return int(row[0]) if row else 0


def set_progress(conn: apsw.Connection, view: str, table: str, seq: int) -> None:
    conn.execute(
        f"INSERT INTO {quote(names.PROGRESS)} (view, base_table, seq) VALUES (?, ?, ?) "
        "ON CONFLICT (view, base_table) DO UPDATE SET seq = excluded.seq",
        (view, table, seq),
    )
