"""The `matview` command: inspect and maintain the views of a SQLite file.

matview views DB              list views, their mode and pending deltas
matview explain DB VIEW       the compiled plan
matview verify DB [VIEW…]     compare views with their SELECT re-run (exit 1 on mismatch)
matview refresh DB VIEW       rebuild a view from scratch
matview flush DB              fold every pending delta now
matview sql DB "SQL"          run SQL (CREATE MATERIALIZED VIEW … works) and print rows
matview shell DB              apsw's interactive shell with matview installed (.views, .verify)
matview backfill DB --table T=PATH …   bulk-load tables with Spark and backfill views (matview[spark])
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import apsw
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from matview.api import Connection, connect
from matview.errors import Error
from matview_ext import statements

console = Console()


def _views(conn: Connection, _args: argparse.Namespace) -> int:
    table = Table("view", "mode", "pending", "columns", "SELECT")
    for view in conn.views():
        table.add_row(view.name, view.maintenance, str(view.pending()), ", ".join(view.columns), view.sql)
    console.print(table)
    return 0


def _explain(conn: Connection, args: argparse.Namespace) -> int:
    console.print(conn.view(args.view).explain(), markup=False)
    return 0


def _verify(conn: Connection, args: argparse.Namespace) -> int:
    names = args.views or [v.name for v in conn.views()]
    failed = 0
    for name in names:
        try:
            ok = conn.view(name).verify()
        except (Error, apsw.Error) as exc:  # a damaged view is a finding, and the others are checked too
            failed += 1
            console.print(f"{escape(name)}: [red]ERROR[/red] {escape(str(exc))}")
            continue
        failed += not ok
        console.print(f"{escape(name)}: {'[green]ok[/green]' if ok else '[red]DIFFERS from its SELECT[/red]'}")
    return 1 if failed else 0


def _refresh(conn: Connection, args: argparse.Namespace) -> int:
    conn.execute(f'REFRESH MATERIALIZED VIEW "{args.view.replace(chr(34), chr(34) * 2)}"')
    return 0


def _flush(conn: Connection, _args: argparse.Namespace) -> int:
    conn.flush()
    return 0


def _sql(conn: Connection, args: argparse.Namespace) -> int:
    for row in conn.execute(args.sql):
        print("|".join("" if v is None else str(v) for v in row))
    return 0


def _shell(conn: Connection, args: argparse.Namespace) -> int:
    import apsw.shell

    class MatviewShell(apsw.shell.Shell):  # type: ignore[misc]
        """apsw's shell; SQL runs through the matview connection, plus .views and .verify."""

        def process_sql(
            self, sql: str, bindings: object = None, internal: bool = False, summary: object = None
        ) -> None:
            # DDL goes through the connection (CREATE/DROP/REFRESH MATERIALIZED VIEW, indexes on
            # views, refusing DROP VIEW/TABLE of a materialized view); everything else runs after
            # the connection caught up with views other connections created or dropped, so the
            # shell reads each view through its exact temp shadow
            if not internal and statements.first_word(sql) in ("CREATE", "DROP", "ALTER", "REFRESH"):
                try:
                    rows = conn.execute(sql)
                    for row in rows:
                        self.write(self.stdout, "|".join(str(v) for v in row) + "\n")
                except Error as exc:
                    self.write_error(f"{exc}\n")
                return
            if not internal:
                conn.registry.sync_shadows()
            super().process_sql(sql, bindings, internal, summary)

        def command_views(self, cmd: list[str]) -> None:
            """views: list materialized views"""
            _views(conn, args)

        def command_verify(self, cmd: list[str]) -> None:
            """verify [VIEW…]: compare views with their SELECT"""
            _verify(conn, argparse.Namespace(views=cmd))

    MatviewShell(db=conn.apsw).cmdloop()
    return 0


def _spark_arguments(parser: argparse.ArgumentParser) -> None:
    """The backfill's arguments; its module (and PySpark) is imported only when it runs."""
    from matview.spark.cli import add_arguments

    add_arguments(parser)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="matview", description="Materialized views for SQLite files")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, handler, extra in (
        ("views", _views, ()),
        ("explain", _explain, ("view",)),
        ("verify", _verify, ("views*",)),
        ("refresh", _refresh, ("view",)),
        ("flush", _flush, ()),
        ("sql", _sql, ("sql",)),
        ("shell", _shell, ()),
    ):
        command = sub.add_parser(name)
        command.add_argument("db")
        for arg in extra:
            if arg.endswith("*"):
                command.add_argument(arg[:-1], nargs="*")
            else:
                command.add_argument(arg)
        command.set_defaults(handler=handler)
    backfill = sub.add_parser("backfill", help="bulk-load tables with Spark and backfill their views")
    _spark_arguments(backfill)
    backfill.set_defaults(handler=None)
    args = parser.parse_args(argv)
    try:
        if args.command == "backfill":
            from matview.spark.cli import run

            return run(args)
        conn = connect(args.db)
        try:
            return int(args.handler(conn, args))
        finally:
            conn.close()
    except Error as exc:
        console.print(f"[red]error:[/red] {exc}", markup=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
