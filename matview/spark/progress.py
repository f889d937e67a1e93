"""A rich progress bar per Spark stage, fed by Spark's status tracker (the CLI's view of the
cluster side; Spark's own console bar is off)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

#: seconds between two looks at the status tracker
POLL = 0.5


@contextmanager
def stage_progress(spark: Any, console: Console) -> Iterator[None]:
    """Show one bar per Spark stage (tasks done / total) while the block runs."""
    tracker = spark.sparkContext.statusTracker()
    done = threading.Event()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        bars: dict[int, Any] = {}

        def poll() -> None:
            while not done.wait(POLL):
                for stage in tracker.getActiveStageIds():
                    info = tracker.getStageInfo(stage)
                    if info is None:
                        continue
                    if stage not in bars:
                        bars[stage] = progress.add_task(f"stage {stage} {info.name[:40]}", total=info.numTasks)
                    progress.update(bars[stage], completed=info.numCompletedTasks, total=info.numTasks)
            for bar in bars.values():  # finished stages: full
                progress.update(bar, completed=progress.tasks[bar].total)

        watcher = threading.Thread(target=poll, daemon=True)
        watcher.start()
        try:
            yield
        finally:
            done.set()
            watcher.join()
