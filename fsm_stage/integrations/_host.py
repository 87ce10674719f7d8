"""``StageHost``: what every framework adapter shares — one ``StagedSession`` step per model
request of the framework, fsm_stage's tools run through the driver, host tools recorded.

``StageHost.open(log, ...)`` composes a runtime (stage switch + plan mode from a stage graph, a
suspending review channel) over any ``EventLog``; ``step(user_text)`` ends the previous step,
starts a turn when none is open and returns the ``StepRequest``; ``reply`` records the model's
answer (a reply without tool calls ends the turn); ``run_fsm_tool`` runs ``goto_stage`` /
``exit_plan_mode`` (``ReviewPending`` when a review suspends); ``resume_call`` settles a
suspended call once its review is answered; ``answer`` records a human's answer
(``answer_review``). Nothing is kept in memory that the log cannot rebuild.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fsm_stage.config import ConfigFile, GraphConfig, load_config
from fsm_stage.driver._step import StagedSession, StepRequest
from fsm_stage.errors import ReviewPending
from fsm_stage.handoff import LocalHandoffStore
from fsm_stage.log.events import EventLog
from fsm_stage.plan_mode import PlanModeController
from fsm_stage.resources import data_dir
from fsm_stage.reviews._answer import answer_review
from fsm_stage.reviews._channel import ReviewChannel, SuspendingReviewChannel
from fsm_stage.runtime.agent import Agent, InboxAgent
from fsm_stage.runtime.messages import user_message
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.session import Session
from fsm_stage.runtime.tools import ToolCall, ToolResult
from fsm_stage.stage_switch import StageController
from fsm_stage.tokens import HeuristicTokenMeter

__all__ = ["FSM_TOOLS", "NOT_EXECUTED", "StageHost", "default_graph"]

FSM_TOOLS = frozenset({"goto_stage", "exit_plan_mode"})
"""The tools fsm_stage itself runs (through the driver); every other call is a host tool."""
NOT_EXECUTED = "Error: the tool call was not executed"
"""The result recorded for a call the framework dropped (invalid arguments, a retry prompt)."""


def default_graph() -> ConfigFile:
    """``stage_graphs/feature-work.yaml`` (explore → implement → verify, with plan mode)."""
    return load_config(data_dir("stage_graphs") / "feature-work.yaml")


def _text_of(result: ToolResult) -> str:
    return result.text


class StageHost:
    """A runtime, an agent and its ``StagedSession`` driver, shared by the framework adapters.

    Build one with ``StageHost.open``; ``stage`` / ``plan`` are the controllers (None when not
    configured). See the module docstring for the calls.
    """

    def __init__(self, runtime: Runtime, agent: InboxAgent, *, stage: StageController | None = None,
                 plan: PlanModeController | None = None, config: Mapping[str, Any] | None = None) -> None:
        self.runtime = runtime
        self.agent = agent
        self.stage = stage
        self.plan = plan
        self.driver = StagedSession(runtime, agent, config=config)
        self.driver.repair()

    @classmethod
    def open(cls, log: EventLog, *, graph: ConfigFile | str | Path | None = None, plan_mode: bool = True,
             review: ReviewChannel | None = None, config: Mapping[str, Any] | None = None,
             eligible: bool = True, guards: Mapping[str, bool] | None = None) -> StageHost:
        """Compose the stage switch (``graph``, default ``feature-work``) and plan mode (the
        file's ``plan_mode`` section, when ``plan_mode``) over ``log``; ``graph`` is a loaded
        ``ConfigFile`` or a YAML path. ``review`` defaults to
        ``SuspendingReviewChannel`` (every review is answered through the framework); ``eligible`` shows the
        stage guidance; ``guards`` maps the graph's guard predicate names to fixed values."""
        loaded = (default_graph() if graph is None else graph if isinstance(graph, ConfigFile)
                  else load_config(graph))
        if loaded.graph is None:
            raise ValueError("StageHost.open needs a file with a stage graph")
        cfg: GraphConfig = loaded.graph
        runtime = Runtime(review=review if review is not None else SuspendingReviewChannel())
        stage = StageController(cfg, handoffs=LocalHandoffStore(), token_meter=HeuristicTokenMeter())
        stage.attach(runtime)
        stage.register_eligibility(lambda _agent: eligible)
        for name, value in (guards or {}).items():
            stage.register_eligibility(_fixed(value), name=name)
        plan = None
        if plan_mode:
            plan = PlanModeController(loaded.plan_mode if loaded.plan_mode is not None
                                      else {"section": "Plan first."})
            plan.attach(runtime)
        return cls(runtime, InboxAgent(Session(log)), stage=stage, plan=plan, config=config)

    # --- reading ---------------------------------------------------------------------------------

    @property
    def session(self) -> Session:
        """The agent's session (its log is the truth)."""
        return self.agent.session

    def current_stage(self) -> str | None:
        """The stage folded from the log (None without a stage switch)."""
        return None if self.stage is None else self.stage.current(self.session)

    def open_review(self, call_id: str) -> str | None:
        """The review id a suspended call ``call_id`` waits for (None when not suspended)."""
        suspended = self.driver.suspended()
        for item in suspended.calls if suspended is not None else ():
            if item.call.id == call_id:
                return item.review_id
        return None

    def pending_reviews(self) -> list[tuple[ToolCall, str, bool]]:
        """``(call, review_id, answered)`` for each suspended call of the open step."""
        suspended = self.driver.suspended()
        return [] if suspended is None else [(c.call, c.review_id, c.answered) for c in suspended.calls]

    # --- one step --------------------------------------------------------------------------------

    def settle_dropped(self, text: str = NOT_EXECUTED) -> None:
        """Record an error result for each call of the open step the framework never executed."""
        for call in self.driver.unsettled():
            if self.open_review(call.id) is None:
                self.driver.record_tool_result(call, text, is_error=True)

    def step(self, user_text: str | None = None) -> StepRequest:
        """End the open step (settled) and begin the next one; with no turn open, steer
        ``user_text`` (when given) and start a turn. Returns the request to send."""
        view = self.driver.view()
        if view is not None and view.open_step is not None:
            self.settle_dropped()
            self.driver.end_step()
        if self.driver.view() is None:
            if user_text is not None:
                self.agent.steer(user_message(user_text))
            self.driver.start_turn()
        request = self.driver.begin_step()
        if request is None:
            self.driver.end_turn("blocked")
            raise RuntimeError("the step was not accepted")
        return request

    def reply(self, text: str, calls: Sequence[ToolCall] = (), *,
              usage: Mapping[str, Any] | None = None) -> None:
        """Record the model's reply; a reply without tool calls ends the step and the turn."""
        self.driver.record_reply(text, list(calls), usage=usage)
        if not calls:
            self.driver.end_step()
            self.driver.end_turn("completed")

    async def run_fsm_tool(self, call: ToolCall) -> str:
        """Run one of fsm_stage's tools; returns the result text (``Error: …`` on failure).
        A call that is suspended already is resumed (its review answered) instead.
        Raises ``ReviewPending`` while its review waits."""
        if self.open_review(call.id) is not None:
            return await self.resume_call(call.id)
        return _text_of(await self.driver.run_tool(call))

    async def resume_call(self, call_id: str) -> str:
        """Settle the suspended call ``call_id`` from its logged answer; returns its result text
        (an already-settled call's recorded text). Raises ``ReviewPending`` while unanswered."""
        for call, review_id, answered in self.pending_reviews():
            if call.id == call_id and not answered:
                raise ReviewPending(review_id, call_id, "plan" if call.name == "exit_plan_mode" else "stage")
        if self.driver.suspended() is not None:
            results = await self.driver.resume()
            for result in results:
                if result.call.id == call_id:
                    return _text_of(result)
        return self.recorded_result(call_id) or NOT_EXECUTED

    def recorded_result(self, call_id: str) -> str | None:
        """The logged result text of ``call_id`` (None when it has none)."""
        for event in reversed(self.session.events):
            data = event.data if isinstance(event.data, Mapping) else {}
            message = data.get("message") if event.type == "tool/result" else None
            if isinstance(message, Mapping) and message.get("content"):
                for block in message["content"]:
                    if block.get("type") == "tool-result" and block.get("toolCallId") == call_id:
                        return _block_text(block)
        return None

    async def refusal(self, call: ToolCall) -> str | None:
        """The tool policy's verdict on a host tool call, before it runs: None to run it, or the
        refusal text the model gets (already logged as ``tool/call`` + error ``tool/result``).
        ``ReviewPending`` when an ``ask`` rule's review suspended."""
        refused = await self.driver.authorize(call)
        return None if refused is None else refused.text

    def logged_call(self, call_id: str) -> ToolCall | None:
        """The open step's recorded call with ``call_id`` (its arguments text as logged), or None."""
        view = self.driver.view()
        state = view.call(call_id) if view is not None else None
        return state.call if state is not None else None

    def required_call(self, call_id: str) -> ToolCall:
        """``logged_call``, raising ``RuntimeError`` when the open step's reply has no such call."""
        call = self.logged_call(call_id)
        if call is None:
            raise RuntimeError(f"tool call {call_id!r} is not in the open step's reply")
        return call

    async def run_host_tool(self, call: ToolCall, execute: Callable[[], Awaitable[Any]]) -> Any:
        """Run one host tool call: the stage's tool policy first (a refused call never runs; its
        refusal text is returned), then ``execute()``, recording ``tool/call`` + ``tool/result``
        (a non-str result as JSON; an exception as an error result, then re-raised)."""
        refusal = await self.refusal(call)
        if refusal is not None:
            return refusal
        try:
            result = await execute()
        except Exception as exc:
            self.record_host_result(call, f"Error: {exc}", is_error=True)
            raise
        self.record_host_result(call, result if isinstance(result, str) else json.dumps(result, default=str))
        return result

    def record_host_result(self, call: ToolCall, text: str, *, is_error: bool = False) -> None:
        """Record a host tool's result (``tool/call`` + ``tool/result``)."""
        self.driver.record_tool_result(call, text, is_error)

    async def keep_unanswered(self, feedback: Callable[[str], str | None] = lambda _call_id: None) -> None:
        """The framework denied suspended calls without ``answer``: record keep (``feedback(call_id)``)
        for each unanswered review and settle the step (``resume``), so the next step can begin."""
        pending = self.pending_reviews()
        for call, review_id, answered in pending:
            if not answered:
                self.answer(review_id, False, feedback=feedback(call.id))
        if pending:
            await self.driver.resume()

    # --- reviews ---------------------------------------------------------------------------------

    def answer(self, review_id: str, approve: bool, *, feedback: str | None = None,
               option: str | None = None, by: str = "api") -> None:
        """Record a human's answer to an open review (``answer_review``): ``approve`` or keep
        (with ``feedback``). A review answered already is left as it is."""
        if all(rid != review_id or answered for _c, rid, answered in self.pending_reviews()):
            return
        answer_review(self.session, review_id, "approve" if approve else "keep",
                              feedback=feedback, option=option, by=by)


def _fixed(value: bool) -> Callable[[Agent], bool]:
    return lambda _agent: value


def _block_text(block: Mapping[str, Any]) -> str:
    content = block.get("content", block.get("output", ""))
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return json.dumps(content)


def example_cwd(path: str | Path) -> str:
    """A working directory for handoff documents next to ``path``."""
    return str(Path(path).resolve().parent)
