"""A fleet session waiting on a review past its deadline is closed by the deadline's answer
(``by: deadline``) at the worker's next drive and goes on, as the reference loop's ``resume``
does (docs/reviews.md, "deadline"): it used to stay ``waiting-review`` for ever, overdue in the
inbox, until a human tried to answer it. A budget review past its deadline is closed too."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from fsm_stage import MemoryLog, SessionHeader
from fsm_stage.constants import REVIEW_ANSWER
from fsm_stage.fleet import drive, session_state
from fsm_stage.fleet.inputs import record_input

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import fleet_model  # noqa: E402
from test_fleet_budget import GRAPH as BUDGET_GRAPH  # noqa: E402
from test_fleet_budget import Say  # noqa: E402

DEADLINE = "review: {deadline: 60s, on_deadline: keep}\n"


class Clock:
    """Epoch ms the test moves on by hand."""

    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def _graph(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "g.yaml"
    path.write_text(text + DEADLINE)
    return path


def _answers(log: Any) -> list[dict[str, Any]]:
    return [dict(e.data) for e in log.events if e.type == REVIEW_ANSWER]


def test_an_overdue_stage_review_is_closed_by_its_deadline_and_the_session_goes_on(tmp_path: Path) -> None:
    graph = _graph(tmp_path, (HERE / "fleet-graph.yaml").read_text())
    clock = Clock()
    log = MemoryLog(SessionHeader("d1", cwd=str(tmp_path)), clock=clock)

    def go() -> Any:
        return asyncio.run(drive(log, graph=str(graph), model=fleet_model.model(), tools=fleet_model.tools()))

    record_input(log, "message", "task: 3", input_id="in-1")
    first = go()
    assert first.state == "waiting-review" and first.review_id
    clock.ms += 59_000
    n = len(log.events)
    assert go().state == "waiting-review" and len(log.events) == n  # not yet due: nothing written
    clock.ms += 2_000
    assert session_state(log.events) == ("waiting-review", first.review_id)  # overdue, still open
    after = go()
    (answer,) = [a for a in _answers(log) if a["id"] == first.review_id]
    assert answer["by"] == "deadline" and answer["outcome"] == "keep"
    # the model was told nobody decided, and asked again: a new review, not the overdue one
    assert after.state == "waiting-review" and after.review_id != first.review_id
    told = [e for e in log.events if e.type == "tool/result"
            and "deadline" in str(e.data.get("message", {}).get("content", ""))]
    assert told, "the model never read that the review expired"


def test_an_overdue_budget_review_is_closed_by_its_deadline(tmp_path: Path) -> None:
    graph = _graph(tmp_path, BUDGET_GRAPH.format(on_budget="\n    on_budget: review"))
    clock = Clock()
    log = MemoryLog(SessionHeader("d2", cwd=str(tmp_path)), clock=clock)

    def go() -> Any:
        return asyncio.run(drive(log, graph=str(graph), model=Say()))

    record_input(log, "message", "first", input_id="in-1")
    assert go().state == "needs-input"
    record_input(log, "message", "second", input_id="in-2")
    waiting = go()
    assert waiting.state == "waiting-review" and waiting.review_id
    clock.ms += 61_000
    result = go()
    (answer,) = [a for a in _answers(log) if a["id"] == waiting.review_id]
    assert answer["by"] == "deadline"
    assert result.state == "blocked"  # nobody decided: the stop stands until an input or command
    assert session_state(log.events) == ("blocked", None)
