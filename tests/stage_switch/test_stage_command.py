"""/stage and set(): show, commit, queue, steer, narration matrix, pending interplay (S82–S93)."""

from __future__ import annotations

import pytest

from fsm_stage.constants import USER_MESSAGE
from fsm_stage.driver import Loop, ModelReply, ScriptedModel
from fsm_stage.errors import LogWriteError

from .harness import PROBE, Harness, body, make_config, run

STAGES = "alpha, beta, gamma"


def user_messages(h: Harness) -> int:
    return sum(1 for e in h.session.events if e.type == USER_MESSAGE)


def prefix(h: Harness, stage: str) -> str:
    return h.text("notice.user_switch_prefix", stage=stage)


def test_bare_stage_shows_current_S82() -> None:
    """S82: bare /stage → current + sorted list; nothing appended."""
    h = Harness()
    h.controller.set(h.agent, "beta")
    before = user_messages(h)
    reply = h.command("/stage")
    assert (reply.kind, reply.text) == ("success", h.text("command.current", stage="beta", stages=STAGES))
    assert h.fold() == "beta" and user_messages(h) == before


def test_idle_commit_writes_one_record_S83() -> None:
    """S83: idle /stage beta → exactly one stage-switch source {notice, Current stage: beta}."""
    h = Harness()
    h.command("/stage beta")
    assert [e.data["source"] for e in h.stage_events()] == [
        {"kind": "stage-switch", "form": "notice", "summary": "Current stage: beta"}]


def test_idle_switch_through_the_command_runtime_S84() -> None:
    """S84: reply switched; fold beta; summaries exactly one (no pre-step ran, no initial prompt)."""
    h = Harness()
    reply = h.command("/stage beta")
    assert (reply.kind, reply.text) == ("success", h.text("command.switched", target="beta"))
    assert h.fold() == "beta" and h.summaries() == ["Current stage: beta"]
    assert [e.type for e in h.session.events] == ["command/run", "user/message", "command/done"]


def test_already_current_is_a_noop_S85() -> None:
    """S85."""
    h = Harness()
    reply = h.command("/stage alpha")
    assert (reply.kind, reply.text) == ("success", h.text("command.already_current", target="alpha"))
    assert user_messages(h) == 0 and h.fold() is None


def test_unknown_stage_is_an_error_reply_S86() -> None:
    """S86: error reply with the sorted list; nothing steered or appended."""
    h = Harness()
    reply = h.command("/stage ghost and a message")
    assert (reply.kind, reply.text) == ("error", h.text("command.unknown", target="ghost", stages=STAGES))
    assert h.fold() is None and h.agent.steered == [] and user_messages(h) == 0


def test_queued_mid_turn_and_flushed_narrated_S87() -> None:
    """S87: open turn, header before any record → queued; flush narrates the beta prompt."""
    h = Harness()
    h.open_turn()
    h.header()
    reply = h.command("/stage beta")
    assert (reply.kind, reply.text) == ("success", h.text("command.queued", target="beta"))
    assert h.fold() is None
    h.boundary(step_start=True)
    assert h.fold() == "beta"
    assert h.stage_texts() == [prefix(h, "beta") + body("beta")]


def test_trailing_message_is_steered_S90() -> None:
    """S90: idle /stage beta focus on the resume path → switched; one steered user message."""
    h = Harness()
    reply = h.command("/stage beta focus on the resume path")
    assert reply.text == h.text("command.switched", target="beta")
    (steered,) = h.agent.steered
    assert steered["content"] == [{"type": "text", "text": "focus on the resume path"}]
    assert steered["source"] == {"kind": "user"}


def test_trailing_message_steered_even_when_current_S91() -> None:
    """S91: /stage alpha keep exploring → already current, and 'keep exploring' is steered."""
    h = Harness()
    reply = h.command("/stage alpha keep exploring")
    assert reply.text == h.text("command.already_current", target="alpha")
    assert [m["content"][0]["text"] for m in h.agent.steered] == ["keep exploring"]


def test_steered_text_lands_after_the_new_prompt_S90() -> None:
    """S90 through the reference loop: the steered text follows the committed stage prompt."""
    h = Harness()
    loop = Loop(h.runtime, h.agent, ScriptedModel([ModelReply.say("ok")]))
    run(loop.command("/stage beta focus on the resume path"))
    run(loop.run_until_idle())
    texts = h.prompt_texts()
    assert texts.index(prefix(h, "beta") + body("beta")) < texts.index("focus on the resume path")


# ----------------------------------------------------------------------------- narration matrix


def test_narration_idle_no_header_S92a() -> None:
    """S92 (a): idle, no header ever → the committed prompt has the prefix."""
    h = Harness()
    h.command("/stage beta")
    assert h.stage_texts() == [prefix(h, "beta") + body("beta")]


def test_narration_idle_header_in_beta_S92b() -> None:
    """S92b: last header while beta; idle /stage alpha since (no header) → /stage beta has no prefix."""
    h = Harness()
    h.command("/stage beta")
    h.header()
    h.command("/stage alpha")
    h.command("/stage beta")
    assert h.stage_texts()[-1] == body("beta")
    assert h.stage_texts()[-2] == prefix(h, "alpha") + body("alpha")


def test_narration_queued_header_in_alpha_S92c() -> None:
    """S92c: open turn, header while alpha → flushed prompt has the prefix."""
    h = Harness()
    h.header()
    h.open_turn()
    h.command("/stage beta")
    h.boundary()
    assert h.stage_texts() == [prefix(h, "beta") + body("beta")]


def test_narration_queued_header_in_beta_S92d() -> None:
    """S92d: header while beta; idle /stage alpha; new turn, no header; /stage beta queued → no prefix."""
    h = Harness()
    h.command("/stage beta")
    h.header()
    h.command("/stage alpha")
    h.open_turn()
    assert h.command("/stage beta").text == h.text("command.queued", target="beta")
    h.boundary()
    assert h.stage_texts()[-1] == body("beta")


def test_narration_never_for_tools_or_initial_S92e_S92f() -> None:
    """S92e: tool flushes never narrate (full and light); S92f: the initial injection never narrates."""
    for threshold in (None, 1e9):
        h = Harness(make_config(min_handoff_tokens=threshold))
        h.header()
        h.open_turn()
        h.review.approve()
        assert not h.goto("beta", "# H").is_error
        h.boundary()
        assert not any(prefix(h, "beta") in t for t in h.stage_texts())
    f = Harness()
    f.header()
    f.open_turn()
    f.boundary()
    assert f.stage_texts() == [body("alpha")]


# ----------------------------------------------------------------------------- set / pending interplay


def test_queued_stage_replaces_an_approved_full_transition_S93a() -> None:
    """S93a (Appendix B3): a queued /stage beta replaces the approved full goto beta: light, narrated,
    nothing archived, the handoff file stays."""
    h = Harness()
    h.header()
    h.open_turn()
    h.user("old work")
    h.review.approve()
    assert not h.goto("beta", "# H").is_error
    assert h.controller.set(h.agent, "beta") == "queued"
    h.boundary()
    assert h.stage_texts() == [prefix(h, "beta") + body("beta")]
    assert "old work" in h.prompt_texts()
    assert h.handoffs.files


def test_set_current_keeps_pending_S93b() -> None:
    """S93b: pending to beta during a turn; set(current) is a noop and keeps the pending transition."""
    h = Harness()
    h.open_turn()
    h.controller.set(h.agent, "beta")
    assert h.controller.set(h.agent, "alpha") == "noop"
    assert h.pending() == "beta"


def test_idle_set_discards_pending_S93c() -> None:
    """S93c: an idle set(gamma) with a pending transition discards it and appends the gamma prompt."""
    h = Harness()
    h.open_turn()
    h.controller.set(h.agent, "beta")
    h.close_turn()
    assert h.controller.set(h.agent, "gamma") == "committed"
    assert h.pending() is None and h.fold() == "gamma"
    h.open_turn()
    h.boundary()
    assert h.summaries() == ["Current stage: gamma"]


def test_whitespace_collapses_S93d() -> None:
    """S93d: '/stage   beta   a   b ' steers 'a b'."""
    h = Harness()
    h.command("/stage   beta   a   b ")
    assert [m["content"][0]["text"] for m in h.agent.steered] == ["a b"]
    assert h.fold() == "beta"


def test_without_commands_set_and_current_still_work_S93e() -> None:
    """S93e: no command registry → /stage is not registered, set()/current() still work."""
    h = Harness(commands=False)
    assert h.runtime.commands is None
    assert h.command("/stage beta") is None
    assert h.controller.set(h.agent, "beta") == "committed"
    assert h.controller.current(h.session) == "beta"


def test_command_replies_stay_out_of_model_history_S93f() -> None:
    """S93f: replies are never model-visible."""
    h = Harness()
    h.command("/stage")
    reply = h.command("/stage ghost")
    h.open_turn()
    h.boundary()
    assert all(reply.text not in t for t in h.prompt_texts())
    assert all("Stages:" not in t for t in h.prompt_texts())
    assert h.prompt_texts() == [PROBE, body("alpha")]


def test_failed_idle_commit_changes_nothing_appendix_b1() -> None:
    """Appendix B1: an idle commit whose append fails keeps the stage and the pending transition."""
    h = Harness()
    h.open_turn()
    h.controller.set(h.agent, "beta")
    h.close_turn()
    h.log.fail_next = OSError("disk full")
    with pytest.raises(LogWriteError, match="disk full"):
        h.controller.set(h.agent, "gamma")
    assert h.pending() == "beta" and h.current() == "alpha" and h.summaries() == []
