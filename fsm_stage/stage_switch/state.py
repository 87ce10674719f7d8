"""Values the stage switch holds and reports: pending transitions, status, set outcomes.

``PendingTransition`` is the payload of a pending stage selection, ``StageStatus`` what
``StageController.get`` returns, ``SetOutcome`` what ``StageController.set`` returns, and
``ProjectionUnavailableError`` what every read raises after ``close()`` (S97).
"""

from __future__ import annotations

from typing import Literal

import attrs

from fsm_stage.errors import ProjectionUnavailableError as ProjectionUnavailableError

__all__ = ["PendingTransition", "ProjectionUnavailableError", "SetOutcome", "StageStatus"]

SetOutcome = Literal["noop", "queued", "committed"]
"""What ``StageController.set`` did: the stage switch's subset of
``fsm_stage.driver._pending.Outcome`` (plan mode adds ``"cancelled"``: its toggle can revert a
pending selection to the logged state, while a stage jump always names a stage)."""


@attrs.frozen
class PendingTransition:
    """Payload of a pending stage selection (§1.9).

    ``kind``: ``"model"`` (an approved ``goto_stage``; applied through the machine's edge) or
    ``"user"`` (``/stage`` / ``set``; applied as a jump). ``handoff_path``: absolute path of the
    handoff document for a full transition, None for a light one. ``from_stage``: the stage the
    transition was approved from. ``review_id``: the logged review an approved model
    transition redeems (None for a user selection).
    """

    kind: Literal["model", "user"]
    from_stage: str
    handoff_path: str | None = None
    review_id: str | None = None


@attrs.frozen
class StageStatus:
    """``StageController.get`` result, the counterpart of plan mode's ``PlanStatus``:
    ``current`` is the logged stage (``initial`` before the first record) and ``pending`` the
    target of the pending transition, or None."""

    current: str
    pending: str | None = None

    def to_json(self) -> dict[str, str]:
        """``{"current": …}`` plus ``"pending"`` only when a transition is pending."""
        out = {"current": self.current}
        if self.pending is not None:
            out["pending"] = self.pending
        return out
