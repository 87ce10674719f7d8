"""Every exception fsm_stage raises on purpose; catch ``UserError`` for every user mistake.

``UserError``: a mistake in what a user gave (the CLI prints one line, exit 1, no traceback).
``LogWriteError``: an append that did not happen (the log is unchanged; caused by an ``OSError``,
the CLI reports it in one line too). The rest are protocol signals or misuse. The tree::

    FsmStageError
    ├── UserError: ConfigError (InvalidConfigError, PlanModeConfigError, ScenarioError),
    │   LogFormatError (DamagedLogError), LogLockedError, ReviewError (ReviewNotFoundError,
    │   ReviewAlreadyAnsweredError, ReviewPayloadChangedError), GraphChangedError, DiagramError,
    │   SimulationError, PromptTemplateError, CatalogError, HandoffPathError, RecordShapeError,
    │   InputFileError, SchemaVersionError, UnknownSessionError, LockFileError, DatabaseError
    ├── LogWriteError: AppendConflictError, InvalidEventError, SurfaceOpError, LockFileError,
    │   DatabaseError (DatabaseUnavailableError: transient, retry later)
    ├── reviews: ReviewSuspended, ReviewPending, ReviewBusy, ReviewDismissed (ReviewInterrupted),
    │   ReviewUnavailableError
    ├── misuse: ControllerClosedError (ProjectionUnavailableError), DriverStateError
    │   (TurnSuspendedError), InvariantError, UnknownStageError
    ├── tools and models: ToolFailure, ModelError
    └── internal signals (never reach callers): LogLineDefect, NotPlainYaml, TypeProblem,
        SeqTakenSignal
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

PROJECTION_UNAVAILABLE_MESSAGE: Final = "the stage projection is not registered (stage switch closed)"
"""Message of ``ProjectionUnavailableError`` (S97)."""


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


class AppendConflictError(LogWriteError):
    """A conditional append lost: the log's last seq is no longer the one the writer folded from.

    ``expected`` is the seq the writer saw (``-1`` for an empty log), ``actual`` the log's last
    seq now. Nothing was written; re-fold (``refresh()``) and decide again.
    """

    def __init__(self, expected: int, actual: int, message: str | None = None) -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(message or f"append conflict: expected the log to end at seq {expected}, "
                                    f"it ends at seq {actual}; re-read the log and retry")


class ReviewSuspended(FsmStageError):
    """Raised by a ``ReviewChannel.ask`` that will not answer now: the review stays open in the
    log and the host answers it later (``answer_review``), in this process or another."""


class ReviewPending(FsmStageError):
    """A tool call whose review was suspended: the call stays open (no ``tool/result``) until
    the host answers review ``review_id`` and resumes the call.

    ``review_id`` (``rv_…``), ``call_id`` (the model's tool-call id) and ``kind``
    (``"plan"`` or ``"stage"``). Map it to your framework's interrupt.
    """

    def __init__(self, review_id: str, call_id: str, kind: str) -> None:
        self.review_id = review_id
        self.call_id = call_id
        self.kind = kind
        super().__init__(f"review {review_id} ({kind}) for tool call {call_id} awaits a human answer")


class ReviewError(UserError):
    """A review cannot be answered as asked (base of the review answer errors)."""


class ReviewNotFoundError(ReviewError):
    """No review with that id in the session log."""


class ReviewAlreadyAnsweredError(ReviewError):
    """The review was answered already (by this or another process); nothing was applied twice."""


class ReviewPayloadChangedError(ReviewError):
    """What the reviewer would approve (plan text, or handoff document plus target) no longer
    hashes to the review request's ``payloadSha256``."""


class GraphChangedError(UserError):
    """The session log records a different stage-graph fingerprint than the graph in use;
    pass ``accept_graph_change=True`` to record the new one."""


class InvalidEventError(LogWriteError):
    """An event a writer refuses before writing (the log is unchanged). One-line message."""


class SurfaceOpError(LogWriteError):
    """A surface op that cannot apply to the current surface (append refused, log unchanged).

    Raised by ``Surface.check``/``Surface.apply``; ``JsonlLog``/``MemoryLog`` raise it from
    ``append`` before anything is written.
    """


class ControllerClosedError(FsmStageError, RuntimeError):
    """A closed controller (plan mode, the stage switch) was asked to attach, select or read.

    Both controllers raise it the same way after ``close()``: ``set`` (a selection would never
    be flushed), ``attach`` and their state reads. The stage switch's reads raise its subclass
    ``ProjectionUnavailableError`` (S97). A ``RuntimeError``, so ``except RuntimeError`` still
    catches it. Message: one line naming the controller, e.g. ``"this plan-mode controller is
    closed: build and attach a new one"``.
    """

    def __init__(self, what: str) -> None:
        super().__init__(f"this {what} is closed: build and attach a new one")


class InvariantError(FsmStageError):
    """An event violates an installed invariant (e.g. a ``plan/mode`` whose ``active`` is not a
    boolean, B107). Raised at installation (existing logs), at ``track`` and on append."""


class DiagramError(UserError):
    """A diagram cannot be produced: nothing to draw, or a renderer piece is missing."""


class SimulationError(UserError):
    """The scenario cannot be run as written (e.g. a model step with no turn to answer in).

    The message is one line starting with the scenario position ``FILE:LINE:COL``.
    """


class PromptTemplateError(UserError):
    """A template does not compile, uses an undefined variable, or breaks the sandbox.

    ``str(err)`` is one line naming where the template came from (``origin``) and what is wrong.
    """


class CatalogError(UserError):
    """A catalog file is missing, is not valid YAML, or does not have the expected shape."""


class HandoffPathError(UserError):
    """A handoff path would leave the session cwd, or crosses a symlink it must not cross."""


class DriverStateError(FsmStageError, RuntimeError):
    """A step-driver method (``StagedSession``) was called out of order: ``begin_step`` with no
    open turn, ``record_reply`` twice in a step, ``end_turn`` with an open step, ... Nothing
    was written."""


class TurnSuspendedError(DriverStateError):
    """The open turn waits for a review (a suspended tool call): answer ``review_ids`` and
    ``resume()``, or ``cancel()``. ``turn``; ``call_ids`` are the suspended calls."""

    def __init__(self, turn: int | None, review_ids: tuple[str, ...] | list[str],
                 call_ids: tuple[str, ...] | list[str]) -> None:
        self.turn = turn
        self.review_ids = tuple(review_ids)
        self.call_ids = tuple(call_ids)
        super().__init__(
            f"turn {turn} is suspended: review {', '.join(self.review_ids)} awaits an answer "
            f"(tool call {', '.join(self.call_ids)}); answer it and call resume(), or cancel()")


class RecordShapeError(UserError, ValueError):
    """What a host asked the step driver to record (a reply, a tool call, a tool result, a
    ``turn/end`` reason) is malformed; the message names the field. Nothing was written."""


class InvalidConfigError(ConfigError):
    """``ConfigError`` raised by the loader; ``details`` holds the structured problems.

    ``problems`` (inherited) are their one-line strings, in the same order.
    """

    def __init__(self, details: Sequence[Any]) -> None:
        self.details = tuple(details)
        super().__init__([str(p) for p in details])


class InputFileError(UserError):
    """A user-named input file cannot be read. The message names the path and the reason."""


class UnknownStageError(FsmStageError, ValueError):
    """A cursor or jump names a stage the compiled graph does not have.

    Not a ``UserError``: controllers validate user input (``/stage``) before calling; a log
    folded from an older graph is handled by the controller (e.g. by jumping).
    """


class DamagedLogError(LogFormatError):
    """A log has a damaged line with lines after it: opening it for writing would cut them,
    so it is refused until ``JsonlLog.repair(path)`` (``fsm-stage repair LOG``)."""


class LockFileError(LogWriteError, UserError):
    """The log's lock file cannot be created (the folder refuses new files, permissions, a
    read-only file system): a ``LogWriteError`` for ``JsonlLog`` callers and a one-line
    ``UserError`` for the CLI — never reported as another writer holding the lock."""


class SchemaVersionError(UserError):
    """The database has no fsm_stage schema, an older one (run ``fsm-stage db init``) or a newer
    one than this fsm_stage understands (upgrade fsm_stage). One-line message."""


class DatabaseError(LogWriteError, UserError):
    """A PostgreSQL store operation failed in the database (a statement the server refused, a
    half-made schema): one line naming the store (password redacted) and the server's reason.
    A ``LogWriteError`` for append callers, a ``UserError`` for the CLI (exit 1). ``transient``
    is False: the same call fails the same way until someone changes something."""

    transient = False


class DatabaseUnavailableError(DatabaseError):
    """The PostgreSQL server cannot be reached, or dropped the connection during the call (a
    restart, a network fault). ``transient`` is True: retry later (the CLI exits 75,
    ``EX_TEMPFAIL``). An append that fails so may have committed: the next call shows it."""

    transient = True


class ReviewUnavailableError(FsmStageError):
    """The client cannot put a question to a human; fsm_stage never approves on its behalf."""


class UnknownSessionError(UserError):
    """A tool call named a session handle the server was not started with."""


class PlanModeConfigError(ConfigError):
    """The plan-mode config is invalid (B1–B3, B5); ``str(err)`` is one line."""

    def __init__(self, message: str) -> None:
        super().__init__([message])


class ModelError(FsmStageError):
    """A failed model request; the loop may retry it within the same step."""


class ReviewDismissed(FsmStageError):
    """The user closed the review without deciding, to type a message instead (B85)."""


class ReviewInterrupted(ReviewDismissed):
    """The user pressed Ctrl-C at the terminal review (a dismissal; callers may exit 130)."""


class ToolFailure(FsmStageError):
    """Raised by ``Tool.execute`` to fail the call; ``message`` is what the model reads
    (after the ``Error: `` prefix)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ScenarioError(ConfigError):
    """A scenario file is invalid (a ``ConfigError``, so the CLI prints it like a stage-graph
    file's problems: one bare ``PATH:LINE:COLUMN: KEY: message`` line each, exit 1).

    ``details``: the positioned problems (``fsm_stage.config.Problem``, from the config
    loader's ``ProblemReport``); ``problems``: their one-line forms.
    """

    def __init__(self, details: Sequence[Any]) -> None:
        self.details = tuple(details)
        super().__init__([str(p) for p in self.details])


class ProjectionUnavailableError(ControllerClosedError):
    """The stage projection is not available (the controller was closed): reads fail loudly
    rather than falling back to the initial stage (S97). A ``ControllerClosedError``, the error
    plan mode's reads raise after ``close()`` too."""

    def __init__(self, message: str = PROJECTION_UNAVAILABLE_MESSAGE) -> None:
        Exception.__init__(self, message)


class ReviewBusy(FsmStageError):
    """A review of this kind is open or approved-unredeemed; ``text`` is the tool failure."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class LogLineDefect(FsmStageError):
    """Internal signal of the log reader, never raised to callers: a bad line, a torn tail when no
    later ``turn/end`` exists, else corruption."""


class NotPlainYaml(FsmStageError):
    """Internal signal of the YAML fast path, never raised to callers: the document uses something
    only the pure round-trip path handles (or reports)."""


class TypeProblem(FsmStageError, TypeError):
    """Internal signal of strict structuring (cattrs reports it positioned): a value of the wrong
    type; the message says what was expected."""


class SeqTakenSignal(FsmStageError):
    """Internal signal of the PostgreSQL store, never raised to callers: another writer took the
    seq a batch was built for (nothing was written)."""
