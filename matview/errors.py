"""The exceptions matview raises. Every one is a `matview.Error`."""

from __future__ import annotations


class Error(Exception):
    """Base class of every error matview raises; the database is left intact and writable."""


class UnsupportedQuery(Error):
    """The SELECT cannot be maintained exactly; the message names the construct and where it is."""


class CatalogError(Error):
    """The catalog is missing, corrupt, or was written by a newer matview."""


class SchemaChanged(Error):
    """A base table a view depends on was dropped or altered; REFRESH or DROP the view."""
