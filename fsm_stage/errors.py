"""Exception hierarchy shared by every layer.

``UserError`` subclasses are mistakes in what a user gave us (a bad YAML file, a log that is
not a session log, an unknown scenario step). The CLI prints them as one line and exits 1,
never with a traceback. Everything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class FsmStageError(Exception):
    """Base class of every exception fsm_stage raises on purpose."""


class UserError(FsmStageError):
    """A mistake in user input. ``str(err)`` is the complete one-line (or few-line) message."""


class ConfigError(UserError):
    """A stage-graph file is invalid.

    ``problems`` holds every positioned problem of the file, each already formatted as
    ``PATH:LINE:COLUMN: KEY: what is wrong and what is expected``.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class LogFormatError(UserError):
    """A session log cannot be read (not a session log, newer version, corruption)."""


class LogWriteError(FsmStageError):
    """An append to a session log failed; the log was rolled back to its previous length."""


class LogLockedError(UserError):
    """Another writer holds the session log's lock."""
