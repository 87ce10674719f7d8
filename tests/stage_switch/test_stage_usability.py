"""Usability rules of the stage switch: handoff write failures and long session ids, terminal
stages in the guidance, goto_stage argument checking, per-case wording, the dropped light-transition
handoff, and one wiring / reading style for both controllers.

Spec behaviours kept as they are and re-checked here: S43 (the agent check), S47/S65
(``errors.requires_handoff``), S49 (a store's own error message passes through), S66 (a light
transition ignores the handoff), S70/S72 (session segments).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path
from typing import Any, cast

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fsm_stage.config import EdgeConfig
from fsm_stage.handoff import (
    MAX_SEGMENT_LENGTH,
    HandoffPathError,
    LocalHandoffStore,
    MemoryHandoffStore,
    atomic_write_text,
    handoff_relative_path,
    session_segment,
)
from fsm_stage.plan_mode import PlanModeController
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.tools import ToolCall, ToolFailure
from fsm_stage.stage_switch import (
    NO_AGENT_MESSAGE,
    StageController,
    StageStatus,
    goto_stage_argument_problem,
)

from .harness import Harness, make_config, run

H = "# Handoff\n\nwork"
LISTING = ("When the current stage (<< stage_current >>) is complete, "
           "call goto_stage with one of: << stage_targets >>.")


# ----------------------------------------------------------------------------- session ids


def test_short_session_ids_keep_the_spec_segment_S70_S72() -> None:
    """Ids up to MAX_SEGMENT_LENGTH characters keep the spec's segment exactly (S70, S72a–c)."""
    # Ids the seed rule changes carry a hash of the original id (one folder per id).
    assert session_segment("odd id/../x").startswith("odd-id-..-x-")
    assert session_segment("..").startswith("session-")
    exact = "a" * MAX_SEGMENT_LENGTH
    assert session_segment(exact) == exact


def test_long_session_id_is_truncated_with_a_hash_suffix() -> None:
    """A session id longer than a file name allows gets a bounded, unique, deterministic segment:
    the sanitised prefix, ``-`` and 16 hex digits of the id's SHA-256."""
    long_id = "x" * 400
    seg = session_segment(long_id)
    assert len(seg) == MAX_SEGMENT_LENGTH
    digest = hashlib.sha256(long_id.encode("utf-8")).hexdigest()[:16]
    assert seg == "x" * (MAX_SEGMENT_LENGTH - 17) + "-" + digest
    assert session_segment(long_id) == seg
    # Two ids sharing a long prefix, and two that sanitise to the same text, stay apart.
    assert session_segment("p" * 300 + "a") != session_segment("p" * 300 + "b")
    assert session_segment("é" * 200) != session_segment("è" * 200)
    assert session_segment("a/" * 100) != session_segment("a-" * 100)


def test_goto_stage_with_a_400_character_session_id_writes_the_handoff(tmp_path: Path) -> None:
    """A 400-character session id does not reach the model as ``[Errno 36]``: the
    handoff is written under the bounded segment and the transition is approved."""
    sid = "session-" + "0123456789" * 40
    h = Harness(session_id=sid, cwd=str(tmp_path), handoffs=LocalHandoffStore())
    h.open_turn()
    h.review.approve()
    result = h.goto("beta", H)
    assert not result.is_error, result.text
    expected = tmp_path / "handoff" / session_segment(sid) / "beta.md"
    assert result.value["handoffPath"] == str(expected)
    assert expected.read_text(encoding="utf-8") == H


# ----------------------------------------------------------------------------- OS errors


def test_os_error_from_the_handoff_write_is_a_catalogued_error() -> None:
    """An ``OSError`` carrying an OS error code becomes ``errors.handoff_write_failed`` naming the
    document's path and the OS's reason; nothing is reviewed or pending (S51d)."""
    h = Harness()
    h.open_turn()
    h.handoffs.fail_with = OSError(errno.ENAMETOOLONG, "File name too long", "beta.md")
    before = len(h.session.events)
    result = h.goto("beta", H)
    assert result.is_error
    assert result.text == "Error: " + h.text(
        "errors.handoff_write_failed", stage="beta", path="/workspace/handoff/agent-1/beta.md",
        reason="File name too long")
    assert "Errno" not in result.text
    assert h.review.requests == []
    assert h.pending() is None and h.fold() is None
    assert len(h.session.events) == before + 2  # tool/call + tool/result only


def test_real_enametoolong_on_the_local_store_is_catalogued(tmp_path: Path) -> None:
    """A real ENAMETOOLONG (a 300-character handoff folder name) reaches the model as the
    catalogued message, with the relative-to-cwd path it tried."""
    folder = "h" * 300
    h = Harness(make_config(handoff_dir=folder), cwd=str(tmp_path),
                handoffs=LocalHandoffStore())
    h.open_turn()
    result = h.goto("beta", H)
    assert result.text == "Error: " + h.text(
        "errors.handoff_write_failed", stage="beta", path=f"{tmp_path}/{folder}/agent-1/beta.md",
        reason=os.strerror(errno.ENAMETOOLONG))
    assert h.review.requests == []


def test_store_errors_without_an_os_code_pass_through_unchanged_S49() -> None:
    """S49 stays: a store's own message (no OS error code) is the tool failure, unchanged; a
    ``HandoffPathError`` too."""
    h = Harness()
    h.handoffs.fail_with = OSError("disk full")
    assert h.goto("beta", H).text == "Error: disk full"
    refusal = HandoffPathError("handoff folder '/workspace/handoff' is a symlink")
    h.handoffs.fail_with = refusal
    assert h.goto("beta", H).text == "Error: handoff folder '/workspace/handoff' is a symlink"


def test_atomic_write_handles_a_file_name_near_the_limit(tmp_path: Path) -> None:
    """The temporary file's name is bounded, so a document whose own name fits can be written."""
    target = tmp_path / ("s" * 250 + ".md")
    atomic_write_text(target, "text")
    assert target.read_text(encoding="utf-8") == "text"
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]


# ----------------------------------------------------------------------------- terminal stages


def terminal_graph(section: str = LISTING) -> Harness:
    cfg = make_config(section=section, targets={
        "alpha": ["beta"], "beta": [EdgeConfig("gamma", ("tests_green",))], "gamma": []})
    h = Harness(cfg)
    h.controller.register_eligibility(lambda _a: True)
    return h


def test_terminal_stage_guidance_is_the_catalogued_line() -> None:
    """At a stage with ``targets: []`` a section that lists ``<< stage_targets >>`` is
    replaced by ``notice.policy_terminal`` (no "one of: ."); the variable keeps the spec's ``''``."""
    h = terminal_graph()
    assert h.controller.policy_text(h.agent) == (
        "When the current stage (alpha) is complete, call goto_stage with one of: beta.")
    h.controller.set(h.agent, "gamma")
    text = h.controller.policy_text(h.agent)
    assert text == h.text("notice.policy_terminal", stage="gamma")
    assert "one of: ." not in text
    assert h.controller.variables(h.agent) == {"stage_current": "gamma", "stage_targets": ""}
    context = {c.name: c.text for c in h.runtime.assemble(h.agent).context}
    assert context["stage:policy"] == text


def test_stage_with_only_closed_edges_names_the_missing_guards() -> None:
    """Edges exist but every guard is closed: ``notice.policy_blocked`` names the guards to wait for;
    once a guard opens the deployer's section is back."""
    h = terminal_graph()
    h.controller.set(h.agent, "beta")
    blocked = h.text("notice.policy_blocked", stage="beta", guards="tests_green")
    assert h.controller.policy_text(h.agent) == blocked
    h.controller.register_eligibility(lambda _a: True, name="tests_green")
    assert h.controller.policy_text(h.agent) == (
        "When the current stage (beta) is complete, call goto_stage with one of: gamma.")


def test_section_that_handles_no_targets_is_rendered_as_written() -> None:
    """A section that branches on ``stage_targets`` (or never mentions it) owns the empty case."""
    branching = terminal_graph("<% if stage_targets %>Go to << stage_targets >>.<% else %>"
                               "<< stage_current >> is the last stage.<% endif %>")
    branching.controller.set(branching.agent, "gamma")
    assert branching.controller.policy_text(branching.agent) == "gamma is the last stage."
    fallback = terminal_graph("Next: << stage_targets or 'nothing' >>.")
    fallback.controller.set(fallback.agent, "gamma")
    assert fallback.controller.policy_text(fallback.agent) == "Next: nothing."
    plain = terminal_graph("Work carefully in << stage_current >>.")
    plain.controller.set(plain.agent, "gamma")
    assert plain.controller.policy_text(plain.agent) == "Work carefully in gamma."


def test_single_stage_graph_guidance_S32_S36() -> None:
    """A single-stage graph: ``stage_targets`` is ``''`` and a listing section becomes the
    terminal line; a section without the variable is the section (S32)."""
    h = Harness(make_config(["solo"], section=LISTING))
    h.controller.register_eligibility(lambda _a: True)
    assert h.controller.variables(h.agent) == {"stage_current": "solo", "stage_targets": ""}
    assert h.controller.policy_text(h.agent) == h.text("notice.policy_terminal", stage="solo")
    plain = Harness(make_config(["solo"]))
    plain.controller.register_eligibility(lambda _a: True)
    assert plain.controller.policy_text(plain.agent) == plain.config.section


# ----------------------------------------------------------------------------- arguments


def problem(h: Harness, key: str, **kw: Any) -> str:
    return "Error: " + h.text("errors.invalid_arguments", problem=h.text(f"errors.arguments.{key}", **kw))


def test_missing_stage_argument_names_the_problem() -> None:
    """``goto_stage {}`` names the missing argument, never ``Stage "None" is not configured``."""
    h = Harness()
    h.open_turn()
    before = len(h.session.events)
    result = _run(h.runtime.call_tool(h.agent, _call({})))
    assert result.text == problem(h, "missing", name="stage")
    assert "None" not in result.text
    null = h.goto(None)  # {"stage": null}
    assert null.text == problem(h, "wrong_type", name="stage", expected="string", actual="null")
    assert h.review.requests == []
    assert h.pending() is None
    assert len(h.session.events) == before + 4  # two tool/call + tool/result pairs only


@pytest.mark.parametrize(("value", "json_name", "yaml_words"), [
    (None, "null", "null"), (True, "boolean", "a boolean (true)"), (5, "number", "a number (5)"),
    ("x", "string", 'a string ("x")'), (["a"], "array", "a list"), ({"a": 1}, "object", "a mapping"),
])
def test_one_value_type_helper_serves_both_vocabularies(value: Any, json_name: str, yaml_words: str) -> None:
    """Duplicate D8: the ``goto_stage`` argument check names JSON types with the same helper the
    config loader uses for YAML values (``fsm_stage.config.describe_value``), not a private copy."""
    from fsm_stage import stage_switch
    from fsm_stage.config import describe_value

    assert describe_value(value, json_names=True) == json_name
    assert describe_value(value) == yaml_words
    assert not hasattr(stage_switch, "_json_type")


def wrong(name: str, actual: str) -> dict[str, str]:
    return {"name": name, "expected": "string", "actual": actual}


@pytest.mark.parametrize(("args", "key", "kw"), [
    ({"stage": 3}, "wrong_type", wrong("stage", "number")),
    ({"stage": True}, "wrong_type", wrong("stage", "boolean")),
    ({"stage": ["beta"]}, "wrong_type", wrong("stage", "array")),
    ({"stage": "beta", "handoff": 5}, "wrong_type", wrong("handoff", "number")),
    ({"stage": "beta", "zz": 1, "extra": 2}, "unknown",
     {"names": '"extra", "zz"', "allowed": '"stage", "handoff"'}),
])
def test_bad_arguments_are_refused_before_the_chain(
        args: dict[str, Any], key: str, kw: dict[str, Any]) -> None:
    """Arguments are checked against the tool's own parameter schema before the validation chain:
    nothing is reviewed, written or pending."""
    h = Harness()
    h.open_turn()
    h.review.approve()
    result = _run(h.runtime.call_tool(h.agent, _call(args)))
    assert result.text == problem(h, key, **kw)
    assert h.review.requests == [] and h.handoffs.writes == []
    assert h.pending() is None


def test_non_object_arguments_are_refused() -> None:
    """Arguments that are not a JSON object (a host calling ``goto_stage`` directly) are refused
    with ``errors.arguments.not_object``."""
    h = Harness()
    with pytest.raises(ToolFailure) as caught:
        _run(h.controller.goto_stage(cast(Any, ["beta"]), h.agent))
    assert caught.value.message == h.text(
        "errors.invalid_arguments", problem=h.text("errors.arguments.not_object", actual="array"))


def test_present_call_tolerates_malformed_arguments_S40() -> None:
    """The call card is drawn before the tool runs, so malformed arguments must not break it:
    non-object arguments draw like ``{}`` (S40's light wording with an empty stage)."""
    h = Harness()
    card = h.controller.present_call(cast(Any, ["beta"]))
    assert card["title"] == h.text("present.call_title", stage="")
    assert card["content"] == [{"type": "text", "text": h.text("present.light_call_content", stage="")}]


def test_schema_check_precedes_the_agent_check_S43() -> None:
    """The schema check stands for the harness's own argument validation, which runs before
    ``execute``; valid arguments without an agent still get the S43 message."""
    h = Harness()
    assert _run(h.runtime.call_tool(None, _call({}), log=False)).text == problem(h, "missing", name="stage")
    assert h.goto("beta", H, agent=None, log=False).text == "Error: " + NO_AGENT_MESSAGE


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2),
    max_leaves=4)


@given(st.dictionaries(st.sampled_from(["stage", "handoff", "other", "Stage"]), _json, max_size=3) | _json)
def test_argument_check_agrees_with_json_schema(args: Any) -> None:
    """``goto_stage_argument_problem`` accepts exactly what the published parameter schema
    accepts (checked against the ``jsonschema`` reference implementation)."""
    schema = json.loads(json.dumps(_SPEC.parameters))
    schema["properties"]["stage"].pop("enum")  # names outside the graph get the chain's message
    schema["properties"]["handoff"]["type"] = ["string", "null"]  # null = no handoff (strict mode)
    valid = jsonschema.Draft202012Validator(schema).is_valid(args)
    assert (goto_stage_argument_problem(args, _CATALOG) is None) == valid


# ----------------------------------------------------------------------------- wording per case


def test_requires_handoff_does_not_claim_a_large_conversation_S47_S65() -> None:
    """Suggestion: with no ``min_handoff_tokens`` every transition is full, so the refusal must not
    say the conversation is large; one text serves both cases (S47 and S65 pin the same key)."""
    h = Harness()
    text = h.goto("beta").text
    assert text == "Error: " + h.text("errors.requires_handoff")
    assert "large" not in text.split("\n")[0]
    assert "## Primary Request and Intent" in text


def test_light_transition_tells_the_model_its_handoff_was_dropped_S66() -> None:
    """A handoff passed on a light transition is not written (S66) and the tool result says so;
    the value keeps the spec's keys."""
    h = Harness(make_config(min_handoff_tokens=100))
    h.open_turn()
    h.user("short")
    h.review.approve()
    result = h.goto("beta", "# Unneeded handoff")
    assert result.value == {"approved": True, "stage": "beta"}
    assert result.text == h.text("tool_result.approved", stage="beta") + h.text("tool_result.handoff_dropped")
    assert h.handoffs.writes == []
    quiet = Harness(make_config(min_handoff_tokens=100))
    quiet.open_turn()
    quiet.review.approve()
    assert quiet.goto("beta", "  ").text == quiet.text("tool_result.approved", stage="beta")


# ----------------------------------------------------------------------------- wiring and reading


def test_both_wiring_styles_work_for_both_controllers() -> None:
    """``controller.attach(runtime)`` and ``runtime.attach(controller)`` are the same thing for the
    stage switch and plan mode; attaching an attached controller again is refused the same way."""
    for style in ("controller", "runtime"):
        runtime = Runtime()
        stage = StageController(make_config())
        plan = PlanModeController({"section": "Plan first."})
        for c in (stage, plan):
            if style == "controller":
                c.attach(runtime)
            else:
                assert runtime.attach(c) is c
        assert set(runtime.tools) == {"goto_stage", "exit_plan_mode"}
        assert runtime.service("stage") is stage
        for c in (stage, plan):
            with pytest.raises(RuntimeError, match="already attached"):
                c.attach(Runtime())


def test_get_reports_current_and_pending_like_plan_mode() -> None:
    """``stage.get(agent)`` mirrors ``plan_mode.get(agent)``: the logged stage and the pending
    target (None when nothing is pending)."""
    h = Harness()
    assert h.controller.get(h.agent) == StageStatus("alpha", None)
    assert h.controller.get(h.agent).to_json() == {"current": "alpha"}
    h.open_turn()
    assert h.controller.set(h.agent, "gamma") == "queued"
    status = h.controller.get(h.agent)
    assert status == StageStatus("alpha", "gamma")
    assert status.to_json() == {"current": "alpha", "pending": "gamma"}
    parts = (h.controller.current(h.session), h.controller.pending_stage(h.session))
    assert (status.current, status.pending) == parts


# ----------------------------------------------------------------------------- helpers

_HARNESS = Harness()
_SPEC = _HARNESS.controller.tool_spec()
_CATALOG = _HARNESS.catalog


def _call(args: Any) -> ToolCall:
    return ToolCall.of("goto_stage", args)


def _run(coro: Any) -> Any:
    return run(coro)


def test_memory_store_still_records_on_success() -> None:
    store = MemoryHandoffStore()
    assert store.write(handoff_relative_path("handoff", "a" * 300, "beta"), "x", cwd="/w") == (
        f"/w/handoff/{session_segment('a' * 300)}/beta.md")
