"""The terminal review without a terminal (pipes) and its markdown rendering (issue 16);
tests/test_terminal_review_tmux.py drives it in a real terminal."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import cast

import click
import pytest

from fsm_stage.reviews import Answer, Option, Question, ReviewDismissed
from fsm_stage.reviews import _channel as review_module
from fsm_stage.reviews._terminal import TerminalReviewChannel, TerminalWording, render_markdown
from fsm_stage.runtime.abort import AbortSignal
from fsm_stage.runtime.agent import Agent

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(__file__).with_name("terminal_review_script.py")
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
NO_AGENT = cast(Agent, None)  # the terminal channel never reads the asking agent
APPROVED = "ANSWER [Answer(id='plan-review', selected=('Approve',), custom=None)] THREADS 1"


def _piped(stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], input=stdin, capture_output=True, text=True,
                          env=ENV, timeout=60, check=False)


def test_review_py_re_exports_the_terminal_channel() -> None:
    assert review_module.TerminalReviewChannel is TerminalReviewChannel
    assert review_module.TerminalWording is TerminalWording
    assert review_module.render_markdown is render_markdown
    with pytest.raises(AttributeError):
        _ = review_module.NoSuchName


@pytest.mark.parametrize("consent", ["Approve", "approve", "y", "yes", "ok", "OK.", "lgtm", "LGTM!"])
def test_consent_typed_as_text_is_confirmed_not_turned_into_feedback(consent: str) -> None:
    done = _piped(f"{consent}\ny\n")
    assert done.returncode == 0, done.stderr
    assert "Select “Approve”? (y/N)" in done.stdout
    assert APPROVED in done.stdout


def test_declining_the_confirmation_asks_again() -> None:
    done = _piped("yes\nn\nplease split step 2\n")
    assert done.stdout.count("Choose an option by number") == 2
    assert "selected=(), custom='please split step 2'" in done.stdout


def test_a_label_typed_as_text_selects_it_after_confirmation() -> None:
    done = _piped("keep planning\ny\nmore tests\n")
    assert "Select “Keep planning”? (y/N)" in done.stdout
    assert "selected=('Keep planning',), custom='more tests'" in done.stdout


def test_other_text_is_feedback_and_numbers_still_select() -> None:
    assert "selected=(), custom='not like this'" in _piped("not like this\n").stdout
    assert APPROVED in _piped("1\n").stdout
    assert "selected=('Keep planning',), custom=None" in _piped("2\n\n").stdout


def test_end_of_input_is_a_dismissal() -> None:
    done = _piped("")
    assert done.returncode == 3 and "DISMISSED" in done.stdout and "Traceback" not in done.stderr


def test_abort_signal_ends_a_piped_review_without_a_thread() -> None:
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "plan", "--abort-after", "0.5"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=ENV)
    assert proc.wait(timeout=30) == 3  # stdin is still open: no end of input, only the abort
    assert proc.stdout is not None and proc.stdin is not None
    out = proc.stdout.read()
    proc.stdin.close()
    assert "DISMISSED review aborted: turn cancelled THREADS 1" in out


def test_sigint_during_a_piped_review_exits_130_without_traceback() -> None:
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "plan"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    seen = ""
    while "Choose an option" not in seen and time.monotonic() < deadline:
        seen += proc.stdout.read(1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=5)
    assert proc.returncode == 130, err
    assert "INTERRUPTED" in out and "Traceback" not in err


def test_cancelling_the_task_cancels_the_prompt() -> None:
    """In-process, on a pipe: cancellation propagates, the loop reader is removed, no thread."""
    read_fd, write_fd = os.pipe()
    saved = sys.stdin
    sys.stdin = os.fdopen(read_fd, "r")
    q = Question("r", "Review", "Go?", (Option("Approve"), Option("Keep")))
    try:
        async def scenario() -> None:
            task = asyncio.ensure_future(TerminalReviewChannel().ask([q], NO_AGENT))
            await asyncio.sleep(0.2)
            assert not task.done()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            os.write(write_fd, b"1\n")  # the channel no longer reads: nothing consumes it
            await asyncio.sleep(0.05)

        asyncio.run(scenario())
        assert threading.active_count() == 1
        assert os.read(read_fd, 10) == b"1\n"
    finally:
        sys.stdin.close()
        sys.stdin = saved
        os.close(write_fd)


def test_an_already_aborted_signal_dismisses_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    q = Question("r", "Review", "Go?", (Option("Approve"), Option("Keep")))
    sig = AbortSignal()
    sig.abort("stop")
    with pytest.raises(ReviewDismissed, match="review aborted: stop"):
        asyncio.run(TerminalReviewChannel().ask([q], NO_AGENT, signal=sig))
    assert capsys.readouterr().out == ""


# --- markdown -------------------------------------------------------------------------------------

PLAN = ("# Plan\n\n> quoted\n\n| a | b |\n|---|---|\n| x | y |\n\nsee [docs](https://e.org), *it* "
        + "word " * 40)


def test_markdown_tables_quotes_links_and_wrapping() -> None:
    text = render_markdown(PLAN, width=40, color=False)
    lines = text.splitlines()
    assert "▌ quoted" in lines and any(line.split() == ["x", "y"] for line in lines)
    assert "docs (https://e.org)" in text and "*it*" not in text and "|---|" not in text
    assert all(len(line) <= 40 for line in lines)
    assert all(not w or w == "word" for line in lines if "word" in line for w in line.split()[-1:])
    assert "\x1b[" not in text


def test_markdown_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    styled = render_markdown("# Title\n\n**bold**", width=40, color=True)
    assert "\x1b[" in styled and click.unstyle(styled).split() == ["Title", "bold"]
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" not in render_markdown("# Title\n\n**bold**", width=40, color=True)


def test_wording_has_the_confirmation_in_every_language() -> None:
    assert TerminalWording.load("en").confirm.replace("\x00", "Approve") == "Select “Approve”? (y/N)"
    assert "\x00" in TerminalWording.load("zh").confirm


def test_in_process_piped_answers_still_work(capsys: pytest.CaptureFixture[str]) -> None:
    """The CliRunner-style path (a stdin without a descriptor) reads lines directly."""
    import io

    q = Question("r", "Review", "Go?", (Option("Approve"), Option("Keep")))
    saved = sys.stdin
    sys.stdin = io.StringIO("ok\ny\n")
    try:
        assert TerminalReviewChannel()._ask_sync((q,)) == [Answer("r", ("Approve",))]
    finally:
        sys.stdin = saved



def test_the_stage_move_comes_from_the_question_context_not_its_intent(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The stage review's ``intent`` stays absent (S53); the UI-only ``context`` carries the move."""
    import io

    from fsm_stage.prompts import load_catalog
    from fsm_stage.stage_switch import build_review_question
    from fsm_stage.stage_switch.controller import CATALOG_NAME

    q = build_review_question(load_catalog(CATALOG_NAME, "en", None), "implement", "# plan",
                              from_stage="explore", handoff_path="/w/handoff/implement.md")
    assert q.intent is None
    assert q.context == {"from": "explore", "to": "implement", "handoff_path": "/w/handoff/implement.md"}
    saved = sys.stdin
    sys.stdin = io.StringIO("1\n")
    try:
        TerminalReviewChannel(pager=False)._ask_sync((q,))
    finally:
        sys.stdin = saved
    assert "explore → implement   (handoff: /w/handoff/implement.md)" in capsys.readouterr().out


def test_feedback_with_escape_sequences_is_asked_again() -> None:
    """Typed text with control characters or escape sequences is refused as every reviewer
    text is (``answer_review``, the inbox): the prompt says so and asks again."""
    done = _piped("split \x1b[2Kstep 2\nsplit step 2\n")
    assert "Control characters or escape sequences are not accepted" in done.stdout
    assert "selected=(), custom='split step 2'" in done.stdout
    trailing = _piped("split step 2\x85\nsplit step 2\n")  # refused, not stripped away
    assert "Control characters or escape sequences are not accepted" in trailing.stdout
    kept = _piped("2\nmore\x07 tests\nmore tests\n")
    assert kept.stdout.count("Feedback (optional") == 2
    assert "selected=('Keep planning',), custom='more tests'" in kept.stdout


def test_wording_refuses_control_characters_in_every_language() -> None:
    assert TerminalWording.load("en").control.startswith("Control characters")
    assert TerminalWording.load("zh").control != TerminalWording.load("en").control


def test_feedback_longer_than_the_limit_is_asked_again_not_dismissed() -> None:
    """Feedback above ``MAX_FEEDBACK_CHARS`` would be refused by every answer path (and a
    channel's refused feedback dismisses the review): the terminal says how long it was and
    asks again, at the option prompt and at the feedback prompt alike."""
    from fsm_stage.reviews._edits import MAX_FEEDBACK_CHARS

    long = "x" * (MAX_FEEDBACK_CHARS + 1)
    typed = _piped(f"{long}\nshorter feedback\n")
    assert f"That is {MAX_FEEDBACK_CHARS + 1:,} characters; feedback holds at most 20,000" in typed.stdout
    assert "selected=(), custom='shorter feedback'" in typed.stdout
    kept = _piped(f"2\n{long}\nmore tests\n")
    assert kept.stdout.count("Feedback (optional") == 2
    assert "selected=('Keep planning',), custom='more tests'" in kept.stdout
    exact = _piped("2\n" + "y" * MAX_FEEDBACK_CHARS + "\n")  # at the limit: accepted as typed
    assert "That is" not in exact.stdout and f"custom='{'y' * 10}" in exact.stdout


def test_wording_says_the_feedback_limit_in_every_language() -> None:
    en, zh = TerminalWording.load("en").too_long, TerminalWording.load("zh").too_long
    assert "20,000" in en and "20,000" in zh and en != zh


def test_concurrent_asks_take_the_terminal_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two tool calls of one reply reviewed at once (tool reviews are one per call): the second
    question waits until the first is answered instead of interleaving on the terminal."""
    channel = TerminalReviewChannel()
    events: list[str] = []

    async def show(q: Question) -> None:
        events.append(f"show {q.id}")

    async def read(q: Question) -> Answer:
        await asyncio.sleep(0.01)  # the human types
        events.append(f"answer {q.id}")
        return Answer(q.id, ("Approve",))

    monkeypatch.setattr(channel, "_show", show)
    monkeypatch.setattr(channel, "_read_answer", read)
    options = (Option("Approve"), Option("Deny"))
    questions = [Question(f"q{i}", "Tool call", "Run it?", options) for i in (1, 2)]

    async def both() -> None:
        await asyncio.gather(*(channel.ask([q], cast(Agent, None)) for q in questions))

    asyncio.run(both())
    assert events == ["show q1", "answer q1", "show q2", "answer q2"]
