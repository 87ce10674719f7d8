"""The smallest stage graph a test needs: ``explore`` → ``implement``, with optional graph-level
``review`` rules and an ``explore`` ``budget`` (stopping), the model reply that takes the edge
with a handoff document, and a JSONL session whose budget review waits."""

from __future__ import annotations

from pathlib import Path

from fsm_stage import ModelReply


def two_stages(*, review: str | None = None, budget: str | None = None) -> str:
    """The graph's YAML; ``review`` and ``budget`` are the insides of YAML flow mappings
    (``"approvers: [alice], deadline: 1s"``, ``"steps: 1"``)."""
    rules = f"review: {{{review}}}\n" if review is not None else ""
    spend = f"    budget: {{{budget}}}\n    on_budget: stop\n" if budget is not None else ""
    return ("name: two\nsection: Call goto_stage when done.\ninitial: explore\n" + rules
            + "stages:\n  - name: explore\n    instruction: Explore.\n    targets: [implement]\n" + spend
            + "  - name: implement\n    instruction: Implement.\n")


def move(handoff: str = "## Next\n- build") -> ModelReply:
    """The model's ``goto_stage implement`` with ``handoff``."""
    return ModelReply.call("goto_stage", {"stage": "implement", "handoff": handoff})


BUDGET_REVIEWED = two_stages(budget="steps: 1").replace("on_budget: stop", "on_budget: review")
"""``two_stages`` whose ``explore`` allows one step, then asks a budget review."""


def budget_review_waiting(path: Path, session_id: str) -> None:
    """Write a JSONL session log at ``path`` under ``BUDGET_REVIEWED``: a first turn of one step,
    then a second turn stopped by the budget, its budget review open."""
    from fsm_stage import open_session
    from fsm_stage.config import load_config_text
    from fsm_stage.log.events import SessionHeader
    from fsm_stage.log.jsonl import JsonlLog
    from fsm_stage.reviews import SuspendingReviewChannel
    from fsm_stage.runtime import user_message

    with JsonlLog(path, header=SessionHeader(session_id, cwd=str(path.parent))) as log:
        driver = open_session(load_config_text(BUDGET_REVIEWED), log, review=SuspendingReviewChannel()).driver
        for text in ("one", "two"):
            driver.agent.steer(user_message(text))
            driver.start_turn()
            if driver.begin_step() is None:
                driver.end_turn("blocked", message=driver.stopped)
                break
            driver.record_reply("ok", [])
            driver.end_step()
            driver.end_turn("completed")
        assert driver.stopped is not None and "budget" in driver.stopped


TOKEN_BUDGET = """\
name: tokens
section: Work.
stages:
  - name: work
    instruction: Work.
    budget: {tokens_out: 100}
"""
"""One stage whose visit may spend 100 output tokens (stopping after)."""
