"""``fsm-stage trace`` (``build_trace``) carries the model of each request and its token usage
(GenAI attribute names), the reviewers of an approval, and tells a person's decision (keep, or a
deadline nobody met) from a tool failure. The log is the simulator's, from a scenario."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from fsm_stage.log.dsh import read_log
from fsm_stage.observe import build_trace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "simulate"))
from sim_helpers import invoke

GRAPH = """\
name: traced
section: When done, call goto_stage with one of << stage_targets >>.
review: {deadline: 30m, on_deadline: keep}
stages:
  - name: design
    instruction: Design.
    targets: [build]
    model: openai:o3
  - name: build
    instruction: Build.
    targets: [design]
"""

SCENARIO = """\
graph: g.yaml
session: {id: traced}
steps:
  - user: Start.
  - model:
      calls: [{tool: goto_stage, id: kept, args: {stage: build, handoff: "# H"}, review: keep}]
      usage: {inputTokens: 100, cacheReadTokens: 20, cacheWriteTokens: 5, outputTokens: 7}
  - model: Designing more.
  - user: Again.
  - model:
      calls: [{tool: goto_stage, id: late, args: {stage: build, handoff: "# H"}, review: suspend}]
  - answer: {call: late, outcome: expire}
  - resume: true
  - model: Still designing.
"""


def _trace(tmp_path: Path) -> Any:
    (tmp_path / "g.yaml").write_text(GRAPH, encoding="utf-8")
    (tmp_path / "s.yaml").write_text(SCENARIO, encoding="utf-8")
    log = tmp_path / "s.jsonl"
    code, out, err = invoke("simulate", str(tmp_path / "s.yaml"), "--log", str(log),
                            "--cwd", str(tmp_path / "w"))
    assert code == 0, out + err
    read = read_log(log)
    return build_trace(read.header, read.events)


def test_steps_carry_the_requested_model_and_the_token_usage(tmp_path: Path) -> None:
    steps = [s for s in _trace(tmp_path).spans if s.name == "fsm_stage.step"]
    assert steps and all(s.attributes.get("gen_ai.request.model") == "openai:o3" for s in steps)
    first = steps[0].attributes
    assert (first["gen_ai.usage.input_tokens"], first["gen_ai.usage.output_tokens"]) == (125, 7)
    assert "gen_ai.usage.input_tokens" not in steps[1].attributes  # that reply logged no usage


def test_a_kept_or_expired_review_is_no_tool_error(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    tools = {s.attributes["gen_ai.tool.call.id"]: s for s in trace.spans
             if s.name == "execute_tool goto_stage"}
    assert tools["kept"].error is None and tools["kept"].attributes["fsm_stage.review.outcome"] == "keep"
    assert tools["late"].error is None and tools["late"].attributes["fsm_stage.review.outcome"] == "expired"
    reviews = [s for s in trace.spans if s.name == "fsm_stage.review"]
    assert [r.error for r in reviews] == [None, "review expired"]
    assert reviews[0].attributes["fsm_stage.review.outcome"] == "keep"


def test_the_deadlines_answer_is_observed_as_an_expiry(tmp_path: Path) -> None:
    from fsm_stage.observe import ScanContext, describe

    _trace(tmp_path)
    events = read_log(tmp_path / "s.jsonl").events
    names = [o.name for ev in events if ev.type == "fsm/review/answer"
             for o in describe("traced", ev, ScanContext(events))]
    assert names == ["review.answered", "review.expired"]  # the keep, then the deadline's answer


def _events(*items: tuple[str, dict[str, Any]]) -> list[Any]:
    from fsm_stage.log.events import Event

    return [Event(type=t, seq=i, time=1_000 + i, data=d) for i, (t, d) in enumerate(items)]


def _result(call_id: str) -> tuple[str, dict[str, Any]]:
    block = {"type": "tool-result", "toolCallId": call_id, "content": [], "isError": True}
    return "tool/result", {"message": {"role": "user", "content": [block]}}


def test_a_reused_call_id_keeps_its_own_error_and_hostile_usage_is_dropped() -> None:
    from fsm_stage.log.events import SessionHeader
    from fsm_stage.observe.otlp import otlp_json

    call = ("tool/call", {"callId": "c1", "name": "goto_stage", "arguments": "{}"})
    events = _events(
        ("turn/start", {"turn": 1}), ("step/start", {"turn": 1, "step": 1}), call,
        ("fsm/review/request", {"id": "rv_1", "callId": "c1", "kind": "stage", "target": "b"}),
        ("fsm/review/answer", {"id": "rv_1", "outcome": "keep", "by": "cli"}), _result("c1"),
        ("assistant/message", {"message": {"role": "assistant", "content": []},
                               "usage": {"inputTokens": 10 ** 4000, "cacheReadTokens": 10 ** 4000,
                                         "outputTokens": -5}}),
        call, _result("c1"))
    trace = build_trace(SessionHeader("s", cwd="/tmp"), events)
    first, second = [s for s in trace.spans if s.name == "execute_tool goto_stage"]
    assert first.error is None and first.attributes["fsm_stage.review.outcome"] == "keep"
    assert second.error == "tool error" and "fsm_stage.review.outcome" not in second.attributes
    (step,) = [s for s in trace.spans if s.name == "fsm_stage.step"]
    assert not any(k.startswith("gen_ai.usage") for k in step.attributes)
    otlp_json(trace)  # encodes: no count beyond what an int attribute holds


def test_a_header_naming_no_model_leaves_the_step_without_one() -> None:
    from fsm_stage.log.events import SessionHeader

    def header(config: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return "request/header", {"header": {"config": config, "system": "", "tools": []}, "reason": "change"}

    events = _events(("turn/start", {"turn": 1}),
                     ("step/start", {"turn": 1, "step": 1}), header({"provider": "openai", "model": "o3"}),
                     ("step/end", {"turn": 1, "step": 1}), ("step/start", {"turn": 1, "step": 2}),
                     ("step/end", {"turn": 1, "step": 2}), ("step/start", {"turn": 1, "step": 3}), header({}))
    trace = build_trace(SessionHeader("s", cwd="/tmp"), events)
    steps = [s for s in trace.spans if s.name == "fsm_stage.step"]
    assert [s.attributes.get("gen_ai.request.model") for s in steps] == ["openai:o3", "openai:o3", None]
