"""``matview backfill …`` and ``python -m matview.spark …`` (the form spark-submit runs).

matview backfill DB --table orders=data/orders/*.parquet --table customers=data/customers.csv
                 [--format parquet|csv|json] [--view NAME[=SELECT] … | --all-views]
                 [--master local[*]] [--spark-conf k=v …] [--mode create|replace|append]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from matview.errors import Error

console = Console()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("db", help="the SQLite file (created if absent)")
    parser.add_argument(
        "--table", action="append", default=[], metavar="NAME=PATH", help="a table and its source (path or glob)"
    )
    parser.add_argument("--format", choices=("parquet", "csv", "json"), help="the sources' format (else by name)")
    parser.add_argument(
        "--view", action="append", default=[], metavar="NAME[=SELECT]", help="an existing view, or one to create"
    )
    parser.add_argument("--all-views", action="store_true", help="rebuild every materialized view in the file")
    parser.add_argument("--master", default="local[*]", help="Spark master (ignored under spark-submit)")
    parser.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting")
    parser.add_argument("--mode", choices=("create", "replace", "append"), default="create")
    parser.add_argument("--staging", help="directory for part files (default: beside DB; shared on a cluster)")


def _pairs(items: Sequence[str], what: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise Error(f"{what} {item!r}: expected NAME=VALUE")
        found[name.strip()] = value.strip()
    return found


def run(args: argparse.Namespace) -> int:
    tables = _pairs(args.table, "--table")
    views: list[str | tuple[str, str]] = []
    for item in args.view:
        name, sep, sql = item.partition("=")
        views.append((name.strip(), sql.strip()) if sep else name.strip())
    conf = _pairs(args.spark_conf, "--spark-conf")
    if not tables:
        raise Error("give at least one --table NAME=PATH")
    console.print(
        f"matview backfill: {len(tables)} table(s) into {args.db} ({args.mode}) on Spark {args.master}; "
        "Spark's own log follows"
    )
    try:
        from matview.spark.pipeline import backfill
        from matview.spark.progress import stage_progress
        from matview.spark.session import build_session
    except ImportError as exc:
        raise Error(f"matview backfill needs pip install 'matview[spark]' ({exc})") from None

    spark = build_session(args.master, conf)
    with stage_progress(spark, console):
        summary = backfill(
            spark,
            args.db,
            tables,
            views=views,
            format=args.format,
            mode=args.mode,
            all_views=args.all_views,
            staging=args.staging,
        )
    print_summary(summary)
    return 0


def print_summary(summary: object) -> None:
    from matview.spark.pipeline import Summary

    assert isinstance(summary, Summary)
    seconds = summary.seconds or 1e-9
    tables = Table("table", "rows loaded", "rows/s (end to end)", title=f"backfill of {summary.db} ({summary.mode})")
    for name, rows in summary.tables.items():
        tables.add_row(name, f"{rows:,}", f"{rows / seconds:,.0f}")
    console.print(tables)
    views = Table("view", "computed", "view rows", "state rows", "ordered-state rows", "why local")
    for view in summary.views:
        views.add_row(
            view.name, view.where, f"{view.rows:,}", f"{view.state_rows:,}", f"{view.ordered_state_rows:,}", view.reason
        )
    if summary.views:
        console.print(views)
    phases = Table("phase", "seconds", "rows/s")
    for phase, spent in summary.phases.items():
        phases.add_row(phase, f"{spent:.2f}", f"{summary.rows_loaded / spent:,.0f}" if spent else "")
    phases.add_row("total", f"{summary.seconds:.2f}", f"{summary.rows_loaded / seconds:,.0f}")
    console.print(phases)
    console.print(f"{summary.partitions} Spark partition(s)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m matview.spark", description="Spark backfill of a SQLite file")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except Error as exc:
        console.print(f"[red]error:[/red] {exc}", markup=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
