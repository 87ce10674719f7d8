"""A scenario recovered from a recorded session log (``fsm-stage scenario LOG``).

``steps_from_events(events)`` turns the log's user prompts, commands, model replies and tool
results into steps; ``replay_events(events, graph)`` adds what a faithful replay needs (the
recorded stage / plan mode of every request as ``expect: {next_request: …}``, inferred
eligibility flips, review outcomes — from the logged ``fsm/review/answer`` events, else from the
result wording — the host system text) and returns a ``Replay`` with warnings about what could
not be recovered. A review answered outside the channel (``by: api`` / ``cli``) or still open
at the end becomes ``review: suspend`` with its ``answer`` and ``resume`` steps.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from fsm_stage.config import GraphConfig
from fsm_stage.constants import (
    ASSISTANT_MESSAGE,
    BUDGET_EVENT,
    BUDGET_KIND,
    COMMAND_RUN,
    EXIT_PLAN_MODE,
    GOTO_STAGE,
    PLAN_COMMAND,
    PLAN_MODE_EVENT,
    PLAN_SOURCE_PLUGIN,
    REQUEST_HEADER,
    REVIEW_ANSWER,
    REVIEW_REQUEST,
    STAGE_COMMAND,
    STAGE_POLICY_CONTEXT,
    STAGE_SOURCE_KINDS,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)
from fsm_stage.driver._budget import BUDGET_PLUGIN
from fsm_stage.log.events import Event
from fsm_stage.log.projections import stage_from_event
from fsm_stage.reviews._team import EXPIRED_BY
from fsm_stage.runtime.commands import parse_command
from fsm_stage.runtime.tools import ERROR_PREFIX
from fsm_stage.scenario.load import _SURROGATE
from fsm_stage.scenario.model import (
    REVIEWED_TOOLS,
    USAGE_KEYS,
    AnswerReview,
    Command,
    EligibilityFlip,
    EndTurn,
    Expect,
    ModelStep,
    NextRequest,
    Resume,
    Review,
    Step,
    SystemText,
    ToolCall,
    UserPrompt,
)
from fsm_stage.scenario.wording import Wording
from fsm_stage.stage_switch import NO_AGENT_MESSAGE

# --- replay: a recorded session log -> scenario steps (``fsm-stage scenario LOG``) -----------------

_PROGRESS_EVERY = 4096  # events between two ``on_progress`` calls
_DISMISS_HINT = re.compile(r"dismiss|closed the [a-z ]*review", re.IGNORECASE)


def _blocks_of(data: Any) -> list[Any]:
    if not isinstance(data, Mapping):
        return []
    msg = data.get("message")
    content = msg.get("content") if isinstance(msg, Mapping) else data.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def _text_of(blocks: Sequence[Any]) -> str:
    return "".join(b["text"] for b in blocks
                   if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str))


def _tool_outcome(data: Any) -> tuple[str | None, str, bool]:
    """(callId, text, isError) of a ``tool/result`` (current and legacy shapes)."""
    if not isinstance(data, Mapping):
        return None, "", False
    if "callId" in data:  # legacy {callId, content, isError}
        content = data.get("content")
        text = content if isinstance(content, str) else _text_of(content if isinstance(content, list) else [])
        return str(data["callId"]), text, bool(data.get("isError"))
    for block in _blocks_of(data):
        if isinstance(block, Mapping) and block.get("type") == "tool-result":
            inner = block.get("content")
            text = inner if isinstance(inner, str) else _text_of(inner if isinstance(inner, list) else [])
            return str(block.get("toolCallId")), text, bool(block.get("isError"))
    msg = data.get("message")
    src = msg.get("source") if isinstance(msg, Mapping) else None
    call_id = src.get("callId") if isinstance(src, Mapping) else None
    return (str(call_id) if call_id is not None else None), "", False


def _parse_args(raw: Any) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, str):
        try:
            value = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            return {"_raw": raw}
        return value if isinstance(value, dict) else {"_raw": raw}
    return {}


def _review_from_result(text: str, is_error: bool) -> Review:
    """The review outcome a recorded result implies: success = approve; a failure mentioning a
    dismissal = dismiss; any other failure = keep (the recorded text is kept as a comment)."""
    if not is_error:
        return Review("approve")
    return Review("dismiss") if _DISMISS_HINT.search(text) else Review("keep")


WAKE_PLACEHOLDER = "(the recorded turn started without a user prompt)"
"""Prompt text a replay uses for a turn something other than the user started, when the log
holds no message that could stand for it."""


def _is_wake_message(data: Mapping[str, Any]) -> bool:
    """A user-role message from another source that may have started a turn (a goal, a subagent
    report, a hook): not a runtime-context snapshot, not a stage or plan-mode record."""
    src = data.get("source")
    if not isinstance(src, Mapping):
        return False
    kind = src.get("kind")
    return kind not in ("user", *STAGE_SOURCE_KINDS) and src.get("form") != "snapshot" and not (
        kind == "plugin" and src.get("plugin") in (PLAN_SOURCE_PLUGIN, BUDGET_PLUGIN))


class _Replay:
    """State of ``steps_from_events`` while it walks a log."""

    def __init__(self, graph: GraphConfig | None = None, wording: Wording | None = None) -> None:
        self.graph, self.wording = graph, wording
        self.stages_recorded = False   # the log holds stage records (set by ``replay_events``)
        self.stage: str | None = None  # the recorded stage (host fold) so far
        self.plan = False              # the recorded plan mode so far
        self.guidance = False          # the last snapshot carried the stage guidance
        self.state_at: dict[int, tuple[str | None, bool]] = {}  # model step index -> request state
        self.need: dict[int, dict[str, bool]] = {}  # model step index -> predicates it needs
        self.system_texts: list[str] = []  # system prompts of requests sent out of plan mode
        self.dropped_commands: list[str] = []  # recorded command lines a scenario cannot hold
        self.refused: set[str] = set()  # ids of goto_stage calls the graph refused (no review)
        self.steps: list[Step] = []
        self.calls_by_id: dict[str, tuple[int, int]] = {}  # callId -> (step index, call index)
        self.steered: set[str] = set()
        self.prompted = False          # a prompt is waiting for the next model step
        self.wake_text: str | None = None
        self.in_turn = False
        self.turn_models = 0
        self.last_had_calls = False
        self.requests: dict[str, tuple[str, tuple[str, ...]]] = {}  # callId -> (review id, options)
        self.budget_reviews: set[str] = set()  # ids of budget reviews (they belong to no call)
        self.blocked = False  # the last turn was stopped by a budget; its prompt still waits
        self.budget_stop = False  # this turn logged a budget stop (``fsm/budget {action: stop}``)
        self.answers: dict[str, Mapping[str, Any]] = {}  # review id -> its first logged answer
        self.suspended: set[str] = set()  # callIds whose review was answered outside the channel
        self.cancelled: set[str] = set()  # callIds whose review the aborted turn closed (by: cancel)

    def review_request(self, data: Mapping[str, Any]) -> None:
        rid, call_id, options = data.get("id"), data.get("callId"), data.get("options")
        if isinstance(rid, str) and isinstance(call_id, str):
            labels = tuple(o for o in options if isinstance(o, str)) if isinstance(options, list) else ()
            self.requests.setdefault(call_id, (rid, labels))
            if data.get("kind") == BUDGET_KIND:
                self.budget_reviews.add(rid)
        where = self.calls_by_id.get(call_id) if isinstance(call_id, str) else None
        if where is not None:  # asked: a goto_stage got past its edge's guards, so they held
            step = self.steps[where[0]]
            assert isinstance(step, ModelStep)
            if step.calls[where[1]].tool == GOTO_STAGE:
                self._guards_held(where[0], step.calls[where[1]])

    def review_answer(self, data: Mapping[str, Any]) -> None:
        """Keep the first answer; one given outside the channel (``by: api`` / ``cli`` /
        ``inbox:NAME``) while its call was open means the review was suspended: ``review:
        suspend`` + an ``answer`` step per named reviewer (``reviewers``: a quorum votes once
        each; an approval with edits keeps its ``edited`` document). A review its deadline
        closed (``by: deadline``) is suspended too, then ``answer: {outcome: expire}``. A budget
        review's answer is an ``answer`` step after its ``end_turn: blocked``."""
        rid = data.get("id")
        if not isinstance(rid, str) or rid in self.answers:
            return
        self.answers[rid] = data
        call_id = next((c for c, (r, _o) in self.requests.items() if r == rid), None)
        by = data.get("by")
        expired = by == EXPIRED_BY
        outside = expired or by in ("api", "cli") or (isinstance(by, str) and by.startswith("inbox:"))
        budget = rid in self.budget_reviews
        if by == "cancel" and call_id in self.calls_by_id and not budget:
            # the turn was aborted while the review waited: nobody answered it (the replay's
            # `end_turn: aborted` closes it again, with the call's aborted result)
            self._suspend(call_id)
            self.cancelled.add(call_id)
            return
        if not outside or call_id is None or (call_id not in self.calls_by_id and not budget):
            return
        if not budget:
            self._suspend(call_id)
        target = "last" if budget else call_id
        if expired:
            self.steps.append(AnswerReview("expire", target))
            return
        outcome = data.get("outcome")
        if outcome not in ("approve", "keep", "dismiss"):
            return
        option, feedback = data.get("option"), data.get("feedback")
        options = self.requests[call_id][1]
        names = data.get("reviewers")
        reviewers: list[str | None] = [None]
        if isinstance(names, list):
            reviewers = [n for n in names if isinstance(n, str)] or [None]
        elif isinstance(by, str) and by.startswith("inbox:"):
            reviewers = [by.removeprefix("inbox:")]
        chosen = option if outcome == "approve" and isinstance(option, str) and options[:1] != (option,) \
            else None
        comments = feedback if outcome == "keep" and isinstance(feedback, str) and feedback.strip() else None
        edited = data.get("edited") if outcome == "approve" and isinstance(data.get("edited"), str) else None
        for reviewer in reviewers:
            self.steps.append(AnswerReview(outcome, target, chosen, comments, reviewer=reviewer,
                                           edited=edited))

    def _suspend(self, call_id: str) -> None:
        i, j = self.calls_by_id[call_id]
        step = self.steps[i]
        assert isinstance(step, ModelStep)
        call = attrs.evolve(step.calls[j], review=Review("suspend"))
        self.steps[i] = attrs.evolve(step, calls=(*step.calls[:j], call, *step.calls[j + 1:]))
        self.suspended.add(call_id)

    def open_suspensions(self) -> list[str]:
        """The reviewed calls of the open turn still without a result (the log ends suspended)."""
        return [c for c in self.calls_by_id if c in self.requests] if self.in_turn else []

    def command(self, data: Mapping[str, Any]) -> None:
        args = data.get("args")
        raw = args if isinstance(args, str) else ""
        name = data.get("name")
        line = f"/{name if isinstance(name, str) else ''}{raw}"
        parsed = parse_command(line)
        if parsed is None or not isinstance(name, str) or parsed.name != name.lower():
            # e.g. an empty or spaced name: `simulate` would refuse the line
            self.dropped_commands.append(line)
            return
        self.steps.append(Command(line))
        words = raw.split()
        # the commands fsm_stage provides steer their trailing text as the next prompt
        if name == PLAN_COMMAND:
            self.steered = {raw.strip()} - {"", "off"}
        elif name == STAGE_COMMAND:
            self.steered = {" ".join(words[1:])} - {""}
        else:
            self.steered = set()
        if self.steered:
            self.prompted = True

    def user_message(self, data: Mapping[str, Any]) -> None:
        src = data.get("source")
        stage = stage_from_event({"type": USER_MESSAGE, "data": data})
        if stage is not None:
            self.stage = stage
        sections = src.get("sections") if isinstance(src, Mapping) else None
        if isinstance(src, Mapping) and src.get("form") == "snapshot" and isinstance(sections, list):
            self.guidance = any(isinstance(sec, Mapping) and sec.get("name") == STAGE_POLICY_CONTEXT
                                for sec in sections)
        text = _text_of(_blocks_of(data))
        if not (isinstance(src, Mapping) and src.get("kind") == "user"):
            if _is_wake_message(data) and text.strip() and self.wake_text is None:
                self.wake_text = text
            return
        if text.strip() in self.steered:
            self.steered = set()
            return
        self.steered = set()
        if text.strip():
            self.steps.append(UserPrompt(text))
            self.prompted = True

    def model(self, data: Mapping[str, Any]) -> None:
        self.blocked = False
        needs_prompt = (not self.in_turn or self.turn_models == 0 or not self.last_had_calls)
        if needs_prompt and not self.prompted:
            # something other than the user woke the agent (a goal, a report, a continuation)
            self.steps.append(UserPrompt(self.wake_text or WAKE_PLACEHOLDER))
        blocks = _blocks_of(data)
        calls = [ToolCall(str(b.get("name")), _parse_args(b.get("arguments", b.get("input"))),
                          id=str(b.get("id")) if b.get("id") is not None else None)
                 for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool-call"]
        for j, c in enumerate(calls):
            if c.id is not None:
                self.calls_by_id[c.id] = (len(self.steps), j)
        stage = self.stage
        if stage is None and self.graph is not None and self.stages_recorded:
            # a subagent is never told its first stage: it is the graph's initial one
            stage = self.graph.initial or self.graph.stages[0].name
        self.state_at[len(self.steps)] = (stage, self.plan)
        self.need[len(self.steps)] = {GUIDANCE_PREDICATE: self.guidance}
        usage = data.get("usage")
        counts = ({k: v for k, v in usage.items() if k in USAGE_KEYS and type(v) is int and 0 <= v <= 10**15}
                  if isinstance(usage, Mapping) else {})  # the spend stage budgets count
        self.steps.append(ModelStep(_text_of(blocks), tuple(calls), usage=counts or None))
        self.prompted, self.wake_text = False, None
        self.turn_models += 1
        self.last_had_calls = bool(calls)

    def tool_result(self, data: Mapping[str, Any]) -> None:
        call_id, text, is_error = _tool_outcome(data)
        if call_id is None or call_id not in self.calls_by_id:
            return
        i, j = self.calls_by_id.pop(call_id)
        step = self.steps[i]
        assert isinstance(step, ModelStep)
        call = step.calls[j]
        # a host tool a policy's ``ask`` rule reviewed ran only if approved: its recorded result
        # answers it then; refused, it never ran (the result is the refusal fsm_stage writes)
        logged = self._logged_review(call_id) if call.tool not in REVIEWED_TOOLS else None
        ran = logged is None or logged.kind == "approve"
        if call_id in self.cancelled:
            return  # closed by the aborted turn: never ran, nothing resumed it
        if call_id in self.suspended:
            if call.tool not in REVIEWED_TOOLS and ran:
                call = attrs.evolve(call, result=text, error=is_error)
                self.steps[i] = attrs.evolve(step, calls=(*step.calls[:j], call, *step.calls[j + 1:]))
            if not self.steps or not isinstance(self.steps[-1], Resume):
                self.steps.append(Resume())
            return
        if call.tool in REVIEWED_TOOLS:
            call = attrs.evolve(call, review=self._logged_review(call_id)
                                or self._review(i, call, text, is_error))
            if call.review is None:
                self.refused.add(call_id)
        elif ran:
            call = attrs.evolve(call, review=logged, result=text, error=is_error)
        else:
            call = attrs.evolve(call, review=logged)
        self.steps[i] = attrs.evolve(step, calls=(*step.calls[:j], call, *step.calls[j + 1:]))

    def _logged_review(self, call_id: str) -> Review | None:
        """The review outcome the logged ``fsm/review/answer`` gives (None: none logged)."""
        rid = self.requests.get(call_id, ("", ()))[0]
        answer = self.answers.get(rid)
        if answer is None:
            return None
        feedback = answer.get("feedback")
        if answer.get("outcome") == "approve":
            return Review("approve")
        if answer.get("outcome") == "keep":
            return (Review("feedback", feedback) if isinstance(feedback, str) and feedback.strip()
                    else Review("keep"))
        return Review("dismiss")

    def _review(self, i: int, call: ToolCall, text: str, is_error: bool) -> Review | None:
        """The review answer a recorded outcome implies (None: the call was refused, nobody was
        asked); also notes the guard values a ``goto_stage`` outcome reveals."""
        wording = self.wording
        if wording is None:
            return _review_from_result(text, is_error)
        if call.tool == GOTO_STAGE and is_error:
            guard = wording.match("guard", text)
            if guard is not None:
                for name in (g.strip() for g in guard.get("guards", "").split(",")):
                    if name:
                        self.need.setdefault(i, {})[name] = False
                return None
            if wording.match("not_a_target", text) is not None:
                return None
            if (wording.match("before_review", text) is not None
                    or text.removeprefix(ERROR_PREFIX) == NO_AGENT_MESSAGE):
                return None  # refused before anyone was asked
        if call.tool == EXIT_PLAN_MODE and is_error and wording.match("plan_before_review", text) is not None:
            return None  # refused before anyone was asked
        if call.tool == GOTO_STAGE:  # it got past the guards: they held
            self._guards_held(i, call)
        if is_error:
            for kind in ("plan_feedback", "stage_feedback"):
                found = wording.match(kind, text)
                if found is not None and found.get("feedback", "").strip():
                    return Review("feedback", found["feedback"])
        return _review_from_result(text, is_error)

    def _guards_held(self, i: int, call: ToolCall) -> None:
        target = call.args.get("stage")
        current = self.state_at.get(i, (None, False))[0]
        if self.graph is None or current is None or not isinstance(target, str):
            return
        for edge in self.graph.edges_from(current):
            if edge.target == target:
                for name in edge.guards:
                    self.need.setdefault(i, {})[name] = True

    def request_header(self, data: Mapping[str, Any]) -> None:
        header = data.get("header")
        system = header.get("system") if isinstance(header, Mapping) else None
        if isinstance(system, str) and not self.plan:
            self.system_texts.append(system)

    def turn_start(self) -> None:
        self.in_turn, self.turn_models, self.last_had_calls = True, 0, False
        self.budget_stop = False

    def turn_end(self, data: Mapping[str, Any] | None = None) -> None:
        """Close the turn so the replay closes it at the same place (a turn a budget stopped
        before any request: ``end_turn: blocked``, its prompt still waiting)."""
        reason = data.get("reason") if data is not None else None
        if self.turn_models == 0 and self.budget_stop and isinstance(reason, Mapping) \
                and reason.get("kind") == "blocked":
            if not self.prompted:
                self.steps.append(UserPrompt(self.wake_text or WAKE_PLACEHOLDER))
            self.steps.append(EndTurn("blocked"))
            self.prompted = self.blocked = True  # the stopped turn's messages wait for the next one
        elif self.turn_models == 0 and self.prompted:
            self.steps.append(ModelStep(""))  # the recorded turn ended before any answer
            self.prompted = False
        elif self.last_had_calls:
            self.steps.append(EndTurn("aborted"))  # it ended without a final answer
        self.in_turn, self.turn_models, self.last_had_calls = False, 0, False
        self.wake_text = None


def steps_from_events(events: Sequence[Event]) -> list[Step]:
    """Turn a recorded session's events into scenario steps (``fsm-stage scenario LOG``).

    Kept: ``command/run`` (as typed: ``/name`` + recorded args), user-typed ``user/message``s
    (not the text a command steered, not plugin/stage notices), each ``assistant/message``
    (text blocks and tool calls) with its calls' recorded outcomes — a review answer for
    ``exit_plan_mode`` / ``goto_stage``, the canned ``result``/``error`` for any other tool.
    Turn structure is kept so the replay runs: a turn something else started (a goal, a
    subagent report) gets a ``user`` step with that message's text; a turn that ended before
    any answer gets an empty model step; one that ended after tool calls without a final
    answer gets ``end_turn: aborted``. Everything controllers write (``plan/mode``, stage
    records, snapshots) is left out: the simulator's controllers produce it again under the
    graph being tested.
    """
    return _walk(events, _Replay()).steps


def _walk(events: Sequence[Event], replay: _Replay,
          on_progress: Callable[[int], None] | None = None) -> _Replay:
    """Feed a log's events to ``replay``; returns it with ``steps`` complete.
    ``on_progress(events_done)`` every ``_PROGRESS_EVERY`` events."""
    for n, ev in enumerate(events):
        if on_progress is not None and n % _PROGRESS_EVERY == 0:
            on_progress(n)
        data = ev.data if isinstance(ev.data, Mapping) else {}
        if ev.type == COMMAND_RUN:
            replay.command(data)
        elif ev.type == USER_MESSAGE:
            replay.user_message(data)
        elif ev.type == ASSISTANT_MESSAGE:
            replay.model(data)
        elif ev.type == TOOL_RESULT:
            replay.tool_result(data)
        elif ev.type == TURN_START:
            replay.turn_start()
        elif ev.type == TURN_END:
            replay.turn_end(data)
        elif ev.type == BUDGET_EVENT and data.get("action") == "stop":
            replay.budget_stop = True
        elif ev.type == PLAN_MODE_EVENT:
            replay.plan = data.get("active") is True
        elif ev.type == REQUEST_HEADER:
            replay.request_header(data)
        elif ev.type == REVIEW_REQUEST:
            replay.review_request(data)
        elif ev.type == REVIEW_ANSWER:
            replay.review_answer(data)
    still_open = replay.open_suspensions()
    for call_id in still_open:  # the log ends while these reviews wait: the replay ends suspended
        if call_id not in replay.suspended:
            replay._suspend(call_id)
    if (replay.in_turn or (replay.prompted and not replay.blocked)) and not still_open:
        replay.turn_end()  # a log that ends on a budget stop ends so: its prompt waits
    steps = replay.steps
    # a call whose result was never recorded: answer it with an empty canned failure
    def answered(c: ToolCall) -> bool:
        return c.review is not None or c.result is not None or c.id in replay.refused

    for i, step in enumerate(steps):
        if isinstance(step, ModelStep) and not all(answered(c) for c in step.calls):
            steps[i] = attrs.evolve(step, calls=tuple(
                c if answered(c)
                else (attrs.evolve(c, review=Review("dismiss")) if c.tool in REVIEWED_TOOLS
                      else attrs.evolve(c, result="", error=True))
                for c in step.calls))
    return replay


@attrs.frozen
class Replay:
    """A recorded session turned into a scenario (``replay_events``): the ``steps`` (with the
    inferred eligibility flips and one ``expect: {next_request: {stage, plan_mode}}`` before each
    model step), the host ``system`` text, and ``warnings`` about what could not be recovered."""

    steps: tuple[Step, ...]
    system: tuple[SystemText, ...] = ()
    warnings: tuple[str, ...] = ()


GUIDANCE_PREDICATE = "guidance"
"""Scenario name of the unnamed eligibility predicate (the stage guidance context)."""


def _scrub(value: Any, count: list[int]) -> Any:
    """``value`` with every lone surrogate in its strings (a JSON log may escape one) replaced by
    U+FFFD; ``count[0]`` counts the strings changed. Walks strings, mappings, lists, tuples and
    attrs instances (the scenario's steps)."""
    if isinstance(value, str):
        fixed = _SURROGATE.sub("\ufffd", value)
        count[0] += fixed != value
        return fixed
    if isinstance(value, Mapping):
        return {_scrub(k, count): _scrub(v, count) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_scrub(v, count) for v in value)
    if attrs.has(type(value)):
        changes = {f.name: _scrub(getattr(value, f.name), count) for f in attrs.fields(type(value))
                   if f.init}
        return attrs.evolve(value, **changes)
    return value


def replay_events(events: Sequence[Event], graph: GraphConfig | None = None, *,
                  on_progress: Callable[[int], None] | None = None) -> Replay:
    """``steps_from_events`` plus what a faithful replay needs (``fsm-stage scenario``):

    * before each model step, ``expect: {next_request: {stage, plan_mode}}`` with the stage and
      plan mode the recorded request was sent in (``stage`` only for a log with stage records;
      before the first one, the graph's initial stage — a subagent is never told it), so a
      replay under a changed graph fails where it diverges;
    * eligibility flips inferred from the log: ``guidance`` from the runtime-context snapshots
      (the ``stage:policy`` entry), and for ``goto_stage`` the guards of the recorded edge in
      ``graph`` (true when the call got past them, false for those a refusal names);
    * review comments recovered from the recorded failure text (``{feedback: TEXT}``), and a
      ``goto_stage`` refused before any review (no edge, guard, bad arguments, missing handoff
      document, handoff write failure…: ``_BEFORE_REVIEW_KEYS``) and an ``exit_plan_mode``
      refused before its review (not in plan mode, bad plan, no review channel:
      ``_PLAN_BEFORE_REVIEW_KEYS``) get no ``review`` (nobody was asked);
    * the host system prompt: the system text of the first request sent outside plan mode, as one
      ``host`` section (a warning when there is none or it changed during the session).
    * a lone surrogate in any recorded text (JSON can escape one; it cannot be encoded as UTF-8,
      so the scenario loader refuses it) is replaced with U+FFFD, with a warning.

    ``on_progress(events_done)`` is called every few thousand events (a progress bar).
    """
    start = _Replay(graph, Wording())
    start.stages_recorded = any(stage_from_event(ev) is not None for ev in events)
    replay = _walk(events, start, on_progress)
    warnings: list[str] = []
    flags: dict[str, bool] = {}
    steps: list[Step] = []
    for i, step in enumerate(replay.steps):
        if i in replay.state_at:
            changes = {k: v for k, v in replay.need.get(i, {}).items() if flags.get(k, False) != v}
            if changes:
                steps.append(EligibilityFlip(changes))
                flags.update(changes)
            stage, plan = replay.state_at[i]
            steps.append(Expect(next_request=NextRequest(stage=stage, plan_mode=plan)))
        steps.append(step)
    system: tuple[SystemText, ...] = ()
    texts = replay.system_texts
    if texts and texts[0].strip():
        system = (SystemText("host", 0, texts[0]),)
        if any(t != texts[0] for t in texts):
            warnings.append("the host system prompt changed during the session; the replay uses the "
                            "first one")
    elif not texts and any(ev.type == REQUEST_HEADER for ev in events):
        warnings.append("every request was sent in plan mode: the host system prompt is not recovered")
    if replay.dropped_commands:
        shown = ", ".join(repr(line) for line in replay.dropped_commands[:3])
        warnings.append(f"{len(replay.dropped_commands)} recorded command(s) are not slash commands a "
                        f"scenario can hold and were left out: {shown}")
    scrubbed = [0]
    steps, system = _scrub(steps, scrubbed), _scrub(system, scrubbed)
    if scrubbed[0]:
        warnings.append(f"{scrubbed[0]} text(s) held a lone surrogate (not encodable as UTF-8); replaced "
                        "with U+FFFD")
    return Replay(tuple(steps), system, tuple(warnings))
