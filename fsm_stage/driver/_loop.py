"""Reference agent loop, ``Model`` protocol and ``ScriptedModel`` (docs/architecture.md).

Drives whole sessions without any host: tests, the simulator and the README example use it.
Each step is ``StagedSession``'s (``fsm_stage.driver``; docs/step-driver.md has the event order):
crash repair first (``Loop.repair``), ``turn/start``, then per step ``begin_step`` (inbox,
assembly, ``accept`` — a rejection ends the turn ``blocked`` —, pre-step, snapshot,
``step/start``, messages, ``request/header``), the model call with **same-step retries** on
``ModelError`` (``on_request_error`` runs, the frozen request is re-sent, no new pre-step;
exhausted → ``turn/end {kind: error, error: {message}}``), ``assistant/message``, the tool
calls, ``step/end``; another step while the model called tools or a steered message waits, else
``turn/end {kind: completed}``. An abort skips the calls not dispatched yet (DSH's closers) and
ends the turn ``aborted``; a review that suspends returns ``TurnOutcome(reason="suspended")``
with the turn left open for ``Loop.resume``. An exception escaping the turn still closes it
(``error`` / ``aborted``) before propagating, so the log never keeps a dangling open turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from fsm_stage.driver import _budget
from fsm_stage.driver._repair import is_turn_live, live_turn
from fsm_stage.driver._step import AcceptFn, DriverStateError, StagedSession
from fsm_stage.errors import ModelError as ModelError
from fsm_stage.errors import ReviewPending
from fsm_stage.log.events import Event
from fsm_stage.runtime.abort import AbortSignal
from fsm_stage.runtime.agent import InboxAgent
from fsm_stage.runtime.assembly import Request
from fsm_stage.runtime.commands import CommandReply
from fsm_stage.runtime.messages import Block, user_message
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.stage_models import ModelChoice
from fsm_stage.runtime.tools import ToolCall

_log = logging.getLogger("fsm_stage.loop")


@attrs.frozen
class ModelReply:
    """One model response: visible ``text``, requested ``tool_calls``, optional ``reasoning``
    and ``usage``, the call's token counts (``inputTokens``, ``outputTokens``,
    ``cacheReadTokens``, ``cacheWriteTokens``, ``reasoningTokens``: whole numbers, each
    optional), logged with the reply; stage ``tokens_in`` / ``tokens_out`` budgets count it."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: str | None = None
    usage: Mapping[str, Any] | None = None

    @classmethod
    def say(cls, text: str, *, usage: Mapping[str, Any] | None = None) -> ModelReply:
        """A plain text answer (ends the turn), with the call's token ``usage``."""
        return cls(text=text, usage=usage)

    @classmethod
    def call(cls, name: str, args: Mapping[str, Any] | None = None, *, text: str = "",
             id: str | None = None, usage: Mapping[str, Any] | None = None) -> ModelReply:
        """A reply calling one tool ``name`` with ``args``, with the call's token ``usage``."""
        return cls(text=text, tool_calls=(ToolCall.of(name, args, id=id),), usage=usage)


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


@attrs.frozen
class TurnOutcome:
    """How a turn ended (or paused): ``turn`` number, ``reason`` kind (``completed``,
    ``aborted``, ``error``, ``blocked`` or ``suspended``), the turn's ``steps`` so far, and for
    ``suspended`` the ``review_id`` and ``call_id`` waiting for a human answer; ``message``: the
    ``turn/end`` message (for ``error``, and for ``blocked`` by a stage or plan-mode budget)."""

    turn: int
    reason: str
    steps: int
    review_id: str | None = None
    call_id: str | None = None
    message: str | None = None


RequestErrorHook = Callable[["Loop", BaseException], "Awaitable[None] | None"]


class Loop:
    """The reference loop for one agent, built on ``StagedSession`` (see the module
    docstring for the event order). ``driver`` is its step driver."""

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
        copy_messages: bool = True,
        models: Mapping[str, Model] | None = None,
        warn_missing_models: bool = True,
    ) -> None:
        if models is not None and not isinstance(models, Mapping):
            raise TypeError("Loop(models=) must be a mapping of model names to models, "
                            f"got {type(models).__name__}")
        self.runtime = runtime
        self.models: dict[str, Model] = dict(models or {})
        self._missing_models: set[str] = set()
        self.warn_missing_models = warn_missing_models
        self.copy_messages = copy_messages  # False: the model gets the history's own messages
        self.agent = agent
        self.model = model
        self.driver = StagedSession(runtime, agent, config=config if config is not None else {
            "provider": model.provider, "model": model.name}, accept=accept)
        self.max_retries = max_retries
        self.max_steps = max_steps
        self.on_request_error = on_request_error
        self.requests: list[Request] = []

    def model_for(self, choice: ModelChoice) -> Model:
        """The model a request with ``choice`` goes to: ``models[choice.model]`` (the
        provider-qualified name), else ``models[choice.alias]``, else ``model`` (the default;
        a stage asking for a model the loop lacks is logged once as a warning, never an error;
        ``warn_missing_models=False`` silences it, as the simulator does: its report shows the
        model of every request)."""
        if choice.model is None:
            return self.model
        for key in (choice.model, choice.alias):
            if key is not None and key in self.models:
                return self.models[key]
        default = f"{self.model.provider}:{self.model.name}"
        if self.warn_missing_models and default != choice.model and choice.model not in self._missing_models:
            self._missing_models.add(choice.model)
            _log.warning("%s asks for model %s; this loop has no such model (Loop(models=…)), so %s:%s "
                         "answers", choice.source or "the stage", choice.model, self.model.provider,
                         self.model.name)
        return self.model

    @property
    def config(self) -> dict[str, Any]:
        """The ``request/header`` config (the driver's)."""
        return self.driver.config

    @property
    def accept(self) -> AcceptFn | None:
        """The host accept decision on each step's inbox batch (the driver's)."""
        return self.driver.accept

    @accept.setter
    def accept(self, value: AcceptFn | None) -> None:
        self.driver.accept = value

    @property
    def session(self) -> Any:
        """The agent's session."""
        return self.agent.session

    def abort(self, reason: str = "user") -> None:
        """Abort the running turn (its signal is forwarded to tools and reviews); a suspended
        turn that nothing runs is closed at once (``StagedSession.close_turn``)."""
        session = self.agent.session
        if session.is_turn_open and not is_turn_live(session.id) and self.driver.suspended() is not None:
            self.driver.close_turn("aborted", cause=reason)
            return
        self.driver.signal.abort(reason)

    def repair(self) -> list[Event]:
        """Crash repair (``fsm_stage.driver._repair``): when the session's log ends inside a
        turn that no loop of this process is running, close it as DSH does (error
        ``tool/result`` per unanswered call, ``step/end``, ``turn/end {kind: interrupted}``)
        and return the events written; ``[]`` when idle, when the open turn is live (e.g.
        called from inside this loop's own turn) or suspended (a review awaits an answer).
        Raises ``LogWriteError`` (log unchanged)."""
        return self.driver.repair()

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
        """Run turns while a steered message is waiting (crash repair first, see ``repair``);
        stops after a ``suspended`` outcome and after a budget stop (the waiting messages stay
        queued until a fresh budget or another stage lets a step open)."""
        self.repair()
        outcomes: list[TurnOutcome] = []
        while self.agent.wants_turn:
            outcomes.append(await self.run_turn())
            if outcomes[-1].reason == "suspended" or self.driver.stopped is not None:
                break
        return outcomes

    async def run_turn(self) -> TurnOutcome:
        """Run one whole turn (see module docstring; crash repair first, see ``repair``).
        Returns ``reason="suspended"`` when a review suspended a tool call (the turn stays
        open; ``resume`` continues it). Raises ``TurnSuspendedError`` while a turn is
        suspended."""
        session = self.agent.session
        self.repair()
        with live_turn(session.id):
            self.driver.start_turn()
            return await self._drive(resume=False)

    async def resume(self) -> TurnOutcome:
        """Continue a suspended turn (this process or a new one over the reopened log): settle
        the suspended calls (``StagedSession.resume``), run the reply's calls the first dispatch
        did not reach through the runtime as it would have (a tool it lacks gets the unknown-tool
        error result), end the step and run the next steps.
        Returns ``suspended`` again while a review is unanswered; raises ``DriverStateError``
        when nothing is suspended."""
        if self.driver.suspended() is None:
            raise DriverStateError("resume: no suspended tool call in the log's open turn")
        with live_turn(self.agent.session.id):
            return await self._drive(resume=True)

    def _steps(self) -> int:
        view = self.driver.view()
        return view.last_step if view is not None else 0

    def _turn(self) -> int:
        view = self.driver.view()
        return view.turn if view is not None and view.turn is not None else self.agent.session.last_turn

    async def _drive(self, *, resume: bool) -> TurnOutcome:
        driver = self.driver
        turn = self._turn()
        try:
            if resume:
                try:
                    await driver.resume(run_rest=False, host_tools=False)  # every tool is the runtime's
                    # the reply's calls after the suspended one, in reply order, through the
                    # runtime as the first dispatch would have run them (an unknown tool's error)
                    for call in driver.unsettled():
                        if driver.signal.aborted:
                            break
                        await driver.run_tool(call)
                except ReviewPending as pending:
                    return TurnOutcome(turn, "suspended", self._steps(), pending.review_id, pending.call_id)
                outcome = self._settle(turn)
                if outcome is not None:
                    return outcome
            while True:
                outcome = await self._run_step(turn)
                if outcome is not None:
                    return outcome
                if self._steps() >= self.max_steps:
                    return self._end(turn, "error", message=f"step limit of {self.max_steps} reached")
        except BaseException as exc:  # never leave the turn open in the log
            with contextlib.suppress(Exception):
                if isinstance(exc, asyncio.CancelledError):
                    driver.close_turn("aborted", cause="cancelled")
                else:
                    driver.close_turn("error", message=str(exc) or type(exc).__name__)
            raise

    def _end(self, turn: int, kind: str, *, message: str | None = None,
             cause: str | None = None) -> TurnOutcome:
        steps = self._steps()
        self.driver.end_turn(kind, message=message, cause=cause)
        return TurnOutcome(turn, kind, steps, message=message)

    def _settle(self, turn: int) -> TurnOutcome | None:
        """After the step's calls: abort, or end the step and continue / complete."""
        driver = self.driver
        if driver.signal.aborted:
            steps = self._steps()
            driver.close_turn("aborted", cause=driver.signal.reason)
            return TurnOutcome(turn, "aborted", steps)
        if driver.end_step():
            return None
        return self._end(turn, "completed")

    async def _run_step(self, turn: int) -> TurnOutcome | None:
        """One step; returns the turn's outcome to stop, or None to continue."""
        driver = self.driver
        req = driver.begin_step(copy_messages=self.copy_messages)
        if req is None and self.runtime.review is not None and driver.budget.review is not None \
                and await _budget.ask(self.runtime.review, self.agent, driver.budget):
            req = driver.begin_step(copy_messages=self.copy_messages)  # the answer is redeemed now
        if req is None:
            if driver.signal.aborted:
                return self._end(turn, "aborted", cause=driver.signal.reason)
            return self._end(turn, "blocked", message=driver.stopped)
        # ``req.messages`` are already this step's own deep copies (``begin_step``) and ``req``
        # goes nowhere else: hand them on instead of copying the whole history again
        request = Request(req.system, req.messages, req.tools, req.model)
        model = self.model_for(req.model)
        retries = self.max_retries
        while True:
            self.requests.append(request)
            try:
                reply = await model.complete(request, signal=driver.signal)
                break
            except ModelError as exc:
                if retries <= 0:
                    driver.end_step()
                    return self._end(turn, "error", message=str(exc) or type(exc).__name__)
                retries -= 1
                if self.on_request_error is not None:
                    res = self.on_request_error(self, exc)
                    if inspect.isawaitable(res):
                        await res
        driver.record_reply(reply.text, reply.tool_calls, reasoning=reply.reasoning, usage=reply.usage,
                            source={"kind": "model", "provider": model.provider, "model": model.name})
        for call in reply.tool_calls:
            if driver.signal.aborted:
                break
            try:
                await driver.run_tool(call)
            except ReviewPending as pending:
                return TurnOutcome(turn, "suspended", self._steps(), pending.review_id, pending.call_id)
        return self._settle(turn)
