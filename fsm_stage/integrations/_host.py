"""``StageHost``: what every framework adapter shares — one ``StagedSession`` step per model
request of the framework, fsm_stage's tools run through the driver, host tools recorded.

``StageHost.open(log, ...)`` is ``open_session`` for an adapter (stage switch + plan mode from a
stage graph, a suspending review channel) over any ``EventLog``; ``step(user_text)`` ends the previous step,
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

from fsm_stage.config import ConfigFile, load_config
from fsm_stage.driver._host import SessionHost
from fsm_stage.driver._step import StepRequest
from fsm_stage.errors import BudgetStoppedError, ReviewPending, ReviewRefusedError
from fsm_stage.log.events import EventLog
from fsm_stage.observe import span_attributes
from fsm_stage.resources import data_dir
from fsm_stage.reviews._answer import answer_review, review_state, vote_review
from fsm_stage.reviews._channel import ReviewChannel, SuspendingReviewChannel
from fsm_stage.reviews._team import EXPIRED_BY, Reviewers
from fsm_stage.runtime.messages import user_message
from fsm_stage.runtime.tools import ToolCall, ToolResult, ToolSpec

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


class StageHost(SessionHost):
    """The ``SessionHost`` of ``open_session`` plus the glue the framework adapters share.

    Build one with ``StageHost.open``; ``stage`` / ``plan`` are the controllers (None when not
    configured). See the module docstring for the calls.
    """

    @classmethod
    def open(cls, log: EventLog, *, graph: ConfigFile | str | Path | None = None,
             plan_mode: bool | Mapping[str, Any] = True,
             review: ReviewChannel | None = None, config: Mapping[str, Any] | None = None,
             eligible: bool = True, guards: Mapping[str, bool] | None = None,
             eligibility: Mapping[str, bool | Callable[[Any], bool]] | None = None,
             accept_graph_change: bool = False) -> StageHost:
        """``open_session`` for an adapter: the stage switch (``graph``, default ``feature-work``)
        and plan mode over ``log``, as ``open_session`` attaches it (``plan_mode`` True: the
        file's ``plan_mode`` section when it has one, else none; a mapping: that section; False:
        none); ``graph`` is a loaded ``ConfigFile`` or a YAML path.
        ``review`` defaults to ``SuspendingReviewChannel`` (every review is answered through the
        framework); ``eligible`` shows the stage guidance; ``eligibility`` (as ``open_session``)
        maps each guard name of the graph to a bool or an ``(agent) -> bool`` predicate,
        ``guards`` to fixed bools (both may be given). A guard left without a value is a
        ``ConfigError`` naming it, as in ``open_session``: an edge is never closed silently.
        ``accept_graph_change`` resumes a log recorded under another graph (``open_session``;
        without it ``GraphChangedError``)."""
        loaded = (default_graph() if graph is None else graph if isinstance(graph, ConfigFile)
                  else load_config(graph))
        if loaded.graph is None:
            raise ValueError("StageHost.open needs a file with a stage graph")
        given: dict[str, bool | Callable[[Any], bool]] = {**dict(guards or {}), **dict(eligibility or {})}
        return cls.compose(loaded, log, review=review if review is not None else SuspendingReviewChannel(),
                           plan_mode=plan_mode, guidance=eligible, eligibility=given, config=config,
                           accept_graph_change=accept_graph_change)

    # --- reading ---------------------------------------------------------------------------------

    def request_tags(self) -> dict[str, Any]:
        """``{fsm_stage.session.id, fsm_stage.stage, fsm_stage.plan_mode}`` now (the stage omitted
        without a stage switch): what the adapters attach to the framework's own record of a model
        request (docs/observability.md)."""
        plan = self.plan is not None and self.plan.get(self.agent).active
        return span_attributes({"session": self.session.id, "stage": self.current_stage(), "plan_mode": plan})

    def open_review(self, call_id: str) -> str | None:
        """The review id a suspended call ``call_id`` waits for (None when not suspended)."""
        suspended = self.driver.suspended()
        for item in suspended.calls if suspended is not None else ():
            if item.call.id == call_id:
                return item.review_id
        return None

    # --- one step --------------------------------------------------------------------------------

    def settle_dropped(self, text: str = NOT_EXECUTED) -> None:
        """Record an error result for each call of the open step the framework never executed
        (a suspended ``goto_stage`` / ``exit_plan_mode`` waits for ``resume_call`` instead). A
        host tool's review of such a call is closed with it (``call-closed``): the call is gone,
        so its review neither waits in the inbox nor blocks the session's next tool review."""
        for call in self.driver.unsettled():
            if call.name not in FSM_TOOLS or self.open_review(call.id) is None:
                self.driver.record_tool_result(call, text, is_error=True)

    def step(self, user_text: str | None = None, host_tools: Sequence[ToolSpec] = ()) -> StepRequest:
        """End the open step (settled) and begin the next one, starting a turn when none is
        open. ``user_text`` (a new prompt of the framework's run) is steered into the step: the
        first message of a new turn, or a user message at the next step of the open turn (it is
        never dropped). ``host_tools``: the framework's own tools offered to the model, logged in
        the step's ``request/header`` after fsm_stage's (``begin_step(host_tools=)``). Returns
        the request to send. Raises ``BudgetStoppedError`` (a ``RuntimeError``) when a budget
        stopped the step: the turn ends ``blocked`` with its one-line reason, and ``review_id``
        names the budget review it waits for; ``RuntimeError`` when the step was not accepted
        otherwise."""
        view = self.driver.view()
        if view is not None and view.open_step is not None:
            self.settle_dropped()
            self.driver.end_step()
        if user_text is not None:
            self.agent.steer(user_message(user_text))
        if self.driver.view() is None:
            self.driver.start_turn()
        request = self.driver.begin_step(host_tools=host_tools)
        if request is None:  # a budget stop says why (docs/stage-models.md, "Budgets")
            stopped = self.driver.stopped
            self.driver.end_turn("blocked", message=stopped)
            if stopped is None:
                raise RuntimeError("the step was not accepted")
            review = self.driver.budget.review
            raise BudgetStoppedError(stopped, review.id if review is not None else None)
        return request

    def reply(self, text: str, calls: Sequence[ToolCall] = (), *,
              usage: Mapping[str, Any] | None = None, source: Mapping[str, Any] | None = None) -> None:
        """Record the model's reply (``source``: the model that answered, default the session
        config's); a reply without tool calls ends the step and the turn."""
        self.driver.record_reply(text, list(calls), usage=usage, source=source)
        if not calls:
            self.driver.end_step()
            self.driver.end_turn("completed")

    async def run_fsm_tool(self, call: ToolCall) -> str:
        """Run one of fsm_stage's tools; returns the result text (``Error: …`` on failure).
        A call that is suspended already is resumed (its review answered) instead; a settled
        call (the framework re-runs it: a retry, a replay from an older snapshot) returns its
        recorded result and runs nothing. Raises ``ReviewPending`` while its review waits."""
        if self.open_review(call.id) is not None:
            return await self.resume_call(call.id)
        settled = self.settled_result(call.id)
        if settled is not None:
            return settled
        return _text_of(await self.driver.run_tool(call))

    def settled_result(self, call_id: str) -> str | None:
        """The recorded result text of ``call_id`` when it is settled and is not a call of the
        open step still waiting (None otherwise): what a re-run of the call returns."""
        state = self.driver.view()
        call = state.call(call_id) if state is not None else None
        if call is not None and not call.answered:
            return None
        return self.recorded_result(call_id)

    async def before_request(self, returned: Callable[[str], str | None], *,
                             by: str = "api") -> list[ToolCall]:
        """Reconcile the open step with the framework before its next model request.
        ``returned(call_id)`` is what the framework's own history holds for a call (a denial
        message) or None. A suspended call the framework denied is recorded as keep (with that
        text as feedback); a call answered elsewhere (CLI, another process) is settled from its
        logged answer. Returns the open step's unsettled calls when one of them waits on a
        review the framework knows nothing of (its history is older than the log: a retry, a
        stale snapshot, a restart), or is a host tool's call the framework has not run: the
        adapter replays them as the model's reply instead of asking the model, so the framework
        asks for the approval again or runs the approved call. ``[]`` otherwise. ``by``: who the
        denials are logged as given by (the framework's name)."""
        pending = self.pending_reviews()
        if any(returned(call.id) is None and (not answered or call.name not in FSM_TOOLS)
               for call, _r, answered in pending):
            return list(self.driver.unsettled())
        await self.keep_unanswered(returned, by=by)
        return []

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

    def policy_verdict(self, call: ToolCall) -> str | None:
        """The tool policy's verdict on ``call`` now (``allow`` / ``ask`` / ``deny``; None: no
        policy applies), decided without asking anyone or writing anything."""
        from fsm_stage.policy._gate import authorize as decide

        found = decide(self.runtime, self.agent, call)
        return None if found is None else found[0].verdict

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

    def required_call(self, call_id: str, name: str = "", arguments: str = "{}") -> ToolCall:
        """``logged_call``; a call settled earlier (a framework re-run) comes back as
        ``ToolCall(call_id, name, arguments)`` (``run_fsm_tool`` / ``run_host_tool`` then return
        its recorded result). Raises ``RuntimeError`` for a call the log never settled that is
        not in the open step's reply."""
        call = self.logged_call(call_id)
        if call is not None:
            return call
        if self.recorded_result(call_id) is not None:
            return ToolCall(call_id, name, arguments)
        raise RuntimeError(f"tool call {call_id!r} is not in the open step's reply")

    async def run_host_tool(self, call: ToolCall, execute: Callable[[], Awaitable[Any]], *,
                            authorized: bool = False) -> Any:
        """Run one host tool call: the stage's tool policy first (a refused call never runs; its
        refusal text is returned; ``authorized``: the caller's ``refusal`` just let it run), then
        ``execute()``, recording ``tool/call`` + ``tool/result`` (a non-str result as JSON; an
        exception as an error result, then re-raised)."""
        settled = self.settled_result(call.id)
        if settled is not None:  # a re-run of a settled call: exactly once
            return settled
        refusal = None if authorized else await self.refusal(call)
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

    async def keep_unanswered(self, feedback: Callable[[str], str | None] = lambda _call_id: None, *,
                              by: str = "api") -> None:
        """The framework denied suspended calls without ``answer``: record keep (``feedback(call_id)``)
        for each unanswered review and settle the step, so the next step can begin: fsm_stage's
        calls through ``resume``, a host tool's call from its logged answer (a refusal; an approved
        call the framework did not run is recorded as not executed)."""
        pending = self.pending_reviews()
        for call, review_id, answered in pending:
            if not answered:
                self.answer(review_id, False, feedback=feedback(call.id), by=by)
        answers = review_state(self.session).answered
        for call, review_id, _answered in pending:
            if call.name in FSM_TOOLS:
                continue
            answer = answers.get(review_id)
            if answer is not None and answer.outcome == "approve":  # approved, but the framework
                self.driver.record_tool_result(call, NOT_EXECUTED, is_error=True)  # did not run it
            else:
                await self.driver.authorize(call)  # the logged answer: its refusal is recorded
        if any(call.name in FSM_TOOLS for call, _r, _a in pending):
            await self.driver.resume()

    # --- reviews ---------------------------------------------------------------------------------

    def answer(self, review_id: str, approve: bool, *, feedback: str | None = None,
               option: str | None = None, by: str = "api", reviewer: str | None = None,
               reviewers: Reviewers | None = None) -> None:
        """Record a human's answer to an open review, a suspended call's or the budget review a
        ``BudgetStoppedError`` names: ``approve`` (``option``: which approve option, e.g.
        ``Continue with a fresh budget``) or keep (with ``feedback``), as ``reviewer`` when given
        (``vote_review``: the review's rules, a quorum's votes; ``reviewers`` resolves
        ``@group`` approvers), else nobody named (``answer_review``). A review answered or
        closed already (its call closed, a fork) is left as it is; one past its deadline is
        closed by its deadline's answer instead, without an error (the resumed call reads that
        answer). Raises ``ReviewNotFoundError`` for a review id the log never opened and
        ``ReviewRefusedError`` when the review's rules refuse the answer (nothing written)."""
        state = review_state(self.session)
        if review_id in state.answered or review_id in state.redeemed:
            return
        outcome = "approve" if approve else "keep"
        try:
            if reviewer is not None:
                vote_review(self.session, review_id, outcome, reviewer=reviewer, reviewers=reviewers,
                            feedback=feedback, option=option, by=by)
            else:
                answer_review(self.session, review_id, outcome, feedback=feedback, option=option, by=by)
        except ReviewRefusedError:
            closed = review_state(self.session).answered.get(review_id)
            if closed is not None and closed.by == EXPIRED_BY:
                return  # the deadline answered it: the call resumes with that answer
            raise


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
