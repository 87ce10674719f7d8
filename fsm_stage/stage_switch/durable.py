"""The stage switch's durable pieces: the approved transition read from the log, the graph
fingerprint record, and the batches that apply a transition together with its redemption.

``approved(ctl, session)`` is the approved, unredeemed stage review (the pending model
transition; it survives a crash). ``graph_specs(ctl, session)`` returns the ``fsm/graph``
event to write with the controller's next write (or raises ``GraphChangedError``).
``redeem_specs(ctl, session, applied, reason)`` returns the ``fsm/review/redeemed`` event(s)
for the pending approval, appended in the same batch as the transition (design B §3).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fsm_stage.constants import GRAPH_EVENT
from fsm_stage.errors import GraphChangedError
from fsm_stage.log.events import NewEvent
from fsm_stage.reviews._flow import redeemed_spec, state_of
from fsm_stage.reviews._fold import ReviewRecord
from fsm_stage.stage_switch.state import PendingTransition

if TYPE_CHECKING:
    from fsm_stage.runtime.session import Session
    from fsm_stage.stage_switch.controller import StageController

__all__ = ["approved", "approved_transition", "graph_specs", "redeem_specs"]


def approved(session: Session) -> ReviewRecord | None:
    """The approved, not yet redeemed stage review of ``session`` (None when none)."""
    return state_of(session).pending("stage")


def approved_transition(session: Session, record: ReviewRecord) -> PendingTransition:
    """The ``PendingTransition`` an approval stands for: full (with its handoff path) when the
    reviewer's recorded shape is ``full``, light otherwise."""
    state = state_of(session)
    answer = state.answered.get(record.id)
    shape = answer.shape if answer is not None and answer.shape is not None else record.shape
    path = record.handoff_path if shape == "full" else None
    return PendingTransition("model", record.from_, path, record.id)


def fingerprint(ctl: StageController) -> str:
    """``"sha256:<hex>"`` of the controller's graph."""
    return "sha256:" + ctl.graph.fingerprint


def graph_specs(ctl: StageController, session: Session) -> list[NewEvent]:
    """``[fsm/graph]`` when the log records no fingerprint yet or (with
    ``accept_graph_change``) a different one; ``[]`` when it records this graph. Raises
    ``GraphChangedError`` for a different recorded fingerprint without ``accept_graph_change``."""
    recorded = state_of(session).graph
    fp = fingerprint(ctl)
    if recorded is not None and recorded.fingerprint == fp:
        return []
    if recorded is not None and not ctl.accept_graph_change:
        raise GraphChangedError(
            f"session {session.id} was recorded with stage graph {recorded.name!r} "
            f"{recorded.fingerprint[:19]}…, "
            f"this controller runs {ctl.config.name!r} {fp[:19]}…; pass accept_graph_change=True to continue")
    return [NewEvent(GRAPH_EVENT, {"name": ctl.config.name, "fingerprint": fp}, ignorable=True)]


def redeem_specs(session: Session, *, applied: bool, reason: str | None = None) -> list[NewEvent]:
    """``[fsm/review/redeemed]`` for the pending approval, ``[]`` when none is pending."""
    record = approved(session)
    return [] if record is None else [redeemed_spec(record.id, applied, None if applied else reason)]
