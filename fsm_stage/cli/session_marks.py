"""What a session log says to highlight in a diagram (``fsm-stage draw GRAPH --log LOG``).

``session_marks(arg)`` reads the log (``-``, pipes and FIFOs spooled, ``fsm_stage.cli.inputs``)
with ``read_log``, or a ``postgresql://…?session=ID`` location with ``read_postgres``, and
folds it with the same projections ``fsm-stage state`` uses: the current stage
(``StageProjection``; None without a stage record), plan mode (``PlanView``), the approved
pending transition and the one an open review asks about (the review fold, ``REVIEW_FOLD``).
Errors are the ``state`` command's one-liners.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fsm_stage.cli.inputs import display_name, shown_as, spooled
from fsm_stage.log.dsh import read_log
from fsm_stage.log.events import Event
from fsm_stage.log.projections import PlanView, StageProjection, fold
from fsm_stage.reviews._fold import REVIEW_FOLD, ReviewState, fold_reviews


@dataclass(frozen=True)
class SessionMarks:
    """The folded facts a diagram highlights: ``stage`` (None: no stage record), ``plan_active``
    and ``plan_pending`` (a plan-mode change requested, not yet applied), ``pending`` (a
    approved ``(source, target)`` transition applied at the next step, or None),
    ``reviewing`` (the transition an open review asks about, or None), the log's
    ``warnings`` (torn tail, unknown event types; each names the log as messages do) and the
    ``graph`` the session records running (``(name, "sha256:<hex>")`` of its last ``fsm/graph``
    event, or None)."""

    stage: str | None
    plan_active: bool
    plan_pending: bool
    pending: tuple[str, str] | None
    warnings: tuple[str, ...] = ()
    reviewing: tuple[str, str] | None = None
    graph: tuple[str, str] | None = None


def pending_transition(events: Sequence[Event], state: ReviewState | None = None) -> tuple[str, str] | None:
    """The approved, not yet applied stage transition ``(source, target)`` in ``events`` (the
    review fold's pending stage review, as ``fsm-stage state`` shows it), or None. ``state``:
    the review fold of ``events`` when the caller has it already. A budget review of the
    current stage visit answered "Move to X" and not yet applied is the move from the current
    stage to X, as the next boundary applies it (``reviews._visits.pending_move``)."""
    reviews = state if state is not None else fold(REVIEW_FOLD, events)
    record = reviews.pending("stage")
    if record is not None:
        return record.from_, record.target
    from fsm_stage.log.projections.spend import SPEND_FOLD
    from fsm_stage.reviews._visits import pending_move

    return pending_move(reviews, fold(SPEND_FOLD, events))


def reviewed_transition(events: Sequence[Event], state: ReviewState | None = None) -> tuple[str, str] | None:
    """The stage transition ``(source, target)`` an open review asks about (asked, not yet
    answered), or None; at most one stage review is open at a time. ``state``: as above."""
    asked = [r for r in (state if state is not None else fold(REVIEW_FOLD, events)).open if r.kind == "stage"]
    return (asked[-1].from_, asked[-1].target) if asked else None


def session_marks(arg: str, *, strict: bool = False) -> SessionMarks:
    """Read the session log ``arg`` (a path, ``-`` or a PostgreSQL location) and fold what a
    diagram highlights.

    Raises ``UserError`` (one line) for an unreadable log, ``LogFormatError`` for one that is
    not a session log or is corrupt (``strict``: also unknown event types).
    """
    from fsm_stage.cli.log_cmds import check_log_input
    from fsm_stage.log.postgres import is_postgres_location

    if is_postgres_location(arg):  # postgresql://…?session=ID, read from the store as `state` does
        from fsm_stage.log.postgres import read_postgres

        res = read_postgres(arg, strict=strict)
        warnings = list(res.warnings)
    else:
        with spooled(arg) as path:
            check_log_input(path, display_name(arg))
            res = read_log(path, strict=strict)
            warnings = shown_as(res.warnings, path, arg)
    plan = PlanView()
    view = plan.view(fold(plan, res.events))
    # one fold for the three review marks; a fork's inherited reviews are not its own
    reviews = fold_reviews(res.events, res.header.seed_length)
    recorded = reviews.graph
    return SessionMarks(
        stage=fold(StageProjection(), res.events).stage,
        plan_active=bool(view["active"]),
        plan_pending=bool(view["pending"]),
        pending=pending_transition(res.events, reviews),
        warnings=tuple(warnings),
        reviewing=reviewed_transition(res.events, reviews),
        graph=None if recorded is None else (recorded.name, recorded.fingerprint),
    )
