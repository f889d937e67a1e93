"""The Spark pipeline: bulk-load base tables with PySpark and backfill materialized views.

Spark partitions, shuffles and combines; SQLite, run by matview's own code inside every task,
evaluates. The result is what a local ``CREATE MATERIALIZED VIEW`` stores. Needs
``pip install 'matview[spark]'`` and Java 17.
"""

from matview.spark.backfill import MODES, Summary, ViewSummary, backfill
from matview.spark.session import build_session, prepare_environment

__all__ = ["MODES", "Summary", "ViewSummary", "backfill", "build_session", "prepare_environment"]
