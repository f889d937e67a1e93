"""The `matview` command: inspect and maintain the views of a SQLite file.

matview views DB [--json]                 list views, their mode and pending deltas
matview explain DB VIEW [--format F]      the view's circuit: tree, json, dot, svg or png
matview verify DB [VIEW…] [--json]        compare views with their SELECT re-run (exit 1 on mismatch)
matview refresh DB VIEW                   rebuild a view from scratch (progress bar; Ctrl-C changes nothing)
matview flush DB                          fold every pending delta now
matview sql DB "SQL"                      run SQL (CREATE MATERIALIZED VIEW … works) and print rows
matview shell DB                          apsw's interactive shell with the views' dot-commands
matview backfill DB --table T=PATH …      bulk-load tables with Spark and backfill views (matview[spark])

Exit codes: 0 success; 1 `verify` found a view that differs from its SELECT; 2 an error
(bad arguments, no such view, SQL error, a file that cannot be opened); 130 interrupted
(Ctrl-C: a CREATE or REFRESH in progress is rolled back, the file is unchanged).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import apsw

from matview import report
from matview.api import Connection, connect
from matview.errors import Error
from matview.names import fold, quote
from matview_ext import statements

EXIT_OK, EXIT_DIFFERS, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


def _views(conn: Connection, args: argparse.Namespace) -> int:
    if args.json:
        _print_json(report.views_data(conn))
    else:
        report.console.print(report.views_table(conn))
    return EXIT_OK


def _explain(conn: Connection, args: argparse.Namespace) -> int:
    from matview import explain

    view = conn.view(args.view)
    image_format = "json" if args.json else args.format
    if image_format == "tree":
        report.console.print(explain.as_tree(view.circuit()))
        return EXIT_OK
    if image_format in ("json", "dot"):
        text = view.explain(image_format)
        if args.output:
            Path(args.output).write_text(text + "\n", encoding="utf-8")
        else:
            print(text)
        return EXIT_OK
    try:
        picture = explain.render_image(view.circuit(), image_format)
    except Exception as exc:  # graphviz.ExecutableNotFound, a missing package
        raise Error(f"cannot draw the picture ({exc}); install Graphviz: apt-get install graphviz") from exc
    if args.output:
        Path(args.output).write_bytes(picture)
    else:
        sys.stdout.buffer.write(picture)
    return EXIT_OK


def _verify(conn: Connection, args: argparse.Namespace) -> int:
    known = {fold(view.name) for view in conn.views()}
    missing = [name for name in args.views or [] if fold(name) not in known]
    if missing:
        report.console.print(f"no such materialized view: {missing[0]}")
        return EXIT_ERROR
    results = report.verify(conn, args.views)
    if args.json:
        _print_json([{"view": name, "ok": ok, "error": error} for name, ok, error in results])
    else:
        for result in results:
            report.console.print(report.verdict(*result))
    return EXIT_OK if all(ok for _, ok, _ in results) else EXIT_DIFFERS


def _refresh(conn: Connection, args: argparse.Namespace) -> int:
    with report.progress_bar(conn):
        conn.execute(f"REFRESH MATERIALIZED VIEW {quote(args.view)}")
    return EXIT_OK


def _flush(conn: Connection, _args: argparse.Namespace) -> int:
    conn.flush()
    return EXIT_OK


def _sql(conn: Connection, args: argparse.Namespace) -> int:
    if statements.parse_materialized(args.sql) is not None:
        with report.progress_bar(conn):
            rows = list(conn.execute(args.sql))
    else:
        rows = list(conn.execute(args.sql))
    for row in rows:
        print("|".join("" if v is None else str(v) for v in row))
    return EXIT_OK


def _shell(conn: Connection, _args: argparse.Namespace) -> int:
    from matview import shell

    return shell.run(conn)


Handler = Callable[[Connection, argparse.Namespace], int]

#: name, handler, one-line help, positional arguments after DB ("*": any number), --json
COMMANDS: tuple[tuple[str, Handler, str, tuple[str, ...], bool], ...] = (
    ("views", _views, "list the materialized views: mode, pending deltas, columns, SELECT", (), True),
    (
        "explain",
        _explain,
        "a view's circuit (operators, rules, state, pending): tree or picture",
        ("view",),
        True,
    ),
    ("verify", _verify, "compare views with their SELECT re-run now (exit 1 if one differs)", ("views*",), True),
    (
        "refresh",
        _refresh,
        "rebuild a view from scratch (Ctrl-C leaves the file unchanged)",
        ("view",),
        False,
    ),
    ("flush", _flush, "fold every pending delta of every view now", (), False),
    ("sql", _sql, "run SQL (CREATE MATERIALIZED VIEW … works) and print the rows", ("sql",), False),
    (
        "shell",
        _shell,
        "interactive shell: .views .explain .verify .refresh .flush .pending …",
        (),
        False,
    ),
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="matview",
        description="Materialized views for SQLite files.",
        epilog="exit codes: 0 ok, 1 verify found a difference, 2 error, 130 interrupted (nothing changed)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, handler, help_text, extra, has_json in COMMANDS:
        command = sub.add_parser(name, help=help_text, description=help_text)
        command.add_argument("db", metavar="DB", help="the SQLite file")
        for arg in extra:
            if arg.endswith("*"):
                command.add_argument(arg[:-1], nargs="*", metavar="VIEW", help="views (default: all)")
            else:
                command.add_argument(arg, metavar=arg.upper())
        if has_json:
            command.add_argument("--json", action="store_true", help="machine-readable output")
        if name == "explain":
            command.add_argument(
                "--format", choices=("tree", "json", "dot", "svg", "png"), default="tree", help="default: tree"
            )
            command.add_argument("-o", "--output", help="write to this file instead of stdout")
        command.set_defaults(handler=handler)
    backfill = sub.add_parser(
        "backfill",
        help="bulk-load tables with Spark and backfill their views (needs matview[spark])",
        description="bulk-load tables with Spark and backfill their views",
    )
    _spark_arguments(backfill)
    backfill.set_defaults(handler=None)
    return parser


def _spark_arguments(parser: argparse.ArgumentParser) -> None:
    """The backfill's arguments; its module (and PySpark) is imported only when it runs."""
    from matview.spark.cli import add_arguments

    add_arguments(parser)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)  # exits 2 on bad arguments
    try:
        if args.command == "backfill":
            from matview.spark.cli import run

            return run(args)
        conn = connect(args.db)
        try:
            return int(args.handler(conn, args))
        finally:
            conn.close()
    except KeyboardInterrupt:
        report.errors.print("[yellow]interrupted: nothing was changed[/yellow]")
        return EXIT_INTERRUPTED
    except (Error, apsw.Error) as exc:
        report.errors.print(f"[red]error:[/red] {exc}", markup=True, highlight=False)
        return EXIT_ERROR
    except (TypeError, ValueError, KeyError, IndexError) as exc:
        # (what a file whose matview tables another client damaged can raise deep inside: said
        # in one line, as an error, with `verify`'s and REFRESH's way out)
        report.errors.print(
            f"[red]error:[/red] {type(exc).__name__}: {exc} (is the file damaged? `matview verify`, REFRESH)",
            markup=True,
            highlight=False,
        )
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
