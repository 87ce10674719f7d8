"""A stage budget that runs out in a fleet session: the drive stops at a wait point (``blocked``,
or ``waiting-review`` for the budget review) instead of starting a blocked turn after another;
a ``/stage`` input queued behind the stopped message is applied first."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from fsm_stage import MemoryLog, ModelReply, SessionHeader
from fsm_stage.constants import TURN_START
from fsm_stage.fleet import drive, session_state
from fsm_stage.fleet.inputs import record_answer, record_input
from fsm_stage.fleet.records import fold

GRAPH = """\
name: budget-fleet
min_handoff_tokens: 1000000
section: |
  Current stage: << stage_current >>. Targets: << stage_targets >>.
stages:
  - name: chat
    instruction: Chat.
    targets: [wrap]
    budget: {{turns: 1}}{on_budget}
  - name: wrap
    instruction: Wrap up.
    targets: [done]
  - name: done
    instruction: Done.
"""


class Say:
    """A model that answers every request with ``ok``."""

    provider, name = "test", "m"

    async def complete(self, request: Any, *, signal: Any) -> ModelReply:
        return ModelReply.say("ok")


def _drive(log: Any, graph: Path) -> Any:
    return asyncio.run(drive(log, graph=str(graph), model=Say()))


def _spent(tmp_path: Path, on_budget: str) -> tuple[MemoryLog, Path]:
    """A session whose first message used the stage's one turn; a second message waits."""
    graph = tmp_path / "g.yaml"
    graph.write_text(GRAPH.format(on_budget=on_budget))
    log = MemoryLog(SessionHeader("b1", cwd=str(tmp_path)))
    record_input(log, "message", "first", input_id="in-1")
    assert _drive(log, graph).state == "needs-input"
    record_input(log, "message", "second", input_id="in-2")
    return log, graph


def _turns(log: Any) -> int:
    return sum(e.type == TURN_START for e in log.events)


def test_a_budget_stop_is_a_wait_point_not_a_loop_of_blocked_turns(tmp_path: Path) -> None:
    log, graph = _spent(tmp_path, "")
    result = _drive(log, graph)
    assert result.state == "blocked" and _turns(log) == 2  # one blocked turn, not 32
    assert session_state(log.events) == ("blocked", None)
    n = len(log.events)
    assert _drive(log, graph).state == "blocked" and len(log.events) == n  # nothing written
    record_input(log, "stage", "wrap", input_id="go")  # queued behind the stopped message
    assert session_state(log.events)[0] == "queued"
    result = _drive(log, graph)
    assert result.state == "needs-input" and not fold(log.events).pending  # moved, then the message ran
    said = [e.data["id"] for e in log.events
            if e.type == "user/message" and e.data.get("source", {}).get("kind") == "user"]
    assert said == ["in-1", "in-2"]


def test_a_new_input_tries_a_stopped_message_again_once_the_budget_was_raised(tmp_path: Path) -> None:
    log, graph = _spent(tmp_path, "")
    assert _drive(log, graph).state == "blocked"
    graph.write_text(graph.read_text().replace("turns: 1", "turns: 10"))
    n = len(log.events)
    assert _drive(log, graph).state == "blocked" and len(log.events) == n  # waits for an input
    record_input(log, "message", "third", input_id="in-3")
    assert session_state(log.events)[0] == "queued"
    assert _drive(log, graph).state == "needs-input" and not fold(log.events).pending
    turns = _turns(log)
    record_input(log, "message", "fourth", input_id="in-4")  # still within the raised budget
    assert _drive(log, graph).state == "needs-input" and _turns(log) == turns + 1


def test_a_budget_review_is_the_wait_point_and_its_answer_lets_the_message_run(tmp_path: Path) -> None:
    log, graph = _spent(tmp_path, "\n    on_budget: review")
    result = _drive(log, graph)
    assert result.state == "waiting-review" and result.review_id is not None
    assert session_state(log.events) == ("waiting-review", result.review_id)
    n = len(log.events)
    assert _drive(log, graph).state == "waiting-review" and len(log.events) == n
    record_answer(log, result.review_id, "approve", option="Continue with a fresh budget")
    assert session_state(log.events)[0] == "queued"
    assert _drive(log, graph).state == "needs-input" and not fold(log.events).pending


def test_an_input_that_is_not_utf8_is_refused_before_a_session_is_created(tmp_path: Path) -> None:
    """``fsm-stage send STORE s $'bad\\xff'`` arrives with a lone surrogate: a one-line
    ``UserError``, and ``--new`` leaves no empty session behind (it was a traceback)."""


    from fsm_stage.errors import UserError
    from fsm_stage.fleet import Store
    from fsm_stage.fleet.workflows import FleetClient
    from fsm_stage.log.events import SessionHeader as Header

    with pytest.raises(UserError, match="not valid UTF-8"):
        record_input(MemoryLog(SessionHeader("b2", cwd=str(tmp_path))), "message", "bad\udcff")
    store = tmp_path / "store"
    store.mkdir()
    client = FleetClient(Store(str(store)))
    with pytest.raises(UserError, match="not valid UTF-8"):
        client.send_input("s-new", "message", "bad\udcff", create=Header("s-new", cwd=str(tmp_path)))
    assert list(store.iterdir()) == []


def test_a_damaged_log_in_a_folder_is_listed_as_damaged(tmp_path: Path) -> None:
    """It used to vanish from ``fsm-stage sessions`` without a word."""
    from fsm_stage.fleet.listing import DAMAGED, list_sessions
    from fsm_stage.log.jsonl import JsonlLog

    for sid in ("a1", "a2"):
        with JsonlLog(tmp_path / f"{sid}.jsonl", header=SessionHeader(sid, cwd=str(tmp_path))) as log:
            for n in range(3):
                record_input(log, "message", f"m{n}", input_id=f"in-{n}")
    (tmp_path / "empty.jsonl").write_text("")  # a log being created: not listed yet
    lines = (tmp_path / "a2.jsonl").read_text().splitlines()
    lines[2] = "{garbage"
    (tmp_path / "a2.jsonl").write_text("\n".join(lines) + "\n")
    assert {i.id: i.state for i in list_sessions(tmp_path)} == {"a1": "queued", "a2": DAMAGED}


@pytest.mark.parametrize("outcome", ["keep", "dismiss"])
def test_a_budget_review_answered_stop_leaves_the_session_blocked_until_a_new_input(
        tmp_path: Path, outcome: str) -> None:
    """"Stop" (keep) or a dismissal is not followed at once by a new budget review (the answer
    would be a no-op): the session is ``blocked``; a new input asks again."""
    log, graph = _spent(tmp_path, "\n    on_budget: review")
    first = _drive(log, graph)
    assert first.state == "waiting-review" and first.review_id is not None
    record_answer(log, first.review_id, outcome)
    assert session_state(log.events) == ("blocked", None)
    n = len(log.events)
    assert _drive(log, graph).state == "blocked" and len(log.events) == n
    record_input(log, "message", "again", input_id="in-3")
    again = _drive(log, graph)
    assert again.state == "waiting-review" and again.review_id not in (None, first.review_id)
