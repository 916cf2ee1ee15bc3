"""A rich progress bar on stderr with a total, elapsed time and ETA, for commands that run for
more than a second (heatmap, reproduce). Shown on a terminal unless --quiet; elsewhere each step's
description becomes a log line instead: a note (`notes=True`, e.g. reproduce's steps) or a debug
line shown by --verbose."""

from __future__ import annotations

import logging
import sys
from typing import Any

from splitplan.cli._logging import note, progress_enabled


class StepProgress:
    """`add(n)` schedules work, `advance(n)` finishes it, `describe(text)` names the current step."""

    def __init__(self, label: str, *, notes: bool = False) -> None:
        self.label = label
        self.notes = notes
        self.total = 0
        self.done = 0
        self._bar: Any = None
        self._task: Any = None
        if progress_enabled():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.table import Column

            self._bar = Progress(
                # a long step name gives way first: counts, elapsed time and ETA stay whole
                TextColumn("{task.description}", table_column=Column(no_wrap=True, max_width=44)),
                BarColumn(bar_width=16),  # an 80-column line keeps its counts, times and ETA
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                console=Console(file=sys.stderr),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task(label, total=None)
            self._bar.refresh()  # drawn now: the refresh thread can wait long on a busy GIL (JIT)

    @property
    def visible(self) -> bool:
        """Whether a bar is drawn (a terminal, no --quiet): a caller skips work done only for it."""
        return self._bar is not None

    def add(self, total: int) -> None:
        self.total += int(total)
        if self._bar is not None:
            self._bar.update(self._task, total=self.total)

    def advance(self, n: int = 1) -> None:
        self.done += int(n)
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done)

    def runs(self, label: str) -> _Row | None:
        """A second row counting finer work (a reproduce step's DES runs), with its own total and
        ETA; None without a bar. `restart()` empties it for the next step."""
        if self._bar is None:
            return None
        return _Row(self._bar, self._bar.add_task(label, total=None))

    def describe(self, text: str) -> None:
        if self._bar is not None:
            self._bar.update(self._task, description=f"{self.label}: {text}")
            self._bar.refresh()
        elif self.notes:
            note(f"{self.label}: {text}")
        else:
            logging.getLogger("splitplan.cli").debug(f"{self.label}: {text}")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> StepProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Row:
    """A `ProgressSink` drawn as one more row of a StepProgress bar."""

    def __init__(self, bar: Any, task: Any) -> None:
        self._bar = bar
        self._task = task
        self.total = 0
        self.done = 0

    def add(self, total: int) -> None:
        self.total += int(total)
        self._bar.update(self._task, total=self.total)

    def advance(self, n: int = 1) -> None:
        self.done += int(n)
        self._bar.update(self._task, completed=self.done)

    def restart(self) -> None:
        self.total = self.done = 0
        self._bar.reset(self._task, total=None)
