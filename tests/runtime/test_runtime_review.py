"""Review seam: consent rule, scripted channel, interactive terminal channel (S6)."""

from __future__ import annotations

import asyncio

import click
import pytest
from click.testing import CliRunner
from runtime_helpers import new_agent, run

from fsm_stage.reviews._channel import (
    Answer,
    Option,
    Question,
    ReviewChannel,
    ReviewDismissed,
    ScriptedReviewChannel,
    TerminalReviewChannel,
    evaluate,
    render_markdown,
)

Q = Question("plan-review", "Plan review", "Approve this plan?",
             (Option("Approve", "go"), Option("Keep planning", "stay")),
             detail="# Add a flag\n\n- **parse** it\n- use `flag`\n")


@pytest.mark.parametrize(("answers", "approved", "feedback"), [
    ([Answer("plan-review", ("Approve",))], True, None),
    ([Answer("plan-review", ("Approve",), "")], False, ""),
    ([Answer("plan-review", ("Keep planning",), "more")], False, "more"),
    ([Answer("plan-review", (), "text")], False, "text"),
    ([Answer("plan-review", ("Approve", "Keep planning"))], False, None),
    ([Answer("plan-review", ("Approve",)), Answer("plan-review", ("Approve",))], False, None),
    ([Answer("other", ("Approve",))], False, None),
    ([], False, None),
])
def test_consent_rule(answers: list[Answer], approved: bool, feedback: str | None) -> None:
    """Exactly one answer with the id, selected exactly [Approve], custom absent."""
    d = evaluate(answers, "plan-review", "Approve")
    assert (d.approved, d.feedback) == (approved, feedback)


def test_scripted_channel_outcomes_and_records() -> None:
    """Scripted outcomes in order; every ask is recorded with agent and signal by identity."""
    ch = ScriptedReviewChannel().approve().keep("more").custom("hm").dismiss().fail(KeyError("k"))
    assert isinstance(ch, ReviewChannel)
    agent = new_agent()
    assert run(ch.ask([Q], agent)) == [Answer("plan-review", ("Approve",))]
    assert run(ch.ask([Q], agent)) == [Answer("plan-review", ("Keep planning",), "more")]
    assert run(ch.ask([Q], agent)) == [Answer("plan-review", (), "hm")]
    with pytest.raises(ReviewDismissed):
        run(ch.ask([Q], agent))
    with pytest.raises(KeyError):
        run(ch.ask([Q], agent))
    with pytest.raises(AssertionError):
        run(ch.ask([Q], agent))
    assert len(ch.requests) == 6 and ch.requests[0].agent is agent


def test_dismissal_is_distinct_from_other_failures() -> None:
    """ReviewDismissed is its own type, not a parent of other failures."""
    assert not issubclass(ReviewDismissed, (TimeoutError, KeyError, RuntimeError))
    assert not issubclass(RuntimeError, ReviewDismissed)


def test_block_until_released() -> None:
    """block() holds the review open until the gate is released (released-early works too)."""
    ch = ScriptedReviewChannel()
    gate = ch.block()
    early = ch.block()
    early.approve()

    async def scenario() -> None:
        task = asyncio.ensure_future(ch.ask([Q], new_agent()))
        await gate.wait_open()
        assert not task.done()
        gate.release(Answer("plan-review", ("Keep planning",)))
        assert await task == [Answer("plan-review", ("Keep planning",))]
        assert await ch.ask([Q], new_agent()) == [Answer("plan-review", ("Approve",))]

    run(scenario())


def _ask_in_terminal(
    channel: TerminalReviewChannel, text_in: str
) -> tuple[list[Answer] | BaseException, str]:
    box: list[list[Answer] | BaseException] = []

    @click.command()
    def review() -> None:
        try:
            box.append(asyncio.run(channel.ask([Q], new_agent())))
        except ReviewDismissed as exc:
            box.append(exc)

    result = CliRunner().invoke(review, input=text_in)
    assert result.exception is None, result.output
    return box[0], result.output


def test_terminal_channel_approve_keep_feedback_and_dismiss() -> None:
    """The terminal channel renders the plan as markdown, offers the options by number and
    free-text feedback; end of input is a dismissal."""
    channel = TerminalReviewChannel()
    answers, out = _ask_in_terminal(channel, "1\n")
    assert answers == [Answer("plan-review", ("Approve",))]
    assert "Plan review" in out and "Add a flag" in out and "# Add" not in out and "• parse it" in out
    assert "1. Approve — go" in out and "2. Keep planning — stay" in out
    keep = Answer("plan-review", ("Keep planning",), "add tests")
    assert _ask_in_terminal(channel, "2\nadd tests\n")[0] == [keep]
    assert _ask_in_terminal(channel, "2\n\n")[0] == [Answer("plan-review", ("Keep planning",))]
    free = Answer("plan-review", (), "please split step 2")
    assert _ask_in_terminal(channel, "please split step 2\n")[0] == [free]
    answers9, out9 = _ask_in_terminal(channel, "9\n\n1\n")
    assert answers9 == [Answer("plan-review", ("Approve",))] and out9.count("Please enter") == 2
    dismissed, _ = _ask_in_terminal(channel, "")
    assert isinstance(dismissed, ReviewDismissed)


def test_terminal_channel_zh_wording() -> None:
    """language="zh" uses the Chinese dialog wording."""
    _, out = _ask_in_terminal(TerminalReviewChannel(language="zh"), "1\n")
    assert "输入选项编号" in out


def test_render_markdown_strips_markup_without_a_tty() -> None:
    """Headings lose their #, bullets become •, bold/code markers go; fences are dropped
    (rich's layout: one blank line between blocks; tests/test_terminal_review.py has more)."""
    text = render_markdown("## Title\n* item **bold**\n```\ncode\n```\nplain `x`")
    assert click.unstyle(text) == "Title\n\n • item bold\n\n code\n\nplain x"


def test_terminal_channel_uses_the_intents_approve_label() -> None:
    """The approving option is the intent's `approve` label (no feedback prompt after it);
    other options ask for optional feedback."""
    q = Question("stage-review", "Stage", "Move?", (Option("Stay"), Option("Go")),
                 intent={"kind": "x", "approve": "Go"})
    box: list[list[Answer]] = []

    @click.command()
    def review() -> None:
        channel = TerminalReviewChannel()
        box.append(asyncio.run(channel.ask([q], new_agent())))
        box.append(asyncio.run(channel.ask([q], new_agent())))

    result = CliRunner().invoke(review, input="2\n1\nnot yet\n")
    assert result.exception is None, result.output
    assert box == [[Answer("stage-review", ("Go",))], [Answer("stage-review", ("Stay",), "not yet")]]
