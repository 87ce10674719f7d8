"""End to end: the seed's example graph through explore → implement → verify with the reference loop.

Checks the log, the handoff files and what the model sees after each boundary, then resumes the
session from its JSONL file (S25, S63, S64, S73, S74, S79).
"""

from __future__ import annotations

from pathlib import Path

from fsm_stage.config import GraphConfig, load_config
from fsm_stage.constants import TOOL_RESULT, USER_MESSAGE
from fsm_stage.driver import Loop, ModelReply, ScriptedModel
from fsm_stage.handoff import LocalHandoffStore, session_segment
from fsm_stage.log.dsh import read_log
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.log.projections import fold_stage
from fsm_stage.prompts import load_catalog
from fsm_stage.resources import data_dir
from fsm_stage.reviews import ScriptedReviewChannel
from fsm_stage.runtime.agent import InboxAgent
from fsm_stage.runtime.assembly import Request
from fsm_stage.runtime.messages import message_text
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.session import Session
from fsm_stage.stage_switch import StageController, stage_body
from fsm_stage.tokens import HeuristicTokenMeter

from .harness import run

HANDOFF = """\
## Primary Request and Intent
- Add a `--dry-run` flag to the exporter.

## Key Technical Concepts
- click options; the exporter writes to S3.

## Files and Code
- exporter/cli.py: add the option.

## Errors and Fixes
- (none)

## Pending Jobs
- Implement the flag; skip uploads when set.

## Current Work
- Exploration finished.

## Next Step
- Add the option and the branch in `upload()`.

## Critical Context
- The user wants no network access in dry runs.
"""
EXPLORATION = "I read exporter/cli.py and upload.py. " * 500  # ~19k chars: well above 4000 tokens


def seed_graph() -> GraphConfig:
    graph = load_config(data_dir("stage_graphs") / "seed-stage-switch.yaml").graph
    assert graph is not None
    return graph


def texts(request: Request) -> list[str]:
    return [t for t in (message_text(m) for m in request.messages) if t]


def test_seed_graph_full_then_light_session(tmp_path: Path) -> None:
    """explore (initial prompt) → implement (full: handoff written, history archived) → verify
    (light: prompt appended, history kept); then resume from the JSONL log."""
    graph = seed_graph()
    assert (graph.initial_stage, graph.min_handoff_tokens, graph.handoff_dir) == ("explore", 4000, "handoff")
    catalog = load_catalog("stage_switch")
    review = ScriptedReviewChannel().approve().approve()
    runtime = Runtime(review=review)
    controller = StageController(graph, handoffs=LocalHandoffStore(), token_meter=HeuristicTokenMeter())
    runtime.attach(controller)
    log_path = tmp_path / "session.jsonl"
    model = ScriptedModel([
        ModelReply.call("goto_stage", {"stage": "implement", "handoff": HANDOFF}, text=EXPLORATION),
        ModelReply.call("goto_stage", {"stage": "verify"}, text="Added --dry-run; uploads are skipped."),
        ModelReply.say("Verified: the dry-run test passes."),
    ])
    with JsonlLog(log_path, header=SessionHeader(id="feature/dry run", cwd=str(tmp_path))) as log:
        session = Session(log)
        agent = InboxAgent(session)
        loop = Loop(runtime, agent, model)
        outcomes = run(loop.prompt("Add a --dry-run flag to the exporter."))
        assert [o.reason for o in outcomes] == ["completed"]
        assert outcomes[0].steps == 3

        # Boundary 1: the initial stage prompt follows the user's message.
        first, second, third = model.requests
        assert texts(first) == ["Add a --dry-run flag to the exporter.", stage_body(graph, "explore")]
        assert [t.name for t in first.tools] == ["goto_stage"]

        # The full transition: handoff written before the review, path under the session segment.
        handoff_path = tmp_path / "handoff" / session_segment("feature/dry run") / "implement.md"
        assert handoff_path.read_text("utf-8") == HANDOFF
        (q1,) = review.requests[0].questions
        assert q1.detail == HANDOFF and q1.question == catalog.text("review.full_question", stage="implement")

        # Boundary 2: the model sees only the handoff notice (history archived in the log).
        notice = catalog.text("notice.handoff_replaced", stage="implement", path=str(handoff_path))
        assert texts(second) == [notice + "\n\n" + stage_body(graph, "implement")]
        assert not any(EXPLORATION[:40] in t for t in texts(second))
        assert any(EXPLORATION[:40] in message_text(e.data.get("message", {}))
                   for e in session.events if e.type == "assistant/message")

        # The light transition: no document, generic question, history kept.
        (q2,) = review.requests[1].questions
        assert q2.detail is None and q2.question == catalog.text("review.light_question", stage="verify")
        assert not (tmp_path / "handoff" / session_segment("feature/dry run") / "verify.md").exists()

        # Boundary 3: the verify prompt is appended after the kept implement history.
        t3 = texts(third)
        assert t3[0].startswith(notice)
        assert "Added --dry-run; uploads are skipped." in t3
        assert t3[-1] == stage_body(graph, "verify")

        # The log: three records, durable markers on the tool results, stage folded from the log.
        summaries = [e.data["source"]["summary"] for e in session.events
                     if e.type == USER_MESSAGE and e.data["source"].get("kind") == "stage-switch"]
        assert summaries == ["Current stage: explore", "Stage switched to implement", "Current stage: verify"]
        metas = [e.data.get("meta", "absent") for e in session.events if e.type == TOOL_RESULT]
        assert metas == [{"fullTransition": True}, None]
        assert controller.current(session) == "verify"

    # Resume: a fresh process reads the file and folds the same stage.
    back = read_log(log_path, strict=True)
    assert fold_stage(back.events) == "verify"
    with JsonlLog(log_path) as reopened:
        fresh = StageController(graph)
        assert fresh.current(Session(reopened)) == "verify"
        state = fresh.projection_state(Session(reopened))
        assert state is not None and state.has_stage_prompt


def test_feature_work_graph_guards_the_verify_edge(tmp_path: Path) -> None:
    """feature-work.yaml: implement → verify needs the `tests_written` guard; the model is told why
    and retries once the deployer's predicate holds."""
    graph = load_config(data_dir("stage_graphs") / "feature-work.yaml").graph
    assert graph is not None
    catalog = load_catalog("stage_switch")
    review = ScriptedReviewChannel().approve()
    runtime = Runtime(review=review)
    controller = StageController(graph, handoffs=LocalHandoffStore(), token_meter=HeuristicTokenMeter())
    runtime.attach(controller)
    written = {"tests": False}
    controller.register_eligibility(lambda _agent: written["tests"], name="tests_written")

    def write_tests(_request: Request) -> ModelReply:
        written["tests"] = True
        return ModelReply.call("goto_stage", {"stage": "verify"}, text="Wrote tests/test_dry_run.py.")

    model = ScriptedModel([
        ModelReply.call("goto_stage", {"stage": "verify"}),
        write_tests,
        ModelReply.say("Verifying."),
    ])
    with JsonlLog(tmp_path / "s.jsonl", header=SessionHeader(id="s1", cwd=str(tmp_path))) as log:
        session = Session(log)
        agent = InboxAgent(session)
        reply = run(runtime.run_command(agent, "/stage implement"))
        assert reply is not None and reply.kind == "success"
        loop = Loop(runtime, agent, model)
        run(loop.prompt("continue"))
        results = [e.data["message"]["content"][0]["content"][0]["text"]
                   for e in session.events if e.type == TOOL_RESULT]
        assert results[0] == "Error: " + catalog.text("errors.guard_blocked", stage="verify", count=1,
                                                      guards="tests_written", targets="explore")
        assert results[1] == catalog.text("tool_result.approved", stage="verify")
        assert controller.current(session) == "verify"
        assert len(review.requests) == 1  # the refused attempt never reached the reviewer
