"""The catalog: which views exist in a file, their plans and their progress.

Created and upgraded by the numbered SQL files of ``migrations/``. The file's format
version lives in ``__dbsp_meta``; a file written by a newer matview is refused rather
than misread.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, cast

import apsw

from matview import names
from matview.codec import pack, unpack
from matview.errors import CatalogError
from matview.names import quote
from matview.plan import PLAN_FORMAT, Plan

FORMAT_VERSION = 1
_MIGRATION_NAME = re.compile(r"^(\d+)_.*\.sql$")


@dataclass
class ViewEntry:
    name: str
    sql: str
    plan: Plan
    maintenance: str  # "immediate" | "deferred"
    base_tables: list[str]


def _migrations() -> list[tuple[int, str]]:
    try:
        root = resources.files("matview_migrations")
        files = [(f.name, f.read_text()) for f in root.iterdir() if f.name.endswith(".sql")]
    except ModuleNotFoundError:  # running from a source checkout without installing
        root_path = Path(__file__).resolve().parent.parent / "migrations"
        files = [(p.name, p.read_text()) for p in root_path.glob("*.sql")]
    found = []
    for name, text in files:
        match = _MIGRATION_NAME.match(name)
        if match:
            found.append((int(match.group(1)), text))
    return sorted(found)


def has_catalog(conn: apsw.Connection) -> bool:
    return bool(
        conn.execute("SELECT 1 FROM main.sqlite_master WHERE type='table' AND name=?", (names.META,)).fetchone()
    )


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
    """Create or upgrade the catalog; call inside a transaction."""
    version = check_version(conn)
    for number, text in _migrations():
        if number > version:
            conn.execute(text)
            conn.execute(
                f"INSERT OR REPLACE INTO {quote(names.META)} (key, value) VALUES ('format_version', ?)", (number,)
            )


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def load_views(conn: apsw.Connection) -> dict[str, ViewEntry]:
    """Every view in the file, by lower-cased name."""
    if check_version(conn) == 0:
        return {}
    views: dict[str, ViewEntry] = {}
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
        if plan_format > PLAN_FORMAT:
            raise CatalogError(f"view {name} was compiled by a newer matview (plan format {plan_format})")
        try:
            plan = Plan.from_dict(unpack(plan_blob))
            base_tables = list(unpack(base_blob))
        except Exception as exc:
            raise CatalogError(f"matview catalog entry of view {name} is corrupt: {exc}") from None
        views[name.lower()] = ViewEntry(name, sql, plan, maintenance, base_tables)
    return views


def save_view(conn: apsw.Connection, entry: ViewEntry) -> None:
    now = _now()
    conn.execute(
        f"INSERT INTO {quote(names.CATALOG)} (name, sql, plan, format, maintenance, base_tables, created_at, "
        "refreshed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            entry.name,
            entry.sql,
            pack(entry.plan.to_dict()),
            PLAN_FORMAT,
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
        (pack(plan.to_dict()), PLAN_FORMAT, _now(), name),
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
