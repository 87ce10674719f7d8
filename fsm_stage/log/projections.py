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
* ``OpenTurn`` — idle vs open turn: the last ``turn/start``/``turn/end`` decides
  (plan-mode-spec §1.4).
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
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

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
    command is running, else ``wanted``; pending = target is not None and != active.
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
    """``open``: the last turn boundary is a ``turn/start``; ``turn``: its number (None if idle)."""

    open: bool = False
    turn: int | None = None


_TURN_IDLE = TurnState()


class OpenTurn:
    """Idle vs open turn from the log (plan-mode-spec §1.4, dsh-log-format §4)."""

    key = "turn"
    STATE_VERSION = 1

    def init(self) -> TurnState:
        return _TURN_IDLE

    def apply(self, state: TurnState, event: Event) -> TurnState:
        if event.type == TURN_START:
            turn = _data(event).get("turn")
            return TurnState(True, turn if isinstance(turn, int) and not isinstance(turn, bool) else None)
        if event.type == TURN_END:
            return state if not state.open else _TURN_IDLE
        return state

    def view(self, state: TurnState) -> dict[str, Any]:
        return {"open": state.open, "turn": state.turn}

    def dump(self, state: TurnState) -> Any:
        return {"open": state.open, "turn": state.turn}

    def load(self, raw: Any) -> TurnState:
        if not isinstance(raw, dict) or not isinstance(raw.get("open"), bool):
            raise ValueError(f"bad turn state {raw!r}")
        turn = raw.get("turn")
        if turn is not None and not isinstance(turn, int):
            raise ValueError(f"bad turn state {raw!r}")
        return TurnState(raw["open"], turn)


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


@attrs.frozen
class StageState:
    """Stage projection state (stage-switch-spec §1.5)."""

    stage: str | None = None
    stage_at_last_header: str | None = None
    open_turn: bool = False
    has_stage_prompt: bool = False
    head_seq: int | None = None
    head_is_system: bool = False


_STAGE_INIT = StageState()


class StageProjection:
    """Incremental stage fold (stage-switch-spec §1.5, S13–S23).

    * ``stage``: ``stage_from_event`` or the previous value;
    * ``stage_at_last_header``: the (already updated) stage at each ``request/header``;
    * ``open_turn``: ``turn/start`` → True, ``turn/end`` → False;
    * ``has_stage_prompt``: sticky (``is_stage_prompt``);
    * ``head_seq``/``head_is_system``: surface node 0 — an append sets it only while the
      surface is empty (head None), a replace starting at the head makes this event the head.

    The current stage is ``state.stage or initial`` (see ``current_stage``).
    """

    key = "stage"
    STATE_VERSION = 1

    def init(self) -> StageState:
        return _STAGE_INIT

    def apply(self, state: StageState, event: Event) -> StageState:
        t = event.type
        changes: dict[str, Any] = {}
        if t == USER_MESSAGE:
            stage = stage_from_event(event)
            if stage is not None and stage != state.stage:
                changes["stage"] = stage
            if not state.has_stage_prompt and is_stage_prompt(event):
                changes["has_stage_prompt"] = True
        elif t == REQUEST_HEADER:
            if state.stage_at_last_header != state.stage:
                changes["stage_at_last_header"] = state.stage
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
        return self.dump(state)  # type: ignore[no-any-return]

    def dump(self, state: StageState) -> Any:
        return {
            "stage": state.stage,
            "stageAtLastHeader": state.stage_at_last_header,
            "openTurn": state.open_turn,
            "hasStagePrompt": state.has_stage_prompt,
            "headSeq": state.head_seq,
            "headIsSystem": state.head_is_system,
        }

    def load(self, raw: Any) -> StageState:
        keys = {"stage", "stageAtLastHeader", "openTurn", "hasStagePrompt", "headSeq", "headIsSystem"}
        if not isinstance(raw, dict) or set(raw) != keys:
            raise ValueError(f"bad stage state {raw!r}")
        for k in ("stage", "stageAtLastHeader"):
            if raw[k] is not None and not isinstance(raw[k], str):
                raise ValueError(f"bad stage state {raw!r}")
        for k in ("openTurn", "hasStagePrompt", "headIsSystem"):
            if not isinstance(raw[k], bool):
                raise ValueError(f"bad stage state {raw!r}")
        if raw["headSeq"] is not None and not isinstance(raw["headSeq"], int):
            raise ValueError(f"bad stage state {raw!r}")
        return StageState(
            raw["stage"],
            raw["stageAtLastHeader"],
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
class ToldState:
    """State at the last ``request/header``: ``header_seq``/``reason`` (None before any),
    ``plan_active``/``stage`` as folded up to and including it, and the live values
    ``live_plan_active``/``live_stage`` the fold needs to snapshot them."""

    header_seq: int | None = None
    reason: str | None = None
    plan_active: bool = False
    stage: str | None = None
    live_plan_active: bool = False
    live_stage: str | None = None


_TOLD_INIT = ToldState()


class ToldProjection:
    """What the model was last told (plan-mode-spec §1.7 narration ``told``; stage-switch §1.6).

    View: None before the first header, else ``{"seq", "reason", "planActive", "stage"}``.
    """

    key = "told"
    STATE_VERSION = 1

    def init(self) -> ToldState:
        return _TOLD_INIT

    def apply(self, state: ToldState, event: Event) -> ToldState:
        t = event.type
        if t == PLAN_MODE_EVENT:
            active = _data(event).get("active")
            if isinstance(active, bool) and active != state.live_plan_active:
                return attrs.evolve(state, live_plan_active=active)
            return state
        if t == USER_MESSAGE:
            stage = stage_from_event(event)
            if stage is not None and stage != state.live_stage:
                return attrs.evolve(state, live_stage=stage)
            return state
        if t == REQUEST_HEADER:
            reason = _data(event).get("reason")
            return attrs.evolve(
                state,
                header_seq=event.seq,
                reason=reason if isinstance(reason, str) else None,
                plan_active=state.live_plan_active,
                stage=state.live_stage,
            )
        return state

    def view(self, state: ToldState) -> dict[str, Any] | None:
        if state.header_seq is None:
            return None
        return {
            "seq": state.header_seq,
            "reason": state.reason,
            "planActive": state.plan_active,
            "stage": state.stage,
        }

    def dump(self, state: ToldState) -> Any:
        return attrs.asdict(state)

    def load(self, raw: Any) -> ToldState:
        if not isinstance(raw, dict) or set(raw) != {f.name for f in attrs.fields(ToldState)}:
            raise ValueError(f"bad told state {raw!r}")
        ok = (
            (raw["header_seq"] is None or type(raw["header_seq"]) is int)
            and (raw["reason"] is None or isinstance(raw["reason"], str))
            and isinstance(raw["plan_active"], bool)
            and isinstance(raw["live_plan_active"], bool)
            and (raw["stage"] is None or isinstance(raw["stage"], str))
            and (raw["live_stage"] is None or isinstance(raw["live_stage"], str))
        )
        if not ok:
            raise ValueError(f"bad told state {raw!r}")
        return ToldState(**raw)


def standard_projections() -> tuple[Projection[Any], ...]:
    """One instance of every built-in projection (plan-mode, plan, turn, stage, told)."""
    return (PlanModeFold(), PlanView(), OpenTurn(), StageProjection(), ToldProjection())
