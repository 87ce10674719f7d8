"""``StagedSession``: the public step driver for a host's own agent loop (docs/step-driver.md).

It writes the DSH event order of a turn and its steps (docs/session-log.md; docs/contracts.md)
so a host calls, per turn: ``start_turn`` → per step ``begin_step`` (claim inbox, assemble,
accept, ``pre_step``, context snapshot, ``step/start``, user messages, ``request/header``) →
``record_reply`` → ``run_tool`` / ``record_tool_result`` per call → ``end_step`` → ``end_turn``.
The reference ``Loop`` is built on it. State is read from the log (``openstep``), so a new
process with a new ``Session`` over a reopened log resumes a suspended step (``suspended`` /
``resume``) or closes it (``cancel``). Messages handed out are deep copies; what the host
records is shape-checked before anything is written (``RecordShapeError``). The contract
table is in ``docs/step-driver.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import inspect
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, cast

import attrs

from fsm_stage.constants import (
    ASSISTANT_MESSAGE,
    REQUEST_HEADER,
    STEP_END,
    STEP_START,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
)
from fsm_stage.driver import _budget, _hostcall, _records
from fsm_stage.driver._openstep import CallState, OpenTurnFold, OpenTurnView
from fsm_stage.driver._records import ABORTED, ABORTED_BEFORE_DISPATCH, TURN_END_KINDS, dismiss, shape
from fsm_stage.driver._repair import hold_live, is_turn_live, release_live, repair_open_turn
from fsm_stage.driver._request import StepRequest, SuspendedCall, SuspendedStep
from fsm_stage.errors import DriverStateError, RecordShapeError, ReviewPending, TurnSuspendedError
from fsm_stage.log.events import Event, NewEvent
from fsm_stage.runtime.abort import AbortSignal
from fsm_stage.runtime.agent import InboxAgent
from fsm_stage.runtime.assembly import SNAPSHOT_FOLD, snapshot_if_changed
from fsm_stage.runtime.messages import Message, new_id
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.session import TURN_FOLD, Session, deep_copies
from fsm_stage.runtime.tools import (
    ToolCall,
    ToolResult,
    ToolSpec,
    result_data,
    step_position,
    tool_result_message,
)

__all__ = [
    "ABORTED",
    "ABORTED_BEFORE_DISPATCH",
    "TURN_END_KINDS",
    "DriverStateError",
    "RecordShapeError",
    "StagedSession",
    "StepRequest",
    "SuspendedCall",
    "SuspendedStep",
    "TurnSuspendedError",
]

_MAX_BUDGET_RETRIES = 3  # a redeemed budget review changes the stage or the budget once
AcceptFn = Callable[[InboxAgent, list[Message]], bool]
F = TypeVar("F", bound=Callable[..., Any])


def _writes(fn: F) -> F:
    """Run a ``StagedSession`` method inside ``_writing`` (sync or async)."""
    if inspect.iscoroutinefunction(fn):
        async def run_async(self: StagedSession, *args: Any, **kwargs: Any) -> Any:
            with self._writing():
                return await fn(self, *args, **kwargs)
        return cast(F, functools.wraps(fn)(run_async))

    def run(self: StagedSession, *args: Any, **kwargs: Any) -> Any:
        with self._writing():
            return fn(self, *args, **kwargs)
    return cast(F, functools.wraps(fn)(run))


class StagedSession:
    """The step driver for ``agent`` (an ``InboxAgent``) on ``runtime``.

    ``config`` is the ``request/header`` config (``{"provider", "model", ...}``); ``accept``
    (optional) is the host's accept decision on a step's inbox batch (False: ``begin_step``
    returns None and the host ends the turn as ``blocked``). Raises ``TypeError`` for a
    non-mapping ``config``. See ``docs/step-driver.md`` for the call order.
    """

    # slotted: a process may hold thousands of drivers mid-turn (docs/performance.md, row 15)
    __slots__ = ("__weakref__", "_dropped", "_fold", "_last_header", "_live", "_running",
                 "_signal", "accept", "agent", "budget", "config", "runtime")

    def __init__(self, runtime: Runtime, agent: InboxAgent, *, config: Mapping[str, Any] | None = None,
                 accept: AcceptFn | None = None) -> None:
        if config is not None and not isinstance(config, Mapping):
            raise TypeError(f"config must be a mapping, got {type(config).__name__}")
        self.runtime = runtime
        self.agent = agent
        self.config: dict[str, Any] = dict(config or {})
        self.accept = accept
        # digest of the last request header this driver logged + the log's header count after it
        self._last_header: bytes | None = None
        self._signal: AbortSignal | None = None
        self._live = False
        self._running: dict[str, asyncio.Task[Any]] | None = None  # made by the first tool call
        self.budget: _budget.Gate = _budget.OPEN
        self._fold = OpenTurnFold()
        self._dropped = False  # the live-turn mark was released by an exception mid-turn
        runtime.track(agent.session)

    # --- reading -------------------------------------------------------------------------------

    @property
    def session(self) -> Session:
        """The agent's session."""
        return self.agent.session

    @property
    def signal(self) -> AbortSignal:
        """The open turn's abort signal (forwarded to tools and reviews); a fresh one if none."""
        if self._signal is None:
            self._signal = AbortSignal()
        return self._signal

    def view(self) -> OpenTurnView | None:
        """The fold of the log's open turn (``openstep.OpenTurnView``), None when idle. Folded
        incrementally: only the events appended since the last read are folded."""
        return self._turn().view()

    def _turn(self) -> OpenTurnFold:
        """The open-turn fold, caught up with the log (check ``.open``)."""
        self._fold.sync(self.session.events)
        return self._fold

    def _open(self, doing: str) -> OpenTurnFold:
        fold = self._turn()
        if not fold.open:
            raise DriverStateError(f"{doing}: no turn is open; call start_turn() first")
        return fold

    def _open_step(self, doing: str) -> OpenTurnFold:
        fold = self._open(doing)
        if fold.open_step is None:
            raise DriverStateError(f"{doing}: no step is open; call begin_step() first")
        return fold

    def suspended(self) -> SuspendedStep | None:
        """The open step's suspended calls (recorded ``tool/call``, no ``tool/result``, a logged
        ``fsm/review/request`` with that ``callId``) and its not-dispatched calls; None when
        nothing is suspended."""
        fold = self._turn()
        suspended = fold.suspended() if fold.open else ()
        if not suspended:
            return None
        return SuspendedStep(
            fold.turn, fold.open_step[1] if fold.open_step else None,
            tuple(SuspendedCall(c.call, c.review_id or "", c.review_answered) for c in suspended),
            tuple(c.call for c in fold.step_calls() if c.call_seq is None and not c.answered))

    def unsettled(self) -> tuple[ToolCall, ...]:
        """Calls of the open step's reply without a ``tool/result`` yet, in order."""
        fold = self._turn()
        return tuple(c.call for c in fold.step_calls() if c.unsettled) if fold.open else ()

    def _raise_if_suspended(self, fold: OpenTurnFold) -> None:
        suspended = fold.suspended()
        if suspended:
            raise TurnSuspendedError(fold.turn, [c.review_id or "" for c in suspended],
                                     [c.call.id for c in suspended], [c.review_answered for c in suspended])

    # --- turn ----------------------------------------------------------------------------------

    def repair(self) -> list[Event]:
        """Crash repair (``fsm_stage.driver``): close a dead open turn (not one a loop of this
        process runs, not a suspended one); returns the events written (``[]`` if none). Reads
        what other writers appended first (``Session.refresh``), so it decides on the log's
        real end."""
        self.session.refresh()
        if not self.session.is_turn_open or is_turn_live(self.session.id):
            return []
        return repair_open_turn(self.session)

    def _hold_live(self) -> None:
        if not self._live:
            hold_live(self.session.id, self)
            self._live = True

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Around a call that writes the open turn: release this driver's live-turn mark
        when anything but a caller's misuse (``DriverStateError``, ``RecordShapeError``: nothing
        written) or a suspension escapes (a dead database, a failing tool host, a cancelled
        task): the turn is then no longer run by a live loop, so ``repair()`` may close it. The
        next writing call on the open turn takes the mark again."""
        if self._dropped and self.session.is_turn_open:
            self._hold_live()
        self._dropped = False
        try:
            yield
        except (DriverStateError, RecordShapeError, ReviewPending):
            raise
        except BaseException:
            if self._live:
                self._release(signal=False)
                self._dropped = True
            raise

    def _release(self, *, signal: bool) -> None:
        if self._live:
            release_live(self.session.id, self)
            self._live = False
        if signal:
            self._signal = None

    def start_turn(self) -> int:
        """Append ``turn/start {turn}`` (numbers continue from the log); returns the turn number.
        Raises ``TurnSuspendedError`` when the open turn is suspended, ``DriverStateError``
        when another turn is open (``repair()`` first after a crash)."""
        view = self._turn()
        if view.open:
            self._raise_if_suspended(view)
            raise DriverStateError(f"start_turn: turn {view.turn} is still open; end it (end_turn / "
                                   "cancel) or, after a crash, call repair()")
        turn = self.session.last_turn + 1
        self._signal = AbortSignal()
        self.session.append(TURN_START, {"turn": turn})
        self._hold_live()
        return turn

    @_writes
    def end_turn(self, reason: str = "completed", *, message: str | None = None,
                 cause: str | None = None) -> Event:
        """Append ``turn/end``: ``completed`` / ``blocked`` → ``{kind}`` (``blocked`` with a
        ``message`` → ``{kind, message}``, e.g. the budget stop reason); ``error`` →
        ``{kind, error: {message}}``; ``aborted`` → ``{kind, reason: {kind: cause or "user"}}``.
        Raises ``RecordShapeError`` for another ``reason`` or a non-str ``message`` / ``cause``,
        ``DriverStateError`` with no open turn or an open step (``end_step`` or ``cancel`` first)."""
        shape(reason in TURN_END_KINDS, f"end_turn: reason must be one of {', '.join(TURN_END_KINDS)}, "
               f"got {reason!r}")
        view = self._open("end_turn")
        if view.open_step is not None:
            raise DriverStateError(f"end_turn: step {view.open_step[1]} is open; call end_step() "
                                   "(or cancel() to abort the turn) first")
        event = self.session.append(TURN_END, {**self._turn_data(view),
                                               "reason": _records.reason(reason, message, cause)})
        self._release(signal=True)
        return event

    @staticmethod
    def _turn_data(view: OpenTurnFold | OpenTurnView) -> dict[str, Any]:
        return {"turn": view.turn} if view.turn is not None else {}

    # --- step ----------------------------------------------------------------------------------

    @_writes
    def begin_step(self, *, copy_messages: bool = True,
                   host_tools: Sequence[ToolSpec] = ()) -> StepRequest | None:
        """Open the next step and return what to send (see the module docstring for the order).
        ``copy_messages=False`` hands the history's own messages, read-only by contract (the reference
        loop's in-process consumers, e.g. the simulator); hosts keep the default deep copies.
        ``host_tools`` (``ToolSpec``s, else ``RecordShapeError``): the host's own tools, logged
        after the runtime's in the step's ``request/header`` so the log records every tool the
        model saw (a runtime tool's name stays the runtime's; ``StepRequest.tools`` too).

        Returns None — and opens no step, runs no pre-step — when ``accept`` rejected the
        batch, the turn's signal is aborted, or a stage / plan-mode ``budget`` ran out
        (``stopped`` then holds the one-line reason and an ``fsm/budget`` stop is logged); the
        host then ends the turn (``blocked`` / ``aborted``; ``blocked`` with ``stopped`` as the
        message). Raises ``DriverStateError`` with no open turn or with a step open,
        ``TurnSuspendedError`` while suspended."""
        shape(all(isinstance(t, ToolSpec) for t in host_tools), "begin_step: host_tools must be ToolSpecs")
        view = self._open("begin_step")
        self._raise_if_suspended(view)
        if view.open_step is not None:
            raise DriverStateError(f"begin_step: step {view.open_step[1]} is still open; end_step() first")
        turn, step = view.turn if view.turn is not None else self.session.last_turn, view.last_step + 1
        agent, runtime, session = self.agent, self.runtime, self.session
        if self._budget_stops(turn):
            return None
        batch = agent.claim()
        assembly = runtime.assemble(agent)
        if self.accept is not None and not self.accept(agent, batch):
            return None
        if self.signal.aborted:
            return None
        batch = runtime.pre_step(agent, batch, aborted=False)
        snapshot = snapshot_if_changed(session.read(SNAPSHOT_FOLD), runtime.render_context(agent))
        if snapshot is not None:
            batch.insert(0, snapshot)
        notices, told = _budget.notices(session)
        session.append(STEP_START, {"turn": turn, "step": step})
        for message in (*notices, *batch):
            session.append_message(message)
        if told is not None:
            session.append_many([told])
        # the request goes to the model of the stage (and plan mode) after the boundary; the
        # system text stays the one assembled before it (docs/step-driver.md)
        assembly = attrs.evolve(assembly, model=runtime.model_choice(agent))
        request = runtime.build_request(agent, assembly, copy=False)
        config = dict(self.config)
        if not request.model.is_default:
            config.update(request.model.header_config())
        header: dict[str, Any] = {"config": config, "system": request.system,
                                  "tools": _records.header_tools(request.tools, host_tools)}
        reason = self._log_header(header)
        tools = tuple(ToolSpec(t.name, t.description, t.parameters, copy.deepcopy(t.output))
                      for t in request.tools)  # the converter copies parameters
        messages = deep_copies(request.messages) if copy_messages else request.messages
        return StepRequest(turn, step, request.system, assembly.sections, tools, messages, reason,
                           request.model)

    @property
    def stopped(self) -> str | None:
        """Why the last ``begin_step`` returned None for a budget (one line), else None."""
        return self.budget.stopped

    def _budget_stops(self, turn: int | None) -> bool:
        """Check the budgets before a step opens (``driver._budget.gate``); keeps the decision
        in ``budget`` and returns True when the step must not open."""
        self.budget = _budget.OPEN
        for _ in range(_MAX_BUDGET_RETRIES):
            rules = self.runtime.budget_rules(self.agent)
            decided = _budget.gate(self.session, rules, turn, self.runtime) if rules else _budget.OPEN
            if not decided.retry:
                self.budget = decided
                return decided.stopped is not None
        return False

    def _log_header(self, header: dict[str, Any]) -> str | None:
        """Log ``request/header`` when the header differs from the last one logged (kept as a
        digest of its canonical JSON, not a copy), or when another writer (a second driver on
        the session) logged a header since this driver's; the logged tool list and system text
        are shared with every other session that logs identical ones (``_shared_json``)."""
        digest = _records.header_digest(header)
        logged = self.session.read(TURN_FOLD).headers  # request/header events in the log
        if self._last_header is None:
            reason = "resume" if logged else "initial"
        elif digest + logged.to_bytes(8, "big") == self._last_header:
            return None  # unchanged, and still the log's last header
        elif (self._last_header[16:] != logged.to_bytes(8, "big")
              and digest == _records.last_header_digest(self.session.events)):
            self._last_header = digest + logged.to_bytes(8, "big")  # another writer logged this one
            return None
        else:
            reason = "change"
        data = {key: _records.shared_json(json.dumps(header[key])) for key in ("config", "system", "tools")}
        self.session.append(REQUEST_HEADER, {"header": data, "reason": reason})
        self._last_header = digest + (logged + 1).to_bytes(8, "big")
        return reason

    @_writes
    def record_reply(self, text: str = "", tool_calls: Sequence[ToolCall] = (), *,
                     reasoning: str | None = None, usage: Mapping[str, Any] | None = None,
                     source: Mapping[str, Any] | None = None) -> Event:
        """Append the step's ``assistant/message`` (content: reasoning, text, one ``tool-call``
        block per call; ``source`` defaults to ``{kind: model, provider, model}`` from
        ``config``). Raises ``RecordShapeError`` for a non-str text/reasoning, a call that is
        not a ``ToolCall`` with a non-empty id and name and str JSON arguments, duplicate call
        ids, a non-mapping or non-JSON usage; ``DriverStateError`` with no open step or when
        the step already has its reply. Nothing is written on error."""
        shape(isinstance(text, str), f"record_reply: text must be a str, got {type(text).__name__}")
        _records.utf8(text, "record_reply: text")
        shape(reasoning is None or isinstance(reasoning, str),
               "record_reply: reasoning must be a str or None")
        shape(isinstance(tool_calls, Sequence) and not isinstance(tool_calls, str | bytes),
               "record_reply: tool_calls must be a sequence of ToolCall")
        calls = [_records.check_call(c, "record_reply: tool call") for c in tool_calls]
        ids = [c.id for c in calls]
        shape(len(set(ids)) == len(ids), f"record_reply: duplicate tool call ids in {ids}")
        shape(usage is None or isinstance(usage, Mapping),
               "record_reply: usage must be a mapping or None")
        shape(source is None or isinstance(source, Mapping),
               "record_reply: source must be a mapping or None")
        usage_data = None if usage is None else _records.json_value(dict(usage), "record_reply: usage")
        view = self._open_step("record_reply")
        if view.replied:
            raise DriverStateError(f"record_reply: step {view.open_step[1] if view.open_step else ''} "
                                   "already has its reply (one assistant/message per step)")
        used = sorted(i for i in ids if view.call(i) is not None)
        shape(not used, f"record_reply: tool call id(s) {used} were used earlier in this turn; "
                         "every tool call of a turn needs its own id")
        content: list[dict[str, Any]] = []
        if reasoning:
            content.append({"type": "reasoning", "text": reasoning})
        if text:
            content.append({"type": "text", "text": text})
        for call in calls:
            content.append({"type": "tool-call", "id": call.id, "name": call.name,
                            "arguments": call.arguments})
        src = dict(source) if source is not None else {"kind": "model", "provider": self.config.get(
            "provider"), "model": self.config.get("model")}
        message: Message = {"role": "assistant", "content": content,
                            "source": _records.json_value(src, "record_reply: source"), "id": new_id()}
        data: dict[str, Any] = {**step_position(*view.open_step), "message": message}  # type: ignore[misc]
        if usage_data is not None:
            data["usage"] = usage_data
        return self.session.append(ASSISTANT_MESSAGE, data, surface_op="append")

    def _call_state(self, view: OpenTurnFold, call: ToolCall, doing: str, *, wait: bool = False) -> CallState:
        state = view.call(call.id)
        if state is not None and (state.turn, state.step) != view.open_step:
            state = None
        if state is None or not view.replied:
            raise DriverStateError(f"{doing}: tool call {call.id!r} is not in this step's reply; "
                                   "record_reply(...) with it first")
        if state.call != call:
            raise RecordShapeError(f"{doing}: tool call {call.id!r} differs from the one in the reply "
                                   f"({state.call.name} {state.call.arguments})")
        host_call = wait and _hostcall.by_host(self.runtime, state)
        if state.answered or (state.call_seq is not None and not host_call):
            raise DriverStateError(f"{doing}: tool call {call.id!r} already ran")
        if self._running is not None and call.id in self._running:
            # a reviewed tool logs its tool/call with its review request: until then only this
            # process knows the call is running
            raise DriverStateError(f"{doing}: tool call {call.id!r} is running")
        return state

    @_writes
    async def run_tool(self, call: ToolCall) -> ToolResult:
        """Run ``call`` (one of the reply's calls) through the runtime's tools, logging
        ``tool/call`` then ``tool/result`` (unknown tools become error results). Raises
        ``ReviewPending`` when the tool's review suspended (the ``tool/call`` stays open, the
        step stays open); on cancellation (``CancelledError``) writes the aborted error result
        (after a ``dismiss`` answer for its review if the tool left it open; ``tool/call`` + the
        aborted-before-dispatch result when a reviewed tool was cancelled before its review
        request) and re-raises. ``DriverStateError`` / ``RecordShapeError`` for a call not in
        the reply, already run or running, or differing from the reply."""
        _records.check_call(call, "run_tool")
        view = self._open_step("run_tool")
        state = self._call_state(view, call, "run_tool")
        return await self._run(call, state.turn, state.step, log_call=True)

    async def _run(self, call: ToolCall, turn: Any, step: Any, *, log_call: bool,
                   call_seq: int | None = None) -> ToolResult:
        task = asyncio.current_task()
        if task is not None:
            if self._running is None:
                self._running = {}
            self._running[call.id] = task
        try:
            result = await self.runtime.call_tool(self.agent, call, turn=turn, step=step,
                                                  signal=self.signal, log=log_call)
        except ReviewPending:
            self._release(signal=False)  # suspended: not a live turn until resume
            raise
        except asyncio.CancelledError:
            self._abort_running(call)
            raise
        finally:
            if self._running is not None:
                self._running.pop(call.id, None)
        if not log_call:
            self.session.append(TOOL_RESULT, result_data(result, turn, step), surface_op="append",
                                source_event_seqs=[call_seq] if call_seq is not None else None)
        return result

    def _abort_running(self, call: ToolCall) -> None:
        fold = self._turn()
        state = fold.call(call.id) if fold.open else None
        if state is None or state.answered:
            return
        if state.call_seq is not None:
            batch = [dismiss(state.review_id)] if state.review_id and not state.review_answered else []
            with contextlib.suppress(Exception):
                self.session.append_many([*batch, *_records.abort_result(state, dispatched=True)])
            return
        # cancelled before its tool/call reached the log (a reviewed tool logs it with its review
        # request): closed as never dispatched, as cancel() closes a call that never started
        with contextlib.suppress(Exception):
            last = self.session.last_seq
            self.session.append_many(_records.abort_result(state, dispatched=False, at=last + 1),
                                     expect_last_seq=last)

    @_writes
    async def authorize(self, call: ToolCall) -> ToolResult | None:
        """The tool policy's verdict on a host tool call of the reply, before the host runs it
        (``docs/tool-policy.md``): None — run it (its ``tool/call`` is logged), then
        ``record_tool_result``; a ``ToolResult`` — refused, already logged: run nothing. Check
        the final arguments. An ``ask`` rule reviews the call, logged with the request;
        ``ReviewPending`` when it suspends: authorize the call again, in any process, once it is
        answered. A call let run before gets ``TOOL_OUTCOME_UNKNOWN`` (``driver._hostcall``).
        Raises as ``record_tool_result``; for a tool registered on the runtime use ``run_tool``."""
        _records.check_call(call, "authorize")
        state = self._call_state(self._open_step("authorize"), call, "authorize", wait=True)
        return await _hostcall.authorize(self.runtime, self.agent, state, signal=self.signal)

    @_writes
    def record_tool_result(self, call: ToolCall, text: str, is_error: bool = False, *,
                           meta: Any = None) -> ToolResult:
        """Record the result of a host-run tool: ``tool/call`` + ``tool/result`` in one batch (the
        result alone for a call ``authorize`` logged; a live review of it closed ``call-closed``),
        ``meta`` written for successes when not None. Raises ``RecordShapeError`` for a non-str
        ``text``, non-bool ``is_error``, non-JSON ``meta``; ``DriverStateError`` as ``run_tool``."""
        _records.check_call(call, "record_tool_result")
        shape(isinstance(text, str), f"record_tool_result: text must be a str, got {type(text).__name__}")
        _records.utf8(text, "record_tool_result: text")
        shape(isinstance(is_error, bool), "record_tool_result: is_error must be a bool")
        meta_data = None if meta is None else _records.json_value(meta, "record_tool_result: meta")
        view = self._open_step("record_tool_result")
        state = self._call_state(view, call, "record_tool_result", wait=True)
        result = ToolResult(call, text, is_error, message=tool_result_message(call, text, is_error))
        if meta_data is not None:
            result = attrs.evolve(result, meta=meta_data)
        self.session.append_many(_hostcall.result_events(self.session, state, result, at=len(self.session)))
        return result

    @_writes
    def end_step(self) -> bool:
        """Append ``step/end``; returns True when the host should run another step (the reply
        called tools, or a steered message waits). Raises ``TurnSuspendedError`` while a call is
        suspended, ``DriverStateError`` with no open step or a call of the reply without result."""
        view = self._open_step("end_step")
        self._raise_if_suspended(view)
        step_calls = view.step_calls()
        missing = [c.call.id for c in step_calls if c.unsettled]
        if missing:
            raise DriverStateError(f"end_step: tool call(s) {', '.join(missing)} have no result; "
                                   "run_tool / record_tool_result them, or cancel()")
        self.session.append(STEP_END, step_position(*view.open_step))  # type: ignore[misc]
        return bool(step_calls) or self.agent.wants_turn

    # --- suspension and cancellation -------------------------------------------------------------

    @_writes
    async def resume(self, *, run_rest: bool = True, host_tools: bool = True) -> list[ToolResult]:
        """Settle a suspended step: re-run each suspended call through its tool (which reads its
        logged review answer) and write its ``tool/result`` (the ``tool/call`` is not logged
        again; ``host_tools``: an approved call of a tool not on the runtime is the host's to
        ``authorize``; False: it runs through the runtime too, an unknown tool's error), then
        run the reply's not-dispatched calls whose tool is registered on the runtime (others
        stay in ``unsettled()``; ``run_rest=False``: none, the caller runs them in reply order).
        The step stays open for ``end_step``. Raises ``ReviewPending`` again (nothing written
        for that call) while a review is unanswered, ``DriverStateError`` when nothing is suspended."""
        view = self.view()
        if view is None or not view.suspended:
            raise DriverStateError("resume: no suspended tool call in the log's open turn")
        self._hold_live()
        results: list[ToolResult] = []
        for state in view.suspended:
            if host_tools and _hostcall.left_to_host(self.runtime, self.session, state):
                continue
            results.append(await self._run(state.call, state.turn, state.step, log_call=False,
                                           call_seq=state.call_seq))
        tools = self.runtime.tools
        for state in view.step_calls if run_rest else ():
            if state.call_seq is None and not state.answered and state.call.name in tools:
                results.append(await self._run(state.call, state.turn, state.step, log_call=True))
        return results

    @_writes
    def close_turn(self, reason: str = "aborted", *, message: str | None = None,
                   cause: str | None = None) -> list[Event]:
        """Close the open turn in one batch, whatever its state: ``fsm/review/answer {outcome:
        dismiss, by: cancel}`` for each open review of the turn, an error ``tool/result`` for
        each call without one (``Error: tool call aborted`` when its ``tool/call`` was logged;
        else ``tool/call`` + ``Error: tool call aborted before dispatch``), ``step/end`` when a
        step is open, ``turn/end`` (``reason`` as ``end_turn``). Returns the events (``[]``
        when no turn is open)."""
        shape(reason in TURN_END_KINDS, f"close_turn: reason must be one of {', '.join(TURN_END_KINDS)}")
        view = self.view()
        if view is None:
            self._release(signal=True)
            return []
        batch: list[NewEvent] = [dismiss(rid) for rid in view.open_reviews]
        start = len(self.session)
        for state in view.calls:
            if state.unsettled:
                batch.extend(_records.abort_result(state, dispatched=state.call_seq is not None,
                                           at=start + len(batch)))
        if view.open_step is not None:
            batch.append(NewEvent(STEP_END, step_position(*view.open_step)))
        batch.append(NewEvent(TURN_END, {**self._turn_data(view),
                                         "reason": _records.reason(reason, message, cause)}))
        events = self.session.append_many(batch)
        self._release(signal=True)
        return events

    async def cancel(self, reason: str = "user") -> list[Event]:
        """Abort the turn: signal ``reason`` to tools and reviews, cancel tool calls this driver
        is running in other tasks (they write their aborted result), then ``close_turn
        ("aborted", cause=reason)``. Returns the events written."""
        self.signal.abort(reason)
        current = asyncio.current_task()
        others = [t for t in (self._running or {}).values() if t is not current and not t.done()]
        for task in others:
            task.cancel()
        for task in others:
            with contextlib.suppress(BaseException):
                await task
        return self.close_turn("aborted", cause=reason)
