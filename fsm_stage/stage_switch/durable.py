"""The stage switch's durable pieces: the approved transition read from the log, the graph
fingerprint record, and the batches that apply a transition together with its redemption.

``approved(ctl, session)`` is the approved, unredeemed stage review (the pending model
transition; it survives a crash). ``graph_specs(ctl, session)`` returns the ``fsm/graph``
event to write with the controller's next write (or raises ``GraphChangedError``).
``redeem_specs(ctl, session, applied, reason)`` returns the ``fsm/review/redeemed`` event(s)
for the pending approval, appended in the same batch as the transition (docs/reviews.md).
``accepted_digests`` / ``write_edited`` serve an approval with edits: the worker's document may
hash to the reviewed version or (after a crash mid-apply) the edited one, and the edited
document replaces the handoff file atomically before the transition's batch.
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

__all__ = ["accepted_digests", "approved", "approved_transition", "graph_specs", "redeem_specs",
           "write_edited"]


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
            f"this controller runs {ctl.config.name!r} {fp[:19]}…; to go on under the new graph, accept the "
            "change (open_session or StageHost.open(..., accept_graph_change=True); fsm-stage mcp "
            "--accept-graph-change; fsm-stage worker --accept-graph-change)")
    return [NewEvent(GRAPH_EVENT, {"name": ctl.config.name, "fingerprint": fp}, ignorable=True)]


def redeem_specs(session: Session, *, applied: bool, reason: str | None = None) -> list[NewEvent]:
    """``[fsm/review/redeemed]`` for the pending approval, ``[]`` when none is pending."""
    record = approved(session)
    return [] if record is None else [redeemed_spec(record.id, applied, None if applied else reason)]


def accepted_digests(session: Session, record: ReviewRecord) -> frozenset[str]:
    """The document hashes under which ``record``'s approval may be applied: the reviewed
    ``payloadSha256`` and, for an approval with edits, its ``editedSha256`` (the file already
    rewritten by a worker that crashed before its batch landed)."""
    answer = state_of(session).answered.get(record.id)
    edited = answer.edited_sha256 if answer is not None and answer.edited is not None else None
    return frozenset(d for d in (record.payload_sha256, edited) if d is not None)


def write_edited(ctl: StageController, session: Session, record: ReviewRecord) -> bool:
    """Put the reviewer's edited handoff document of ``record``'s approval in place, atomically,
    before the transition is applied; returns whether the approval carries edits. A store that
    keeps documents itself (``document(path)``) is written through ``write``; otherwise the file
    at ``handoffPath`` (just re-read and hashed inside the session cwd) is replaced
    (``handoff.atomic_write_text``). An ``OSError`` / ``HandoffPathError`` propagates: the flush
    keeps the approval pending and retries (the unedited document is never used)."""
    from fsm_stage.handoff import HandoffPathError, atomic_write_text, handoff_relative_path

    answer = state_of(session).answered.get(record.id)
    if answer is None or answer.edited is None or record.handoff_path is None:
        return False
    reader = getattr(ctl.handoffs, "document", None)
    if callable(reader) and ctl.handoffs is not None:
        if reader(record.handoff_path) != answer.edited:
            relative = handoff_relative_path(ctl.config.handoff_dir, session.id, record.target)
            policy = ctl.sandbox.resolve(session) if ctl.sandbox is not None else None
            written = ctl.handoffs.write(relative, answer.edited, cwd=session.header.cwd, policy=policy)
            if written != record.handoff_path:
                raise HandoffPathError(f"the edited handoff document went to {written}, "
                                       f"not {record.handoff_path}")
        return True
    atomic_write_text(record.handoff_path, answer.edited)
    return True
