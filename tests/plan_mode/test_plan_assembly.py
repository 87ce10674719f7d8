"""Prompt section, tool catalog and no execution gating (plan-mode spec §2.E, §2.F, B112)."""

from __future__ import annotations

import json

from plan_helpers import CAT, PLAN, SECTION, FakeTool, Harness, run

from fsm_stage.constants import EXIT_PLAN_MODE, PLAN_MODE_EVENT, PLAN_POLICY_ORDER, PLAN_POLICY_SECTION
from fsm_stage.driver import Loop, ModelReply, ScriptedModel
from fsm_stage.reviews import ScriptedReviewChannel
from fsm_stage.runtime.assembly import SystemSection
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.tools import ToolCall, ToolSpec, export_tools


def _with_tools(h: Harness, *names: str) -> dict[str, FakeTool]:
    tools = {n: FakeTool(n) for n in names}
    for t in tools.values():
        h.runtime.add_tool(t)
    return tools


def test_section_follows_effective_state_verbatim_B36() -> None:
    """B36: plan:policy (order 50) renders the section verbatim while effectively active."""
    h = Harness(section="  Plan first.\n")
    h.runtime.add_section(SystemSection("base", 10, lambda a: "BASE"))
    assert h.runtime.assemble(h.agent).section(PLAN_POLICY_SECTION) == ""
    assert h.runtime.assemble(h.agent).system == "BASE"
    h.log.append(PLAN_MODE_EVENT, {"active": True})
    a = h.runtime.assemble(h.agent)
    assert a.section(PLAN_POLICY_SECTION) == "  Plan first.\n"
    assert [(s.name, s.order) for s in a.sections] == [("base", 10), (PLAN_POLICY_SECTION, PLAN_POLICY_ORDER)]
    seeded = Harness(events=[(PLAN_MODE_EVENT, {"active": True})])
    assert seeded.runtime.assemble(seeded.agent).section(PLAN_POLICY_SECTION) == SECTION


def test_agentless_assembly_B37() -> None:
    """B37: no agent → empty section; the exit tool is still listed."""
    h = Harness(events=[(PLAN_MODE_EVENT, {"active": True})])
    _with_tools(h, "read")
    a = h.runtime.assemble(None)
    assert a.section(PLAN_POLICY_SECTION) == "" and a.tool_names == (EXIT_PLAN_MODE, "read")


def test_tool_list_identical_in_both_modes_B38() -> None:
    """B38: [exit_plan_mode, read, write] in both modes, with identical schemas."""
    h = Harness()
    _with_tools(h, "write", "read")
    before = h.runtime.assemble(h.agent).tools
    h.plan.set(h.agent, True)
    after = h.runtime.assemble(h.agent).tools
    assert [t.name for t in before] == [EXIT_PLAN_MODE, "read", "write"]
    assert before == after


def test_plan_mode_removes_no_tool_B39() -> None:
    """B39: all registered tools stay, and so do tools a later assembly participant adds."""
    h = Harness(events=[(PLAN_MODE_EVENT, {"active": True})])
    _with_tools(h, "read", "write", "todo_write")
    assert h.runtime.assemble(h.agent).tool_names == (EXIT_PLAN_MODE, "read", "todo_write", "write")
    h2 = Harness()
    _with_tools(h2, "read")
    later = ToolSpec("added-later", "x", {"type": "object"})
    h2.runtime.add_assemble_hook(lambda agent, a: type(a)(a.sections, (*a.tools, later), a.context))
    default_names = h2.runtime.assemble(h2.agent).tool_names
    h2.plan.set(h2.agent, True)
    expected = (EXIT_PLAN_MODE, "read", "added-later")
    assert default_names == h2.runtime.assemble(h2.agent).tool_names == expected


def test_exit_tool_publishes_its_output_schema_B40() -> None:
    """B40 (Code Mode port): the exit tool's output schema says approved is the literal true,
    so a typed-binding generator reading the exported tools can include it."""
    spec = Harness().runtime.tools[EXIT_PLAN_MODE].spec
    assert spec.output == {"type": "object", "properties": {"approved": {"type": "boolean", "const": True}},
                           "required": ["approved"], "additionalProperties": False}
    (exported,) = [t for t in export_tools([spec], "dsh")]
    assert exported["output"]["properties"]["approved"]["const"] is True


def test_wire_tools_and_bindings_both_include_exit_tool_in_plan_mode_B41() -> None:
    """B41 (mode "both" port): while plan mode is active the native wire list and every export
    (bindings source) include exit_plan_mode next to read, run_code and write."""
    h = Harness(events=[(PLAN_MODE_EVENT, {"active": True})])
    _with_tools(h, "read", "run_code", "write")
    a = h.runtime.assemble(h.agent)
    assert a.tool_names == (EXIT_PLAN_MODE, "read", "run_code", "write")
    for style, key in (("openai", lambda t: t["function"]["name"]), ("anthropic", lambda t: t["name"]),
                       ("dsh", lambda t: t["name"])):
        assert EXIT_PLAN_MODE in [key(t) for t in export_tools(a.tools, style)]


def test_exported_tool_metadata_byte_identical_across_modes_B42() -> None:
    """B42: the exported tool metadata is byte-identical in default and plan mode; a
    composition without plan mode lacks the exit binding."""
    h = Harness()
    _with_tools(h, "read")

    def dump(rt: Runtime) -> str:
        return json.dumps(export_tools(rt.assemble(h.agent).tools, "dsh"), sort_keys=True)

    default = dump(h.runtime)
    h.plan.set(h.agent, True)
    assert dump(h.runtime) == default
    bare = Runtime()
    bare.add_tool(FakeTool("read"))
    assert dump(bare) != default and EXIT_PLAN_MODE not in dump(bare)


def test_approved_exit_projects_next_assembly_before_boundary_B43() -> None:
    """B43: after approval the log still reads active but the next assembly has no section and
    still lists the exit tool; after the boundary the fold is false, nothing else changes."""
    h = Harness(review=ScriptedReviewChannel().approve(), events=[(PLAN_MODE_EVENT, {"active": True})])
    h.open_turn()
    tools_before = h.runtime.assemble(h.agent).tools
    run(h.plan.exit_plan_mode({"plan": PLAN}, h.agent))
    a = h.runtime.assemble(h.agent)
    assert h.get == {"active": True, "pending": False}
    assert a.section(PLAN_POLICY_SECTION) == "" and EXIT_PLAN_MODE in a.tool_names
    h.boundary()
    b = h.runtime.assemble(h.agent)
    assert h.get == {"active": False} and b.tools == tools_before == a.tools
    assert b.section(PLAN_POLICY_SECTION) == ""


def test_pre_turn_set_makes_first_header_plan_shaped_B44() -> None:
    """B44: an idle set(true) before the first prompt commits below the first (initial)
    header; that header lists [exit_plan_mode, read, write] and carries the section."""
    h = Harness()
    _with_tools(h, "read", "write")
    assert h.plan.set(h.agent, True) == "committed"
    run(Loop(h.runtime, h.agent, ScriptedModel([ModelReply.say("ok")])).prompt("plan it"))
    mode = next(e for e in h.log.events if e.type == PLAN_MODE_EVENT)
    header = next(e for e in h.log.events if e.type == "request/header")
    assert mode.seq < header.seq and header.data["reason"] == "initial"
    assert [t["name"] for t in header.data["header"]["tools"]] == [EXIT_PLAN_MODE, "read", "write"]
    assert SECTION in header.data["header"]["system"]


def test_flip_between_turns_one_notice_changed_header_same_tools_B45() -> None:
    """B45: default turn, idle set(true), new prompt → second header reason change, same tools,
    section present; exactly one plugin notice in the log."""
    h = Harness()
    _with_tools(h, "read", "write")
    loop = Loop(h.runtime, h.agent, ScriptedModel([ModelReply.say("a"), ModelReply.say("b")]))
    run(loop.prompt("one"))
    assert h.plan.set(h.agent, True) == "committed"
    run(loop.prompt("two"))
    h1, h2 = [e.data for e in h.log.events if e.type == "request/header"]
    assert h2["reason"] == "change" and h2["header"]["tools"] == h1["header"]["tools"]
    assert SECTION in h2["header"]["system"] and SECTION not in h1["header"]["system"]
    assert h.notices() == [CAT.text("notice.to_plan")]


def test_other_tools_run_without_agent_or_in_default_mode_B46() -> None:
    """B46: plan mode never blocks other tools: agent-less and default-mode calls succeed."""
    h = Harness()
    (write,) = _with_tools(h, "write").values()
    r1 = run(h.runtime.call_tool(None, ToolCall.of("write", {"path": "x"})))
    r2 = run(h.runtime.call_tool(h.agent, ToolCall.of("write", {"path": "x"})))
    assert not r1.is_error and not r2.is_error and len(write.calls) == 2


def test_plan_mode_is_guidance_only_B47_B112() -> None:
    """B47/B112: in plan mode read, write and bash run untouched; in the loop a write returns a
    non-error result, plan mode stays active, no notice; nothing touches sandbox or approval
    state and no tool is filtered."""
    h = Harness(events=[(PLAN_MODE_EVENT, {"active": True})])
    tools = _with_tools(h, "read", "write", "bash")
    for name in ("read", "write", "bash"):
        assert not run(h.runtime.call_tool(h.agent, ToolCall.of(name))).is_error
    model = ScriptedModel([ModelReply.call("write", {"path": "a.txt"}), ModelReply.say("done")])
    run(Loop(h.runtime, h.agent, model).prompt("go"))
    result = next(e for e in reversed(h.log.events) if e.type == "tool/result")
    assert result.data["message"]["content"][0]["isError"] is False
    assert h.get == {"active": True} and h.notices() == []
    assert len(tools["write"].calls) == 2
    assert not any(e.type.startswith(("sandbox/", "approval/", "permission/")) for e in h.log.events)
    assert model.requests[0].tool_names == ("bash", EXIT_PLAN_MODE, "read", "write")  # sorted
