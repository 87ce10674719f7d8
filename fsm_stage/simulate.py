"""The simulator: run a scenario and record exactly what the model sees at every request.

``simulate(scenario)`` drives a scenario (``fsm_stage.scenario``) through the reference loop
(``fsm_stage.runtime.loop``) with the plan-mode and stage-switch controllers the graph file
asks for, a scripted model and a scripted review channel. For every model request it keeps a
``RequestRecord``: turn/step, stage, plan mode, the system sections (name, order), the
runtime-context entries, the model-visible messages (role, source, text), the tool names, an
estimated token count and a ``PrefixReport`` (the prompt prefix reused from the previous
request, the provider's prompt-cache effect).

Prefix model (``prefix_report``)
--------------------------------
A request is priced as an ordered list of cacheable blocks: each non-empty system section in
order, then each tool spec in catalog order, then each message. Providers cache a request's
longest byte-identical prefix; we count it at block granularity: the reused prefix is the
token sum of the leading blocks identical to the previous request's blocks. ``system`` is
``kept`` when every section (name, order, text) is unchanged; ``tools`` when the catalog
serialises identically; ``messages`` is ``kept`` when the previous request's messages are a
prefix of this one's (a full stage transition ``broken``: it replaces the history with a
handoff notice). Tokens come from the stage switch's meter (``fsm_stage.tokens``: ≈4 Latin
characters per token, one per CJK / full-width character, ≈2 characters per token for other
scripts, plus a per-message overhead).
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import attrs
import filelock

from fsm_stage.config import ConfigFile, load_config
from fsm_stage.constants import STEP_START, USER_MESSAGE
from fsm_stage.errors import LogFormatError, UserError
from fsm_stage.fileio import output_error
from fsm_stage.handoff import LocalHandoffStore, handoff_relative_path
from fsm_stage.log.dsh import read_header
from fsm_stage.log.events import Event, EventLog, MemoryLog, SessionHeader, wall_clock_ms
from fsm_stage.log.jsonl import JsonlLog, writer_lock
from fsm_stage.log.projections import PlanModeFold
from fsm_stage.plan_mode import PlanModeController
from fsm_stage.runtime.abort import AbortSignal
from fsm_stage.runtime.agent import InboxAgent
from fsm_stage.runtime.assembly import Assembly, Request, SystemSection
from fsm_stage.runtime.loop import Loop, ModelReply, ScriptedModel
from fsm_stage.runtime.messages import Message, message_text, source_of, user_message
from fsm_stage.runtime.review import Answer, Question, ReviewDismissed, ScriptedReviewChannel
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.session import Session
from fsm_stage.runtime.tools import ERROR_PREFIX, ToolFailure, ToolOutput, ToolResult, ToolSpec
from fsm_stage.runtime.tools import ToolCall as LoopToolCall
from fsm_stage.scenario import (
    UNSET,
    Command,
    EligibilityFlip,
    EndTurn,
    Expect,
    ModelStep,
    NextRequest,
    Review,
    Scenario,
    Step,
    UserPrompt,
)
from fsm_stage.scenario import ToolCall as ScenarioToolCall
from fsm_stage.stage_switch import StageController
from fsm_stage.tokens import HeuristicTokenMeter

__all__ = [
    "GUIDANCE",
    "Failure",
    "LogTarget",
    "MessageView",
    "Note",
    "PrefixReport",
    "RequestRecord",
    "SectionView",
    "SimulationError",
    "SimulationResult",
    "ToolView",
    "message_view",
    "prefix_report",
    "section_views",
    "simulate",
    "simulate_async",
    "tool_views",
]

Kept = Literal["kept", "changed"]


@attrs.frozen
class SectionView:
    """A rendered system section or runtime-context entry: name, order, text, tokens."""

    name: str
    order: int
    text: str
    tokens: int


@attrs.frozen
class ToolView:
    """One tool of the catalog: name, its serialised spec (``text``) and its tokens."""

    name: str
    text: str
    tokens: int


@attrs.frozen
class MessageView:
    """One model-visible message: ``role``, ``source`` label (``user``, ``model``,
    ``tool <callId>``, ``plugin:plan-mode notice``, ``stage-switch notice``…), its
    readable ``text``, tokens, and ``key`` (role + content JSON, what the provider caches)."""

    role: str
    source: str
    text: str
    tokens: int
    key: str = attrs.field(repr=False)


@attrs.frozen
class PrefixReport:
    """Prompt-cache effect of a request relative to the previous one.

    ``first``: there is no previous request (nothing reusable). ``reused_tokens``: tokens of
    the longest identical leading block run; ``percent``: ``reused_tokens`` over this request's
    tokens (0–100). ``system`` / ``tools``: ``kept`` or ``changed`` (None when first), with a
    one-line ``system_change`` / ``tools_change`` naming the first difference. ``messages``:
    ``kept`` when the previous messages are a prefix of this request's, else ``broken``;
    ``messages_kept``: how many leading messages are unchanged. ``head_percent``: percent of
    the previous request's system+tools tokens this request reuses.
    """

    first: bool
    reused_tokens: int
    total_tokens: int
    percent: float
    system: Kept | None = None
    system_change: str | None = None
    tools: Kept | None = None
    tools_change: str | None = None
    messages: Literal["kept", "broken"] | None = None
    messages_kept: int = 0
    head_percent: float = 0.0


@attrs.frozen
class RequestRecord:
    """Everything one model request carried (see the module docstring), JSON via ``to_json``.

    ``index`` counts requests from 1; ``turn``/``step`` are the loop's numbers; ``stage`` is the
    logged stage when the request was sent (None without a stage graph); ``plan_mode`` the
    logged plan mode; ``tokens`` the estimated total (system + tools + messages); ``seq`` the
    log seq of the request's ``step/start`` (to find it in the ``--log`` output).
    """

    index: int
    turn: int
    step: int
    stage: str | None
    plan_mode: bool
    sections: tuple[SectionView, ...]
    context: tuple[SectionView, ...]
    messages: tuple[MessageView, ...]
    tools: tuple[ToolView, ...]
    prefix: PrefixReport
    seq: int | None = None

    @property
    def system_tokens(self) -> int:
        """Tokens of the system prompt (sum over sections)."""
        return sum(s.tokens for s in self.sections)

    @property
    def tool_tokens(self) -> int:
        """Tokens of the tool catalog."""
        return sum(t.tokens for t in self.tools)

    @property
    def message_tokens(self) -> int:
        """Tokens of the messages."""
        return sum(m.tokens for m in self.messages)

    @property
    def tokens(self) -> int:
        """Estimated request tokens: system + tools + messages."""
        return self.system_tokens + self.tool_tokens + self.message_tokens

    @property
    def tool_names(self) -> tuple[str, ...]:
        """Tool names in catalog order."""
        return tuple(t.name for t in self.tools)

    @property
    def text(self) -> str:
        """Every model-visible text of the request (system, tools, messages), for ``contains``."""
        parts = [s.text for s in self.sections]
        parts += [t.text for t in self.tools]
        parts += [m.text for m in self.messages]
        return "\n".join(parts)

    def to_json(self) -> dict[str, Any]:
        """One JSON record (``simulate --json``): plain dicts, lists, strings and numbers."""
        return {
            "request": self.index,
            "turn": self.turn,
            "step": self.step,
            "seq": self.seq,
            "stage": self.stage,
            "plan_mode": self.plan_mode,
            "system": [{"name": s.name, "order": s.order, "tokens": s.tokens, "text": s.text}
                       for s in self.sections],
            "context": [{"name": c.name, "order": c.order, "tokens": c.tokens, "text": c.text}
                        for c in self.context],
            "messages": [{"role": m.role, "source": m.source, "tokens": m.tokens, "text": m.text}
                         for m in self.messages],
            "tools": [t.name for t in self.tools],
            "tokens": {"system": self.system_tokens, "tools": self.tool_tokens,
                       "messages": self.message_tokens, "total": self.tokens},
            "prefix": attrs.asdict(self.prefix),
        }


# --- building views -----------------------------------------------------------------------------

_METER = HeuristicTokenMeter()


def section_views(items: Sequence[Any], meter: HeuristicTokenMeter = _METER) -> tuple[SectionView, ...]:
    """Views of rendered sections/context entries (anything with ``name``, ``order``, ``text``)."""
    return tuple(SectionView(s.name, s.order, s.text, meter.count_text(s.text)) for s in items)


def tool_views(specs: Sequence[Any], meter: HeuristicTokenMeter = _METER) -> tuple[ToolView, ...]:
    """Views of tool specs (``ToolSpec``): the DSH ``request/header`` entry, compact JSON."""
    out = []
    for spec in specs:
        text = json.dumps(spec.to_json(), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        out.append(ToolView(spec.name, text, meter.count_text(text)))
    return tuple(out)


def _source_label(message: Mapping[str, Any]) -> str:
    src = source_of(message)
    kind = src.get("kind")
    if kind == "plugin":
        form = src.get("form")
        return f"plugin:{src.get('plugin')}" + (f" {form}" if form else "")
    if kind == "tool":
        return "tool"
    if kind is None:
        return "model" if message.get("role") == "assistant" else "user"
    form = src.get("form")
    return str(kind) + (f" {form}" if form and kind != "user" else "")


def _readable_text(message: Mapping[str, Any]) -> str:
    """Text blocks, tool calls as ``→ name(args)`` and tool results with an error marker."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "tool-call":
            args = block.get("arguments", block.get("input", ""))
            args_text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            parts.append(f"→ {block.get('name')}({args_text})")
        elif kind == "tool-result":
            inner = message_text({"content": block.get("content")})
            parts.append(("[error] " if block.get("isError") else "") + inner)
        elif kind == "image":
            parts.append("[image]")
    return "\n".join(p for p in parts if p)


def message_view(message: Mapping[str, Any], meter: HeuristicTokenMeter = _METER) -> MessageView:
    """The view of one surface message (DSH shape: ``{role, content, source, id}``)."""
    role = str(message.get("role", "user"))
    content = message.get("content")
    tokens = meter.count_nodes([Event(USER_MESSAGE, 0, 0, {"content": content})])
    key = json.dumps([role, content], ensure_ascii=False, sort_keys=True)
    return MessageView(role, _source_label(message), _readable_text(message), tokens, key)


# --- the prefix / cache report (pure) -------------------------------------------------------------


def _first_section_change(prev: Sequence[SectionView], cur: Sequence[SectionView]) -> str | None:
    """One line naming the first section (in order) that differs, or None when identical."""
    p = {(s.name, s.order): s.text for s in prev}
    c = {(s.name, s.order): s.text for s in cur}
    for name, order in sorted(set(p) | set(c), key=lambda k: (k[1], k[0])):
        if (name, order) not in p:
            return f"{name} (order {order}) added"
        if (name, order) not in c:
            return f"{name} (order {order}) removed"
        if p[(name, order)] != c[(name, order)]:
            return f"{name} (order {order}) changed"
    return None


def _first_tool_change(prev: Sequence[ToolView], cur: Sequence[ToolView]) -> str | None:
    pn, cn = [t.name for t in prev], [t.name for t in cur]
    if pn != cn:
        added = [n for n in cn if n not in pn]
        removed = [n for n in pn if n not in cn]
        bits = ([f"added {', '.join(added)}"] if added else []) + (
            [f"removed {', '.join(removed)}"] if removed else [])
        return "; ".join(bits) or "reordered"
    for a, b in zip(prev, cur, strict=True):
        if a.text != b.text:
            return f"{a.name} changed"
    return None


def _blocks(sections: Sequence[SectionView], tools: Sequence[ToolView],
            messages: Sequence[MessageView]) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = [(f"s\0{s.name}\0{s.order}\0{s.text}", s.tokens) for s in sections]
    out += [(f"t\0{t.text}", t.tokens) for t in tools]
    out += [(f"m\0{m.key}", m.tokens) for m in messages]
    return out


def prefix_report(
    prev: RequestRecord | None,
    sections: Sequence[SectionView],
    tools: Sequence[ToolView],
    messages: Sequence[MessageView],
) -> PrefixReport:
    """Compare a request (its section, tool and message views) with the previous ``RequestRecord``.

    Pure. Returns a ``PrefixReport`` (see its docstring and the module docstring for the
    block model). ``prev=None`` gives ``first=True`` with nothing reused.
    """
    cur_blocks = _blocks(sections, tools, messages)
    total = sum(t for _, t in cur_blocks)
    if prev is None:
        return PrefixReport(first=True, reused_tokens=0, total_tokens=total, percent=0.0)
    prev_blocks = _blocks(prev.sections, prev.tools, prev.messages)
    reused = 0
    for (a, ta), (b, _tb) in zip(prev_blocks, cur_blocks, strict=False):
        if a != b:
            break
        reused += ta
    system_change = _first_section_change(prev.sections, sections)
    tools_change = _first_tool_change(prev.tools, tools)
    kept = 0
    for a_msg, b_msg in zip(prev.messages, messages, strict=False):
        if a_msg.key != b_msg.key:
            break
        kept += 1
    head_prev = prev.system_tokens + prev.tool_tokens
    head_reused = min(reused, head_prev)
    return PrefixReport(
        first=False,
        reused_tokens=reused,
        total_tokens=total,
        percent=round(100.0 * reused / total, 1) if total else 100.0,
        system="kept" if system_change is None else "changed",
        system_change=system_change,
        tools="kept" if tools_change is None else "changed",
        tools_change=tools_change,
        messages="kept" if kept == len(prev.messages) else "broken",
        messages_kept=kept,
        head_percent=round(100.0 * head_reused / head_prev, 1) if head_prev else 100.0,
    )


# --- running a scenario -----------------------------------------------------------------------------


class SimulationError(UserError):
    """The scenario cannot be run as written (e.g. a model step with no turn to answer in).

    The message is one line starting with the scenario position ``FILE:LINE:COL``.
    """


@attrs.frozen
class Failure:
    """An expectation that did not hold: where (scenario position), what, expected, actual."""

    where: str
    check: str
    expected: str
    actual: str

    def line(self) -> str:
        """``FILE:LINE:COL: expect CHECK: expected X, got Y`` (one line)."""
        return f"{self.where}: expect {self.check}: expected {self.expected}, got {self.actual}"


@attrs.frozen
class Note:
    """Something the scenario did between requests, shown in the human view.

    ``kind``: ``user`` | ``command`` | ``tool`` | ``review`` | ``eligible`` | ``turn`` | ``expect`` |
    ``warning``;
    ``text``: one readable line (or a few); ``after``: requests recorded before it.
    """

    kind: str
    text: str
    after: int


@attrs.frozen
class SimulationResult:
    """What ``simulate`` produced: the per-request ``records``, the ``notes`` timeline, the
    expectation ``failures`` (empty = every ``expect:`` held), the ``graph`` path used and the
    session ``log`` (an ``EventLog``: ``MemoryLog`` or the ``--log`` ``JsonlLog``), the number of
    ``checks`` made, the ``scenario`` path and ``warnings``: one line per scenario entry that had
    no effect (a scripted review nobody asked for); warnings do not make ``ok`` false."""

    records: tuple[RequestRecord, ...]
    notes: tuple[Note, ...]
    failures: tuple[Failure, ...]
    graph: Path
    log: EventLog
    checks: int = 0
    scenario: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when every expectation held."""
        return not self.failures


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
                 cwd: Path, meter: HeuristicTokenMeter) -> None:
        self.scenario, self.config, self.graph_path, self.cwd, self.meter = (
            scenario, config, graph_path, cwd, meter)
        self.steps = scenario.steps
        self.i = 0
        self.flags: dict[str, bool] = dict(scenario.eligible)
        self.records: list[RequestRecord] = []
        self._views: dict[str, tuple[Any, tuple[str, str], MessageView]] = {}  # message id -> view
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
        self.session = Session(log)
        self.review = ScriptedReviewChannel(default=self._answer_review)
        self.runtime = _SimRuntime(self, review=self.review)
        self.runtime.add_assemble_hook(self._on_assemble)
        self.runtime.add_pre_step(self._on_pre_step)  # first participant: before any flush
        for sec in scenario.system:
            self.runtime.add_section(SystemSection(sec.name, sec.order, self._constant(sec.text)))
        self.stage: StageController | None = None
        self.plan: PlanModeController | None = None
        graph = config.graph
        self.handoffs = _TrackedHandoffStore(cwd)
        if graph is not None:
            self.stage = StageController(graph, handoffs=self.handoffs, token_meter=meter)
            self.runtime.attach(self.stage)
            self.stage.register_eligibility(self._flag(GUIDANCE))
            for name in sorted(_guard_names(config)):
                self.stage.register_eligibility(self._flag(name), name=name)
        if config.plan_mode is not None:
            self.plan = _attach_plan_mode(self.runtime, config)
        provided = set(self.runtime.tools)
        canned = sorted({c.tool for s in self.steps if isinstance(s, ModelStep) for c in s.calls
                         if c.result is not None and c.tool not in provided})
        for name in canned:
            self.runtime.add_tool(_CannedTool(self, name))
        self.agent = InboxAgent(self.session)
        # The reference loop's scripted model, one script item per model step (each answers one
        # request) plus one more that reports a request no model step answers.
        answers = sum(isinstance(s, ModelStep) for s in self.steps) + 1
        self.model = ScriptedModel([self.answer] * answers, provider="scripted", name="fsm-stage-simulate")
        self.loop = Loop(self.runtime, self.agent, self.model)

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
        call = self.scenario_call()
        review = call.review if call is not None else None
        if review is None:
            where = self.model_step.where if self.model_step is not None else self.scenario.path
            name = call.tool if call is not None else "a tool"
            self.fatal = SimulationError(
                f"{where}: {name} asked the human a review ({q.id}) but the call has no `review:` "
                "outcome (approve, keep, dismiss, abort or {feedback: TEXT})")
            raise RuntimeError("no scripted review outcome")
        if self.current_call is not None:
            self.reviewed.add(self.current_call.id)
        self._note("review", f"review {q.id}: {review.kind}"
                   + (f" ({review.feedback})" if review.feedback else ""))
        if review.kind == "approve":
            return [Answer(q.id, (q.options[0].label,))]
        if review.kind == "keep":
            return [Answer(q.id, (q.options[-1].label,))]
        if review.kind == "feedback":
            return [Answer(q.id, (q.options[-1].label,), review.feedback or "")]
        if review.kind == "dismiss":
            raise ReviewDismissed("review dismissed")
        self.loop.abort("user")
        raise RuntimeError("the review was aborted: the user stopped the turn")

    def answer(self, request: Request) -> ModelReply:
        """The model's answer to ``request``: record it, run pending checks, play the next step."""
        self.raise_fatal()
        record = self._record(request)
        self.records.append(record)
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
        return ModelReply(text=step.text, tool_calls=tuple(calls))

    def raise_fatal(self) -> None:
        if self.fatal is not None:
            raise self.fatal

    # --- the driver -------------------------------------------------------------------------------

    async def run(self) -> None:
        while self.i < len(self.steps):
            step = self.steps[self.i]
            if isinstance(step, ModelStep):
                if not self.agent.wants_turn:
                    raise SimulationError(
                        f"{step.where}: model step with no turn to answer in: the previous model step "
                        "had no tool calls, so its turn ended; start a turn with a user prompt (or a "
                        "command that steers text) first")
                await self.loop.run_until_idle()
                self.raise_fatal()
                continue
            self.i += 1
            await self._do(step, in_turn=False)
        if self.agent.wants_turn:
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
        elif isinstance(step, EndTurn):
            if in_turn and step.reason == "aborted":
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
        tools = tool_views(request.tools, self.meter)
        messages = tuple(self._message_view(m) for m in request.messages)
        prev = self.records[-1] if self.records else None
        turn, step, seq = self._turn_step()
        return RequestRecord(
            index=len(self.records) + 1, turn=turn, step=step, stage=self.current_stage(),
            plan_mode=self.plan_active(), sections=sections, context=context, messages=messages,
            tools=tools, prefix=prefix_report(prev, sections, tools, messages), seq=seq)

    def _message_view(self, message: Mapping[str, Any]) -> MessageView:
        """``message_view``, computed once per message: every request lists all the messages so
        far, so pricing and rendering each again made a session's run quadratic. The runtime hands
        out deep copies, so a hit is keyed by the message id and checked by equal content, role
        and source label (comparing is far cheaper than pricing)."""
        content = message.get("content")
        role, label = str(message.get("role", "user")), _source_label(message)
        key = message.get("id")
        hit = self._views.get(key) if isinstance(key, str) else None
        if hit is not None and hit[1] == (role, label) and hit[0] == content:
            return hit[2]
        view = message_view(message, self.meter)
        if isinstance(key, str) and isinstance(content, list | dict):
            self._views[key] = (content, (role, label), view)
        return view

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
        text = record.text
        label = f"request {record.index} (turn {record.turn} step {record.step})"
        for where, nr in pending:
            states = (("stage", nr.stage, record.stage), ("plan_mode", nr.plan_mode, record.plan_mode))
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
                                   ("messages", nr.prefix.messages)):
                    if want is None:
                        continue
                    self.checks += 1
                    got = "first request" if p.first else getattr(p, part)
                    if got != want:
                        why = {"system": p.system_change, "tools": p.tools_change}.get(part)
                        self._fail(where, f"next_request.prefix.{part}", f"{want} in {label}",
                                   f"{got}" + (f" ({why})" if why else ""))


_PLAN_FOLD = PlanModeFold()


def _attach_plan_mode(runtime: Runtime, config: ConfigFile) -> PlanModeController:
    """Attach plan mode (``config.plan_mode``) in the graph's language; returns the controller."""
    language = config.graph.language if config.graph is not None else "en"
    controller = PlanModeController(config.plan_mode, language=language)
    runtime.attach(controller)
    return controller


def _plan_pending(plan: PlanModeController | None, agent: InboxAgent) -> bool | None:
    """The target of the pending plan-mode selection (None when nothing is pending)."""
    return plan.get(agent).pending if plan is not None else None


def _header(scenario: Scenario, cwd: Path) -> SessionHeader:
    sub = scenario.session.subagent
    return SessionHeader(
        id=scenario.session_id, created_at=wall_clock_ms(), cwd=str(cwd),
        delegation_depth=1 if sub else 0, origin="subagent" if sub else None,
        parent_session=(scenario.session.parent or f"{scenario.session_id}-parent") if sub else None)


def prepare(scenario: Scenario, *, graph: str | Path | None = None) -> tuple[Path, ConfigFile]:
    """Load the graph a run uses (``graph`` overrides the scenario's) and check the scenario's
    names against it before anything runs: ``expect`` stages (``stage``, ``pending_stage``,
    ``handoff_exists``, ``handoff_missing``, ``next_request.stage``) must be stages of the graph,
    eligibility names (``eligible:`` and every flip) ``guidance`` or a guard named on its edges.

    Returns ``(graph path, config)``. Raises ``ConfigError`` for a bad graph and
    ``SimulationError`` listing every unknown name, one line each (``FILE:LINE:COL: …``).
    """
    graph_path = Path(graph) if graph is not None else scenario.graph
    config = load_config(graph_path)
    problems = _name_problems(scenario, config, graph_path)
    if problems:
        raise SimulationError("\n".join(problems))
    return graph_path, config


def _guard_names(config: ConfigFile) -> frozenset[str]:
    graph = config.graph
    if graph is None:
        return frozenset()
    # Omitted ``targets`` mean unguarded edges to every other stage: only explicit edges carry guards.
    return frozenset(g for st in graph.stages for edge in st.targets or () for g in edge.guards)


def _name_problems(scenario: Scenario, config: ConfigFile, graph_path: Path) -> list[str]:
    stages = [st.name for st in config.graph.stages] if config.graph is not None else []
    known_flags = _guard_names(config) | {GUIDANCE}
    out: list[str] = []

    def flags(values: Mapping[str, bool], where: str) -> None:
        unknown = sorted(set(values) - known_flags)
        if unknown:
            out.append(f"{where}: unknown eligibility predicate(s) {', '.join(unknown)}; this graph "
                       f"knows {', '.join(sorted(known_flags))}")

    def stage(where: str, key: str, name: object) -> None:
        if isinstance(name, str) and name not in stages:
            have = f"({', '.join(stages)})" if stages else "(it has no stage graph)"
            out.append(f"{where}: expect {key}: {name!r} is not a stage of {graph_path} {have}")

    flags(scenario.eligible, f"{scenario.path}: eligible")
    for step in scenario.steps:
        if isinstance(step, EligibilityFlip):
            flags(step.values, step.where)
        elif isinstance(step, Expect):
            stage(step.where, "stage", step.stage)
            stage(step.where, "pending_stage", step.pending_stage)
            for name in step.handoff_exists:
                stage(step.where, "handoff_exists", name)
            for name in step.handoff_missing:
                stage(step.where, "handoff_missing", name)
            if step.next_request is not None:
                stage(step.where, "next_request.stage", step.next_request.stage)
    return out


class LogTarget:
    """The ``--log`` output while a run writes it: the target's writer lock is held, the run writes
    a ``JsonlLog`` in a hidden temporary folder beside the target, and ``commit()`` renames it
    into place. ``close()`` removes the temporary folder and releases the lock; the lock file
    itself stays, as filelock intends (waiters must share one inode; ``JsonlLog`` leaves it too).

    Use ``LogTarget.open(path, inputs=…, replace=…)``; see ``simulate`` for the rules.
    """

    def __init__(self, out: Path, lock: filelock.BaseFileLock, folder: Path) -> None:
        self.out, self._lock, self.folder = out, lock, folder
        self.log: JsonlLog | None = None

    @classmethod
    def open(cls, path: str | Path, *, inputs: Mapping[str, Path], replace: bool) -> LogTarget:
        """Take ``path``'s writer lock and check it may be written.

        ``inputs``: files the run reads, by role (``{"scenario": …, "graph": …}``), never
        overwritten. Raises ``LogLockedError`` (a live writer holds the log), ``UserError`` (the
        target is an input, a directory, an existing file that is not a session log, an existing
        session log without ``replace``, or cannot be written). Creates missing parent folders.
        """
        out = Path(path)
        if out.is_dir():
            raise UserError(f"{out}: cannot write session log: it is a directory")
        _refuse_inputs(out, inputs)
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
        except (OSError, ValueError) as err:
            raise _log_error(out, err) from None
        try:
            lock = writer_lock(out)  # LogLockedError / LockFileError (a UserError) as they are
        except ValueError as err:
            raise _log_error(out, err) from None
        try:
            _refuse_inputs(out, inputs)  # re-checked under the lock
            _check_existing_log(out, replace)
            # under the lock no other run writes here: leftovers are from a killed run (SIGKILL)
            for stale in out.parent.glob(f".{glob.escape(out.name)}.*.partial"):
                if stale.is_dir() and not stale.is_symlink():
                    shutil.rmtree(stale, ignore_errors=True)
            folder = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
        except OSError as err:
            lock.release()
            raise _log_error(out, err) from None
        except BaseException:
            lock.release()
            raise
        return cls(out, lock, folder)

    def writer(self, header: SessionHeader) -> JsonlLog:
        """The ``JsonlLog`` the run appends to (in the temporary folder)."""
        self.log = JsonlLog(self.folder / self.out.name, header=header)
        return self.log

    def commit(self) -> None:
        """Close the writer and atomically replace the target with the finished log."""
        assert self.log is not None
        self.log.close()
        try:
            os.replace(self.log.path, self.out)
        except OSError as err:
            raise _log_error(self.out, err) from None
        self.log.path = self.out  # the closed writer now names the file it wrote

    def close(self) -> None:
        """Remove the temporary folder (whatever is in it) and release the target's lock."""
        if self.log is not None:
            self.log.close()
        shutil.rmtree(self.folder, ignore_errors=True)
        self._lock.release()


def _log_error(out: Path, err: OSError | ValueError) -> UserError:
    if isinstance(err, ValueError):
        return UserError(f"{out!r}: cannot write session log: {err}")
    return output_error(out, err, what="session log")


def _refuse_inputs(out: Path, inputs: Mapping[str, Path]) -> None:
    for role, path in inputs.items():
        with contextlib.suppress(OSError, ValueError):
            if out.exists() and out.samefile(path):
                raise UserError(f"{out}: refusing to overwrite the {role} file with the session log")


def _check_existing_log(out: Path, replace: bool) -> None:
    if not out.exists() and not out.is_symlink():
        return
    if not out.is_file():
        raise UserError(f"{out}: cannot write session log: not a regular file")
    try:
        with out.open("rb") as fh:
            read_header(fh, str(out))
    except LogFormatError:
        raise UserError(f"{out}: exists and is not a session log; refusing to overwrite it") from None
    if not replace:
        raise UserError(f"{out}: session log already exists; pass --force to replace it")


async def simulate_async(
    scenario: Scenario,
    *,
    graph: str | Path | None = None,
    log_path: str | Path | None = None,
    replace_log: bool = False,
    cwd: str | Path | None = None,
    meter: HeuristicTokenMeter | None = None,
) -> SimulationResult:
    """Run ``scenario`` (see ``simulate``) inside a running event loop."""
    graph_path, config = prepare(scenario, graph=graph)
    meter = meter if meter is not None else HeuristicTokenMeter()
    with contextlib.ExitStack() as stack:
        target: LogTarget | None = None
        if log_path is not None:
            target = LogTarget.open(log_path, inputs={"scenario": Path(scenario.path), "graph": graph_path},
                                    replace=replace_log)
            stack.callback(target.close)
        if cwd is not None:
            work = _work_folder(Path(cwd), f"--cwd {str(cwd)!r}")
        elif scenario.session.cwd is not None:
            work = _work_folder(Path(scenario.path).parent / scenario.session.cwd,
                                f"{scenario.path}: session.cwd {scenario.session.cwd!r}")
        else:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fsm-sim-")))
        header = _header(scenario, work)
        log: EventLog = target.writer(header) if target is not None else MemoryLog(header)
        engine = _Engine(scenario, config, graph_path, log, work, meter)
        await engine.run()
        if target is not None:
            target.commit()
        return SimulationResult(tuple(engine.records), tuple(engine.notes), tuple(engine.failures),
                                graph_path, log, engine.checks, scenario.path, tuple(engine.warnings))
    raise AssertionError("unreachable")  # pragma: no cover - ExitStack does not swallow


def _work_folder(path: Path, shown: str) -> Path:
    """The session working directory, created when missing; a one-line ``SimulationError`` when
    it cannot be (a file is in the way, no permission, a NUL byte in the name) or is read-only."""
    try:
        work = path.resolve()
        work.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise SimulationError(f"{shown}: not a folder (a file is in the way)") from None
    except (OSError, ValueError) as err:
        reason = err.strerror.lower() if isinstance(err, OSError) and err.strerror else str(err)
        raise SimulationError(f"{shown}: cannot create the folder: {reason}") from None
    if not os.access(work, os.W_OK | os.X_OK):
        raise SimulationError(f"{shown}: the folder is not writable")
    return work


def simulate(
    scenario: Scenario,
    *,
    graph: str | Path | None = None,
    log_path: str | Path | None = None,
    replace_log: bool = False,
    cwd: str | Path | None = None,
    meter: HeuristicTokenMeter | None = None,
) -> SimulationResult:
    """Run ``scenario`` through the reference loop and record every model request.

    ``graph`` overrides the scenario's graph file (``--graph``). ``log_path``: also write the
    DSH-shaped session log there (``--log``). The target's one-writer lock (the one ``JsonlLog``
    takes) is held for the whole run, so a live writer makes this raise ``LogLockedError``
    before anything runs; the scenario and graph files are never overwritten, nor any existing
    file that is not a session log; an existing session log is replaced only when
    ``replace_log`` (``--force``). The log is written in a hidden temporary folder beside the
    target and renamed over it when the run finishes; a failed or interrupted run leaves the
    target as it was and no temporary file behind (the ``<log>.lock`` file stays, as with every
    ``JsonlLog`` writer: filelock keeps it so waiters share one inode). Missing parent folders
    are created.
    ``cwd``: the session's working directory (default: the scenario's
    ``session.cwd``, else a temporary directory removed afterwards); handoff documents are
    written under it. ``meter``: the token meter (default ``HeuristicTokenMeter()``).

    Returns a ``SimulationResult`` (records, notes, failed expectations). Raises ``ConfigError``
    for a bad graph and ``SimulationError`` when the scenario cannot be run as written (both
    ``UserError``: one line).
    """
    out: list[SimulationResult] = []

    async def main() -> None:
        # The main task returns nothing: asyncio.run restores the SIGINT handler through
        # signal._int_to_enum, whose failed enum lookup formats the old handler (a partial holding
        # the main task, whose repr holds its result) — every record and message once more.
        out.append(await simulate_async(scenario, graph=graph, log_path=log_path,
                                        replace_log=replace_log, cwd=cwd, meter=meter))

    asyncio.run(main())
    return out[0]


# --- the human view -----------------------------------------------------------------------------------

_WIDTH = 120
_PAD = " " * 13


def _one_line(text: str, width: int) -> str:
    flat = " ⏎ ".join(part.strip() for part in text.strip().splitlines() if part.strip())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _indent(text: str, pad: str) -> str:
    return "\n".join(pad + line for line in text.splitlines()) if text else pad + "(empty)"


def _part(name: str, state: str | None, why: str | None) -> str:
    return f"{name} kept" if state == "kept" else f"{name} CHANGED" + (f" ({why})" if why else "")


def render_request(record: RequestRecord, *, full: bool = False) -> list[str]:
    """The human view of one request, as explained line by line in the README:

    a heading (request number, turn/step, stage, plan mode, estimated tokens); ``system``: one
    line per section (order, name, tokens); ``context``: runtime-context entries; ``tools``;
    ``messages``: how many are kept from the previous request and one line per new message
    (role, source, tokens, text); ``prefix``: tokens reused from the previous request and
    whether the system prompt, the tool catalog and the message history were kept.
    ``full=True`` prints every text in full under its line.
    """
    out = [f"━━ request {record.index} · turn {record.turn} step {record.step} · stage "
           f"{record.stage if record.stage is not None else '-'} · plan mode "
           f"{'on' if record.plan_mode else 'off'} · ~{record.tokens} tokens"]
    head = "   system    "
    if not record.sections:
        out.append(head + "(empty)")
    for s in record.sections:
        out.append(f"{head}[{s.order:>3}] {s.name:<20} {s.tokens:>5} tok")
        head = _PAD
        if full:
            out.append(_indent(s.text, _PAD + "      "))
    head = "   context   "
    for c in record.context:
        out.append(f"{head}[{c.order:>3}] {c.name:<20} {c.tokens:>5} tok  {_one_line(c.text, 60)}")
        head = _PAD
        if full:
            out.append(_indent(c.text, _PAD + "      "))
    out.append(f"   tools     {', '.join(record.tool_names) or '(none)'} ({record.tool_tokens} tok)")
    p = record.prefix
    kept = 0 if p.first else min(p.messages_kept, len(record.messages))
    new = record.messages[kept:]
    if p.first:
        shown = f"{len(new)} new"
    elif p.messages == "kept":
        shown = f"{kept} kept from request {record.index - 1}, {len(new)} new"
    else:
        shown = f"history replaced: {kept} kept, {len(new)} new"
    out.append(f"   messages  {len(record.messages)} ({record.message_tokens} tok): {shown}")
    for m in new:
        label = f"+ {m.role:<9} {m.source:<25} {m.tokens:>5} tok  "
        # a runtime-context snapshot: show its entries, not its fixed intro paragraph
        text = m.text.split("\n\n", 1)[-1] if m.source.endswith(" snapshot") else m.text
        out.append(_PAD + label + _one_line(text, max(30, _WIDTH - len(_PAD) - len(label))))
        if full:
            out.append(_indent(m.text, _PAD + "    "))
    if p.first:
        out.append("   prefix    first request: nothing cached yet")
    else:
        msgs = "messages kept" if p.messages == "kept" else "messages BROKEN"
        out.append(f"   prefix    reused {p.reused_tokens} of {p.total_tokens} tok ({p.percent:g}%) · "
                   f"{_part('system', p.system, p.system_change)} · {_part('tools', p.tools, p.tools_change)}"
                   f" · {msgs}")
    return out


def render_human(result: SimulationResult, *, full: bool = False) -> str:
    """The whole human view: notes (what the scenario did) interleaved with each request, then
    a summary line and, when expectations failed, one line per failure."""
    header = result.log.header
    kind = " (subagent)" if header.is_subagent else ""
    lines: list[str] = [f"scenario {result.scenario} · graph {result.graph} · session {header.id}{kind}"]
    notes = list(result.notes)
    k = 0

    def flush(upto: int) -> None:
        nonlocal k
        while k < len(notes) and notes[k].after <= upto:
            n = notes[k]
            k += 1
            if n.kind == "expect" and n.text.startswith("ok"):
                lines.append(f"   ✓ expect {n.text[3:]}")
            elif n.kind == "expect":
                lines.append(f"   ✗ expect {n.text}")
            elif n.kind == "warning":
                lines.append(f"   ! warning: {n.text}")
            elif n.kind == "user":
                lines.append(f"   » user: {_one_line(n.text, _WIDTH - 11)}")
            else:
                lines.append(f"   » {_one_line(n.text, _WIDTH - 5)}")

    for record in result.records:
        flush(record.index - 1)
        lines.extend(render_request(record, full=full))
    flush(len(result.records))
    total = sum(r.tokens for r in result.records)
    reused = sum(r.prefix.reused_tokens for r in result.records)
    turns = len({r.turn for r in result.records})
    lines.append("")
    share = 100.0 * reused / total if total else 0.0
    lines.append(f"{len(result.records)} requests in {turns} turn(s) · ~{total} tokens sent · {reused} "
                 f"reused from the previous request ({share:.0f}%) · expectations: "
                 f"{result.checks - len(result.failures)} of {result.checks} passed"
                 + (f" · {len(result.warnings)} warning{'s' if len(result.warnings) != 1 else ''}"
                    if result.warnings else ""))
    if result.failures:
        lines.append(f"FAILED {len(result.failures)} expectation(s):")
        lines.extend(f"  {f.line()}" for f in result.failures)
    return "\n".join(lines)
