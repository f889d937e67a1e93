"""The Spark pipeline: bulk-load base tables with PySpark and backfill materialized views.

Spark partitions, shuffles and combines; SQLite, run by matview's own code inside every task,
evaluates. The result is what a local ``CREATE MATERIALIZED VIEW`` stores. Needs
``pip install 'matview[spark]'`` and Java 17. Names are imported on first use, so that
``matview``'s CLI can offer ``backfill`` without importing pyarrow or PySpark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matview.spark.pipeline import MODES, Summary, ViewSummary, backfill
    from matview.spark.session import build_session, prepare_environment

__all__ = ["MODES", "Summary", "ViewSummary", "backfill", "build_session", "prepare_environment"]
_HOMES = {
    "MODES": "pipeline",
    "Summary": "pipeline",
    "ViewSummary": "pipeline",
    "backfill": "pipeline",
    "build_session": "session",
    "prepare_environment": "session",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'matview.spark' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"matview.spark.{_HOMES[name]}"), name)
