"""Peer systems' bugs (shared/notes/anchors.md) turned into stage-switch regression tests."""

from __future__ import annotations

import asyncio
from typing import Any

from fsm_stage.log.events import Replace
from fsm_stage.log.projections import fold_stage
from fsm_stage.runtime.messages import user_message
from fsm_stage.runtime.session import Session

from .harness import Harness, run

H = "# H"


def test_concurrent_goto_calls_apply_exactly_one_transition() -> None:
    """pytransitions #640 / apache/burr PR #786 (racing triggers both ran): of two goto_stage
    calls in flight at once one is reviewed and approved, the other refused at once (one open
    review per session, durable reviews); the flush records exactly one switch."""
    h = Harness()
    h.open_turn()
    h.review.approve().approve()

    async def both() -> list[Any]:
        calls = (h.goto_async("beta", H, log=False), h.goto_async("gamma", H, log=False))
        return list(await asyncio.gather(*calls))

    results = run(both())
    assert sorted(r.is_error for r in results) == [False, True]
    assert "already" in next(r for r in results if r.is_error).text
    assert len(h.review.requests) == 1
    h.boundary()
    h.boundary()
    assert len(h.summaries()) == 1
    assert h.summaries()[0] in ("Stage switched to beta", "Stage switched to gamma")
    assert h.pending() is None


def test_stage_survives_a_foreign_compaction_without_reinjection() -> None:
    """anthropics/claude-code #29956 (compaction re-entered a stale mode): a host compaction that
    replaces the whole surface with a summary leaves the stage (folded from the log, not the surface)
    and never re-injects the initial stage prompt."""
    h = Harness()
    h.open_turn()
    h.boundary()
    h.controller.set(h.agent, "beta")
    h.boundary()
    assert h.fold() == "beta"
    nodes = list(h.session.surface())
    h.session.append_message(user_message("Summary of the conversation so far."),
                             surface_op=Replace(nodes[0], nodes[-1]), source_event_seqs=nodes)
    h.boundary()
    assert h.current() == "beta"
    assert h.summaries() == ["Current stage: alpha", "Current stage: beta"]
    assert not any(t.startswith("Current stage: alpha") for t in h.prompt_texts())


def test_goto_stage_stays_registered_across_archives() -> None:
    """anthropics/claude-code #40519 (the exit tool vanished after a compaction boundary): goto_stage
    and the system prompt are identical before and after a full transition archived the history."""
    h = Harness(system_head=True)
    h.open_turn()
    h.user("old work")
    before = h.runtime.assemble(h.agent)
    h.review.approve()
    assert not h.goto("beta", H).is_error
    h.boundary()
    after = h.runtime.assemble(h.agent)
    assert "goto_stage" in after.tool_names
    assert (before.system, before.tools) == (after.system, after.tools)


def test_interrupted_review_leaves_no_half_state() -> None:
    """anthropics/claude-code #62451 (state inconsistent when the exit review was interrupted): a
    review cancelled mid-flight leaves no pending transition, no record, and a usable controller."""
    h = Harness()
    h.open_turn()
    gate = h.review.block()

    async def interrupted() -> None:
        task = asyncio.create_task(h.controller.goto_stage({"stage": "beta", "handoff": H}, h.agent))
        await gate.wait_open()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    run(interrupted())
    assert h.pending() is None and h.fold() is None
    h.review.approve()
    assert not h.goto("beta", H).is_error
    h.boundary()
    assert h.fold() == "beta"


def test_resume_in_a_new_process_continues_in_the_logged_stage() -> None:
    """XState #5077 / pydantic-ai #1684 (restored state differed from what was persisted): a session
    rebuilt from the same events folds to the same stage and needs no second initial prompt."""
    h = Harness()
    h.open_turn()
    h.boundary()
    h.controller.set(h.agent, "gamma")
    h.boundary()
    from fsm_stage.log.events import MemoryLog

    copy = Session(MemoryLog(h.log.header, list(h.session.events)))
    fresh = Harness()
    assert fresh.controller.current(copy) == "gamma" == fold_stage(copy.events)
    state = fresh.controller.projection_state(copy)
    assert state is not None and state.has_stage_prompt
