"""The prefix / prompt-cache report (``fsm_stage.simulate.prefix_report``): pure functions."""

from __future__ import annotations

import attrs

from fsm_stage.runtime.tools import ToolSpec
from fsm_stage.simulate import (
    MessageView,
    PrefixReport,
    RequestRecord,
    SectionView,
    ToolView,
    message_view,
    prefix_report,
    section_views,
    tool_views,
)
from fsm_stage.tokens import HeuristicTokenMeter


@attrs.frozen
class _Sec:
    name: str
    order: int
    text: str


def _msg(role: str, text: str, **source: str) -> dict[str, object]:
    return {"role": role, "content": [{"type": "text", "text": text}], "source": source or {"kind": "user"}}


BASE = section_views([_Sec("host", 0, "You are a coding agent." * 10)])
PLAN = section_views([_Sec("host", 0, "You are a coding agent." * 10),
                      _Sec("plan:policy", 50, "Plan first.")])
TOOLS = tool_views([ToolSpec("goto_stage", "Move to a stage.", {"type": "object"}),
                    ToolSpec("exit_plan_mode", "Submit the plan.", {"type": "object"})])
M1 = (message_view(_msg("user", "Add a flag.")),)
M2 = (*M1, message_view(_msg("assistant", "On it.")))


def _record(sections: tuple[SectionView, ...], tools: tuple[ToolView, ...], messages: tuple[MessageView, ...],
            prev: RequestRecord | None = None) -> RequestRecord:
    report = prefix_report(prev, sections, tools, messages)
    return RequestRecord(index=1 if prev is None else prev.index + 1, turn=1, step=1, stage=None,
                         plan_mode=False, sections=sections, context=(), messages=messages,
                         tools=tools, prefix=report)


def test_first_request_reuses_nothing() -> None:
    report = prefix_report(None, BASE, TOOLS, M1)
    assert report.first and report.reused_tokens == 0 and report.percent == 0.0
    assert report.total_tokens == sum(s.tokens for s in BASE) + sum(t.tokens for t in TOOLS) + M1[0].tokens


def test_appending_messages_reuses_the_whole_previous_request() -> None:
    first = _record(BASE, TOOLS, M1)
    report = prefix_report(first, BASE, TOOLS, M2)
    assert (report.system, report.tools, report.messages) == ("kept", "kept", "kept")
    assert report.reused_tokens == first.tokens
    assert report.head_percent == 100.0
    assert report.percent == round(100 * first.tokens / report.total_tokens, 1)
    assert report.messages_kept == 1


def test_plan_section_change_is_named_and_breaks_the_cache_from_order_50() -> None:
    """B36: plan mode's policy section is order 50; entering it changes the system prompt
    from that section on — the host section before it is still reused, the tools are not."""
    first = _record(BASE, TOOLS, M1)
    report = prefix_report(first, PLAN, TOOLS, M2)
    assert report.system == "changed"
    assert report.system_change == "plan:policy (order 50) added"
    assert report.tools == "kept" and report.messages == "kept"
    assert report.reused_tokens == BASE[0].tokens  # only the unchanged leading section
    back = prefix_report(_record(PLAN, TOOLS, M1), BASE, TOOLS, M2)
    assert back.system_change == "plan:policy (order 50) removed"


def test_changed_text_of_a_section_is_reported_as_changed() -> None:
    other = section_views([_Sec("host", 0, "Another prompt.")])
    report = prefix_report(_record(BASE, TOOLS, M1), other, TOOLS, M1)
    assert report.system_change == "host (order 0) changed" and report.reused_tokens == 0


def test_tool_catalog_changes_are_named() -> None:
    fewer = TOOLS[:1]
    report = prefix_report(_record(BASE, TOOLS, M1), BASE, fewer, M1)
    assert report.tools == "changed" and report.tools_change == "removed exit_plan_mode"
    described = tool_views([ToolSpec("goto_stage", "Different words.", {"type": "object"}),
                            ToolSpec("exit_plan_mode", "Submit the plan.", {"type": "object"})])
    report = prefix_report(_record(BASE, TOOLS, M1), BASE, described, M1)
    assert report.tools_change == "goto_stage changed"
    assert report.reused_tokens == sum(s.tokens for s in BASE)


def test_replaced_history_breaks_the_message_prefix_but_keeps_system_and_tools() -> None:
    """S73: a full transition replaces the visible history with one notice."""
    first = _record(BASE, TOOLS, M2)
    notice = (message_view(_msg("user", "Stage switched to verify.", kind="stage-switch", form="notice")),)
    report = prefix_report(first, BASE, TOOLS, notice)
    assert (report.system, report.tools, report.messages) == ("kept", "kept", "broken")
    assert report.messages_kept == 0
    assert report.head_percent == 100.0
    assert report.reused_tokens == first.system_tokens + first.tool_tokens


def test_message_identity_ignores_ids_and_sources() -> None:
    """What the provider caches is role + content; a new message id does not break the prefix."""
    a = message_view({"id": "1", **_msg("user", "same")})
    b = message_view({"id": "2", **_msg("user", "same", kind="plugin", plugin="x")})
    assert a.key == b.key and a.source != b.source


def test_message_tokens_use_the_stage_switch_meter() -> None:
    meter = HeuristicTokenMeter()
    text = "x" * 41
    view = message_view(_msg("user", text), meter)
    assert view.tokens == meter.count_text(text) + meter.per_message_overhead


def test_report_is_a_plain_value() -> None:
    report = prefix_report(None, BASE, TOOLS, M1)
    assert isinstance(report, PrefixReport)
    assert attrs.asdict(report)["first"] is True
