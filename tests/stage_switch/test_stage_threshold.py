"""Full vs light transitions by token threshold (S63–S68) and handoff placement (S69–S72)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fsm_stage.handoff import LocalHandoffStore, session_segment
from fsm_stage.reviews import ScriptedReviewChannel
from fsm_stage.runtime.runtime import Runtime

from .harness import Harness, RecordingSandbox, make_config

PATH = "/workspace/handoff/agent-1/beta.md"
LONG = "x" * 1080


class CountingMeter:
    """A token meter fake: len(text)//4 over the surface, counting calls."""

    def __init__(self) -> None:
        self.calls = 0

    def surface_tokens(self, session: Any) -> int:
        self.calls += 1
        return sum(len(str(m.get("content"))) for m in session.messages()) // 4


def threshold(n: float = 100, **kw: Any) -> Harness:
    h = Harness(make_config(min_handoff_tokens=n), **kw)
    h.open_turn()
    return h


def test_full_at_or_above_threshold_S63() -> None:
    """S63: a ~1080-char surface is full: path returned, detail = handoff, notice after the boundary."""
    h = threshold()
    h.user(LONG)
    h.review.approve()
    result = h.goto("beta", "# Handoff\n\nhandoff text")
    assert result.value["handoffPath"] == PATH
    assert h.review.requests[0].questions[0].detail == "# Handoff\n\nhandoff text"
    h.boundary(step_start=True)
    assert h.text("notice.handoff_replaced", stage="beta", path=PATH) in h.prompt_texts()[0]


def test_light_below_threshold_S64() -> None:
    """S64: 'short' is light: value without path, no writes, no detail/intent; history kept, prompt
    between 'short' and the probe, un-narrated, nothing archived."""
    h = threshold()
    h.user("short")
    h.review.approve()
    result = h.goto("beta")
    assert result.value == {"approved": True, "stage": "beta"}
    assert h.handoffs.writes == []
    q = h.review.requests[0].questions[0]
    assert q.detail is None and q.intent is None
    h.boundary(step_start=True)
    texts = h.prompt_texts()
    assert h.fold() == "beta"
    assert texts[0] == "short" and texts[-1] == "boundary probe"
    assert "Current stage: beta\nInstruction for the beta stage." in texts
    assert not any("archived" in t for t in texts)


def test_missing_handoff_then_retry_S65() -> None:
    """S65: above threshold without handoff → requires_handoff, no writes/review; retry succeeds."""
    h = threshold()
    h.user(LONG)
    first = h.goto("beta")
    assert first.text == "Error: " + h.text("errors.requires_handoff")
    assert h.handoffs.writes == [] and h.review.requests == []
    h.review.approve()
    second = h.goto("beta", "# H")
    assert second.value["handoffPath"] == PATH
    assert [(w.path, w.text) for w in h.handoffs.writes] == [(PATH, "# H")]
    assert len(h.review.requests) == 1


def test_light_discards_a_provided_handoff_S66() -> None:
    """S66: below threshold a handoff is ignored: not written, not shown."""
    h = threshold()
    h.user("short")
    h.review.approve()
    result = h.goto("beta", "# Unneeded handoff")
    assert result.value == {"approved": True, "stage": "beta"}
    assert h.handoffs.writes == []
    assert h.review.requests[0].questions[0].detail is None


def test_durable_marker_S67() -> None:
    """S67: full → meta {fullTransition: true}; light → meta present and null."""
    full = Harness()
    full.open_turn()
    full.review.approve()
    full.goto("beta", "# H")
    assert full.last_tool_result().data["meta"] == {"fullTransition": True}
    light = threshold()
    light.user("short")
    light.review.approve()
    r = light.goto("beta")
    assert "handoffPath" not in r.value
    data = light.last_tool_result().data
    assert "meta" in data and data["meta"] is None


def test_requires_handoff_rules_S68() -> None:
    """S68a–d: no threshold never consults the meter; 0 is always full but needs the meter; the shape
    is fixed at call time; exactly-at-threshold is full."""
    meter = CountingMeter()
    a = Harness(meter=meter)  # (a)
    a.open_turn()
    a.review.approve()
    assert "handoffPath" in a.goto("beta", "# H").value and meter.calls == 0
    b = threshold(0, meter=None)  # (b)
    assert b.goto("beta", "# H").text == "Error: " + b.text("errors.missing_token_meter")
    b0 = threshold(0)
    b0.review.approve()
    assert "handoffPath" in b0.goto("beta", "# H").value
    c = threshold()  # (c)
    c.user("short")
    c.review.approve()
    c.goto("beta")
    c.user(LONG * 3)  # the surface grows before the boundary
    c.boundary()
    assert c.summaries() == ["Current stage: beta"] and c.handoffs.writes == []
    exact = CountingMeter()
    d = threshold(10, meter=exact)  # (d)
    d.user("y" * 36)  # str(content) of one text block is 40+ chars: measure it
    at = exact.surface_tokens(d.session)
    d2 = threshold(at, meter=CountingMeter())
    d2.user("y" * 36)
    d2.review.approve()
    assert "handoffPath" in d2.goto("beta", "# H").value


def test_sessions_sharing_a_workspace_S69() -> None:
    """S69: two sessions, one workspace: handoffs land in per-session folders, in order."""
    review = ScriptedReviewChannel().approve().approve()
    runtime = Runtime(review=review)
    a = Harness(session_id="session-aaa", runtime=runtime, review=review)
    store = a.handoffs
    b = Harness(session_id="session-bbb", runtime=Runtime(review=review), review=review, handoffs=store)
    for h, text in ((a, "# First"), (b, "# Second")):
        h.open_turn()
        assert not h.goto("beta", text).is_error
    assert [(w.path, w.text) for w in store.writes] == [
        ("/workspace/handoff/session-aaa/beta.md", "# First"),
        ("/workspace/handoff/session-bbb/beta.md", "# Second"),
    ]


def test_odd_session_id_is_sanitised_S70() -> None:
    """S70: 'odd id/../x' → /workspace/handoff/odd-id-..-x-<16 hex of its hash>/beta.md."""
    h = Harness(session_id="odd id/../x")
    h.open_turn()
    h.review.approve()
    h.goto("beta", "# Odd")
    seg = session_segment("odd id/../x")  # the seed's 'odd-id-..-x' plus a hash of the id
    assert seg.startswith("odd-id-..-x-") and len(seg) == len("odd-id-..-x-") + 16
    assert [w.path for w in h.handoffs.writes] == [f"/workspace/handoff/{seg}/beta.md"]


def test_sandbox_policy_per_session_S71() -> None:
    """S71: the write carries exactly the session's policy; the provider saw one request, the session."""
    sandbox = RecordingSandbox()
    h = Harness(sandbox=sandbox)
    h.open_turn()
    h.review.approve()
    h.goto("beta", "# H")
    assert h.handoffs.policies == [
        {"mode": "workspace-write", "workspaceRoot": "/workspace", "sessionId": "agent-1"}]
    assert sandbox.requests == [h.session]


def test_handoff_placement_details_S72() -> None:
    """S72d–g: custom handoff_dir; no cwd → store default; no sandbox → None; overwrite."""
    d = Harness(make_config(handoff_dir="docs/handoffs"))
    d.open_turn()
    d.review.approve()
    assert d.goto("beta", "# H").value["handoffPath"] == "/workspace/docs/handoffs/agent-1/beta.md"
    assert d.handoffs.policies == [None]  # (f)
    e = Harness(cwd=None)
    e.handoffs.default_root = "/srv/default"
    e.open_turn()
    e.review.approve()
    assert e.goto("beta", "# H").value["handoffPath"] == "/srv/default/handoff/agent-1/beta.md"  # (e)


def test_real_files_and_overwrite_S72g(tmp_path: Path) -> None:
    """S72g with the local store: a second full review to the same stage overwrites the file.
    (Durable reviews: while the first approval is pending a second goto_stage is refused, so
    the first review is kept here and the second one approved.)"""
    h = Harness(cwd=str(tmp_path), handoffs=None)
    h.controller.handoffs = LocalHandoffStore()
    h.open_turn()
    h.review.keep().approve()
    first = h.goto("beta", "# First")
    assert first.is_error and (tmp_path / "handoff/agent-1/beta.md").read_text() == "# First"
    assert not h.goto("beta", "# Second").is_error
    assert (tmp_path / "handoff/agent-1/beta.md").read_text() == "# Second"
    assert sorted(p.name for p in (tmp_path / "handoff/agent-1").iterdir()) == ["beta.md"]


def test_symlinked_handoff_folder_fails_the_call_cleanly(tmp_path: Path) -> None:
    """A symlinked handoff folder: the call fails with a clear error, nothing is written outside."""
    outside = tmp_path / "outside"
    outside.mkdir()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "handoff").symlink_to(outside)
    h = Harness(cwd=str(ws), handoffs=None)
    h.controller.handoffs = LocalHandoffStore()
    h.open_turn()
    result = h.goto("beta", "# H")
    assert result.is_error and "symlink" in result.text
    assert list(outside.iterdir()) == [] and h.review.requests == []
