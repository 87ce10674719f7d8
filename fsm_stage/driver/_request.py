"""What the step driver hands a host: ``StepRequest`` (one step's request), ``SuspendedStep`` /
``SuspendedCall`` (a step waiting for reviews)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from fsm_stage.runtime.assembly import RenderedSection, Request
from fsm_stage.runtime.messages import Message
from fsm_stage.runtime.session import deep_copies
from fsm_stage.runtime.stage_models import DEFAULT_CHOICE, ModelChoice
from fsm_stage.runtime.tools import ToolCall, ToolSpec


@attrs.frozen
class StepRequest:
    """What to send for step ``step`` of turn ``turn``: ``system`` text (the joined
    ``sections``), ``tools`` and ``messages`` (copies of the tool specs and a tuple of deep
    copies of the model-visible history: mutate freely; with ``begin_step(copy_messages=False)``
    the session's own messages, a read-only sequence), ``header_reason`` (``initial`` / ``resume`` /
    ``change`` logged now, or None) and ``model``: the current stage's and plan mode's model
    choice (``ModelChoice``: provider-qualified ``model``, ``reasoning_effort``, ``settings``;
    ``DEFAULT_CHOICE`` when the graph declares none: use the host's own)."""

    turn: int
    step: int
    system: str
    sections: tuple[RenderedSection, ...]
    tools: tuple[ToolSpec, ...]
    messages: Sequence[Message]
    header_reason: str | None = None
    model: ModelChoice = DEFAULT_CHOICE

    @property
    def request(self) -> Request:
        """The ``Request`` (system, messages, tools, model), with fresh copies of the messages."""
        return Request(self.system, deep_copies(self.messages), self.tools, self.model)


@attrs.frozen
class SuspendedCall:
    """A suspended tool call: the ``call``, its ``review_id`` and whether the review was
    ``answered`` (then ``resume`` settles it)."""

    call: ToolCall
    review_id: str
    answered: bool


@attrs.frozen
class SuspendedStep:
    """The open step waiting for reviews: ``turn``, ``step``, the suspended ``calls`` (in
    order) and ``pending`` (calls of the reply not dispatched yet; ``resume`` runs them)."""

    turn: int | None
    step: Any
    calls: tuple[SuspendedCall, ...]
    pending: tuple[ToolCall, ...]

    @property
    def review_ids(self) -> tuple[str, ...]:
        """The reviews the step waits for, in call order."""
        return tuple(c.review_id for c in self.calls)
