"""Boundary flush: archive by surface replace, protected head, durable-first failures (S73–S81)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pytest

from fsm_stage.driver import Selection
from fsm_stage.errors import LogWriteError
from fsm_stage.log.events import Event, NewEvent, Replace
from fsm_stage.stage_switch import FLUSH_FAILURE_MESSAGE, PendingTransition

from .harness import PROBE, Harness, body, make_config


def approved(h: Harness, stage: str, handoff: str = "# H") -> str:
    h.review.approve()
    result = h.goto(stage, handoff, log=False)
    assert not result.is_error, result.text
    return str(result.value.get("handoffPath"))


def test_archive_leaves_only_the_notice_S73() -> None:
    """S73: two old messages; after the boundary the model sees the notice and the probe; the log keeps
    'old work'."""
    h = Harness()
    h.open_turn()
    h.user("old work")
    h.user("more old work")
    path = approved(h, "gamma", "# Verify\n\ncheck it")
    assert len(h.session.messages()) == 2
    h.boundary(step_start=True)
    texts = h.prompt_texts()
    assert len(texts) == 2
    assert h.text("notice.handoff_replaced", stage="gamma", path=path) in texts[0]
    assert path == "/workspace/handoff/agent-1/gamma.md"
    assert texts[1] == PROBE
    assert sum(1 for e in h.session.events if e.type == "user/message"
               and e.data["content"][0]["text"] == "old work") == 1


def test_full_transition_recorded_by_the_notice_alone_S74() -> None:
    """S74: fold None right after the call, beta after the boundary; the only record is the notice."""
    h = Harness()
    h.open_turn()
    approved(h, "beta")
    assert h.fold() is None
    h.boundary(step_start=True)
    assert h.fold() == "beta"
    assert h.summaries() == ["Stage switched to beta"]


def test_protected_system_head_is_kept_S75() -> None:
    """S75: head unchanged at node 0, notice at 1, probe last, exactly 3 nodes; log keeps old work."""
    h = Harness(system_head=True)
    h.open_turn()
    h.user("old work")
    path = approved(h, "beta", "# Implement\n\n- Completed: exploration")
    h.boundary(step_start=True)
    assert h.fold() == "beta"
    assert "Stage switched to beta" in h.summaries()
    nodes = h.session.surface()
    assert len(nodes) == 3
    assert h.session.events[nodes[0]].type == "system/message"
    texts = h.prompt_texts()
    assert texts[0] == "You are a careful engineer."
    assert h.text("notice.handoff_replaced", stage="beta", path=path) in texts[1]
    assert texts[-1] == PROBE
    assert any(e.type == "user/message" and e.data["content"][0]["text"] == "old work"
               for e in h.session.events)


def test_head_only_surface_appends_the_notice_S76() -> None:
    """S76: only the system head on the surface → the notice is appended, 3 nodes."""
    h = Harness(system_head=True)
    h.open_turn()
    approved(h, "beta")
    h.boundary(step_start=True)
    notice = h.stage_events()[-1]
    assert notice.surface_op == "append"
    assert h.fold() == "beta"
    texts = h.prompt_texts()
    assert texts[0] == "You are a careful engineer." and "archived" in texts[1] and texts[-1] == PROBE
    assert len(h.session.surface()) == 3


def test_exact_notice_shape_S77() -> None:
    """S77: text, source, replace(s1..s3) with sources [s1, s2, s3]; without a head replace(u0..u1);
    an empty surface appends."""
    h = Harness(system_head=True)
    h.open_turn()
    s1 = h.user("u1").seq
    s2 = h.session.append("assistant/message", {"message": {"role": "assistant", "content": [
        {"type": "text", "text": "a2"}]}}, surface_op="append").seq
    s3 = h.user("t3").seq
    path = approved(h, "beta")
    h.boundary()
    (notice,) = h.stage_events()
    assert notice.data["content"] == [{"type": "text", "text": h.text(
        "notice.handoff_replaced", stage="beta", path=path) + "\n\n" + body("beta")}]
    assert notice.data["source"] == {"kind": "stage-switch", "form": "notice",
                                     "summary": "Stage switched to beta"}
    assert notice.surface_op == Replace(s1, s3)
    assert notice.source_event_seqs == (s1, s2, s3)

    n = Harness()
    n.open_turn()
    u0, u1 = n.user("u0").seq, n.user("u1").seq
    approved(n, "beta")
    n.boundary()
    assert n.stage_events()[0].surface_op == Replace(u0, u1)
    assert n.stage_events()[0].source_event_seqs == (u0, u1)

    e = Harness()
    e.open_turn()
    approved(e, "beta")
    e.boundary()
    assert e.stage_events()[0].surface_op == "append" and e.stage_events()[0].source_event_seqs is None


def test_tool_transition_is_not_narrated_S78() -> None:
    """S78: header logged while alpha; approved full goto beta → no user-switch prefix anywhere."""
    h = Harness(session_id="command-tool-narrate")
    h.open_turn()
    h.header()
    path = approved(h, "beta")
    h.boundary(step_start=True)
    assert h.fold() == "beta"
    prefix = h.text("notice.user_switch_prefix", stage="beta")
    assert not any(prefix in t for t in h.stage_texts())
    assert any(h.text("notice.handoff_replaced", stage="beta",
                      path="/workspace/handoff/command-tool-narrate/beta.md") in t for t in h.stage_texts())
    assert path.endswith("command-tool-narrate/beta.md")


def test_light_tool_flush_is_never_narrated_S79() -> None:
    """S79: a light approval flushes exactly 'Current stage: beta\\n<instruction>'."""
    h = Harness(make_config(min_handoff_tokens=100))
    h.open_turn()
    h.header()
    h.review.approve()
    assert not h.goto("beta").is_error
    h.boundary()
    assert h.stage_texts() == [body("beta")]


def test_failed_flush_keeps_stage_and_pending_S80(caplog: pytest.LogCaptureFixture) -> None:
    """S80: the append raises → logged at error level, batch unchanged, no record, stage unchanged,
    pending kept; the next accepted pre-step succeeds and clears it."""
    h = Harness()
    h.open_turn()
    h.user("old work")
    approved(h, "beta")
    h.log.fail_next = OSError("host refused the replace")
    with caplog.at_level(logging.ERROR):
        batch = h.boundary()
    assert [m["content"][0]["text"] for m in batch] == [PROBE]
    assert any(r.levelno == logging.ERROR and "host refused the replace" in r.getMessage()
               for r in caplog.records)
    assert FLUSH_FAILURE_MESSAGE.split("{")[0] in caplog.text
    assert h.summaries() == [] and h.current() == "alpha" and h.pending() == "beta"
    h.boundary()
    assert h.fold() == "beta" and h.pending() is None
    assert h.summaries() == ["Stage switched to beta"]


def test_flush_failure_names_a_stage_with_braces_verbatim_S80(caplog: pytest.LogCaptureFixture) -> None:
    """S80 with a stage name that looks like a format template: the logged failure names it
    verbatim and the real error, neither read as a placeholder.

    Deliberate change: ``set`` refuses names outside ``STAGE_NAME_RE``
    (ValueError), so such a name only reaches the flush through a selection stored directly
    (a host adapter's own store); the flush log must still not format it."""
    h = Harness()
    h.open_turn()
    stage = "{error}-{stage}-{0}"
    with pytest.raises(ValueError):
        h.controller.set(h.agent, stage)
    h.controller.pending.put(h.session, Selection(stage, True, PendingTransition("user", "alpha")))
    h.log.fail_next = OSError("disk full")
    with caplog.at_level(logging.ERROR):
        h.boundary()
    (logged,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert logged.startswith(FLUSH_FAILURE_MESSAGE.format(stage=stage, error=""))
    assert logged.endswith("disk full")
    assert h.pending() == stage


def test_refused_replace_over_a_protected_head_S80(monkeypatch: pytest.MonkeyPatch) -> None:
    """S80 with the host's own refusal: a log whose surface rejects the replace keeps everything."""
    h = Harness(system_head=True)
    h.open_turn()
    h.user("old")
    approved(h, "beta")
    original = h.session.append_many  # the approved switch + its redemption go in one batch

    def refuse(specs: Sequence[NewEvent], **kw: Any) -> list[Event]:
        if any(isinstance(spec.surface_op, Replace) for spec in specs):
            raise LogWriteError("replace over the protected system head")
        return original(specs, **kw)

    monkeypatch.setattr(h.session, "append_many", refuse)
    h.boundary()
    assert h.pending() == "beta" and h.current() == "alpha"
    monkeypatch.undo()
    h.boundary()
    assert h.current() == "beta" and h.session.events[h.session.surface()[0]].type == "system/message"


def test_flush_once_and_rejected_steps_keep_pending_S81() -> None:
    """S81a: after a successful flush, further pre-steps add nothing; S81b: aborted pre-steps keep it."""
    h = Harness()
    h.open_turn()
    approved(h, "beta")
    h.boundary(aborted=True)
    assert h.pending() == "beta" and h.summaries() == []
    h.boundary()
    count = len(h.session.events)
    h.boundary()
    assert h.summaries() == ["Stage switched to beta"]
    assert len(h.session.events) == count + 1  # only the probe
