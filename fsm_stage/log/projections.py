"""Projections: pure, incremental folds of the session log (DESIGN.md §4, dsh-log-format.md §6).

A ``Projection`` is a pure reducer: ``init()`` is the state of an empty log,
``apply(state, event)`` returns the next state and returns **the same object** when the event
is irrelevant (change detection is by identity), ``view(state)`` is the client value, and
``dump``/``load`` convert the state to and from plain JSON for checkpoints. Bump
``STATE_VERSION`` when the state shape or the fold semantics change: checkpoints from another
version are discarded and the key is refolded from the log.

``ProjectionCursor(projection, log)`` keeps a watermark, so ``read()`` after k new events
costs O(k). ``fold(projection, events, end)`` folds any prefix (time travel).

Concrete projections:

* ``PlanModeFold`` — the logged plan mode: last ``plan/mode`` wins, else False
  (plan-mode-spec §1.3, B6–B8). ``fold_plan_mode(events, end=None)``.
* ``PlanView`` — the ``plan`` unit ``{active, wanted, running}``, version 2, rules R0–R5,
  view ``{active, pending}`` (plan-mode-spec §2.K, dsh-log-format §6.5/§10).
* ``PlanModeProblems`` — the ``plan/mode`` records with an invalid payload
  (``plan_mode_problem``): every fold above skips them (the last *valid* record wins); this one
  counts them so readers such as ``fsm-stage state`` can warn.
* ``OpenTurn`` — idle vs open turn: the last ``turn/start``/``turn/end`` decides
  (plan-mode-spec §1.4); also the last turn number and the ``request/header`` count. The
  runtime's ``Session`` reads this same fold (``runtime.session.TurnFold`` is a subclass).
* ``HeaderRelative(inner)`` — any fold plus its state at the last ``request/header``;
  ``told(state, default)`` reads it. The **one** "what was the model last told" mechanism:
  plan mode uses ``HeaderRelative(PlanModeFold())``, ``StageProjection`` folds
  ``HeaderRelative(StageFold())`` for ``stage``/``stage_at_last_header``, and
  ``ToldProjection`` (the CLI's ``lastHeader``) wraps both (review H3).
* ``StageFold`` — the last stage record's stage (None before any).
* ``StageProjection`` — stage-switch-spec §1.5: ``stage``, ``stage_at_last_header``,
  ``open_turn``, ``has_stage_prompt``, ``head_seq``, ``head_is_system``.
* ``ToldProjection`` — what the last ``request/header`` told the model: plan mode and stage
  folded up to and including it (plan-mode-spec §1.7, stage-switch-spec §1.6).
* Stage records: ``stage_from_event``, ``fold_stage(events, end=None)``,
  ``fold_stage_records(entries)`` (stage-switch-spec §1.3–§1.4).

Checkpoints (``Checkpoint``, ``CheckpointStore``, ``cold_fold``) live in
``fsm_stage.log.checkpoints``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeGuard, TypeVar, runtime_checkable

import attrs

from fsm_stage.constants import (
    COMMAND_DONE,
    COMMAND_RUN,
    NOTICE_FORM,
    PLAN_COMMAND,
    PLAN_MODE_EVENT,
    PLAN_PROJECTION_STATE_VERSION,
    REQUEST_HEADER,
    STAGE_SOURCE_KINDS,
    STAGE_SUMMARY_RE,
    STAGE_SWITCHED_PREFIX,
    SYSTEM_MESSAGE,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)
from fsm_stage.log.events import Event, EventLog, Replace

S = TypeVar("S")

CURRENT_STAGE_MARK = "Current stage:"
"""Text every stage-entry message contains; the has-stage-prompt check scans for it (§1.3)."""


@runtime_checkable
class Projection(Protocol[S]):
    """A pure incremental fold of the log (dsh-log-format.md §6.1).

    ``key`` names the unit (checkpoint rows are keyed by it); ``STATE_VERSION`` is a
    non-negative int. ``apply`` must return the same object for irrelevant events and must
    never mutate ``state``. ``load`` raises ``ValueError`` for a state it cannot accept.
    """

    key: str
    STATE_VERSION: int

    def init(self) -> S: ...

    def apply(self, state: S, event: Event) -> S: ...

    def view(self, state: S) -> Any: ...

    def dump(self, state: S) -> Any: ...

    def load(self, raw: Any) -> S: ...


def fold(projection: Projection[S], events: Sequence[Event], end: int | None = None) -> S:
    """The state after ``events[0:end]`` (``end`` defaults to ``len(events)``)."""
    state = projection.init()
    apply = projection.apply
    stop = len(events) if end is None else max(0, min(end, len(events)))
    for i in range(stop):
        state = apply(state, events[i])
    return state


class ProjectionCursor(Generic[S]):
    """Incremental reader of one projection over a growing log.

    ``log`` is an ``EventLog`` or a plain event sequence. ``read()`` applies only the events
    appended since the last read (O(k) for k new events) and returns the state. ``state``/
    ``watermark`` may seed the cursor from a checkpoint (``watermark`` = last seq reflected,
    -1 for none). If the log is shorter than the watermark (a checkpoint seeded over a
    shorter log, or a swapped sequence), the cursor refolds from ``init``.

    Thread safety (review H2): the state and the next seq to fold live in **one** attribute,
    read once and assigned once per ``read()``, so concurrent readers (a controller under its
    lock, a runtime view without one) each fold from a consistent pair and never apply an
    event twice or skip one; at worst two readers fold the same new events in parallel.
    ``snapshot`` gives the pair without folding.
    """

    __slots__ = ("_at", "_events", "projection")

    def __init__(
        self,
        projection: Projection[S],
        log: EventLog | Sequence[Event],
        *,
        state: S | None = None,
        watermark: int = -1,
    ) -> None:
        self.projection = projection
        # Resolve the event source once: a runtime Protocol isinstance check per read would
        # cost more than folding a few events.
        if isinstance(log, Sequence):
            seq_log: Sequence[Event] = log
            self._events: Callable[[], Sequence[Event]] = lambda: seq_log
        else:
            ev_log: EventLog = log
            self._events = lambda: ev_log.events
        # (state, next seq to fold): one attribute so a reader never sees half an update
        self._at: tuple[S, int] = (projection.init(), 0) if state is None else (state, watermark + 1)

    def read(self) -> S:
        """The state reflecting every committed event (folds only the new ones)."""
        events = self._events()
        n = len(events)
        state, nxt = self._at
        if n == nxt:
            return state
        if n < nxt:
            state, nxt = self.projection.init(), 0
        apply = self.projection.apply
        for i in range(nxt, n):
            state = apply(state, events[i])
        self._at = (state, n)
        return state

    def view(self) -> Any:
        """``projection.view(read())``."""
        return self.projection.view(self.read())

    @property
    def watermark(self) -> int:
        """The last seq reflected in the state (-1 before any event)."""
        return self._at[1] - 1

    @property
    def state(self) -> S:
        """The state as of ``watermark`` (no read)."""
        return self._at[0]

    @property
    def snapshot(self) -> tuple[S, int]:
        """``(state, watermark)`` as one consistent pair (no read)."""
        state, nxt = self._at
        return state, nxt - 1


def _data(event: Event) -> Mapping[str, Any]:
    d = event.data
    return d if isinstance(d, dict) else {}


class Fold(Protocol[S]):
    """A pure incremental fold (dsh-log-format §6): ``init()``, ``apply(state, event)`` — the
    part of a ``Projection`` that folding needs (``Session.read`` and ``HeaderRelative``
    accept any). ``apply`` returns the same object when the event is irrelevant."""

    def init(self) -> S: ...

    def apply(self, state: S, event: Event) -> S: ...


# ---------------------------------------------------------------------------------------
# state at the last request header
# ---------------------------------------------------------------------------------------


@attrs.frozen
class HeaderRelativeState(Generic[S]):
    """``current`` inner state, the inner state at the last header, and whether one exists."""

    current: S
    at_last_header: S | None = None
    has_header: bool = False


class HeaderRelative(Generic[S]):
    """Projection wrapper remembering ``inner``'s state at the last ``request/header``
    ("what the model was last told", plan-mode-spec §1.7, stage-switch-spec §1.6).

    The header event is applied to ``inner`` first, so the remembered state includes it.
    Returns the same state object for events that change neither part. The single
    implementation behind plan mode's told state, ``StageProjection.stage_at_last_header`` and
    ``ToldProjection`` (review H3); ``fsm_stage.runtime.pending`` re-exports it.
    """

    def __init__(self, inner: Fold[S], header_type: str = REQUEST_HEADER) -> None:
        self.inner = inner
        self.header_type = header_type

    def init(self) -> HeaderRelativeState[S]:
        return HeaderRelativeState(self.inner.init())

    def apply(self, state: HeaderRelativeState[S], event: Event) -> HeaderRelativeState[S]:
        current = self.inner.apply(state.current, event)
        if event.type == self.header_type:
            return HeaderRelativeState(current, current, True)
        if current is state.current:
            return state
        return HeaderRelativeState(current, state.at_last_header, state.has_header)


def told(state: HeaderRelativeState[S], default: S | None = None) -> S | None:
    """What the model was last told: the state at the last header, else ``default`` (also
    used when the header came before any value, i.e. ``at_last_header is None``)."""
    if not state.has_header or state.at_last_header is None:
        return default
    return state.at_last_header


# ---------------------------------------------------------------------------------------
# plan mode
# ---------------------------------------------------------------------------------------


class PlanModeFold:
    """Logged plan mode (plan-mode-spec §1.3, B6–B8): the last ``plan/mode.active`` (a bool), else False.

    A ``plan/mode`` whose ``active`` is not a bool (an invariant violation, B107) is ignored.
    """

    key = "plan-mode"
    STATE_VERSION = 1

    def init(self) -> bool:
        return False

    def apply(self, state: bool, event: Event) -> bool:
        if event.type != PLAN_MODE_EVENT:
            return state
        active = _data(event).get("active")
        return active if isinstance(active, bool) else state

    def view(self, state: bool) -> bool:
        return state

    def dump(self, state: bool) -> Any:
        return state

    def load(self, raw: Any) -> bool:
        if not isinstance(raw, bool):
            raise ValueError(f"plan-mode state must be a bool, got {raw!r}")
        return raw


def fold_plan_mode(events: Sequence[Event], end: int | None = None) -> bool:
    """``fold(log, end)`` of plan-mode-spec §1.3: the last ``plan/mode`` in ``events[0:end]`` wins (B6–B8)."""
    stop = len(events) if end is None else max(0, min(end, len(events)))
    for i in range(stop - 1, -1, -1):
        ev = events[i]
        if ev.type == PLAN_MODE_EVENT:
            active = _data(ev).get("active")
            if isinstance(active, bool):
                return active
    return False


def plan_mode_problem(event: Event) -> str | None:
    """The plan-mode invariant (plan-mode-spec §2.L, B105–B108): a ``plan/mode`` must carry a
    boolean ``active``. Returns a one-line problem for a bad ``plan/mode`` (the offending value
    as JSON, ``undefined`` when missing), else None (other types are ignored)."""
    if event.type != PLAN_MODE_EVENT:
        return None
    d = event.data
    if isinstance(d, dict) and isinstance(d.get("active"), bool):
        return None
    import json

    shown = json.dumps(d.get("active")) if isinstance(d, dict) and "active" in d else "undefined"
    return f"seq {event.seq}: plan/mode active must be a boolean, got {shown}"


@attrs.frozen
class PlanModeProblemsState:
    """``count`` invalid ``plan/mode`` records seen; ``first``: the one-line problems
    (``plan_mode_problem``) of the first ``PlanModeProblems.KEEP`` of them, in log order."""

    count: int = 0
    first: tuple[str, ...] = ()


class PlanModeProblems:
    """Fold of the ``plan/mode`` records with an invalid payload (B105–B108).

    The plan folds (``PlanModeFold``, ``PlanView``) skip such a record, so the plan mode is the
    last *valid* record's value; this fold lets a reader say so. View:
    ``{"count": int, "problems": [str, …]}`` (at most ``KEEP`` problems, in log order).
    """

    key = "planModeProblems"
    STATE_VERSION = 1
    KEEP = 20

    def init(self) -> PlanModeProblemsState:
        return _NO_PLAN_MODE_PROBLEMS

    def apply(self, state: PlanModeProblemsState, event: Event) -> PlanModeProblemsState:
        problem = plan_mode_problem(event)
        if problem is None:
            return state
        first = state.first if len(state.first) >= self.KEEP else (*state.first, problem)
        return PlanModeProblemsState(state.count + 1, first)

    def view(self, state: PlanModeProblemsState) -> dict[str, Any]:
        return {"count": state.count, "problems": list(state.first)}

    def dump(self, state: PlanModeProblemsState) -> Any:
        return {"count": state.count, "first": list(state.first)}

    def load(self, raw: Any) -> PlanModeProblemsState:
        if not isinstance(raw, dict) or set(raw) != {"count", "first"}:
            raise ValueError(f"bad plan-mode problems state {raw!r}")
        count, first = raw["count"], raw["first"]
        if (not isinstance(count, int) or isinstance(count, bool) or not isinstance(first, list)
                or not all(isinstance(p, str) for p in first) or not len(first) <= min(count, self.KEEP)):
            raise ValueError(f"bad plan-mode problems state {raw!r}")
        return PlanModeProblemsState(count, tuple(first))


_NO_PLAN_MODE_PROBLEMS = PlanModeProblemsState()


@attrs.frozen
class RunningSelection:
    """A ``/plan`` command in flight: its id and whether it asks for plan mode on."""

    command_id: str
    wanted: bool


@attrs.frozen
class PlanState:
    """The ``plan`` unit state ``{active, wanted, running}`` (plan-mode-spec §1.11)."""

    active: bool = False
    wanted: bool | None = None
    running: RunningSelection | None = None


_PLAN_INIT = PlanState()


class PlanView:
    """The ``plan`` projection unit (plan-mode-spec §2.K rules R0–R5, dsh-log-format §6.5).

    View: ``{"active": bool, "pending": bool}`` where the target is ``running.wanted`` if a
    command is running, else ``wanted``; pending = target is not None and != active. A
    ``plan/mode`` whose ``active`` is not a boolean is skipped (``active`` stays the last valid
    record's value); ``PlanModeProblems`` counts such records so readers can warn.
    """

    key = "plan"
    STATE_VERSION = PLAN_PROJECTION_STATE_VERSION

    def init(self) -> PlanState:
        return _PLAN_INIT

    def apply(self, state: PlanState, event: Event) -> PlanState:
        t = event.type
        if t == COMMAND_RUN:
            d = _data(event)
            args, cid = d.get("args"), d.get("commandId")
            if d.get("name") != PLAN_COMMAND or not isinstance(args, str) or not isinstance(cid, str):
                return state  # R1 / R5
            return PlanState(state.active, state.wanted, RunningSelection(cid, args.strip() != "off"))  # R2
        if t == COMMAND_DONE:
            running = state.running
            if running is None or _data(event).get("commandId") != running.command_id:
                return state  # R5
            ok = _data(event).get("kind") == "success" and running.wanted != state.active
            return PlanState(state.active, running.wanted if ok else None, None)  # R3
        if t == PLAN_MODE_EVENT:
            active = _data(event).get("active")
            if not isinstance(active, bool):
                return state
            if active == state.active and state.wanted is None:
                return state
            return PlanState(active, None, state.running)  # R4
        return state

    def view(self, state: PlanState) -> dict[str, bool]:
        target = state.running.wanted if state.running is not None else state.wanted
        return {"active": state.active, "pending": target is not None and target != state.active}

    def dump(self, state: PlanState) -> Any:
        running = state.running
        return {
            "active": state.active,
            "wanted": state.wanted,
            "running": None
            if running is None
            else {"commandId": running.command_id, "wanted": running.wanted},
        }

    def load(self, raw: Any) -> PlanState:
        if not isinstance(raw, dict) or set(raw) != {"active", "wanted", "running"}:
            raise ValueError(f"bad plan state {raw!r}")
        active, wanted, running = raw["active"], raw["wanted"], raw["running"]
        if not isinstance(active, bool) or not (wanted is None or isinstance(wanted, bool)):
            raise ValueError(f"bad plan state {raw!r}")
        sel: RunningSelection | None = None
        if running is not None:
            if (
                not isinstance(running, dict)
                or set(running) != {"commandId", "wanted"}
                or not isinstance(running["commandId"], str)
                or not isinstance(running["wanted"], bool)
            ):
                raise ValueError(f"bad plan state {raw!r}")
            sel = RunningSelection(running["commandId"], running["wanted"])
        return PlanState(active, wanted, sel)


# ---------------------------------------------------------------------------------------
# turns
# ---------------------------------------------------------------------------------------


@attrs.frozen
class TurnState:
    """State of ``OpenTurn``.

    ``open``: the last turn boundary is a ``turn/start``; ``turn``: the open turn's number
    (None when idle); ``last_turn``: the highest turn number seen (0 before any);
    ``headers``: how many ``request/header`` events the log holds.
    """

    open: bool = False
    turn: int | None = None
    last_turn: int = 0
    headers: int = 0


_TURN_IDLE = TurnState()


def _int(value: Any) -> TypeGuard[int]:
    """An int that is not a bool (JSON integers)."""
    return isinstance(value, int) and not isinstance(value, bool)


class OpenTurn:
    """Idle vs open turn from the log (plan-mode-spec §1.4, dsh-log-format §4).

    A ``turn/start`` opens a turn numbered ``data.turn``, or ``last_turn + 1`` when it
    carries no integer number (hand-trimmed logs); ``last_turn`` keeps the highest number.
    A ``turn/end`` closes an open turn. ``request/header`` events are counted. The view is
    ``{"open", "turn"}``. The runtime's ``Session.is_turn_open``/``last_turn``/
    ``has_request_header`` read this fold, so runtime and CLI agree (review H3).
    """

    key = "turn"
    STATE_VERSION = 2

    def init(self) -> TurnState:
        return _TURN_IDLE

    def apply(self, state: TurnState, event: Event) -> TurnState:
        t = event.type
        if t == TURN_START:
            turn = _data(event).get("turn")
            number = turn if _int(turn) else state.last_turn + 1
            return TurnState(True, number, max(number, state.last_turn), state.headers)
        if t == TURN_END:
            return TurnState(False, None, state.last_turn, state.headers) if state.open else state
        if t == REQUEST_HEADER:
            return attrs.evolve(state, headers=state.headers + 1)
        return state

    def view(self, state: TurnState) -> dict[str, Any]:
        return {"open": state.open, "turn": state.turn}

    def dump(self, state: TurnState) -> Any:
        return {"open": state.open, "turn": state.turn, "lastTurn": state.last_turn, "headers": state.headers}

    def load(self, raw: Any) -> TurnState:
        if not isinstance(raw, dict) or set(raw) != {"open", "turn", "lastTurn", "headers"}:
            raise ValueError(f"bad turn state {raw!r}")
        ok = (
            isinstance(raw["open"], bool)
            and (raw["turn"] is None or _int(raw["turn"]))
            and _int(raw["lastTurn"])
            and _int(raw["headers"])
        )
        if not ok:
            raise ValueError(f"bad turn state {raw!r}")
        return TurnState(raw["open"], raw["turn"], raw["lastTurn"], raw["headers"])


# ---------------------------------------------------------------------------------------
# stage records
# ---------------------------------------------------------------------------------------


def _event_fields(event: Event | Mapping[str, Any]) -> tuple[str | None, Any, Any, Any]:
    if isinstance(event, Event):
        return event.type, event.data, event.seq, event.time
    return event.get("type"), event.get("data"), event.get("seq"), event.get("time")


def _stage_summary(event: Event | Mapping[str, Any]) -> str | None:
    t, data, _, _ = _event_fields(event)
    if t != USER_MESSAGE or not isinstance(data, dict):
        return None
    source = data.get("source")
    if not isinstance(source, dict) or source.get("kind") not in STAGE_SOURCE_KINDS:
        return None
    if source.get("form") != NOTICE_FORM:
        return None
    summary = source.get("summary")
    return summary if isinstance(summary, str) else None


def stage_from_event(event: Event | Mapping[str, Any]) -> str | None:
    """The stage a record names, or None (stage-switch-spec §1.4, S13–S19).

    A record is a ``user/message`` whose ``source.kind`` is ``stage-switch`` or
    ``plugin:stage-switch``, ``source.form == "notice"`` and whose ``source.summary``
    ``re.fullmatch``-es ``STAGE_SUMMARY_RE``. The retired ``{kind: "plugin", plugin:
    "stage-switch"}`` wrapper is not a record. Accepts an ``Event`` or a JSON event dict.
    """
    summary = _stage_summary(event)
    if summary is None:
        return None
    m = STAGE_SUMMARY_RE.fullmatch(summary)
    return m.group(1) if m else None


def fold_stage(events: Sequence[Event | Mapping[str, Any]], end: int | None = None) -> str | None:
    """The host fold (stage-switch-spec §1.4): the last record's stage in ``events[0:end]``, else None."""
    stop = len(events) if end is None else max(0, min(end, len(events)))
    for i in range(stop - 1, -1, -1):
        stage = stage_from_event(events[i])
        if stage is not None:
            return stage
    return None


@attrs.frozen
class StageRecord:
    """One stage record for the client fold: ``switched`` is True for ``Stage switched to …``."""

    stage: str
    seq: int
    time: int
    switched: bool

    def to_json(self) -> dict[str, Any]:
        return {"stage": self.stage, "seq": self.seq, "time": self.time, "switched": self.switched}


def fold_stage_records(entries: Iterable[Mapping[str, Any]]) -> list[StageRecord]:
    """The client fold (stage-switch-spec §1.4, S20–S22).

    ``entries`` are ``{"type": "event", "event": <Event or event dict>}`` or transient entries
    (``{"type": "transient", …}``, skipped). Returns one ``StageRecord`` per record, in order.
    """
    out: list[StageRecord] = []
    for entry in entries:
        if entry.get("type") != "event":
            continue
        event = entry.get("event")
        if not isinstance(event, Event | Mapping):
            continue
        stage = stage_from_event(event)
        if stage is None:
            continue
        summary = _stage_summary(event)
        _, _, seq, tm = _event_fields(event)
        out.append(StageRecord(stage, seq, tm, bool(summary and summary.startswith(STAGE_SWITCHED_PREFIX))))
    return out


def message_text(data: Any) -> str:
    """Joined text of a message's text blocks (current and legacy shapes; ``""`` if none)."""
    if not isinstance(data, dict):
        return ""
    content = data.get("content")
    if content is None and isinstance(data.get("message"), dict):
        content = data["message"].get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(
        b["text"]
        for b in content
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )


def is_stage_prompt(event: Event) -> bool:
    """``hasStagePrompt`` test (§1.5): stage-source ``user/message`` (form not checked) whose
    text contains ``Current stage:``."""
    if event.type != USER_MESSAGE:
        return False
    d = _data(event)
    source = d.get("source")
    if not isinstance(source, dict) or source.get("kind") not in STAGE_SOURCE_KINDS:
        return False
    return CURRENT_STAGE_MARK in message_text(d)


class StageFold:
    """The last stage record's stage (``stage_from_event``), None before any (§1.4).

    Returns the same object for events that name no new stage. The inner fold of
    ``StageProjection``'s ``HeaderRelative`` and of ``ToldProjection``.
    """

    def init(self) -> str | None:
        return None

    def apply(self, state: str | None, event: Event) -> str | None:
        if event.type != USER_MESSAGE:
            return state
        stage = stage_from_event(event)
        return stage if stage is not None and stage != state else state


_STAGE_AT_HEADER: HeaderRelative[str | None] = HeaderRelative(StageFold())


@attrs.frozen
class StageState:
    """Stage projection state (stage-switch-spec §1.5).

    ``at`` is ``HeaderRelative(StageFold())``'s state; ``stage`` and ``stage_at_last_header``
    read it (the stage now, and as the last ``request/header`` told the model).
    """

    at: HeaderRelativeState[str | None] = attrs.field(factory=_STAGE_AT_HEADER.init)
    open_turn: bool = False
    has_stage_prompt: bool = False
    head_seq: int | None = None
    head_is_system: bool = False

    @property
    def stage(self) -> str | None:
        """The last stage record's stage (None before any)."""
        return self.at.current

    @property
    def stage_at_last_header(self) -> str | None:
        """The stage when the last ``request/header`` was logged (None before any header)."""
        return self.at.at_last_header


_STAGE_INIT = StageState()


class StageProjection:
    """Incremental stage fold (stage-switch-spec §1.5, S13–S23).

    * ``stage`` / ``stage_at_last_header``: ``HeaderRelative(StageFold())`` — the last
      record's stage, and its value at each ``request/header``;
    * ``open_turn``: ``turn/start`` → True, ``turn/end`` → False;
    * ``has_stage_prompt``: sticky (``is_stage_prompt``);
    * ``head_seq``/``head_is_system``: surface node 0 — an append sets it only while the
      surface is empty (head None), a replace starting at the head makes this event the head.

    The current stage is ``state.stage or initial`` (see ``current_stage``). ``view`` is
    ``{stage, stageAtLastHeader, openTurn, hasStagePrompt, headSeq, headIsSystem}``; ``dump``
    adds ``hasHeader``.
    """

    key = "stage"
    STATE_VERSION = 2

    def init(self) -> StageState:
        return _STAGE_INIT

    def apply(self, state: StageState, event: Event) -> StageState:
        t = event.type
        changes: dict[str, Any] = {}
        at = _STAGE_AT_HEADER.apply(state.at, event)
        if at is not state.at:
            changes["at"] = at
        if t == USER_MESSAGE:
            if not state.has_stage_prompt and is_stage_prompt(event):
                changes["has_stage_prompt"] = True
        elif t == TURN_START:
            if not state.open_turn:
                changes["open_turn"] = True
        elif t == TURN_END and state.open_turn:
            changes["open_turn"] = False
        op = event.surface_op
        if op is not None:
            new_head = (op == "append" and state.head_seq is None) or (
                isinstance(op, Replace) and state.head_seq is not None and op.start == state.head_seq
            )
            if new_head:
                changes["head_seq"] = event.seq
                changes["head_is_system"] = t == SYSTEM_MESSAGE
        if not changes:
            return state
        return attrs.evolve(state, **changes)

    def view(self, state: StageState) -> dict[str, Any]:
        return {
            "stage": state.stage,
            "stageAtLastHeader": state.stage_at_last_header,
            "openTurn": state.open_turn,
            "hasStagePrompt": state.has_stage_prompt,
            "headSeq": state.head_seq,
            "headIsSystem": state.head_is_system,
        }

    def dump(self, state: StageState) -> Any:
        return {**self.view(state), "hasHeader": state.at.has_header}

    def load(self, raw: Any) -> StageState:
        keys = {
            "stage", "stageAtLastHeader", "hasHeader", "openTurn", "hasStagePrompt", "headSeq", "headIsSystem"
        }
        if not isinstance(raw, dict) or set(raw) != keys:
            raise ValueError(f"bad stage state {raw!r}")
        for k in ("stage", "stageAtLastHeader"):
            if raw[k] is not None and not isinstance(raw[k], str):
                raise ValueError(f"bad stage state {raw!r}")
        for k in ("hasHeader", "openTurn", "hasStagePrompt", "headIsSystem"):
            if not isinstance(raw[k], bool):
                raise ValueError(f"bad stage state {raw!r}")
        if raw["headSeq"] is not None and not _int(raw["headSeq"]):
            raise ValueError(f"bad stage state {raw!r}")
        return StageState(
            HeaderRelativeState(raw["stage"], raw["stageAtLastHeader"], raw["hasHeader"]),
            raw["openTurn"],
            raw["hasStagePrompt"],
            raw["headSeq"],
            raw["headIsSystem"],
        )


def current_stage(state: StageState, initial: str) -> str:
    """``current(session)``: the folded stage, or the graph's ``initial`` when no record exists."""
    return state.stage if state.stage is not None else initial


# ---------------------------------------------------------------------------------------
# what the last request header told the model
# ---------------------------------------------------------------------------------------


@attrs.frozen
class ToldFacts:
    """What a ``request/header`` tells: its ``header_seq``/``reason`` (None before any) and
    ``plan_active``/``stage`` as folded up to and including it."""

    header_seq: int | None = None
    reason: str | None = None
    plan_active: bool = False
    stage: str | None = None


class _ToldFacts:
    """Inner fold of ``ToldProjection``: plan mode (``PlanModeFold``), stage (``StageFold``)
    and the latest header's seq and reason."""

    _plan = PlanModeFold()
    _stage = StageFold()

    def init(self) -> ToldFacts:
        return ToldFacts()

    def apply(self, state: ToldFacts, event: Event) -> ToldFacts:
        if event.type == REQUEST_HEADER:
            reason = _data(event).get("reason")
            reason = reason if isinstance(reason, str) else None
            return attrs.evolve(state, header_seq=event.seq, reason=reason)
        plan = self._plan.apply(state.plan_active, event)
        stage = self._stage.apply(state.stage, event)
        if plan is state.plan_active and stage is state.stage:
            return state
        return attrs.evolve(state, plan_active=plan, stage=stage)


ToldState = HeaderRelativeState[ToldFacts]
"""State of ``ToldProjection``: ``current`` facts and the facts at the last header."""

_TOLD = HeaderRelative(_ToldFacts())


class ToldProjection:
    """What the model was last told (plan-mode-spec §1.7 narration ``told``; stage-switch §1.6).

    ``HeaderRelative`` over ``PlanModeFold`` + ``StageFold`` — the folds plan mode and the
    stage controller judge "told" with (review H3). View: None before the first header, else
    ``{"seq", "reason", "planActive", "stage"}``.
    """

    key = "told"
    STATE_VERSION = 2

    def init(self) -> ToldState:
        return _TOLD.init()

    def apply(self, state: ToldState, event: Event) -> ToldState:
        return _TOLD.apply(state, event)

    def view(self, state: ToldState) -> dict[str, Any] | None:
        facts = state.at_last_header
        if not state.has_header or facts is None:
            return None
        return {
            "seq": facts.header_seq,
            "reason": facts.reason,
            "planActive": facts.plan_active,
            "stage": facts.stage,
        }

    def dump(self, state: ToldState) -> Any:
        at = state.at_last_header
        return {
            "current": attrs.asdict(state.current),
            "atLastHeader": None if at is None else attrs.asdict(at),
            "hasHeader": state.has_header,
        }

    def load(self, raw: Any) -> ToldState:
        if not isinstance(raw, dict) or set(raw) != {"current", "atLastHeader", "hasHeader"}:
            raise ValueError(f"bad told state {raw!r}")
        if not isinstance(raw["hasHeader"], bool):
            raise ValueError(f"bad told state {raw!r}")
        at = None if raw["atLastHeader"] is None else _load_facts(raw["atLastHeader"])
        return HeaderRelativeState(_load_facts(raw["current"]), at, raw["hasHeader"])


def _load_facts(raw: Any) -> ToldFacts:
    if not isinstance(raw, dict) or set(raw) != {f.name for f in attrs.fields(ToldFacts)}:
        raise ValueError(f"bad told state {raw!r}")
    ok = (
        (raw["header_seq"] is None or _int(raw["header_seq"]))
        and (raw["reason"] is None or isinstance(raw["reason"], str))
        and isinstance(raw["plan_active"], bool)
        and (raw["stage"] is None or isinstance(raw["stage"], str))
    )
    if not ok:
        raise ValueError(f"bad told state {raw!r}")
    return ToldFacts(**raw)


def standard_projections() -> tuple[Projection[Any], ...]:
    """One instance of every built-in projection (plan-mode, plan, turn, stage, told)."""
    return (PlanModeFold(), PlanView(), OpenTurn(), StageProjection(), ToldProjection())
