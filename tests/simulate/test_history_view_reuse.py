"""The simulator's per-request message views: a request that starts with the very messages of
the previous one only prices the new ones, and a request whose earlier messages changed (equal
length or longer) still gets views of what it really holds. Tool views likewise: requests with
equal tool specs share one tuple, changed specs get views of what they hold."""

from __future__ import annotations

from typing import Any

from fsm_stage.runtime.tools import ToolSpec
from fsm_stage.simulate.report import tool_views
from fsm_stage.simulate.views import RequestViews
from fsm_stage.tokens import HeuristicTokenMeter


def _views() -> RequestViews:
    return RequestViews(HeuristicTokenMeter())


def _msg(i: int, text: str) -> dict[str, Any]:
    return {"id": f"m{i}", "role": "user", "content": [{"type": "text", "text": text}],
            "source": {"kind": "user"}}


def _fresh(messages: list[dict[str, Any]]) -> tuple[Any, ...]:
    return tuple(_views().messages(messages))


def test_grown_requests_reuse_views_and_a_changed_middle_is_seen() -> None:
    engine = _views()
    m = [_msg(i, f"message {i}") for i in range(4)]
    first = engine.messages(m[:2])
    second = engine.messages(m[:3])  # the same objects, grown
    assert tuple(second) == _fresh(m[:3]) and tuple(second)[:2] == tuple(first)
    assert engine._seen == tuple(m[:3])
    changed = [m[0], _msg(1, "rewritten by a transition, much longer than before"), m[2], m[3]]
    third = engine.messages(changed)
    assert tuple(third) == _fresh(changed)
    assert tuple(third)[1] != tuple(second)[1]
    assert tuple(second) == _fresh(m[:3])  # the earlier record's views never change
    # equal copies (a host deep-copying) still match the history without new views
    copies = [dict(x) for x in changed]
    assert tuple(engine.messages(copies)) == tuple(third)
    shorter = engine.messages(changed[:2])
    assert tuple(shorter) == _fresh(changed[:2])
    assert tuple(engine.messages([*changed, _msg(9, "next")])) == _fresh([*changed, _msg(9, "next")])


def _spec(name: str, description: str = "Does a thing.") -> ToolSpec:
    return ToolSpec(name, description, {"type": "object", "properties": {"to": {"type": "string"}}})


def test_requests_with_equal_tool_specs_share_one_views_tuple() -> None:
    engine = _views()
    specs = [_spec("goto_stage"), _spec("read_file")]
    first = engine.tools(specs)
    assert first == tool_views(specs)
    assert engine.tools(list(specs)) is first  # the same specs again
    assert engine.tools([_spec("goto_stage"), _spec("read_file")]) is first  # equal copies
    changed = [_spec("goto_stage", "Move to another stage."), _spec("read_file")]
    second = engine.tools(changed)
    assert second == tool_views(changed) and second != first
    assert engine.tools(specs[:1]) == tool_views(specs[:1])  # a tool removed
    assert engine.tools([]) == ()
    assert first == tool_views(specs)  # a record's views never change afterwards
