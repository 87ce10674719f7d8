"""A phased progress bar on stderr for long commands (``fsm-stage state`` on a big log).

``Progress(total, label)`` is called with the absolute amount done so far (bytes read,
events folded); ``phase(label, total)`` finishes the current bar and starts the next phase,
so the bar covers the whole command (``reading log`` then ``folding``) instead of reaching
100% and going silent. Nothing is drawn unless the command has run for ``PROGRESS_AFTER_S``
and the stream is a terminal: redirected stderr stays clean. Use it as a context manager
(``with Progress(0) as progress:``): a command that finishes completes the bar (100%); one
that stops early (Ctrl-C, an error) leaves the bar where it stopped and only ends its line,
so an interrupted read never shows a finished bar.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

import click

PROGRESS_AFTER_S = 0.5
#: The escape click's bar writes when it finishes, to show the cursor it hid.
_SHOW_CURSOR = "\033[?25h"


class Progress:
    """Lazily shown, phased click progress bar (see the module docstring)."""

    def __init__(
        self,
        total: int,
        label: str = "reading log",
        *,
        file: TextIO | None = None,
        enabled: bool | None = None,
    ) -> None:
        self.file = sys.stderr if file is None else file
        self.enabled = self.file.isatty() if enabled is None else enabled
        self.t0 = time.monotonic()
        self.label = label
        self.total = max(total, 1)
        self.done = 0
        self.bar: Any = None
        self.shown: list[str] = []  #: labels of the phases drawn so far (for tests and callers)

    def __call__(self, done: int) -> None:
        """Report that ``done`` units of the current phase are complete (absolute, not a step)."""
        if not self.enabled:
            return
        if self.bar is None:
            if time.monotonic() - self.t0 < PROGRESS_AFTER_S:
                return
            self.bar = click.progressbar(length=self.total, label=self.label, file=self.file)
            self.bar.__enter__()
            self.shown.append(self.label)
        step = min(done, self.total) - self.done
        if step > 0:
            self.bar.update(step)
            self.done += step

    def phase(self, label: str, total: int) -> None:
        """Finish the current phase and start ``label`` with ``total`` units; it is drawn at
        once when an earlier phase was, else once the command has run ``PROGRESS_AFTER_S``."""
        self.close()
        self.bar, self.done, self.label, self.total = None, 0, label, max(total, 1)
        self(0)

    def close(self) -> None:
        """Complete and end the current bar (no-op when none was drawn)."""
        if self.bar is not None:
            self.bar.update(self.total - self.done)
            self.done = self.total
            self.bar.__exit__(None, None, None)
            self.bar = None

    def abandon(self) -> None:
        """End the current bar where it stands (never drawn at 100%): show the cursor again
        (click hides it while drawing) and end the line. No-op when no bar was drawn."""
        if self.bar is not None:
            self.bar = None
            self.file.write(_SHOW_CURSOR + "\n")
            self.file.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_exc: object) -> None:
        """``close()`` on success, ``abandon()`` when the block raised (Ctrl-C included)."""
        if exc_type is None:
            self.close()
        else:
            self.abandon()
