"""The ``/plan`` command (docs/contracts.md, B48–B63)."""

from __future__ import annotations

from typing import Any

from plan_helpers import CAT, Harness, run

from fsm_stage.constants import COMMAND_DONE, COMMAND_RUN, PLAN_MODE_EVENT
from fsm_stage.runtime.commands import CommandReply

IMAGE: dict[str, Any] = {"type": "image", "attachment": {"attachmentId": "att-1", "mediaType": "image/png",
                                                         "bytes": 68, "width": 1, "height": 1}}


def cmd(h: Harness, line: str, images: tuple[dict[str, Any], ...] = ()) -> CommandReply:
    reply = run(h.runtime.run_command(h.agent, line, images))
    assert reply is not None
    return reply


def ok(key: str) -> CommandReply:
    return CommandReply("success", CAT.text(key))


def test_registered_only_with_a_command_registry_B48() -> None:
    """B48: without a command registry nothing is registered and plan mode still works."""
    h = Harness(commands=False)
    assert h.runtime.commands is None
    assert run(h.runtime.run_command(h.agent, "/plan")) is None
    assert h.plan.set(h.agent, True) == "committed"
    assert h.runtime.assemble(h.agent).section("plan:policy") == h.plan.config.section


def test_descriptor_and_only_command_B49() -> None:
    """B49: name plan, description, hint, images allowed; /mode and /review are not handled."""
    h = Harness()
    assert h.runtime.commands is not None
    (spec,) = h.runtime.commands.specs
    assert (spec.name, spec.description, spec.hint, spec.images) == (
        "plan", CAT.text("command.description"), CAT.text("command.hint"), True)
    n = len(h.log)
    assert run(h.runtime.run_command(h.agent, "/mode")) is None
    assert run(h.runtime.run_command(h.agent, "/review x")) is None
    assert len(h.log) == n


def test_only_exact_off_selects_exit_B50() -> None:
    """B50: the trimmed raw input `off` exits; `OFF` and `off now` enter and are steered."""
    h = Harness(events=[(PLAN_MODE_EVENT, {"active": True})])
    assert cmd(h, "/plan   off  ") == ok("command.off_now")
    for text in ("OFF", "off now"):
        h2 = Harness()
        assert cmd(h2, f"/plan {text}") == ok("command.on_now")
        assert [m["content"] for m in h2.steered()] == [[{"type": "text", "text": text}]]


def test_off_with_images_is_refused_first_B51() -> None:
    """B51: /plan off with images → error before anything else: no selection, no steer."""
    h = Harness(events=[(PLAN_MODE_EVENT, {"active": True})])
    assert cmd(h, "/plan off", (IMAGE,)) == CommandReply("error", CAT.text("command.off_images"))
    assert h.get == {"active": True} and h.agent.inbox == ()
    assert [e.data["kind"] for e in h.log.events if e.type == COMMAND_DONE] == ["error"]


def test_off_when_idle_and_inactive_B52() -> None:
    """B52: idle, inactive, no record → already-off success."""
    h = Harness()
    assert cmd(h, "/plan off") == ok("command.already_off")
    assert h.get == {"active": False}


def test_off_cancels_pending_entry_B53() -> None:
    """B53: open turn, pending entry → entry-cancelled; nothing steered; never logged."""
    h = Harness()
    h.open_turn()
    assert cmd(h, "/plan") == ok("command.on_deferred")
    assert cmd(h, "/plan off") == ok("command.entry_cancelled")
    assert h.get == {"active": False, "pending": False} and h.agent.inbox == ()
    h.boundary()
    assert h.get == {"active": False} and h.plan_events() == []


def test_off_deferred_in_open_turn_and_repeat_B54() -> None:
    """B54: open turn, logged active → off-deferred (queued); a repeat is a noop with the same
    text; nothing steered; after the boundary plan mode is off."""
    h = Harness(events=[(PLAN_MODE_EVENT, {"active": True})])
    h.open_turn()
    assert cmd(h, "/plan off") == ok("command.off_deferred")
    assert h.get == {"active": True, "pending": False}
    assert cmd(h, "/plan off") == ok("command.off_deferred")
    assert h.agent.inbox == ()
    h.boundary()
    assert h.get == {"active": False}


def test_off_outcome_mapping_B55() -> None:
    """B55: committed → off-now, queued → off-deferred, cancelled → entry-cancelled, noop →
    off-deferred while the log reads active else already-off; all success, never steers."""
    committed = Harness(events=[(PLAN_MODE_EVENT, {"active": True})])
    assert cmd(committed, "/plan off") == ok("command.off_now")
    queued = Harness(events=[(PLAN_MODE_EVENT, {"active": True})])
    queued.open_turn()
    assert cmd(queued, "/plan off") == ok("command.off_deferred")
    assert cmd(queued, "/plan off") == ok("command.off_deferred")  # noop, log active
    cancelled = Harness()
    cancelled.open_turn()
    cancelled.plan.set(cancelled.agent, True)
    assert cmd(cancelled, "/plan off") == ok("command.entry_cancelled")
    noop = Harness()
    assert cmd(noop, "/plan off") == ok("command.already_off")
    for h in (committed, queued, cancelled, noop):
        assert h.steered() == []


def test_idle_commit_copy_on_both_forms_B56() -> None:
    """B56: idle /plan → on-now, fold true; /plan off → off-now, fold false."""
    h = Harness()
    assert cmd(h, "/plan") == ok("command.on_now") and h.get == {"active": True}
    assert cmd(h, "/plan off") == ok("command.off_now") and h.get == {"active": False}


def test_entry_outcome_wording_B57_Q2() -> None:
    """B57 (with the Q2 decision): committed → on-now; queued → on-deferred; noop during a
    pending entry → on-deferred; noop while already on → already-on; cancelling a pending exit
    → exit-cancelled."""
    h = Harness()
    assert cmd(h, "/plan") == ok("command.on_now")
    assert cmd(h, "/plan") == ok("command.already_on")  # noop, logged active (Q2)
    q = Harness()
    q.open_turn()
    assert cmd(q, "/plan") == ok("command.on_deferred")  # queued
    assert cmd(q, "/plan") == ok("command.on_deferred")  # noop, entry still pending
    c = Harness(events=[(PLAN_MODE_EVENT, {"active": True})])
    c.open_turn()
    c.plan.set(c.agent, False)
    assert cmd(c, "/plan") == ok("command.exit_cancelled")  # cancelled (Q2)
    assert c.get == {"active": True, "pending": True}


def test_bare_plan_in_open_turn_B58() -> None:
    """B58: open turn, bare /plan → on-deferred, pending true, nothing steered."""
    h = Harness()
    h.open_turn()
    assert cmd(h, "/plan") == ok("command.on_deferred")
    assert h.get == {"active": False, "pending": True} and h.agent.inbox == ()


def test_message_is_trimmed_and_steered_once_B59() -> None:
    """B59: open turn `/plan   draft the migration  ` → on-deferred, one steered user message
    with the trimmed text, a fresh id and source {kind: user}."""
    h = Harness()
    h.open_turn()
    assert cmd(h, "/plan   draft the  migration  ") == ok("command.on_deferred")
    assert h.get == {"active": False, "pending": True}
    (msg,) = h.steered()
    assert msg["role"] == "user" and msg["source"] == {"kind": "user"}
    assert msg["content"] == [{"type": "text", "text": "draft the  migration"}]
    assert isinstance(msg["id"], str) and len(msg["id"]) >= 8
    h2 = Harness()
    h2.open_turn()
    cmd(h2, "/plan   draft the  migration  ")
    assert h2.steered()[0]["id"] != msg["id"]
    run_ = next(e for e in h.log.events if e.type == COMMAND_RUN)
    assert run_.data["args"] == "   draft the  migration  "


def test_images_first_then_text_B60() -> None:
    """B60: `/plan sketch the layout` with one image steers [image, text]; success."""
    h = Harness()
    assert cmd(h, "/plan sketch the layout", (IMAGE,)).kind == "success"
    (msg,) = h.steered()
    assert msg["content"] == [IMAGE, {"type": "text", "text": "sketch the layout"}]


def test_image_only_message_B61() -> None:
    """B61: open turn, bare /plan with one image → one message with only the image block."""
    h = Harness()
    h.open_turn()
    assert cmd(h, "/plan", (IMAGE,)) == ok("command.on_deferred")
    assert [m["content"] for m in h.steered()] == [[IMAGE]]
    assert h.get == {"active": False, "pending": True}


def test_mode_selected_before_steer_even_on_noop_B62() -> None:
    """B62: the selection happens before the steer; the steer happens whatever the outcome."""
    h = Harness()
    seen: list[int] = []
    h.agent.on_wake = lambda agent: seen.append(len(h.plan_events()))
    cmd(h, "/plan first")
    assert seen == [1]  # plan/mode already logged when the message was steered
    cmd(h, "/plan second")  # noop: already on
    assert [m["content"][0]["text"] for m in h.steered()] == ["first", "second"]


def test_close_removes_the_command_B63() -> None:
    """B63: closing the controller unregisters /plan."""
    h = Harness()
    assert h.runtime.commands is not None
    h.plan.close()
    assert h.runtime.commands.specs == []
    assert run(h.runtime.run_command(h.agent, "/plan")) is None
