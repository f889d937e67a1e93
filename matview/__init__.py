"""matview: incrementally maintained, persisted materialized views for SQLite (DBSP)."""

from matview.api import Connection, ViewInfo, connect, install
from matview.errors import CatalogError, Error, SchemaChanged, UnsupportedQuery

__all__ = [
    "CatalogError",
    "Connection",
    "Error",
    "SchemaChanged",
    "UnsupportedQuery",
    "ViewInfo",
    "connect",
    "install",
]
__version__ = "0.1.0"
