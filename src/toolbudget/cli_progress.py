"""A progress bar on stderr for the commands that can take minutes.

``replay``, ``inspect``, ``compact`` of many bodies and ``convert --all``
report each step done to a :class:`Bar`. It draws nothing until the work has
taken :data:`DELAY` seconds, so a quick command prints exactly what it always
did, and nothing at all when stderr is not a terminal, so a log or a pipe
never fills with control codes. It writes only to stderr: stdout is the same
bytes with and without it.

``--progress always`` (a hidden option, for tests and for terminals a
program cannot recognise) draws it from the first step; ``never`` never
does. Needs ``rich``, part of the ``cli`` extra.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any

import click

DELAY = 1.0
"""Seconds a command runs before its bar appears."""

MODES = ("auto", "always", "never")


def progress_option(func: Any) -> Any:
    """The hidden ``--progress`` option of the commands that draw a bar."""
    return click.option(
        "--progress",
        "progress_mode",
        type=click.Choice(MODES),
        default="auto",
        hidden=True,
        help="Draw a progress bar on stderr: auto (a terminal, after a second), always, never.",
    )(func)


class Bar:
    """Counts steps of one command and draws them with an ETA once it is worth it."""

    def __init__(self, label: str, mode: str = "auto") -> None:
        self.label = label
        self.mode = mode
        self.enabled = mode == "always" or (mode == "auto" and _stderr_is_terminal())
        self.started = time.monotonic()
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> Bar:
        if self.mode == "always":
            self._show()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def update(self, done: int, total: int, label: str | None = None) -> None:
        """``done`` of ``total`` steps are finished (``label``: what is being worked on now)."""
        if not self.enabled:
            return
        if self._progress is None:
            if time.monotonic() - self.started < DELAY:
                return
            self._show()
        self._progress.update(
            self._task, completed=done, total=max(total, 1), description=label or self.label
        )

    def _show(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        console = Console(file=sys.stderr, force_terminal=self.mode == "always" or None)
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._task = self._progress.add_task(self.label, total=None)
        self._progress.start()


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
