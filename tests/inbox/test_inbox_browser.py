"""The inbox in a real browser: Debian's chromium driven headless by Playwright against a
uvicorn server on 127.0.0.1. Skips with the reason outside CI when chromium or playwright is
missing; fails under ``CI=true``. Screenshots land in a tmp dir (``FSM_STAGE_ARTEFACTS`` to keep them)."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import inbox_fixtures
import pytest
from inbox_fixtures import add_rules, login, write_reviewers

from fsm_stage.log.dsh import read_log


def _in_thread(fn: Any, *args: Any, **kw: Any) -> Any:
    """Run ``fn`` on another thread (the fixtures use asyncio.run; Playwright's sync API holds
    this thread's event loop)."""
    out: list[Any] = []
    worker = threading.Thread(target=lambda: out.append(fn(*args, **kw)))
    worker.start()
    worker.join(60)
    assert out, f"{fn.__name__} failed"
    return out[0]


def stage_session(*args: Any, **kw: Any) -> str:
    return str(_in_thread(inbox_fixtures.stage_session, *args, **kw))


def plan_session(*args: Any, **kw: Any) -> str:
    return str(_in_thread(inbox_fixtures.plan_session, *args, **kw))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    import uvicorn
    from tests_graph import graph

    from fsm_stage.inbox import create_app

    logs = tmp_path / "logs"
    logs.mkdir()
    app = create_app(logs, reviewers_file=write_reviewers(tmp_path / "reviewers.yaml"),
                     secret_key="k" * 40, graph=graph())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}", logs
    finally:
        srv.should_exit = True
        thread.join(10)


def _answers(path: Path) -> list[dict[str, Any]]:
    return [e.data for e in read_log(path).events if e.type == "fsm/review/answer"]


def test_a_review_appears_live_and_an_approval_is_logged(browser: Any, server: tuple[str, Path],
                                                         shots: Path) -> None:
    base, logs = server
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    login(page, base)
    assert page.locator("tr.review-row").count() == 0
    rid = stage_session(logs, "s1", handoff="# Handoff\n\nExplored the **parser**; next: implement it.")
    page.locator(f"tr[data-review='s1.jsonl/{rid}']").wait_for(timeout=15000)  # the poll reloaded the queue
    page.screenshot(path=str(shots / "queue.png"), full_page=True)
    page.click(f"tr[data-review='s1.jsonl/{rid}'] td:nth-child(4) a")
    assert page.locator("article.markdown strong").inner_text() == "parser"
    if shutil.which("dot") is not None or os.environ.get("CI"):  # CI installs Graphviz
        # the SVG is drawn on request: wait for it to load (or fail) instead of racing it
        width = page.locator("img.graph").evaluate(
            "img => img.complete ? img.naturalWidth : new Promise(done => {"
            " img.onload = () => done(img.naturalWidth); img.onerror = () => done(0); })")
        assert width > 0
    else:  # a plain machine without Graphviz: the page has no picture, and says nothing broke
        assert page.locator("img.graph").count() == 0
    page.screenshot(path=str(shots / "review.png"), full_page=True)
    page.set_viewport_size({"width": 1100, "height": 560})
    page.screenshot(path=str(shots / "review-top.png"))  # the size of the one in docs/inbox.md
    page.click("button.approve[value='Approve']")
    page.locator(".flash.ok").first.wait_for()
    (answer,) = _answers(logs / "s1.jsonl")
    assert (answer["id"], answer["outcome"], answer["by"]) == (rid, "approve", "inbox:alice")
    assert not [e for e in errors if "Content Security Policy" in e], errors


def test_bulk_approve_three_reviews(browser: Any, server: tuple[str, Path]) -> None:
    base, logs = server
    rids = {f"s{i}": stage_session(logs, f"s{i}") for i in range(3)}
    page = browser.new_page()
    login(page, base)
    for sid, rid in rids.items():
        page.check(f"input[value='{sid}.jsonl/{rid}']")
    page.click("button[name=action][value=approve]")
    page.wait_for_url(f"{base}/")
    assert page.locator(".flash.ok").count() == 3
    for sid, rid in rids.items():
        assert [(a["id"], a["by"]) for a in _answers(logs / f"{sid}.jsonl")] == [(rid, "inbox:alice")]


def test_a_reviewer_not_allowed_sees_a_refusal(browser: Any, server: tuple[str, Path]) -> None:
    """The page says why and offers no answer (Approve and Keep disabled, no editor link, the
    queue's checkbox disabled); a form sent anyway is refused with 403 and the page again."""
    base, logs = server
    rid = stage_session(logs, "s1")
    add_rules(logs / "s1.jsonl", {"approvers": ["alice"]})
    page = browser.new_page()
    login(page, base, "bob")
    assert page.locator(f"input[value='s1.jsonl/{rid}']").is_disabled()
    page.goto(f"{base}/review/s1.jsonl/{rid}")
    assert "not among the approvers" in page.locator(".flash.refused").first.inner_text()
    assert page.locator("button.approve").first.is_disabled() and page.locator("button.keep").is_disabled()
    assert page.locator("a.button.edit").count() == 0
    page.evaluate("document.querySelectorAll('button').forEach(b => b.disabled = false)")
    with page.expect_navigation() as nav:
        page.click("button.approve[value='Approve']")
    response = nav.value
    assert response is not None and response.status == 403
    assert "not among the approvers" in page.locator(".flash.refused").first.inner_text()
    assert _answers(logs / "s1.jsonl") == []


def test_a_forged_form_is_refused(browser: Any, server: tuple[str, Path]) -> None:
    base, logs = server
    rid = stage_session(logs, "s1")
    page = browser.new_page()
    login(page, base)
    page.goto(f"{base}/review/s1.jsonl/{rid}")
    page.evaluate("document.querySelectorAll('input[name=csrf]').forEach(e => e.remove())")
    with page.expect_navigation():
        page.click("button.approve[value='Approve']")
    assert "CSRF" in page.content()
    assert _answers(logs / "s1.jsonl") == []


def test_a_hostile_plan_renders_inert(browser: Any, server: tuple[str, Path]) -> None:
    base, logs = server
    rid = plan_session(logs, "s1", "# Plan\n<script>window.pwned = 1</script>\n"
                                    "<img src=x onerror=\"window.pwned=2\">"
                                    "\n\x1b[31mred\x1b[0m")
    page = browser.new_page()
    login(page, base)
    page.goto(f"{base}/review/s1.jsonl/{rid}")
    assert page.evaluate("window.pwned === undefined")
    text = page.locator("article.markdown").inner_text()
    assert "<script>window.pwned = 1</script>" in text and "\\x1b[31mred" in text
    assert page.locator("article.markdown script, article.markdown img").count() == 0
