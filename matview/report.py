"""What the `matview` command and shell print: rich tables, verify results, progress bars,
and the same as JSON-ready data (`--json`)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

import apsw
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from matview.api import Connection
from matview.errors import Error
from matview.progress import Progress as StatementProgress

console = Console()
errors = Console(stderr=True)


def console_on(stream: IO[str]) -> Console:
    """A console writing to `stream` (the shell's own output; apsw may wrap the terminal's
    stream, so whether it is a terminal is asked of the process's own streams too)."""
    terminal = getattr(stream, "isatty", lambda: False)() or (sys.stdout.isatty() and sys.stderr.isatty())
    return Console(file=stream, force_terminal=terminal)


def views_data(conn: Connection) -> list[dict[str, Any]]:
    return [
        {"name": v.name, "maintenance": v.maintenance, "pending": v.pending(), "columns": v.columns, "sql": v.sql}
        for v in conn.views()
    ]


def views_table(conn: Connection) -> Table:
    table = Table("view", "mode", "pending", "columns", "SELECT")
    for view in views_data(conn):
        table.add_row(view["name"], view["maintenance"], str(view["pending"]), ", ".join(view["columns"]), view["sql"])
    return table


def verify(conn: Connection, names: list[str]) -> list[tuple[str, bool, str | None]]:
    """(view, matches its SELECT, the error that stopped the check) for the named views, or
    every view: a damaged view is a finding, and the others are checked too."""
    results: list[tuple[str, bool, str | None]] = []
    damaged = [d.name for d in conn.registry.damaged.values()]  # (its reads raise why)
    for name in names or [*(v.name for v in conn.views()), *damaged]:
        try:
            results.append((name, conn.view(name).verify(), None))
        except (Error, apsw.Error) as exc:
            results.append((name, False, str(exc)))
    return results


def verdict(name: str, ok: bool, error: str | None) -> str:
    """One line of a verify report, as rich markup."""
    if error is not None:
        return f"{escape(name)}: [red]ERROR[/red] {escape(error)}"
    return f"{escape(name)}: {'[green]ok[/green]' if ok else '[red]DIFFERS from its SELECT[/red]'}"


#: seconds a statement runs before its bar appears (quick ones show none)
BAR_DELAY = 0.3


@contextmanager
def progress_bar(conn: Connection, console: Console = errors, what: str = "working") -> Iterator[None]:
    """A pulsing bar (SQLite cannot tell how much is left) with the work done and the time,
    while the statements of the block run, once they have run for BAR_DELAY seconds."""
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[work]}"))
    bar = Progress(*columns, TimeElapsedColumn(), console=console, transient=True)
    task = bar.add_task(what, total=None, work="")
    shown = False

    def update(report: StatementProgress) -> None:
        nonlocal shown
        if not shown and report.elapsed >= BAR_DELAY:
            bar.start()
            shown = True
        bar.update(task, description=report.what, work=f"{report.steps / 1e6:.1f}M steps")

    try:
        with conn.progress(update):
            yield
    finally:
        if shown:
            bar.stop()
