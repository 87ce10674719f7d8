"""Every exception fsm_stage raises on purpose; catch ``UserError`` for every user mistake.

``UserError``: a mistake in what a user gave (the CLI prints one line, exit 1, no traceback).
``LogWriteError``: an append that did not happen (the log is unchanged). ``ReviewError``: every
review condition. The rest are misuse of the API, tools and models. The tree (builtin mix-ins
in brackets)::

    FsmStageError
    ├── UserError
    │   ├── ConfigError
    │   ├── LogFormatError
    │   ├── LogLockedError
    │   ├── GraphChangedError
    │   ├── InputFileError
    │   ├── RecordShapeError [ValueError]
    │   ├── HandoffPathError
    │   ├── PromptTemplateError
    │   └── SimulationError
    ├── LogWriteError
    │   ├── AppendConflictError
    │   ├── ClaimLostError
    │   ├── LockFileError [also UserError]
    │   └── DatabaseError [also UserError]
    ├── ReviewError
    │   ├── ReviewSuspended
    │   ├── ReviewPending
    │   ├── ReviewDismissed
    │   ├── ReviewNotFoundError [also UserError]
    │   ├── ReviewAlreadyAnsweredError [also UserError]
    │   ├── ReviewRefusedError [also UserError]
    │   └── ReviewPayloadChangedError [also UserError]
    ├── ControllerClosedError [RuntimeError]
    ├── DriverStateError [RuntimeError]
    │   └── TurnSuspendedError
    ├── BudgetStoppedError [RuntimeError]
    ├── UnknownStageError [ValueError]
    ├── ToolFailure
    └── ModelError

Private signals caught inside fsm_stage, never raised to callers: ``_LogLineDefect`` (log
reader), ``_NotPlainYaml`` (YAML fast path), ``_TypeProblem`` (strict structuring),
``_SeqTakenSignal`` (PostgreSQL store), ``_ReviewBusy`` (a review of that kind is open).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

__all__ = [
    "PROJECTION_UNAVAILABLE_MESSAGE",
    "AppendConflictError",
    "BudgetStoppedError",
    "ClaimLostError",
    "ConfigError",
    "ControllerClosedError",
    "DatabaseError",
    "DriverStateError",
    "FsmStageError",
    "GraphChangedError",
    "HandoffPathError",
    "InputFileError",
    "LockFileError",
    "LogFormatError",
    "LogLockedError",
    "LogWriteError",
    "ModelError",
    "PromptTemplateError",
    "RecordShapeError",
    "ReviewAlreadyAnsweredError",
    "ReviewDismissed",
    "ReviewError",
    "ReviewNotFoundError",
    "ReviewPayloadChangedError",
    "ReviewPending",
    "ReviewRefusedError",
    "ReviewSuspended",
    "SimulationError",
    "ToolFailure",
    "TurnSuspendedError",
    "UnknownStageError",
    "UserError",
]

PROJECTION_UNAVAILABLE_MESSAGE: Final = "the stage projection is not registered (stage switch closed)"
"""Message of ``ControllerClosedError`` (S97)."""


class FsmStageError(Exception):
    """Base class of every exception fsm_stage raises on purpose."""


class UserError(FsmStageError):
    """A mistake in user input. ``str(err)`` is the complete one-line (or few-line) message."""


class ConfigError(UserError):
    """A stage-graph file (or its ``plan_mode`` section, B1–B3, B5) or a simulator scenario
    file is invalid.

    ``problems`` holds every problem as one line, positioned ones formatted as
    ``PATH:LINE:COLUMN: KEY: what is wrong and what is expected``; ``details`` the items given
    (the loader's structured ``fsm_stage.config.Problem`` objects, or the strings). A single
    string is one problem.
    """

    def __init__(self, problems: str | Sequence[Any]) -> None:
        items = [problems] if isinstance(problems, str) else list(problems)
        self.details = tuple(items)
        self.problems = [str(p) for p in items]
        super().__init__("\n".join(self.problems))


class LogFormatError(UserError):
    """A session log cannot be read or opened: not a session log, a newer version, corruption;
    a damaged line with lines after it (opening it for writing would cut them: run
    ``JsonlLog.repair(path)`` / ``fsm-stage repair LOG``); a database without the fsm_stage
    schema, or an older or newer one (``fsm-stage db init`` / upgrade fsm_stage). One line."""


class LogWriteError(FsmStageError):
    """An append to a session log failed or was refused before writing (an invalid event, a
    surface op that cannot apply to the current surface); the log is unchanged (rolled back
    to its previous length). One-line message."""


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


class ReviewError(FsmStageError):
    """The root of every review condition: a review that waits (``ReviewSuspended``,
    ``ReviewPending``), was dismissed (``ReviewDismissed``), cannot be answered as asked (the
    ``UserError``s below), or cannot be put to a human at all (bare ``ReviewError``: fsm_stage
    never approves on the human's behalf)."""


class ReviewSuspended(ReviewError):
    """Raised by a ``ReviewChannel.ask`` that will not answer now: the review stays open in the
    log and the host answers it later (``answer_review``), in this process or another."""


class ReviewPending(ReviewError):
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


class ReviewNotFoundError(ReviewError, UserError):
    """No review with that id in the session log."""


class ReviewAlreadyAnsweredError(ReviewError, UserError):
    """The review was answered already (by this or another process); nothing was applied twice."""


class ReviewRefusedError(ReviewError, UserError):
    """An answer the review's rules do not allow (a reviewer who is not an approver, the
    session's requester under ``not_requester``, a wrong token, an expired review, a second vote);
    nothing was written. For a second vote ``voted_before`` is True, ``votes`` holds the approvals
    that count so far and ``needed`` the quorum; otherwise False, ``()`` and 0."""

    voted_before: bool = False
    votes: tuple[str, ...] = ()
    needed: int = 0


class ReviewPayloadChangedError(ReviewError, UserError):
    """What the reviewer would approve (plan text, or handoff document plus target) no longer
    hashes to the review request's ``payloadSha256``."""


class GraphChangedError(UserError):
    """The session log records a different stage-graph fingerprint than the graph in use;
    pass ``accept_graph_change=True`` to record the new one."""






class ControllerClosedError(FsmStageError, RuntimeError):
    """A closed controller (plan mode, the stage switch) was asked to attach, select or read.

    Both controllers raise it the same way after ``close()``: ``set`` (a selection would never
    be flushed), ``attach`` and their state reads; the stage switch's reads say the stage
    projection is unavailable rather than fall back to the initial stage (S97). A
    ``RuntimeError``, so ``except RuntimeError`` still catches it. Message: one line naming the
    controller, e.g. ``"this plan-mode controller is closed: build and attach a new one"``.
    """

    def __init__(self, what: str, message: str | None = None) -> None:
        super().__init__(message or f"this {what} is closed: build and attach a new one")


class SimulationError(UserError):
    """The scenario cannot be run as written (e.g. a model step with no turn to answer in).

    The message is one line starting with the scenario position ``FILE:LINE:COL``.
    """


class PromptTemplateError(UserError):
    """A template does not compile, uses an undefined variable, or breaks the sandbox; or a
    wording catalog file is missing, is not valid YAML, or does not have the expected shape.

    ``str(err)`` is one line naming where the template came from (``origin``) and what is wrong.
    """




class HandoffPathError(UserError):
    """A handoff path would leave the session cwd, or crosses a symlink it must not cross."""


class DriverStateError(FsmStageError, RuntimeError):
    """A step-driver method (``StagedSession``) was called out of order: ``begin_step`` with no
    open turn, ``record_reply`` twice in a step, ``end_turn`` with an open step, ... Nothing
    was written."""


class BudgetStoppedError(FsmStageError, RuntimeError):
    """A stage or plan-mode budget ran out before a framework adapter's step
    (``StageHost.step``; docs/stage-models.md, "Budgets"): the turn was ended ``blocked`` and no
    model was asked. ``str(err)`` is the one-line reason (``budget of stage verify ran out:
    turns 3/3``, and under ``on_budget: review`` the review it waits for); ``review_id`` is
    that budget review (answer it with ``StageHost.answer(review_id, True, option=...)`` and
    run again), None under ``on_budget: stop``. A ``RuntimeError``, as the adapters raised
    before it existed."""

    def __init__(self, reason: str, review_id: str | None = None) -> None:
        super().__init__(reason)
        self.review_id = review_id


class TurnSuspendedError(DriverStateError):
    """The open turn has suspended tool calls (``call_ids``, bound to ``review_ids``; ``answered``
    per call: its review has an answer): answer the reviews and ``resume()``, or ``cancel()``. A
    call of the host's own tools whose review is answered waits for the host: ``authorize`` it,
    run it, ``record_tool_result``. ``turn``: the open turn."""

    def __init__(self, turn: int | None, review_ids: tuple[str, ...] | list[str],
                 call_ids: tuple[str, ...] | list[str], answered: tuple[bool, ...] | list[bool] = ()) -> None:
        self.turn = turn
        self.review_ids = tuple(review_ids)
        self.call_ids = tuple(call_ids)
        self.answered = tuple(answered) or (False,) * len(self.call_ids)
        rows = list(zip(self.review_ids, self.call_ids, self.answered, strict=False))
        waiting = [(r, c) for r, c, a in rows if not a]
        done = [c for _r, c, a in rows if a]
        parts = []
        if waiting:
            parts.append(f"review {', '.join(r for r, _c in waiting)} awaits an answer (tool call "
                         f"{', '.join(c for _r, c in waiting)}); answer it and call resume()")
        if done:
            parts.append(f"tool call {', '.join(done)} has its review answered: resume() settles it, or, "
                         "for a tool you run yourself, authorize(call), run it and record_tool_result")
        super().__init__(f"turn {turn} is suspended: {'; '.join(parts)}; or cancel()")


class RecordShapeError(UserError, ValueError):
    """What a host asked to record (a reply, a tool call, a tool result, a ``turn/end`` reason
    to the step driver; a review outcome or option to ``answer_review``) is malformed, or an
    event violates an installed invariant (e.g. a ``plan/mode`` whose ``active`` is not a
    boolean, B107: raised at installation for existing logs, at ``track`` and on append); the
    message names the field. Nothing was written."""




class InputFileError(UserError):
    """A user-named input file cannot be read. The message names the path and the reason."""


class UnknownStageError(FsmStageError, ValueError):
    """A cursor or jump names a stage the compiled graph does not have.

    Not a ``UserError``: controllers validate user input (``/stage``) before calling; a log
    folded from an older graph is handled by the controller (e.g. by jumping).
    """




class LockFileError(LogWriteError, UserError):
    """The log's lock file cannot be created (the folder refuses new files, permissions, a
    read-only file system): a ``LogWriteError`` for ``JsonlLog`` callers and a one-line
    ``UserError`` for the CLI — never reported as another writer holding the lock."""




class DatabaseError(LogWriteError, UserError):
    """A PostgreSQL store operation failed: one line naming the store (password redacted) and
    the server's reason. A ``LogWriteError`` for append callers, a ``UserError`` for the CLI.

    ``transient`` (bool): True when the server cannot be reached or dropped the connection
    during the call (a restart, a network fault): retry later (the CLI exits 75,
    ``EX_TEMPFAIL``; an append that failed so may have committed, the next call shows it).
    False when the server refused the statement or the schema is half-made: the same call
    fails the same way until someone changes something (the CLI exits 1)."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class ModelError(FsmStageError):
    """A failed model request; the loop may retry it within the same step."""


class ReviewDismissed(ReviewError):
    """The user closed the review without deciding, to type a message instead (B85).

    ``interrupted`` is ``True`` when the user pressed Ctrl-C at the terminal review (still a
    dismissal; a CLI may exit 130).
    """

    def __init__(self, *args: object, interrupted: bool = False) -> None:
        super().__init__(*args)
        self.interrupted = interrupted


class ToolFailure(FsmStageError):
    """Raised by ``Tool.execute`` to fail the call; ``message`` is what the model reads
    (after the ``Error: `` prefix)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _ReviewBusy(FsmStageError):
    """A review of this kind is open or approved-unredeemed; ``text`` is the tool failure."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class _LogLineDefect(FsmStageError):
    """Internal signal of the log reader, never raised to callers: a bad line, a torn tail when no
    later ``turn/end`` exists, else corruption."""


class _NotPlainYaml(FsmStageError):
    """Internal signal of the YAML fast path, never raised to callers: the document uses something
    only the pure round-trip path handles (or reports)."""


class _TypeProblem(FsmStageError, TypeError):
    """Internal signal of strict structuring (cattrs reports it positioned): a value of the wrong
    type; the message says what was expected."""


class ClaimLostError(LogWriteError):
    """A fleet driver's append was refused because another driver claimed the session since
    (a ``fsm/fleet/claim`` with a higher epoch is in the log), or because this driver never
    claimed it. Nothing was written; the driver must stop (the newer claim drives)."""


class _SeqTakenSignal(FsmStageError):
    """Internal signal of the PostgreSQL store, never raised to callers: another writer took the
    seq a batch was built for (nothing was written)."""
