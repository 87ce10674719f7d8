"""Stage folds (docs/contracts.md).

Stage records: ``stage_from_event``, ``fold_stage(events, end=None)`` (the host fold),
``fold_stage_records(entries)`` (the client fold). ``StageFold`` is the last record's stage;
``StageProjection`` adds ``stage_at_last_header``, ``open_turn``, ``has_stage_prompt``,
``head_seq`` and ``head_is_system``; ``current_stage(state, initial)`` reads it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from fsm_stage.constants import (
    CURRENT_STAGE_PREFIX,
    NOTICE_FORM,
    REQUEST_HEADER,
    STAGE_SOURCE_KINDS,
    STAGE_SUMMARY_RE,
    STAGE_SWITCHED_PREFIX,
    SYSTEM_MESSAGE,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)
from fsm_stage.log.events import Event, Replace
from fsm_stage.log.projections.core import HeaderRelative, HeaderRelativeState, _data, _int

_CURRENT_STAGE_MARK = CURRENT_STAGE_PREFIX.rstrip()
"""Text every stage-entry message contains (``constants.CURRENT_STAGE_PREFIX`` without its
trailing space); the has-stage-prompt check scans for it."""


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
    """The stage a record names, or None (docs/contracts.md, S13–S19).

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
    """The host fold (docs/contracts.md): the last record's stage in ``events[0:end]``, else None."""
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
    """The client fold (docs/contracts.md, S20–S22).

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
    """``hasStagePrompt`` test: stage-source ``user/message`` (form not checked) whose
    text contains ``Current stage:``."""
    if event.type != USER_MESSAGE:
        return False
    d = _data(event)
    source = d.get("source")
    if not isinstance(source, dict) or source.get("kind") not in STAGE_SOURCE_KINDS:
        return False
    return _CURRENT_STAGE_MARK in message_text(d)


class StageFold:
    """The last stage record's stage (``stage_from_event``), None before any.

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
    """Stage projection state (docs/contracts.md).

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
    """Incremental stage fold (docs/contracts.md, S13–S23).

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
    #: Event types that can change the state: an event of another type changes it
    #: only through a ``surfaceOp``, so a streaming reader may skip it (tests check this).
    READS = frozenset({USER_MESSAGE, TURN_START, TURN_END, REQUEST_HEADER})

    def init(self) -> StageState:
        return _STAGE_INIT

    def apply(self, state: StageState, event: Event) -> StageState:
        t = event.type
        at = _STAGE_AT_HEADER.apply(state.at, event)
        open_turn, has_prompt = state.open_turn, state.has_stage_prompt
        head_seq, head_is_system = state.head_seq, state.head_is_system
        if t == USER_MESSAGE:
            if not has_prompt and is_stage_prompt(event):
                has_prompt = True
        elif t == TURN_START:
            open_turn = True
        elif t == TURN_END:
            open_turn = False
        op = event.surface_op
        if op is not None and ((op == "append" and head_seq is None) or (
                isinstance(op, Replace) and head_seq is not None and op.start == head_seq)):
            head_seq, head_is_system = event.seq, t == SYSTEM_MESSAGE
        if (at is state.at and open_turn == state.open_turn and has_prompt == state.has_stage_prompt
                and head_seq == state.head_seq and head_is_system == state.head_is_system):
            return state
        return StageState(at, open_turn, has_prompt, head_seq, head_is_system)

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
            "stage",
            "stageAtLastHeader",
            "hasHeader",
            "openTurn",
            "hasStagePrompt",
            "headSeq",
            "headIsSystem",
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
