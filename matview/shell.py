"""`matview shell DB`: apsw's interactive shell on a matview connection, with dot-commands
for the views (.views, .explain, .verify, .refresh, .flush, .pending, .create-view).

Every statement typed runs through the matview `Connection`, so writes are folded into
the views like any other matview write, and CREATE/DROP/REFRESH MATERIALIZED VIEW work.
Tab completes view names after the view commands (and wherever apsw completes tables).
"""

from __future__ import annotations

from typing import Any

import apsw
import apsw.shell

from matview import report
from matview.api import Connection
from matview.errors import Error
from matview.names import quote
from matview_ext import statements

#: dot-commands whose arguments are view names
_VIEW_COMMANDS = ("explain", "verify", "refresh", "pending")
#: statements apsw's shell runs itself (its output modes); everything else goes through the connection
_READS = ("SELECT", "WITH", "VALUES", "PRAGMA", "EXPLAIN")


class MatviewShell(apsw.shell.Shell):  # type: ignore[misc]
    """apsw's shell; SQL runs through the matview connection, plus the views' dot-commands."""

    def __init__(self, conn: Connection, **kwargs: Any) -> None:
        self.matview = conn
        super().__init__(db=conn.apsw, **kwargs)

    # -- SQL --------------------------------------------------------------------------
    def process_sql(self, sql: str, bindings: object = None, internal: bool = False, summary: object = None) -> None:
        if internal:
            super().process_sql(sql, bindings, internal, summary)
            return
        # Statements matview handles (MATERIALIZED VIEW DDL, indexes on views, DROP/ALTER checks)
        # and writes (folded before they commit) go through the connection; reads run in apsw's
        # shell (its output modes) after the connection caught up with others' changes.
        word = statements.first_word(sql)
        if word not in _READS:
            self._through_connection(sql, bindings)
            return
        if word in ("SELECT", "WITH") and self.matview.apsw.get_autocommit():
            self.matview.execute("SELECT 1").fetchall()  # folds others' commits, delivers feeds
        self.matview.registry.sync_shadows()
        super().process_sql(sql, bindings, internal, summary)

    def _through_connection(self, sql: str, bindings: object) -> None:
        try:
            if statements.parse_materialized(sql) is not None:
                with report.progress_bar(self.matview, what=statements.first_word(sql).lower()):
                    rows = list(self.matview.execute(sql, bindings))  # type: ignore[arg-type]
            else:
                rows = list(self.matview.execute(sql, bindings))  # type: ignore[arg-type]
        except (Error, apsw.Error) as exc:
            self.write_error(f"{exc}\n")
            return
        for row in rows:
            self.write(self.stdout, "|".join("" if v is None else str(v) for v in row) + "\n")

    # -- dot-commands -----------------------------------------------------------------
    def _print(self, renderable: Any) -> None:
        report.console_on(self.stdout).print(renderable)

    def command_views(self, cmd: list[str]) -> None:
        """views: list the materialized views (mode, pending deltas, SELECT)"""
        self._print(report.views_table(self.matview))

    def command_explain(self, cmd: list[str]) -> None:
        """explain VIEW: the view's circuit as a tree (operators, rules, state sizes, pending)"""
        if len(cmd) != 1:
            raise self.Error("usage: .explain VIEW")
        from matview import explain

        self._print(explain.as_tree(self._view(cmd[0]).circuit()))

    def command_verify(self, cmd: list[str]) -> None:
        """verify ?VIEW ...?: compare views with their SELECT re-run now"""
        for result in report.verify(self.matview, cmd):
            self._print(report.verdict(*result))

    def command_refresh(self, cmd: list[str]) -> None:
        """refresh VIEW: rebuild the view from scratch (Ctrl-C leaves it unchanged)"""
        if len(cmd) != 1:
            raise self.Error("usage: .refresh VIEW")
        self._through_connection(f"REFRESH MATERIALIZED VIEW {quote(self._view(cmd[0]).name)}", None)

    def command_flush(self, cmd: list[str]) -> None:
        """flush: fold every pending delta of every view now"""
        self.matview.flush()

    def command_pending(self, cmd: list[str]) -> None:
        """pending ?VIEW ...?: delta rows waiting to be folded, per view"""
        views = [self._view(name) for name in cmd] or self.matview.views()
        for view in views:
            self.write(self.stdout, f"{view.name}: {view.pending()}\n")

    def command_create_view(self, cmd: list[str]) -> None:
        """create-view NAME AS SELECT ...: create a materialized view (immediate maintenance)"""
        if len(cmd) < 3 or cmd[1].upper() != "AS":
            raise self.Error("usage: .create-view NAME AS SELECT ...")
        self._through_connection(f"CREATE MATERIALIZED VIEW {quote(cmd[0])} AS {' '.join(cmd[2:])}", None)

    def command_help(self, cmd: list[str]) -> None:
        """help ?COMMAND?: list the commands, or explain one (``.help all``: every one)"""
        super().command_help([word.replace("-", "_") for word in cmd])

    def command_json(self, cmd: list[str]) -> None:
        """json VIEW: the view's circuit as JSON"""
        if len(cmd) != 1:
            raise self.Error("usage: .json VIEW")
        self.write(self.stdout, self._view(cmd[0]).explain("json") + "\n")

    def _view(self, name: str) -> Any:
        try:
            return self.matview.view(name)
        except Error as exc:
            raise self.Error(str(exc)) from exc

    def process_command(self, command: str) -> None:
        # apsw splits a command's arguments like a shell would (quotes removed): the SELECT
        # of .create-view must reach SQLite as typed
        head, _, rest = command.strip().partition(" ")
        if head == ".create-view":
            name, _, select = rest.strip().partition(" ")
            as_word, _, select = select.strip().partition(" ")
            self.command_create_view([name, as_word, select] if select else [name, as_word])
            return
        super().process_command(command)

    # -- completion -------------------------------------------------------------------
    def complete_command(self, line: str, token: str, beg: int, end: int) -> list[str]:
        words = line[:beg].split()
        if words and words[0].lstrip(".") in _VIEW_COMMANDS:
            return [name + " " for name in self._view_names() if name.lower().startswith(token.lower())]
        return list(super().complete_command(line, token, beg, end) or [])

    def complete_sql(self, line: str, token: str, beg: int, end: int) -> list[str]:
        found = list(super().complete_sql(line, token, beg, end) or [])
        views = [name for name in self._view_names() if name.lower().startswith(token.lower())]
        return found + [name for name in views if name not in found]

    def _view_names(self) -> list[str]:
        return [view.name for view in self.matview.views()]


def run(conn: Connection) -> int:
    """The interactive loop; returns the exit code."""
    MatviewShell(conn).cmdloop()
    return 0
