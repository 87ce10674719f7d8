"""A review channel (scripted, terminal, any custom one) answers for nobody: the rules a review
logged still decide. An approval from a channel cannot satisfy rules that name approvers, a
quorum or not_requester (the review stays open for a named reviewer: ``ReviewPending``), and a
review past its deadline is closed by its ``onDeadline`` answer, never approved."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from two_stages import move, two_stages

from fsm_stage import (
    Loop,
    MemoryLog,
    ModelReply,
    ScriptedModel,
    ScriptedReviewChannel,
    SessionHeader,
    open_session,
)
from fsm_stage.config import load_config_text
from fsm_stage.reviews import answer_review, load_reviewers, review_state
from fsm_stage.reviews._team import token_sha256


class _Late(ScriptedReviewChannel):
    """Answers after ``delay`` seconds (a human who came back late)."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    async def ask(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(self.delay)
        return await super().ask(*args, **kwargs)


def _run(extra: str, channel: ScriptedReviewChannel, tmp_path: Path) -> Any:
    log = MemoryLog(SessionHeader("team", cwd=str(tmp_path)))
    graph = load_config_text(two_stages(review="approvers: [alice]" + extra))
    host = open_session(graph, log, review=channel)
    model = ScriptedModel([move(), ModelReply.say("done")])
    loop = Loop(host.runtime, host.agent, model)
    return host, loop, asyncio.run(loop.prompt("go"))


def _answers(host: Any) -> list[dict[str, Any]]:
    return [e.data for e in host.session.events if e.type == "fsm/review/answer"]


def test_a_channel_cannot_approve_a_review_whose_rules_name_approvers(tmp_path: Path) -> None:
    host, loop, outcomes = _run("", ScriptedReviewChannel().approve(), tmp_path)
    assert [o.reason for o in outcomes] == ["suspended"]
    assert _answers(host) == [] and host.current_stage() == "explore"
    (record,) = review_state(host.session).open
    # alice, authenticated, approves it; the suspended call then applies the switch once
    path = tmp_path / "reviewers.yaml"
    path.write_text(f"reviewers:\n  alice: {{token_sha256: {token_sha256('alice-secret')}}}\n")
    answer_review(host.session, record.id, "approve", reviewer="alice", reviewers=load_reviewers(path))
    asyncio.run(loop.resume())
    assert host.current_stage() == "implement"
    assert [a["reviewers"] for a in _answers(host)] == [["alice"]]


def test_a_channel_may_still_keep_such_a_review(tmp_path: Path) -> None:
    host, _loop, outcomes = _run("", ScriptedReviewChannel().keep(), tmp_path)
    assert outcomes[-1].reason == "completed" and host.current_stage() == "explore"
    assert [(a["outcome"], a["by"]) for a in _answers(host)] == [("keep", "channel")]


def test_a_channel_answer_after_the_deadline_closes_the_review_as_its_rules_say(tmp_path: Path) -> None:
    host, _loop, outcomes = _run(", deadline: 1s", _Late(1.3).approve(), tmp_path)
    assert outcomes[-1].reason == "completed" and host.current_stage() == "explore"
    assert [(a["outcome"], a["by"]) for a in _answers(host)] == [("dismiss", "deadline")]
    assert _answers(host)[0]["feedback"] == ("No reviewer answered before the review's deadline (1 s); "
                                             "nobody decided on it.")


def test_a_group_name_is_never_a_reviewer(tmp_path: Path) -> None:
    """``approvers: ["@leads"]`` admits the members of leads; "@leads" itself, given as the
    answering reviewer, is refused like any other non-member."""
    import pytest

    from fsm_stage.errors import ReviewRefusedError
    from fsm_stage.inbox._auth import refusal
    from fsm_stage.reviews._team import may_answer

    path = tmp_path / "reviewers.yaml"
    digest = token_sha256("alice-secret")
    path.write_text(f"reviewers:\n  alice: {{token_sha256: {digest}, groups: [leads]}}\n")
    reviewers = load_reviewers(path)
    rules = {"approvers": ["@leads"]}
    assert may_answer(rules, "alice", reviewers) and not may_answer(rules, "@leads", reviewers)
    assert refusal(rules, "alice", ("leads",)) is None and refusal(rules, "@leads", ("leads",)) is not None
    host, _loop, _outcomes = _run("", ScriptedReviewChannel().approve(), tmp_path)
    (record,) = review_state(host.session).open
    with pytest.raises(ReviewRefusedError):
        answer_review(host.session, record.id, "approve", reviewer="@alice", reviewers=reviewers)
    assert _answers(host) == []


def test_a_zero_deadline_is_refused_and_an_unreadable_logged_one_expires_at_once() -> None:
    import pytest

    from fsm_stage.errors import ConfigError
    from fsm_stage.reviews._team import deadline_at

    with pytest.raises(ConfigError, match="deadline: must be longer than zero"):
        load_config_text(two_stages(review="approvers: [alice], deadline: 0s"))
    assert deadline_at({}, 1000) is None and deadline_at({"deadlineSeconds": 2}, 1000) == 3000
    for hostile in (0, -5, float("nan"), float("inf"), "1h", True):
        assert deadline_at({"deadlineSeconds": hostile}, 1000) == 1000, hostile


def test_an_answer_field_that_is_not_text_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    import pytest

    from fsm_stage.errors import RecordShapeError

    host, _loop, _outcomes = _run("", ScriptedReviewChannel().approve(), tmp_path)
    (record,) = review_state(host.session).open
    for outcome, kwargs in (("keep", {"feedback": "bad \ud800"}), ("keep", {"feedback": 3}),
                            ("keep", {"option": "Approve"}), ("dismiss", {"option": "Approve"})):
        with pytest.raises(RecordShapeError):
            answer_review(host.session, record.id, outcome, **kwargs)  # type: ignore[arg-type]
    assert _answers(host) == []


def test_not_requester_without_a_recorded_requester_approves_nothing() -> None:
    """The rule reads who started the session from its header; when nothing recorded it, no
    approval can be told apart from theirs, so none is accepted (a keep still is)."""
    from fsm_stage.reviews._team import refusal

    rules = {"notRequester": True}
    assert refusal(rules, "alice", requester=None, reviewers=None, outcome="approve") is not None
    assert refusal(rules, "alice", requester=None, reviewers=None, outcome="keep") is None
    assert refusal(rules, "alice", requester="bob", reviewers=None, outcome="approve") is None
    assert refusal(rules, "bob", requester="bob", reviewers=None, outcome="approve") is not None


def _result_text(host: Any) -> str:
    """The text of the session's one tool result (what the model reads)."""
    (result,) = [e.data for e in host.session.events if e.type == "tool/result"]
    (part,) = result["message"]["content"]
    return str(part["content"][0]["text"])


def test_a_review_closed_by_its_deadline_tells_the_model_nobody_decided(tmp_path: Path) -> None:
    """Keep or dismiss, an answer ``by: deadline`` reaches the model as "nobody answered", never
    as the user's keep or dismissal (stage switch and plan mode alike)."""
    for on_deadline in ("keep", "dismiss"):
        host, _loop, _ = _run(f", deadline: 1s, on_deadline: {on_deadline}", _Late(1.3).approve(), tmp_path)
        text = _result_text(host)
        assert text.startswith("Error: Nobody answered the stage review before its deadline")
        assert "user" not in text.lower() and host.current_stage() == "explore"
    graph = load_config_text(two_stages(review="deadline: 1s") + "plan_mode:\n  section: Plan first.\n")
    log = MemoryLog(SessionHeader("plan", cwd=str(tmp_path)))
    host = open_session(graph, log, review=_Late(1.3).approve())
    assert host.plan is not None
    host.plan.set(host.agent, True)
    model = ScriptedModel([ModelReply.call("exit_plan_mode", {"plan": "# Plan\n\n1. Do it."}),
                           ModelReply.say("waiting")])
    asyncio.run(Loop(host.runtime, host.agent, model).prompt("plan it"))
    assert _result_text(host).startswith("Error: Nobody answered the plan review before its deadline")
    assert host.plan.logged(host.session)  # still in plan mode
