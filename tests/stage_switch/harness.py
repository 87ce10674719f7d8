"""Test doubles and the boundary driver for the stage-switch suite (stage-switch spec §0.2, §4.4).

``Harness`` composes a ``Runtime``, a ``StageController`` over the alpha/beta/gamma fixture
graph, an in-memory session (``MemoryLog``, protected system head on), an ``InboxAgent``, a
scripted review channel, an in-memory handoff store and a steer spy.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, TypeVar, cast

import attrs

from fsm_stage.config import EdgeConfig, GraphConfig, Language, StageConfig
from fsm_stage.constants import (
    REQUEST_HEADER,
    STAGE_SOURCE_KINDS,
    STEP_START,
    SYSTEM_MESSAGE,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)
from fsm_stage.handoff import HandoffStore, MemoryHandoffStore, SandboxPolicyProvider
from fsm_stage.log.events import Event, MemoryLog, SessionHeader
from fsm_stage.log.projections import fold_stage
from fsm_stage.prompts import Catalog
from fsm_stage.reviews import ScriptedReviewChannel
from fsm_stage.runtime.agent import InboxAgent
from fsm_stage.runtime.commands import CommandRegistry
from fsm_stage.runtime.messages import Message, message_text, user_message
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.session import Session
from fsm_stage.runtime.tools import ToolCall, ToolResult
from fsm_stage.stage_switch import StageController
from fsm_stage.tokens import HeuristicTokenMeter, TokenMeter

T = TypeVar("T")

STAGES = ("alpha", "beta", "gamma")
SECTION = "When this stage is done, call goto_stage to move on."
PROBE = "boundary probe"

Targets = Mapping[str, Sequence[str | EdgeConfig]]
"""``make_config(targets=…)``: stage name → its edges (a bare name or an ``EdgeConfig``)."""


def instruction(name: str) -> str:
    """The fixture's generated instruction (spec §0.2)."""
    return f"Instruction for the {name} stage."


def body(name: str) -> str:
    """The stage body ``Current stage: <name>\\n<instruction>``."""
    return f"Current stage: {name}\n{instruction(name)}"


def make_config(
    names: Sequence[str] = STAGES,
    *,
    section: str = SECTION,
    initial: str | None = None,
    handoff_dir: str = "handoff",
    min_handoff_tokens: float | None = None,
    language: str = "en",
    targets: Targets | None = None,
) -> GraphConfig:
    """A ``GraphConfig`` like the spec's fixture (``targets`` omitted = the seed's any-to-any)."""
    stages = []
    for n in names:
        t = None
        if targets is not None and n in targets:
            t = tuple(e if isinstance(e, EdgeConfig) else EdgeConfig(e) for e in targets[n])
        stages.append(StageConfig(n, instruction(n), t))
    return GraphConfig(
        name="fixture",
        stages=tuple(stages),
        section=section,
        initial=initial,
        handoff_dir=handoff_dir,
        min_handoff_tokens=min_handoff_tokens,
        language=cast(Language, language),
    )


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion (pytest-asyncio is not assumed)."""
    return asyncio.run(coro)


class SteerSpy(InboxAgent):
    """An ``InboxAgent`` recording every steered message."""

    def __init__(self, session: Session) -> None:
        super().__init__(session)
        self.steered: list[Message] = []

    def steer(self, message: Message) -> None:
        self.steered.append(message)
        super().steer(message)


@attrs.define
class RecordingSandbox(SandboxPolicyProvider):
    """A sandbox-policy provider that records requests (S71)."""

    requests: list[Any] = attrs.Factory(list)

    def resolve(self, session: Any) -> Any:
        self.requests.append(session)
        return {"mode": "workspace-write", "workspaceRoot": session.header.cwd, "sessionId": session.id}


_clock = itertools.count(1_000)


class Harness:
    """One composed stage switch + session (see module docstring)."""

    def __init__(
        self,
        config: GraphConfig | None = None,
        *,
        session_id: str = "agent-1",
        cwd: str | None = "/workspace",
        origin: str | None = None,
        depth: int = 0,
        system_head: bool = False,
        review: ScriptedReviewChannel | bool | None = True,
        handoffs: HandoffStore | bool | None = True,
        meter: TokenMeter | bool | None = True,
        sandbox: SandboxPolicyProvider | None = None,
        commands: bool = True,
        catalog: Catalog | None = None,
        runtime: Runtime | None = None,
    ) -> None:
        self.config = config if config is not None else make_config()
        if review is True:
            review = ScriptedReviewChannel()
        self.review_channel: ScriptedReviewChannel | None = review or None
        if handoffs is True:
            handoffs = MemoryHandoffStore()
        self.handoff_store: HandoffStore | None = handoffs or None
        if meter is True:
            meter = HeuristicTokenMeter()
        self.meter: TokenMeter | None = meter or None
        if runtime is None:
            runtime = Runtime(review=self.review_channel, commands=commands)
        self.runtime = runtime
        self.controller = StageController(
            self.config, handoffs=self.handoff_store, token_meter=self.meter, sandbox=sandbox, catalog=catalog
        )
        self.runtime.attach(self.controller)
        self.catalog = self.controller.catalog
        if self.review_channel is not None:
            self.review_channel.approve_label = self.catalog.text("review.approve_label")
            self.review_channel.keep_label = self.catalog.text("review.keep_stage_label")
        header = SessionHeader(id=session_id, cwd=cwd, origin=origin, delegation_depth=depth)
        self.log = MemoryLog(header, clock=lambda: next(_clock))
        self.session = Session(self.log)
        self.agent = SteerSpy(self.session)
        self._turn = 0
        if system_head:
            self.session.append(SYSTEM_MESSAGE, {"role": "system", "content": [
                {"type": "text", "text": "You are a careful engineer."}]}, surface_op="append")

    @property
    def review(self) -> ScriptedReviewChannel:
        """The scripted review channel; a harness built with ``review=None`` has none."""
        assert self.review_channel is not None, "this harness has no review channel"
        return self.review_channel

    @property
    def handoffs(self) -> MemoryHandoffStore:
        """The in-memory handoff store; a harness built with another store (or none) has none."""
        assert isinstance(self.handoff_store, MemoryHandoffStore), "this harness has no in-memory store"
        return self.handoff_store

    @property
    def commands(self) -> CommandRegistry:
        """The runtime's command registry; a harness built with ``commands=False`` has none."""
        assert self.runtime.commands is not None, "this harness runs without commands"
        return self.runtime.commands

    # -- log shaping -------------------------------------------------------------------------

    def open_turn(self) -> Event:
        self._turn += 1
        return self.session.append(TURN_START, {"turn": self._turn})

    def close_turn(self) -> Event:
        return self.session.append(TURN_END, {"turn": self._turn, "reason": {"kind": "completed"}})

    def header(self) -> Event:
        return self.session.append(REQUEST_HEADER, {"header": {"config": {"provider": "p", "model": "m"},
                                                               "system": "", "tools": []},
                                                    "reason": "initial"})

    def user(self, text: str) -> Event:
        return self.session.append_message(user_message(text))

    # -- the boundary driver (spec §0.2) ------------------------------------------------------

    def boundary(
        self, *, step_start: bool = False, aborted: bool = False, probe: str = PROBE
    ) -> list[Message]:
        """Run one accepted pre-step over ``[probe]`` and append the entered batch."""
        batch = self.runtime.pre_step(self.agent, [user_message(probe)], aborted=aborted)
        if step_start:
            self.session.append(STEP_START, {"turn": self._turn, "step": 1})
        for m in batch:
            self.session.append_message(m)
        return batch

    # -- observations -------------------------------------------------------------------------

    def prompt_texts(self) -> list[str]:
        """Text of every model-visible message, in order, empty ones dropped."""
        return [t for t in (message_text(m) for m in self.session.messages()) if t]

    def stage_events(self) -> list[Event]:
        return [e for e in self.session.events if e.type == USER_MESSAGE
                and e.data.get("source", {}).get("kind") in STAGE_SOURCE_KINDS]

    def summaries(self) -> list[str]:
        """``source.summary`` of every logged stage-switch message."""
        return [e.data["source"]["summary"] for e in self.stage_events() if "summary" in e.data["source"]]

    def stage_texts(self) -> list[str]:
        return [message_text(e.data) for e in self.stage_events()]

    def fold(self) -> str | None:
        return fold_stage(self.session.events)

    def current(self) -> str:
        return self.controller.current(self.session)

    def pending(self) -> str | None:
        return self.controller.pending_stage(self.session)

    # -- tool and command -------------------------------------------------------------------

    async def goto_async(self, stage: Any, handoff: Any = None, *, log: bool = True,
                         agent: Any = "self", extra: Mapping[str, Any] | None = None) -> ToolResult:
        args: dict[str, Any] = {"stage": stage}
        if handoff is not None:
            args["handoff"] = handoff
        if extra:
            args.update(extra)
        who = self.agent if agent == "self" else agent
        return await self.runtime.call_tool(who, ToolCall.of("goto_stage", args), log=log)

    def goto(self, stage: Any, handoff: Any = None, **kw: Any) -> ToolResult:
        return run(self.goto_async(stage, handoff, **kw))

    def last_tool_result(self) -> Event:
        return [e for e in self.session.events if e.type == TOOL_RESULT][-1]

    def command(self, raw: str) -> Any:
        return run(self.runtime.run_command(self.agent, raw))

    def text(self, key: str, **kw: Any) -> str:
        return self.catalog.text(key, **kw)
