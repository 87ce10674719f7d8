"""Session and agent seams (docs/architecture.md; docs/contracts.md, S1/S3)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from runtime_helpers import new_agent

from fsm_stage.constants import TURN_END, TURN_START
from fsm_stage.log.events import Event, MemoryLog, Replace, SessionHeader
from fsm_stage.runtime.agent import Agent, InboxAgent
from fsm_stage.runtime.messages import message_text, new_id, notice, stage_notice, user_message
from fsm_stage.runtime.session import Session


class CountingFold:
    def __init__(self) -> None:
        self.applied = 0

    def init(self) -> int:
        return 0

    def apply(self, state: int, event: Event) -> int:
        self.applied += 1
        return state + 1


def test_projection_reads_cost_only_new_events() -> None:
    """Session.read folds only the events appended since the last read (invariant 4)."""
    s = Session(MemoryLog(SessionHeader("s")))
    fold = CountingFold()
    for _ in range(5):
        s.append("x/y", {})
    assert s.read(fold) == 5 and fold.applied == 5
    assert s.read(fold) == 5 and fold.applied == 5
    s.append("x/y", {})
    assert s.read(fold) == 6 and fold.applied == 6


def test_open_turn_and_turn_numbers_from_the_log() -> None:
    """Open/idle comes from the last turn/start|turn/end (docs/contracts.md)."""
    s = Session(MemoryLog(SessionHeader("s")))
    assert not s.is_turn_open and s.last_turn == 0
    s.append(TURN_START, {"turn": 3})
    assert s.is_turn_open and s.last_turn == 3
    s.append(TURN_END, {"turn": 3, "reason": {"kind": "completed"}})
    assert not s.is_turn_open and s.last_turn == 3


def test_surface_and_messages_follow_append_and_replace() -> None:
    """The surface folds append/replace by position; messages skip empty assistant messages."""
    s = Session(MemoryLog(SessionHeader("s")))
    a = s.append_message(user_message("one"))
    s.append("assistant/message", {"message": {"role": "assistant", "content": []}}, surface_op="append")
    b = s.append_message(user_message("two"))
    s.append("turn/start", {"turn": 1})
    assert s.surface() == (a.seq, 1, b.seq)
    assert [message_text(m) for m in s.messages()] == ["one", "two"]
    r = s.append_message(user_message("summary"), surface_op=Replace(a.seq, b.seq),
                         source_event_seqs=[a.seq, 1, b.seq])
    assert s.surface() == (r.seq,)
    assert [message_text(m) for m in s.messages()] == ["summary"]


def test_validators_refuse_before_anything_is_written() -> None:
    """A validator that raises refuses the append; the log is unchanged."""
    s = Session(MemoryLog(SessionHeader("s")))
    seen: list[Event] = []

    def no_bad(ev: Event) -> None:
        seen.append(ev)
        if ev.data.get("bad"):
            raise ValueError("bad event")

    dispose = s.add_validator(no_bad)
    s.append("a/b", {})
    with pytest.raises(ValueError):
        s.append("a/b", {"bad": True})
    assert len(s) == 1 and seen[-1].seq == 1
    dispose()
    s.append("a/b", {"bad": True})
    assert len(s) == 2


def test_steer_wakes_inject_does_not() -> None:
    """steer queues and wakes (on_wake, wants_turn); inject queues without waking; claim takes
    both in arrival order."""
    woken: list[Agent] = []
    agent = InboxAgent(Session(MemoryLog(SessionHeader("s"))), on_wake=woken.append)
    assert isinstance(agent, Agent)
    n1 = notice("context", plugin="p")
    agent.inject(n1)
    assert woken == [] and not agent.wants_turn
    m = user_message("hi")
    agent.steer(m)
    assert woken == [agent] and agent.wants_turn
    assert agent.claim() == [n1, m] and agent.inbox == () and not agent.wants_turn


def test_agent_turn_state_is_the_logs() -> None:
    """is_turn_open reads the log (not a runtime status)."""
    agent = new_agent()
    assert not agent.is_turn_open
    agent.session.append(TURN_START, {"turn": 1})
    assert agent.is_turn_open


def test_message_builders() -> None:
    """User messages: images first, then text; fresh ids; notice and stage-notice sources."""
    image: dict[str, Any] = {"type": "image", "attachment": {"attachmentId": "a"}}
    m1, m2 = user_message("t", images=[image]), user_message("t")
    assert m1["content"] == [image, {"type": "text", "text": "t"}] and m1["id"] != m2["id"]
    assert user_message(None, images=[image])["content"] == [image]
    n = notice("Hello.", plugin="plan-mode")
    assert n["source"] == {"kind": "plugin", "plugin": "plan-mode", "form": "notice", "summary": "Hello."}
    st = stage_notice("Current stage: a\nDo a.", summary="Current stage: a")
    assert st["source"] == {"kind": "stage-switch", "form": "notice", "summary": "Current stage: a"}
    assert message_text(st) == "Current stage: a\nDo a."


def test_message_ids_are_random_uuid4_strings() -> None:
    """``new_id`` gives what ``str(uuid.uuid4())`` gives: the canonical text of a version-4,
    RFC 4122 UUID, fresh each time."""
    ids = [new_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_head_is_system_tracks_surface_node_zero() -> None:
    """head_is_system is True while node 0 is a system/message (the stage switch's protected
    head)."""
    s = Session(MemoryLog(SessionHeader("s")))
    assert s.head_is_system is False
    s.append("system/message", {"role": "system", "content": [{"type": "text", "text": "sys"}]},
             surface_op="append")
    s.append_message(user_message("u"))
    assert s.head_is_system is True and [message_text(m) for m in s.messages()] == ["sys", "u"]


def test_runtime_tracks_sessions_it_sees_and_validates_appends() -> None:
    """pre_step / call_tool / run_command track the agent's session: installed invariants then
    validate every append (and the existing log once)."""
    from fsm_stage.errors import RecordShapeError
    from fsm_stage.runtime.runtime import Runtime

    rt = Runtime()
    rt.add_invariant(lambda ev: "no x/bad" if ev.type == "x/bad" else None)
    agent = new_agent()
    agent.session.append("x/bad", {})  # not yet tracked
    with pytest.raises(RecordShapeError):
        rt.pre_step(agent, [])
    other = new_agent("s2")
    rt.pre_step(other, [])
    with pytest.raises(RecordShapeError):
        other.session.append("x/bad", {})
    assert len(other.session) == 0


def test_abort_signal_wakes_waiters_once() -> None:
    """AbortSignal: the first reason wins; wait() returns it, before or after the abort."""
    import asyncio

    from fsm_stage.runtime.abort import AbortSignal

    async def scenario() -> None:
        signal = AbortSignal()
        waiter = asyncio.ensure_future(signal.wait())
        await asyncio.sleep(0)
        assert not waiter.done() and not signal.aborted
        signal.abort("user")
        signal.abort("later")
        assert await waiter == "user" and signal.reason == "user"
        assert await signal.wait() == "user"

    asyncio.run(scenario())


def test_session_reads_the_logs_surface_instead_of_folding_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """The surface is folded once per session — by the log that validates it. A ``Session``
    (and ``tokens.surface_events`` given a session or a log) reads ``log.surface`` and never
    applies an event to a second ``Surface``, nor refolds the log from scratch."""
    from fsm_stage import tokens
    from fsm_stage.log import surface as surface_mod
    from fsm_stage.log.surface import Surface

    log = MemoryLog(SessionHeader("s"))
    s = Session(log)
    applied: list[int] = []
    real_apply = Surface.apply

    def spy(self: Surface, event: Event, **kw: Any) -> None:
        applied.append(event.seq)
        real_apply(self, event, **kw)

    monkeypatch.setattr(Surface, "apply", spy)

    def no_refold(*_a: Any, **_k: Any) -> list[int]:
        raise AssertionError("surface refolded from scratch")

    monkeypatch.setattr(surface_mod, "fold_surface", no_refold)
    s.append("system/message", {"content": "sys"}, surface_op="append")
    s.append_message(user_message("hi"))
    assert s.surface() == (0, 1) and s.head_is_system
    log.append("user/message", {"content": []}, surface_op=Replace(1, 1), source_event_seqs=[1])
    assert s.surface() == (0, 2) and s.head_is_system
    assert [e.seq for e in tokens.surface_events(s)] == [0, 2]
    assert [e.seq for e in tokens.surface_events(log)] == [0, 2]
    assert applied == [0, 1, 2]  # each event folded into exactly one surface, once
