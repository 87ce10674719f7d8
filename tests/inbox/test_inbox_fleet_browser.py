"""Issue 27's "Done when", end to end in a real browser: a fleet worker in another process drives
a session whose model asks to switch stage with a handoff document; ``fsm-stage inbox serve``
(another process) serves the same folder; a reviewer logs in with chromium, sees the review
appear live, opens it, approves it with an edit, and the session resumes with the edited
document: the handoff file holds the edited bytes, the transition is applied under the edited
digest and the model reads the edited version.

The worker waits with ``--poll 3600``, so only the inbox's wake-up can resume it within the
test's budget; the latency from the answer to the worker's next logged event is measured and
written next to the screenshots (``latency.json``), not asserted (speed targets live in bench/).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from inbox_fixtures import login, write_reviewers

from fsm_stage.log.dsh import read_log
from fsm_stage.reviews._fold import stage_payload_sha256

ROOT = Path(__file__).resolve().parents[2]
FLEET = ROOT / "tests" / "fleet"
GRAPH = FLEET / "fleet-handoff-graph.yaml"
EDITED = "# Handoff\n\nTask 7: the parser is explored.\nReviewer: write the tests first, then build.\n"

if importlib.util.find_spec("dbos") is None:
    if os.environ.get("CI") not in (None, "", "0"):
        pytest.fail("dbos is missing in CI (pip install 'fsm_stage[test]')", pytrace=False)
    pytest.skip("the fleet needs DBOS: pip install 'fsm_stage[fleet]'", allow_module_level=True)
sys.path.insert(0, str(FLEET))
from fleet_procs import stop  # noqa: E402


def _env() -> dict[str, str]:
    path = os.pathsep.join([str(ROOT), str(FLEET), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    env.pop("FSM_STAGE_FLEET_DBOS", None)
    return env


def _worker(folder: Path, tmp: Path) -> subprocess.Popen[bytes]:
    """``fsm-stage worker`` on ``folder`` with the handoff model; returns once it serves."""
    err = tmp / "worker.err"
    proc = subprocess.Popen(
        [sys.executable, "-m", "fsm_stage", "worker", "--graph", str(GRAPH), "--store", str(folder),
         "--model", "fleet_model:handoff_model", "--poll", "3600", "--slots", "2"],
        env=_env(), stdout=subprocess.DEVNULL, stderr=err.open("wb"))
    end = time.monotonic() + 60
    while "serving" not in (err.read_text(errors="replace") if err.exists() else ""):
        assert proc.poll() is None and time.monotonic() < end, err.read_text(errors="replace")
        time.sleep(0.1)
    return proc


def _inbox(folder: Path, tmp: Path) -> tuple[subprocess.Popen[str], str]:
    """``fsm-stage inbox serve`` on ``folder`` (a free port); returns it and its URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "fsm_stage", "inbox", "serve", str(folder), "--port", "0",
         "--reviewers", str(write_reviewers(tmp / "reviewers.yaml")), "--graph", str(GRAPH)],
        env=_env(), stdout=subprocess.PIPE, stderr=(tmp / "inbox.err").open("wb"), text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    url = re.search(r"listening on (http://127\.0\.0\.1:\d+)/", first)
    assert url is not None, first + (tmp / "inbox.err").read_text(errors="replace")
    return proc, url.group(1)


def _state(folder: Path, sid: str) -> Any:
    from fsm_stage.fleet.listing import list_sessions

    return next((i for i in list_sessions(folder) if i.id == sid), None)


def _wait(folder: Path, sid: str, states: tuple[str, ...], budget: float = 120.0) -> Any:
    end = time.monotonic() + budget
    while time.monotonic() < end:
        info = _state(folder, sid)
        if info is not None and info.state in states:
            return info
        time.sleep(0.1)
    raise AssertionError(f"{sid} never reached {states} within {budget} s: {_state(folder, sid)}")


def _send(folder: Path, tmp: Path) -> None:
    from fsm_stage.fleet import Store
    from fsm_stage.fleet.workflows import FleetClient
    from fsm_stage.log.events import SessionHeader

    with FleetClient(Store(folder)) as client:
        client.send_input("w1", "message", "task: 7", input_id="in-w1",
                          create=SessionHeader("w1", cwd=str(tmp / "work")))


def test_a_browser_approval_with_an_edit_resumes_the_fleet_session_with_the_edited_document(
        browser: Any, shots: Path, tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    (tmp_path / "work").mkdir()
    worker = _worker(folder, tmp_path)
    inbox = None
    try:
        inbox, base = _inbox(folder, tmp_path)  # the worker made .fleet/dbos.sqlite: the inbox wakes it
        page = browser.new_page()
        login(page, base)
        assert page.locator("tr.review-row").count() == 0
        _send(folder, tmp_path)  # the worker drives the session to its stage review
        row = page.locator("tr[data-review^='w1.jsonl/']")
        row.wait_for(timeout=60000)  # the queue reloaded itself: the review appeared live
        page.screenshot(path=str(shots / "fleet-queue.png"), full_page=True)
        rid = str(row.get_attribute("data-review")).split("/", 1)[1]
        assert _state(folder, "w1").state == "waiting-review"
        page.click("tr[data-review^='w1.jsonl/'] td:nth-child(4) a")
        assert "the parser is explored" in page.locator("article.markdown").inner_text()
        page.click("a.button.edit")
        editor = page.locator("textarea#edited")
        assert editor.input_value() == "# Handoff\n\nTask 7: the parser is explored.\n"
        editor.fill(EDITED)
        page.set_viewport_size({"width": 1100, "height": 640})
        page.screenshot(path=str(shots / "edit.png"))
        page.click("button.approve")
        page.locator(".flash.ok").first.wait_for()
        assert "approve with edits" in page.locator(".flash.ok").first.inner_text()
        page.screenshot(path=str(shots / "fleet-approved.png"), full_page=True)
        _wait(folder, "w1", ("complete",), budget=60)  # --poll 3600: only the wake-up resumes it
    finally:
        if inbox is not None:
            stop(inbox)
        stop(worker)
    events = read_log(folder / "w1.jsonl").events
    (answer,) = [e for e in events if e.type == "fsm/review/answer"]
    assert (answer.data["id"], answer.data["by"], answer.data["edited"]) == (rid, "inbox:alice", EDITED)
    assert answer.data["editedSha256"] == stage_payload_sha256("build", EDITED)
    (request,) = [e.data for e in events if e.type == "fsm/review/request"]
    assert Path(request["handoffPath"]).read_bytes() == EDITED.encode("utf-8")  # the edited bytes
    (redeemed,) = [e.data for e in events if e.type == "fsm/review/redeemed"]
    assert (redeemed["id"], redeemed["applied"]) == (rid, True)
    notices = [json.dumps(e.data) for e in events if e.type == "user/message"]
    (notice,) = [n for n in notices if "Stage switched to build" in n]
    assert "The reviewer edited the handoff document" in notice
    replies = [json.dumps(e.data) for e in events if e.type == "assistant/message"]
    assert any("building from the handoff" in r and "write the tests first" in r for r in replies), replies
    after = next(e for e in events if e.seq > answer.seq)
    latency = {"answer_to_next_event_ms": after.time - answer.time, "next_event": after.type}
    (shots / "latency.json").write_text(json.dumps(latency) + "\n")
    print(f"answer → the worker's next event ({after.type}): {after.time - answer.time} ms")
