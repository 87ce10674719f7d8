"""Request assembly, runtime-context snapshots and the shared pending/boundary mechanism."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from runtime_helpers import new_agent, run

from fsm_stage.constants import REQUEST_HEADER, STAGE_POLICY_CONTEXT, STAGE_POLICY_ORDER
from fsm_stage.driver import Loop, ModelReply, ScriptedModel
from fsm_stage.driver._pending import HeaderRelative, PendingStore, Selection, told
from fsm_stage.errors import LogWriteError
from fsm_stage.handoff import HandoffPathError
from fsm_stage.log.events import Event
from fsm_stage.log.projections import PlanModeFold
from fsm_stage.runtime.agent import Agent
from fsm_stage.runtime.assembly import SNAPSHOT_FOLD, ContextEntry, SystemSection, snapshot_if_changed
from fsm_stage.runtime.messages import Message, notice
from fsm_stage.runtime.runtime import Runtime


def test_sections_render_by_order_dropping_empty_ones() -> None:
    """Sections sort by order (registration breaks ties); empty texts are dropped; the
    agent (or None) is passed to every text function."""
    rt = Runtime()
    seen: list[Any] = []
    rt.add_section(SystemSection("late", 90, lambda a: "LATE"))
    rt.add_section(SystemSection("empty", 10, lambda a: ""))
    rt.add_section(SystemSection("b", 50, lambda a: (seen.append(a), "B")[1]))
    rt.add_section(SystemSection("a", 50, lambda a: "A"))
    agent = new_agent()
    asm = rt.assemble(agent)
    assert asm.section_names == ("b", "a", "late") and asm.system == "B\n\nA\n\nLATE"
    assert rt.assemble(None).system == "B\n\nA\n\nLATE" and seen == [agent, None]


def test_context_snapshot_only_when_text_changes() -> None:
    """Runtime-context entries travel as a snapshot message, re-appended only on change (the
    stage switch's stage:policy at order 116)."""
    rt = Runtime()
    policy = {"text": "When done, call goto_stage."}
    rt.add_context(ContextEntry(STAGE_POLICY_CONTEXT, STAGE_POLICY_ORDER, lambda a: policy["text"]))
    agent = new_agent()
    loop = Loop(rt, agent, ScriptedModel([ModelReply.say("1"), ModelReply.say("2"), ModelReply.say("3")]))
    run(loop.prompt("a"))
    run(loop.prompt("b"))
    policy["text"] = ""
    run(loop.prompt("c"))
    snaps = [e for e in agent.session.events if e.type == "user/message"
             and e.data["source"].get("form") == "snapshot"]
    assert [[s["text"] for s in e.data["source"]["sections"]] for e in snaps] == [
        ["When done, call goto_stage."], []]
    assert "When done, call goto_stage." in snaps[0].data["content"][0]["text"]
    assert agent.session.read(SNAPSHOT_FOLD) == ()


def test_snapshot_if_changed_rules() -> None:
    """Nothing while there never was context; a change (including to empty) is recorded once."""
    rt = Runtime()
    rt.add_context(ContextEntry("x", 1, lambda a: "X"))
    ctx = rt.assemble(None).context
    assert snapshot_if_changed(None, ()) is None
    assert snapshot_if_changed(None, ctx) is not None
    assert snapshot_if_changed((("x", "X"),), ctx) is None
    assert snapshot_if_changed((("x", "X"),), ()) is not None


def test_pre_step_participants_run_in_order_with_disposers() -> None:
    """Each participant receives the previous one's list; a disposed one no longer runs."""
    rt, agent = Runtime(), new_agent()
    a, b = notice("a", plugin="p"), notice("b", plugin="p")
    d1 = rt.add_pre_step(lambda ag, msgs, aborted: [*msgs, a])
    rt.add_pre_step(lambda ag, msgs, aborted: [*msgs, b] if not aborted else msgs)
    assert rt.pre_step(agent, []) == [a, b]
    assert rt.pre_step(agent, [], aborted=True) == [a]
    d1()
    assert rt.pre_step(agent, []) == [b]


def _store() -> tuple[PendingStore[str], Agent]:
    return PendingStore[str](logger=logging.getLogger("test.pending")), new_agent()


def test_pending_flush_applies_clears_and_extends() -> None:
    """A pending selection is applied once at an accepted boundary; extra messages go last."""
    store, agent = _store()
    applied: list[Selection[str]] = []
    extra = notice("switched", plugin="p")

    def apply(ag: Agent, sel: Selection[str]) -> list[Message]:
        applied.append(sel)
        ag.session.append("stage/record", {"stage": sel.target})
        return [extra]

    assert store.flush(agent, ["m"], aborted=False, apply=apply) == ["m"]  # nothing pending
    store.put(agent.session, Selection("beta", narrate=False, payload="/h/beta.md"))
    store.put(agent.session, Selection("gamma", narrate=True))  # overwrites
    assert store.flush(agent, ["m"], aborted=True, apply=apply) == ["m"] and applied == []
    assert store.flush(agent, ["m"], aborted=False, apply=apply) == ["m", extra]
    assert [s.target for s in applied] == ["gamma"] and store.get(agent.session) is None


def test_pending_flush_failure_is_contained_and_kept(caplog: pytest.LogCaptureFixture) -> None:
    """A failing apply is logged once at the store's level, the batch is unchanged and the
    selection kept for the next boundary (durable first)."""
    store, agent = _store()
    store.put(agent.session, Selection("beta", narrate=True))

    def boom(ag: Agent, sel: Selection[str]) -> list[Message]:
        raise OSError("disk full")

    with caplog.at_level(logging.WARNING, logger="test.pending"):
        out = store.flush(agent, ["m"], aborted=False, apply=boom, failure=lambda e: f"flush failed: {e}")
    assert out == ["m"] and [r.getMessage() for r in caplog.records] == ["flush failed: disk full"]
    assert store.get(agent.session) == Selection("beta", narrate=True)
    store.clear_all()
    assert store.get(agent.session) is None


@pytest.mark.parametrize("error", [
    LogWriteError("append rolled back"),
    HandoffPathError("handoff folder is a symlink"),
    OSError(28, "No space left on device"),
])
def test_pending_flush_keeps_the_selection_on_write_errors_S80(
    error: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    """S80/B29: the write-path failures (a rolled-back append, a refused handoff path, an OS
    error) are contained: logged, batch unchanged, selection kept for the next boundary."""
    store, agent = _store()
    store.put(agent.session, Selection("beta", narrate=True))

    def fail(ag: Agent, sel: Selection[str]) -> list[Message]:
        raise error

    with caplog.at_level(logging.WARNING, logger="test.pending"):
        assert store.flush(agent, ["m"], aborted=False, apply=fail) == ["m"]
    assert len(caplog.records) == 1 and str(error) in caplog.records[0].getMessage()
    assert store.get(agent.session) == Selection("beta", narrate=True)


@pytest.mark.parametrize("error", [TypeError("bad operand"), KeyError("stage"), AssertionError("bug")])
def test_pending_flush_lets_programming_errors_propagate(
    error: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    """A bug in ``apply`` is not a write failure: it propagates instead of being logged and
    retried at every boundary forever; nothing is cleared, nothing logged."""
    store, agent = _store()
    store.put(agent.session, Selection("beta", narrate=True))

    def buggy(ag: Agent, sel: Selection[str]) -> list[Message]:
        raise error

    with caplog.at_level(logging.DEBUG, logger="test.pending"), pytest.raises(type(error)):
        store.flush(agent, ["m"], aborted=False, apply=buggy)
    assert caplog.records == []
    assert store.get(agent.session) == Selection("beta", narrate=True)


def test_header_relative_projection_remembers_state_at_last_header() -> None:
    """HeaderRelative tracks the inner state at the last request/header; same object when
    nothing changes; told() falls back to the default before any header."""
    proj = HeaderRelative(PlanModeFold())
    state = proj.init()
    assert told(state) is None and told(state, False) is False
    ev = lambda t, d, s: Event(t, s, 0, d)  # noqa: E731
    s1 = proj.apply(state, ev("plan/mode", {"active": True}, 0))
    assert s1.current is True and told(s1) is None
    assert proj.apply(s1, ev("turn/start", {"turn": 1}, 1)) is s1
    s2 = proj.apply(s1, ev(REQUEST_HEADER, {"reason": "initial"}, 2))
    s3 = proj.apply(s2, ev("plan/mode", {"active": False}, 3))
    assert told(s3) is True and s3.current is False


def test_build_request_uses_the_surface_and_a_frozen_assembly() -> None:
    """build_request = the assembly's system text and tools + the session's surface messages;
    a frozen assembly (same-step retry) is reused as given."""
    rt = Runtime()
    text = {"v": "A"}
    rt.add_section(SystemSection("s", 1, lambda a: text["v"]))
    agent = new_agent()
    agent.session.append_message(notice("hello", plugin="p"))
    frozen = rt.assemble(agent)
    text["v"] = "B"
    req = rt.build_request(agent, frozen)
    assert req.system == "A" and [m["content"][0]["text"] for m in req.messages] == ["hello"]
    assert rt.build_request(agent).system == "B"
