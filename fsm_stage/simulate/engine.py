"""The scenario driver: ``_Engine`` plays one scenario through the reference loop.

It wires the runtime, the graph's stage-switch and plan-mode controllers, a scripted model (one
answer per model step) and a scripted review channel; at every model request it builds a
``RequestRecord`` and runs the pending ``expect`` checks. A ``review: suspend`` leaves the call
open (the loop returns ``suspended``); ``answer`` steps record answers with ``answer_review`` and
``resume`` steps run ``Loop.resume()``. Use it through ``fsm_stage.simulate.simulate``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from fsm_stage.config import ConfigFile
from fsm_stage.constants import BUDGET_KIND, STEP_START
from fsm_stage.driver._host import guard_names, open_session
from fsm_stage.driver._loop import Loop, ModelReply, ScriptedModel, TurnOutcome
from fsm_stage.errors import ReviewSuspended, UserError
from fsm_stage.handoff import LocalHandoffStore, handoff_relative_path
from fsm_stage.log.events import EventLog
from fsm_stage.log.projections import PlanModeFold
from fsm_stage.plan_mode import PlanModeController
from fsm_stage.policy._gate import policy_state
from fsm_stage.reviews._answer import answer_review, open_reviews, vote_review
from fsm_stage.reviews._channel import Answer, Question, ReviewDismissed, ScriptedReviewChannel
from fsm_stage.reviews._team import Reviewers, deadline_at, expire, expiry_spec
from fsm_stage.runtime.abort import AbortSignal
from fsm_stage.runtime.agent import InboxAgent
from fsm_stage.runtime.assembly import Assembly, Request, SystemSection
from fsm_stage.runtime.messages import Message, user_message
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.tools import ERROR_PREFIX, ToolFailure, ToolOutput, ToolResult, ToolSpec
from fsm_stage.runtime.tools import ToolCall as LoopToolCall
from fsm_stage.scenario import (
    UNSET,
    AnswerReview,
    Command,
    EligibilityFlip,
    EndTurn,
    Expect,
    ModelStep,
    NextRequest,
    Resume,
    Review,
    Scenario,
    Step,
    UserPrompt,
)
from fsm_stage.scenario import ToolCall as ScenarioToolCall
from fsm_stage.simulate.report import RequestRecord, SectionView, prefix_report, section_views
from fsm_stage.simulate.result import Failure, Note, SimulationError
from fsm_stage.simulate.views import RequestViews
from fsm_stage.tokens import HeuristicTokenMeter

GUIDANCE = "guidance"
"""Scenario predicate name of the unnamed eligibility predicate (it shows ``stage:policy``)."""

_STEP_START_LOOKBACK = 4096

class _SimRuntime(Runtime):
    """The runtime, plus a hook after each tool call (scenario steps between model steps run
    once the last call of a model step has settled, before the next step's assembly)."""

    def __init__(self, engine: _Engine, **kw: Any) -> None:
        super().__init__(**kw)
        self._engine = engine

    async def call_tool(self, agent: Any, call: LoopToolCall, **kw: Any) -> ToolResult:
        engine = self._engine
        engine.current_call = call
        result = await super().call_tool(agent, call, **kw)
        engine.after_call(call, result)
        if engine.calls_left == 0:
            await engine.between_steps()
        return result


class _TrackedHandoffStore(LocalHandoffStore):
    """``LocalHandoffStore`` that remembers the documents this run wrote."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.written: set[Path] = set()

    def write(self, relative: PurePosixPath, text: str, *, cwd: str | None, policy: Any = None) -> str:
        path = super().write(relative, text, cwd=cwd, policy=policy)
        self.written.add(Path(path).resolve())
        return path

    def wrote(self, path: Path) -> bool:
        """True when this run wrote the document at ``path``."""
        return path.resolve() in self.written


class _CannedTool:
    """A tool the scenario answers itself (replayed logs): result text or failure per call."""

    def __init__(self, engine: _Engine, name: str) -> None:
        self._engine = engine
        self.spec = ToolSpec(name, "Replayed tool: answers with the result recorded in the scenario.",
                             {"type": "object"})

    async def execute(self, args: Mapping[str, Any], agent: Any,
                      signal: AbortSignal | None = None) -> ToolOutput:
        call = self._engine.scenario_call()
        text = call.result if call is not None and call.result is not None else ""
        if call is not None and call.result is None:  # another call of this tool gave one
            engine = self._engine
            where = engine.model_step.where if engine.model_step is not None else engine.scenario.path
            cid = engine.current_call.id if engine.current_call is not None else call.tool
            engine.warn(f"{where}: {call.tool} ({cid}) ran without a `result:`, so it answered the "
                        "empty string")
        if call is not None and call.error:
            raise ToolFailure(text.removeprefix(ERROR_PREFIX))
        return ToolOutput(None, text)


def _review_text(review: Review) -> str:
    """A review answer as the scenario spells it."""
    return f"{{feedback: {review.feedback}}}" if review.kind == "feedback" else review.kind


def _short(value: Any) -> str:
    """A value as the scenario YAML would spell it: JSON (``"explore"``, ``true``, ``null``)."""
    return json.dumps(value, ensure_ascii=False)


class _Engine:
    """One scenario run (see ``simulate``)."""

    def __init__(self, scenario: Scenario, config: ConfigFile, graph_path: Path, log: EventLog,
                 cwd: Path, meter: HeuristicTokenMeter, team: Reviewers | None = None) -> None:
        self.scenario, self.config, self.graph_path, self.cwd, self.meter = (
            scenario, config, graph_path, cwd, meter)
        self.steps = scenario.steps
        self.i = 0
        self.flags: dict[str, bool] = dict(scenario.eligible)
        self.records: list[RequestRecord] = []
        self.views = RequestViews(meter)  # what the requests carry, viewed once
        self.notes: list[Note] = []
        self.failures: list[Failure] = []
        self.checks = 0
        self.warnings: list[str] = []
        self.reviewed: set[str] = set()  # call ids whose scripted review was asked
        self.fatal: SimulationError | None = None
        self.next_checks: list[tuple[str, NextRequest]] = []
        self.current_call: LoopToolCall | None = None
        self.calls: dict[str, ScenarioToolCall] = {}
        self.calls_left = 0
        self.model_step: ModelStep | None = None
        self._assembly: Assembly | None = None
        self._system_assembly: Assembly | None = None

        self.log = log
        self.team = team  # the scenario's ``reviewers:`` file: ``@group`` approvers for named answers
        self.review = ScriptedReviewChannel(default=self._answer_review)
        self.runtime = _SimRuntime(self, review=self.review)
        self.runtime.add_assemble_hook(self._on_assemble)
        self.runtime.add_pre_step(self._on_pre_step)  # first participant: before any flush
        for sec in scenario.system:
            self.runtime.add_section(SystemSection(sec.name, sec.order, self._constant(sec.text)))
        self.handoffs = _TrackedHandoffStore(cwd)
        guards = guard_names(config.graph) if config.graph is not None else frozenset()
        host = open_session(config, log, runtime=self.runtime, handoffs=self.handoffs, token_meter=meter,
                            guidance=self._flag(GUIDANCE),
                            eligibility={name: self._flag(name) for name in sorted(guards)}, repair=False)
        self.stage, self.plan, self.agent = host.stage, host.plan, host.agent
        self.session = host.session
        provided = set(self.runtime.tools)
        canned = sorted({c.tool for s in self.steps if isinstance(s, ModelStep) for c in s.calls
                         if c.result is not None and c.tool not in provided})
        for name in canned:
            self.runtime.add_tool(_CannedTool(self, name))
        # The reference loop's scripted model, one script item per model step (each answers one
        # request) plus one more that reports a request no model step answers.
        answers = sum(isinstance(s, ModelStep) for s in self.steps) + 1
        self.model = ScriptedModel([self.answer] * answers, provider="scripted", name="fsm-stage-simulate")
        self.loop = Loop(self.runtime, self.agent, self.model, copy_messages=False, warn_missing_models=False)

    @staticmethod
    def _constant(text: str) -> Callable[[Any], str]:
        return lambda _agent: text

    def _flag(self, name: str) -> Callable[[Any], bool]:
        """The predicate reading scenario flag ``name`` (false until a flip sets it)."""
        return lambda _agent: self.flags.get(name, False) is True

    # --- hooks from the runtime and the loop ------------------------------------------------------

    def _on_assemble(self, _agent: Any, assembly: Assembly) -> Assembly:
        self._assembly = assembly
        return assembly

    def _on_pre_step(self, _agent: Any, messages: list[Message], _aborted: bool) -> list[Message]:
        self._system_assembly = self._assembly  # the assembly the request's system/tools come from
        return messages

    def scenario_call(self) -> ScenarioToolCall | None:
        """The scenario's entry for the tool call being executed."""
        return self.calls.get(self.current_call.id) if self.current_call is not None else None

    def after_call(self, call: LoopToolCall, result: ToolResult) -> None:
        self.calls_left -= 1
        mark = "✗" if result.is_error else "✓"
        self._note("tool", f"{mark} {call.name} → {result.text}")
        scripted = self.calls.get(call.id)
        if scripted is not None and scripted.review is not None and call.id not in self.reviewed:
            where = self.model_step.where if self.model_step is not None else self.scenario.path
            self.warn(f"{where}: {call.name} ({call.id}) was not reviewed, so its "
                      f"`review: {_review_text(scripted.review)}` was not used")

    def warn(self, text: str) -> None:
        """Something the scenario says that had no effect (not a failure: the exit status stays)."""
        self.warnings.append(text)
        self._note("warning", text)

    async def between_steps(self) -> None:
        """Run the scenario steps between this model step and the next (inside the turn)."""
        while self.i < len(self.steps) and not isinstance(self.steps[self.i], ModelStep):
            step = self.steps[self.i]
            self.i += 1
            await self._do(step, in_turn=True)
            if isinstance(step, EndTurn):
                break

    def _answer_review(self, questions: Sequence[Question]) -> list[Answer]:
        q = questions[0]
        if q.id == BUDGET_KIND:  # asked at a step boundary, of no call: an `answer` step answers it
            self._note("review", "budget review: nobody answers now (an `answer` step answers it)")
            raise ReviewSuspended("a budget review is answered by an `answer` step")
        call = self.scenario_call()
        review = call.review if call is not None else None
        if review is None:
            where = self.model_step.where if self.model_step is not None else self.scenario.path
            name = call.tool if call is not None else "a tool"
            self.fatal = SimulationError(
                f"{where}: {name} asked the human a review ({q.id}) but the call has no `review:` "
                "outcome (approve, keep, dismiss, abort, suspend or {feedback: TEXT})")
            raise RuntimeError("no scripted review outcome")
        if self.current_call is not None:
            self.reviewed.add(self.current_call.id)
        self._note("review", f"review {q.id}: {review.kind}"
                   + (f" ({review.feedback})" if review.feedback else "")
                   + (" (nobody answers now: the call stays open)" if review.kind == "suspend" else ""))
        if review.kind == "approve":
            return [Answer(q.id, (q.options[0].label,))]
        if review.kind == "keep":
            return [Answer(q.id, (q.options[-1].label,))]
        if review.kind == "feedback":
            return [Answer(q.id, (q.options[-1].label,), review.feedback or "")]
        if review.kind == "dismiss":
            raise ReviewDismissed("review dismissed")
        if review.kind == "suspend":
            raise ReviewSuspended("the scripted reviewer answers later (an `answer` step)")
        self.loop.abort("user")
        raise RuntimeError("the review was aborted: the user stopped the turn")

    def answer(self, request: Request) -> ModelReply:
        """The model's answer to ``request``: record it, run pending checks, play the next step."""
        self.raise_fatal()
        record = self._record(request)
        self.records.append(record)
        # the records hold what each request carried; the loop's and the model's own request
        # lists would keep every request's whole message list alive (memory quadratic in turns)
        self.loop.requests.clear()
        self.model.requests.clear()
        self._check_next_request(record)
        step = self.steps[self.i] if self.i < len(self.steps) else None
        if not isinstance(step, ModelStep):
            last = self.model_step.where if self.model_step is not None else self.scenario.path
            raise SimulationError(
                f"{last}: request {record.index} (turn {record.turn} step {record.step}) has no model "
                "step to answer it: the turn is still open because the previous model step called tools; "
                "add a model step (no calls ends the turn) or `end_turn: aborted`")
        self.i += 1
        self.model_step = step
        calls = []
        self.calls = {}
        for j, c in enumerate(step.calls, 1):
            call_id = c.id if c.id is not None else f"call-{record.index}-{j}"
            call = LoopToolCall.of(c.tool, c.args, id=call_id)
            calls.append(call)
            self.calls[call.id] = c
        self.calls_left = len(calls)
        return ModelReply(text=step.text, tool_calls=tuple(calls),
                          usage=dict(step.usage) if step.usage else None)

    def raise_fatal(self) -> None:
        if self.fatal is not None:
            raise self.fatal

    # --- the driver -------------------------------------------------------------------------------

    async def run(self) -> None:
        while self.i < len(self.steps):
            step = self.steps[self.i]
            if isinstance(step, ModelStep):
                if self.loop.driver.suspended() is not None:
                    raise SimulationError(
                        f"{step.where}: model step while the turn is suspended (a review waits for its "
                        "answer); add an `answer` step and a `resume: true` step first")
                if not self.agent.wants_turn:
                    raise SimulationError(
                        f"{step.where}: model step with no turn to answer in: the previous model step "
                        "had no tool calls, so its turn ended; start a turn with a user prompt (or a "
                        "command that steers text) first")
                at = self.i
                outcomes = await self.loop.run_until_idle()
                self.raise_fatal()
                if outcomes:
                    self._suspension_note(outcomes[-1])
                if self.i == at:  # no request was made: a budget stopped the turn before it
                    why = self.loop.driver.stopped or "the turn ended before its first request"
                    self._note("turn", f"turn stopped before a request: {why}")
                    raise SimulationError(
                        f"{step.where}: model step, but no request was made: {why}; write `end_turn: "
                        "blocked` here, then an `answer` step for the budget review, then this model step")
                continue
            self.i += 1
            await self._do(step, in_turn=False)
        if self.loop.driver.suspended() is not None:
            self._note("turn", "the scenario ends with the turn suspended (open reviews: "
                       f"{', '.join(r.id for r in open_reviews(self.session)) or 'none, answered'})")
        elif self.agent.wants_turn and self.loop.driver.stopped is not None:
            self._note("turn", f"the scenario ends with the turn stopped: {self.loop.driver.stopped}")
        elif self.agent.wants_turn:
            raise SimulationError(f"{self.scenario.path}: the scenario ends with a user message that no "
                                  "model step answers; add a model step")
        for where, _nr in self.next_checks:
            self.checks += 1
            self._fail(where, "next_request", "a following model request", "none (the scenario ended)")

    async def _do(self, step: Step, *, in_turn: bool) -> None:
        if isinstance(step, UserPrompt):
            self._note("user", step.text)
            self.agent.steer(user_message(step.text))
        elif isinstance(step, Command):
            reply = await self.loop.command(step.line)
            if reply is None:
                self._note("command", f"{step.line} → not handled (no /{step.name} command here)")
            else:
                self._note("command", f"{step.line} → {reply.kind}: {reply.text}")
        elif isinstance(step, EligibilityFlip):
            self.flags.update(step.values)
            self._note("eligible", ", ".join(f"{k}={str(v).lower()}" for k, v in step.values.items()))
        elif isinstance(step, AnswerReview | Resume):
            await self._answer_or_resume(step)
        elif isinstance(step, EndTurn) and step.reason == "blocked":
            await self._blocked(step, in_turn=in_turn)
        elif isinstance(step, EndTurn):
            if step.reason == "aborted" and self.loop.driver.suspended() is not None:
                self.loop.abort("user")
                self._note("turn", "the user stops the suspended turn")
            elif in_turn and step.reason == "aborted":
                self.loop.abort("user")
                self._note("turn", "the user stops the turn")
            elif in_turn:
                raise SimulationError(f"{step.where}: end_turn: completed, but the turn is still open (the "
                                      "model step before called tools); use `end_turn: aborted` or add a "
                                      "model step without calls")
            elif step.reason == "aborted":
                raise SimulationError(f"{step.where}: end_turn: aborted, but no turn is open")
        elif isinstance(step, Expect):
            self._check(step)

    async def _blocked(self, step: EndTurn, *, in_turn: bool) -> None:
        """``end_turn: blocked``: run the waiting turn, which a budget must stop before its first
        request (``SimulationError`` otherwise)."""
        if in_turn or not self.agent.wants_turn or self.loop.driver.suspended() is not None:
            raise SimulationError(f"{step.where}: end_turn: blocked needs a waiting turn (a user prompt "
                                  "after the last turn ended)")
        asked = len(self.records)
        outcomes = await self.loop.run_until_idle()
        self.raise_fatal()
        stopped = self.loop.driver.stopped
        if len(self.records) != asked or not outcomes or outcomes[-1].reason != "blocked" or stopped is None:
            raise SimulationError(f"{step.where}: end_turn: blocked, but no budget stopped the turn")
        self._note("turn", f"turn {outcomes[-1].turn} stopped before a request: {stopped}")

    def _suspension_note(self, outcome: TurnOutcome) -> None:
        if outcome.reason != "suspended":
            return
        self._note("turn", f"turn {outcome.turn} suspended: review {outcome.review_id} of "
                   f"{outcome.call_id} waits for an answer")
        scripted = self.calls.get(outcome.call_id or "")
        if scripted is not None and scripted.review is not None and scripted.review.kind == "approve":
            # the channel answered, but the review's rules need a named reviewer: the scenario
            # would go on as if approved while the review stays open
            where = self.model_step.where if self.model_step is not None else self.scenario.path
            raise SimulationError(
                f"{where}: {scripted.tool} ({outcome.call_id}): the review's rules need a named reviewer "
                "(approvers, a quorum or not_requester), so a scripted `review: approve` answers for "
                "nobody; write `review: suspend`, then `answer` steps with `reviewer: NAME` and "
                "`resume: true`")

    async def _answer_or_resume(self, step: AnswerReview | Resume) -> None:
        """``answer``: record the answer (``answer_review``); ``resume``: ``Loop.resume()``."""
        if isinstance(step, Resume):
            if self.loop.driver.suspended() is None:
                raise SimulationError(f"{step.where}: resume: no suspended tool call in the open turn")
            self._note("turn", "the host resumes the suspended turn")
            outcome = await self.loop.resume()
            self.raise_fatal()
            self._suspension_note(outcome)
            return
        reviews = open_reviews(self.session)
        found = [r for r in reviews if step.call in ("last", r.call_id)]
        if not found:
            open_ = ", ".join(f"{r.call_id} ({r.id})" for r in reviews) or "none"
            raise SimulationError(f"{step.where}: answer: no open review for call {step.call!r} "
                                  f"(open: {open_})")
        record = found[-1]
        if step.outcome == "expire":
            self._expire(step, record)
            return
        try:
            if step.reviewer is None:
                answer_review(self.session, record.id, step.outcome, feedback=step.feedback,
                              option=step.option, edited=step.edited)
                voted = ""
            else:  # a named reviewer: the review's rules decide, a quorum counts votes
                vote = vote_review(self.session, record.id, step.outcome, reviewer=step.reviewer,
                                   feedback=step.feedback, option=step.option, reviewers=self.team,
                                   edited=step.edited)
                voted = f" by {step.reviewer}" + ("" if vote.answer is not None
                                                  else f" (vote {len(vote.votes)} of {vote.needed})")
        except UserError as exc:
            raise SimulationError(f"{step.where}: answer: {exc}") from None
        self._note("review", f"answer {record.id} ({record.call_id}): {step.outcome}{voted}"
                   + (" with edits" if step.edited is not None else "")
                   + (f" ({step.option})" if step.option else "")
                   + (f" ({step.feedback})" if step.feedback else ""))

    def _expire(self, step: AnswerReview, record: Any) -> None:
        """``answer: {outcome: expire}``: the review's deadline passes and closes it as a fleet
        worker or the inbox would (``expire``); a review without a deadline is an error."""
        if deadline_at(record.rules, record.time) is None:
            raise SimulationError(f"{step.where}: answer: expire: review {record.id} ({record.call_id}) "
                                  "has no deadline (its edge's review rules set none)")
        expire(self.session, record)  # the simulator is the session's only writer
        answer = expiry_spec(record, record.rules or {}).data
        self._note("review", f"answer {record.id} ({record.call_id}): the deadline passed: "
                   f"{answer['outcome']}, by deadline")

    # --- records ----------------------------------------------------------------------------------

    def _turn_step(self) -> tuple[int, int, int | None]:
        events = self.session.events
        for k in range(len(events) - 1, max(-1, len(events) - 1 - _STEP_START_LOOKBACK), -1):
            ev = events[k]
            if ev.type == STEP_START and isinstance(ev.data, Mapping):
                return int(ev.data.get("turn", 0)), int(ev.data.get("step", 0)), ev.seq
        return 0, 0, None

    def current_stage(self) -> str | None:
        return self.stage.current(self.session) if self.stage is not None else None

    def plan_active(self) -> bool:
        return self.session.read(_PLAN_FOLD)

    def _record(self, request: Request) -> RequestRecord:
        assembly = self._system_assembly
        if assembly is not None and assembly.system == request.system:
            sections = section_views(assembly.sections, self.meter)
        else:  # a host hook rewrote the system text: show it as one block
            sections = (SectionView("system", 0, request.system, self.meter.count_text(request.system)),)
        # rendered after the pre-step (as the loop renders the snapshot the request carries), not
        # from the step's frozen assembly: a transition flushed at this boundary shows at once
        context = section_views(self.runtime.render_context(self.agent), self.meter)
        tools = self.views.tools(request.tools)
        messages = self.views.messages(request.messages, self.session.extends)
        prev = self.records[-1] if self.records else None
        turn, step, seq = self._turn_step()
        model = None if request.model.is_default else request.model.to_json()
        return RequestRecord(
            index=len(self.records) + 1, turn=turn, step=step, stage=self.current_stage(),
            plan_mode=self.plan_active(), sections=sections, context=context, messages=messages,
            tools=tools, prefix=prefix_report(prev, sections, tools, messages, model), seq=seq,
            policy=self._policy_line(request), model=model)

    def _policy_line(self, request: Request) -> str | None:
        """The tool policy in effect for this request: ``every tool`` in a stage without one (and
        plan mode off or unrestricting) of a graph that declares some; None when it declares none."""
        state = policy_state(self.runtime, self.agent)
        if state is not None:
            return state.describe([t.name for t in request.tools])
        graph, plan = self.config.graph, self.config.plan_mode
        declared = ((graph is not None and graph.restricts_tools)
                    or (plan is not None and plan.tools is not None))
        return "every tool" if declared else None

    def _note(self, kind: str, text: str) -> None:
        self.notes.append(Note(kind, text, len(self.records)))

    # --- expectations -----------------------------------------------------------------------------

    def _fail(self, where: str, check: str, expected: str, actual: str) -> None:
        self.failures.append(Failure(where, check, expected, actual))
        self._note("expect", f"FAILED {check}: expected {expected}, got {actual}")

    def _expect(self, where: str, check: str, expected: Any, actual: Any) -> None:
        self.checks += 1
        if expected != actual:
            self._fail(where, check, _short(expected), _short(actual))

    def _check(self, e: Expect) -> None:
        where = e.where
        before = len(self.failures)
        if e.stage is not UNSET:
            self._expect(where, "stage", e.stage, self.current_stage())
        if e.plan_mode is not UNSET:
            self._expect(where, "plan_mode", e.plan_mode, self.plan_active())
        if e.pending_stage is not UNSET:
            actual = self.stage.pending_stage(self.session) if self.stage is not None else None
            self._expect(where, "pending_stage", e.pending_stage, actual)
        if e.pending_plan is not UNSET:
            self._expect(where, "pending_plan", e.pending_plan, _plan_pending(self.plan, self.agent))
        for stage in (*e.handoff_exists, *e.handoff_missing):
            must = stage in e.handoff_exists
            path = self.handoff_path(stage)
            self.checks += 1
            # only this run's documents count: a fixed cwd keeps earlier runs' files
            there = path is not None and self.handoffs.wrote(path) and path.is_file()
            if there != must:
                shown = str(path) if path is not None else "(no stage graph)"
                self._fail(where, "handoff_exists" if must else "handoff_missing",
                           f"{shown} to {'exist' if must else 'be absent'} (written by this run)",
                           "this run wrote it" if there else "this run wrote no such file")
        if e.next_request is not None:
            self.next_checks.append((where, e.next_request))
        if len(self.failures) == before:
            self._note("expect", f"ok ({where})")

    def handoff_path(self, stage: str) -> Path | None:
        """Where the handoff document for ``stage`` is written in this run."""
        if self.config.graph is None:
            return None
        return self.cwd / handoff_relative_path(self.config.graph.handoff_dir, self.session.id, stage)

    def _check_next_request(self, record: RequestRecord) -> None:
        pending, self.next_checks = self.next_checks, []
        # every text of the request, joined only for a contains / not_contains check
        text = record.text if any(nr.contains or nr.not_contains for _, nr in pending) else ""
        label = f"request {record.index} (turn {record.turn} step {record.step})"
        for where, nr in pending:
            chosen = (record.model or {}).get("model", "default")
            states = (("stage", nr.stage, record.stage), ("plan_mode", nr.plan_mode, record.plan_mode),
                      ("model", nr.model, chosen))
            for key, want, got in states:
                if want is None:
                    continue
                self.checks += 1
                if want != got:
                    self._fail(where, f"next_request.{key}", f"{_short(want)} in {label}", _short(got))
            for s in nr.contains:
                self.checks += 1
                if s not in text:
                    self._fail(where, "next_request.contains", f"{label} to contain {_short(s)}",
                               "no such text")
            for s in nr.not_contains:
                self.checks += 1
                if s in text:
                    line = next((ln for ln in text.splitlines() if s in ln), s)
                    self._fail(where, "next_request.not_contains", f"{label} not to contain {_short(s)}",
                               f"it does: {_short(line.strip()[:160])}")
            if nr.prefix is not None:
                p = record.prefix
                for part, want in (("system", nr.prefix.system), ("tools", nr.prefix.tools),
                                   ("messages", nr.prefix.messages), ("model", nr.prefix.model)):
                    if want is None:
                        continue
                    self.checks += 1
                    got = "first request" if p.first else getattr(p, part)
                    if part == "model" and got is None:
                        got = "kept"  # no stage chooses a model: the host's own throughout
                    if got != want:
                        why = {"system": p.system_change, "tools": p.tools_change,
                               "model": p.model_change}.get(part)
                        self._fail(where, f"next_request.prefix.{part}", f"{want} in {label}",
                                   f"{got}" + (f" ({why})" if why else ""))


_PLAN_FOLD = PlanModeFold()


def _plan_pending(plan: PlanModeController | None, agent: InboxAgent) -> bool | None:
    """The target of the pending plan-mode selection (None when nothing is pending)."""
    return plan.get(agent).pending if plan is not None else None


