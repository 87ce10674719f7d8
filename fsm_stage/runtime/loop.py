"""Reference agent loop, ``Model`` protocol and ``ScriptedModel`` (DESIGN.md §8).

Drives whole sessions without any host: tests, the simulator and the README example use it.
It writes DSH-shaped events (dsh-log-format §4) so ``fsm_stage.log`` reads them back.

One turn (``Loop.run_turn``), per step (plan-mode spec §1.5):

1. ``turn/start {turn}`` on the first step (turn numbers continue from the log).
2. Claim the agent's inbox (steered and injected messages, in arrival order).
3. Assemble the request (system sections, tools) — frozen for same-step retries.
4. Host accept (``accept(agent, batch)``; a rejection closes the turn with
   ``turn/end {reason: {kind: blocked}}`` and **no** pre-step runs). Then, once per accepted
   pre-step, ``runtime.pre_step(agent, batch, aborted=...)``; participants may append events
   (e.g. ``plan/mode``) which therefore land before ``step/start``.
5. Runtime-context snapshot (only when it changed) is put first in the batch; then
   ``step/start {turn, step}`` and one ``user/message`` per entering message.
6. ``request/header {header: {config, system, tools}, reason}``: ``initial`` (first header of the
   log), ``resume`` (this loop's first request over a log that has headers), ``change`` (header
   differs from the last one this loop logged); not logged when unchanged.
7. The model call. A ``ModelError`` triggers a **same-step retry** (up to ``max_retries``):
   ``on_request_error(loop, error)`` runs, then the same frozen request is sent again — no new
   pre-step (B34, Q8). When retries are exhausted the step ends and the turn ends with
   ``{kind: error, error: {message}}`` (DSH's shape; an abort is ``{kind: aborted, reason:
   {kind: <cause>}}``, a host rejection ``{kind: blocked}``).
8. ``assistant/message``, then ``tool/call``/``tool/result`` per requested call, ``step/end``.
0. Crash repair first (``Loop.repair``, dsh-log-format §8): when the log ends inside a turn
   that no loop of this process is running (a reopened log whose writer died mid-turn), the
   dangling tool calls, step and turn are closed (``turn/end {reason: {kind: interrupted}}``)
   before anything else; ``prompt``, ``run_until_idle``, ``run_turn`` and ``command`` do it.
9. Continue with step n+1 when the model called tools or a steered message is waiting;
   otherwise ``turn/end {reason: {kind: completed}}``. An exception escaping the turn (a bug,
   a cancellation) still closes it (``error`` / ``aborted``) before propagating, so the log
   never keeps a dangling open turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from fsm_stage.constants import (
    ASSISTANT_MESSAGE,
    REQUEST_HEADER,
    STEP_END,
    STEP_START,
    TURN_END,
    TURN_START,
)
from fsm_stage.log.events import Event
from fsm_stage.runtime.abort import AbortSignal
from fsm_stage.runtime.agent import InboxAgent
from fsm_stage.runtime.assembly import SNAPSHOT_FOLD, Request, snapshot_if_changed
from fsm_stage.runtime.commands import CommandReply
from fsm_stage.runtime.messages import Block, Message, new_id, user_message
from fsm_stage.runtime.repair import is_turn_live, live_turn, repair_open_turn
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.tools import ToolCall, ToolResult


@attrs.frozen
class ModelReply:
    """One model response: visible ``text``, requested ``tool_calls``, optional ``reasoning``."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: str | None = None
    usage: Mapping[str, Any] | None = None

    @classmethod
    def say(cls, text: str) -> ModelReply:
        """A plain text answer (ends the turn)."""
        return cls(text=text)

    @classmethod
    def call(cls, name: str, args: Mapping[str, Any] | None = None, *, text: str = "",
             id: str | None = None) -> ModelReply:
        """A reply calling one tool ``name`` with ``args``."""
        return cls(text=text, tool_calls=(ToolCall.of(name, args, id=id),))


class ModelError(Exception):
    """A failed model request; the loop may retry it within the same step."""


@runtime_checkable
class Model(Protocol):
    """A language model: ``complete(request, signal=...) -> ModelReply`` (raise ``ModelError``)."""

    @property
    def provider(self) -> str: ...

    @property
    def name(self) -> str: ...

    async def complete(self, request: Request, *, signal: AbortSignal) -> ModelReply: ...


ScriptItem = ModelReply | BaseException | Callable[[Request], ModelReply]


class ScriptedModel:
    """A ``Model`` answering from a script: replies, exceptions to raise, or functions of the
    request. Every request is recorded in ``requests``. An exhausted script raises
    ``AssertionError``."""

    def __init__(self, script: Iterable[ScriptItem] = (), *, provider: str = "scripted",
                 name: str = "scripted-model") -> None:
        self._script: deque[ScriptItem] = deque(script)
        self.requests: list[Request] = []
        self.provider = provider
        self.name = name

    def then(self, *items: ScriptItem) -> ScriptedModel:
        """Queue more script items; returns self."""
        self._script.extend(items)
        return self

    @property
    def remaining(self) -> int:
        """How many script items are left."""
        return len(self._script)

    async def complete(self, request: Request, *, signal: AbortSignal) -> ModelReply:
        """Record ``request`` and play the next script item."""
        self.requests.append(request)
        if not self._script:
            raise AssertionError("ScriptedModel: script exhausted")
        item = self._script.popleft()
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, ModelReply):
            return item
        return item(request)


def _error(message: str) -> dict[str, Any]:
    """A DSH ``turn/end`` error reason: ``{kind: error, error: {message}}``."""
    return {"kind": "error", "error": {"message": message}}


def _aborted(cause: str | None) -> dict[str, Any]:
    """A DSH ``turn/end`` aborted reason: ``{kind: aborted, reason: {kind: <cause>}}``."""
    return {"kind": "aborted", "reason": {"kind": cause or "user"}}


@attrs.frozen
class TurnOutcome:
    """How a turn ended: ``turn`` number, ``reason`` kind, number of ``steps`` run."""

    turn: int
    reason: str
    steps: int


RequestErrorHook = Callable[["Loop", BaseException], "Awaitable[None] | None"]
AcceptFn = Callable[[InboxAgent, list[Message]], bool]


class Loop:
    """The reference loop for one agent (see the module docstring for the event order)."""

    def __init__(
        self,
        runtime: Runtime,
        agent: InboxAgent,
        model: Model,
        *,
        config: Mapping[str, Any] | None = None,
        max_retries: int = 1,
        max_steps: int = 64,
        accept: AcceptFn | None = None,
        on_request_error: RequestErrorHook | None = None,
    ) -> None:
        self.runtime = runtime
        self.agent = agent
        self.model = model
        self.config: dict[str, Any] = dict(config) if config is not None else {
            "provider": model.provider, "model": model.name}
        self.max_retries = max_retries
        self.max_steps = max_steps
        self.accept = accept
        self.on_request_error = on_request_error
        self._last_header: dict[str, Any] | None = None
        self._signal: AbortSignal | None = None
        self.requests: list[Request] = []
        runtime.track(agent.session)

    @property
    def session(self) -> Any:
        """The agent's session."""
        return self.agent.session

    def abort(self, reason: str = "user") -> None:
        """Abort the running turn (its signal is forwarded to tools and reviews)."""
        if self._signal is not None:
            self._signal.abort(reason)

    def repair(self) -> list[Event]:
        """Crash repair (``fsm_stage.runtime.repair``): when the session's log ends inside a
        turn that no loop of this process is running, close it as DSH does (error
        ``tool/result`` per unanswered call, ``step/end``, ``turn/end {kind: interrupted}``)
        and return the events written; ``[]`` when idle or when the open turn is live (e.g.
        called from inside this loop's own turn). Raises ``LogWriteError`` (log unchanged)."""
        session = self.agent.session
        if not session.is_turn_open or is_turn_live(session.id):
            return []
        return repair_open_turn(session)

    async def prompt(self, text: str, *, images: Sequence[Block] = ()) -> list[TurnOutcome]:
        """Steer a user message and run until idle (crash repair first, see ``repair``)."""
        self.repair()
        self.agent.steer(user_message(text, images=images))
        return await self.run_until_idle()

    async def command(self, line: str, images: Sequence[Block] = ()) -> CommandReply | None:
        """Run a slash command (``/name rest``) through the runtime's command registry (crash
        repair first, see ``repair``, so a command never waits for a dead turn to end)."""
        self.repair()
        return await self.runtime.run_command(self.agent, line, images)

    async def run_until_idle(self) -> list[TurnOutcome]:
        """Run turns while a steered message is waiting (crash repair first, see ``repair``)."""
        self.repair()
        outcomes: list[TurnOutcome] = []
        while self.agent.wants_turn:
            outcomes.append(await self.run_turn())
        return outcomes

    async def run_turn(self) -> TurnOutcome:
        """Run one whole turn (see module docstring; crash repair first, see ``repair``)."""
        session = self.agent.session
        self.repair()
        with live_turn(session.id):
            return await self._run_turn(session)

    async def _run_turn(self, session: Any) -> TurnOutcome:
        turn = session.last_turn + 1
        signal = AbortSignal()
        self._signal = signal
        session.append(TURN_START, {"turn": turn})
        step = 0
        try:
            while True:
                step += 1
                outcome = await self._run_step(turn, step, signal)
                if outcome is not None:
                    return self._end(turn, outcome, step)
                if step >= self.max_steps:
                    return self._end(turn, _error(f"step limit of {self.max_steps} reached"), step)
        except BaseException as exc:  # never leave the turn open in the log
            if session.is_turn_open:
                reason: dict[str, Any] = (
                    _aborted("cancelled") if isinstance(exc, asyncio.CancelledError)
                    else _error(str(exc) or type(exc).__name__))
                with contextlib.suppress(Exception):
                    session.append(TURN_END, {"turn": turn, "reason": reason})
            raise
        finally:
            self._signal = None

    def _end(self, turn: int, reason: dict[str, Any], steps: int) -> TurnOutcome:
        self.agent.session.append(TURN_END, {"turn": turn, "reason": reason})
        return TurnOutcome(turn, str(reason["kind"]), steps)

    async def _run_step(self, turn: int, step: int, signal: AbortSignal) -> dict[str, Any] | None:
        """One step; returns a turn/end reason to stop, or None to continue."""
        agent, runtime, session = self.agent, self.runtime, self.agent.session
        batch = agent.claim()
        assembly = runtime.assemble(agent)  # frozen for same-step retries
        if self.accept is not None and not self.accept(agent, batch):
            return {"kind": "blocked"}
        if signal.aborted:
            return _aborted(signal.reason)
        batch = runtime.pre_step(agent, batch, aborted=signal.aborted)
        context = runtime.render_context(agent)
        snapshot = snapshot_if_changed(session.read(SNAPSHOT_FOLD), context)
        if snapshot is not None:
            batch.insert(0, snapshot)
        session.append(STEP_START, {"turn": turn, "step": step})
        for message in batch:
            session.append_message(message)
        request = runtime.build_request(agent, assembly)
        header: dict[str, Any] = {"config": dict(self.config), "system": request.system,
                                  "tools": [t.to_json() for t in request.tools]}
        retries = self.max_retries
        while True:
            self._log_header(header)
            self.requests.append(request)
            try:
                reply = await self.model.complete(request, signal=signal)
                break
            except ModelError as exc:
                if retries <= 0:
                    session.append(STEP_END, {"turn": turn, "step": step})
                    return _error(str(exc) or type(exc).__name__)
                retries -= 1
                if self.on_request_error is not None:
                    res = self.on_request_error(self, exc)
                    if inspect.isawaitable(res):
                        await res
        self._log_assistant(turn, step, reply)
        results: list[ToolResult] = []
        for call in reply.tool_calls:
            results.append(await runtime.call_tool(agent, call, turn=turn, step=step, signal=signal))
        session.append(STEP_END, {"turn": turn, "step": step})
        if signal.aborted:
            return _aborted(signal.reason)
        if reply.tool_calls or agent.wants_turn:
            return None
        return {"kind": "completed"}

    def _log_header(self, header: dict[str, Any]) -> None:
        session = self.agent.session
        if self._last_header is None:
            reason = "resume" if session.has_request_header else "initial"
        elif header != self._last_header:
            reason = "change"
        else:
            return
        session.append(REQUEST_HEADER, {"header": json.loads(json.dumps(header)), "reason": reason})
        self._last_header = header

    def _log_assistant(self, turn: int, step: int, reply: ModelReply) -> None:
        content: list[dict[str, Any]] = []
        if reply.reasoning:
            content.append({"type": "reasoning", "text": reply.reasoning})
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for call in reply.tool_calls:
            content.append({"type": "tool-call", "id": call.id, "name": call.name,
                            "arguments": call.arguments})
        source = {"kind": "model", "provider": self.model.provider, "model": self.model.name}
        message: Message = {"role": "assistant", "content": content, "source": source, "id": new_id()}
        data: dict[str, Any] = {"turn": turn, "step": step, "message": message}
        if reply.usage is not None:
            data["usage"] = dict(reply.usage)
        self.agent.session.append(ASSISTANT_MESSAGE, data, surface_op="append")
