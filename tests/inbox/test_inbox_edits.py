"""Approve with edits in the inbox (issue 27) over Starlette's TestClient: the editor is a plain
form prefilled with the document, its answer is ``answer_review(edited=…)`` (the edited text and
its digest in the log, CRLF line ends stored as LF, unchanged text an ordinary approval), and
what the rules or the library refuse is shown as such with nothing written; a review re-asked
after a keep shows the diff to the kept version."""

from __future__ import annotations

import asyncio
import html
import re
from pathlib import Path
from typing import Any

import attrs
import pytest

pytest.importorskip("starlette")
pytest.importorskip("jinja2")
pytest.importorskip("markdown_it")

from inbox_fixtures import TOKENS, add_rules, plan_session, stage_session, write_reviewers
from starlette.testclient import TestClient
from team_rig import host, suspended

from fsm_stage.driver import ModelReply
from fsm_stage.inbox import create_app
from fsm_stage.inbox._editor import not_editable
from fsm_stage.log.dsh import read_log
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.reviews import REVIEW_FOLD, answer_review
from fsm_stage.reviews._fold import plan_payload_sha256, stage_payload_sha256

EDITED = "# Handoff\n\nExplored the parser.\nNext: write the tests first."


def _csrf(text: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', text)
    assert found is not None
    return found.group(1)


def _client(tmp_path: Path, name: str = "alice") -> tuple[TestClient, Path, str]:
    logs = tmp_path / "logs"
    logs.mkdir()
    app = create_app(logs, reviewers_file=write_reviewers(tmp_path / "reviewers.yaml"), secret_key="k" * 40)
    client = TestClient(app)
    page = client.get("/login")
    done = client.post("/login", data={"csrf": _csrf(page.text), "name": name, "token": TOKENS[name]})
    assert done.status_code == 200
    return client, logs, _csrf(done.text)


def _answers(path: Path) -> list[dict[str, Any]]:
    return [dict(e.data) for e in read_log(path).events if e.type == "fsm/review/answer"]


def _textarea(text: str) -> str:
    found = re.search(r'<textarea id="edited" name="edited"[^>]*>\n(.*?)</textarea>', text, re.S)
    assert found is not None, text
    return html.unescape(found.group(1))


def test_a_stage_review_is_approved_with_the_edited_handoff_document(tmp_path: Path) -> None:
    client, logs, _ = _client(tmp_path)
    rid = stage_session(logs, "s1", handoff="# Handoff\n\nExplored the parser.")
    review = client.get(f"/review/s1.jsonl/{rid}")
    assert f'href="/review/s1.jsonl/{rid}/edit">Approve with edits' in review.text
    editor = client.get(f"/review/s1.jsonl/{rid}/edit")
    assert editor.status_code == 200 and _textarea(editor.text) == "# Handoff\n\nExplored the parser."
    done = client.post(f"/review/s1.jsonl/{rid}/edit", follow_redirects=False,
                       data={"csrf": _csrf(editor.text), "edited": EDITED.replace("\n", "\r\n")})
    assert done.status_code == 303 and done.headers["location"] == f"/review/s1.jsonl/{rid}"
    (answer,) = _answers(logs / "s1.jsonl")
    assert (answer["id"], answer["outcome"], answer["by"]) == (rid, "approve", "inbox:alice")
    assert answer["edited"] == EDITED  # the browser's CRLF line ends are stored as LF
    assert answer["editedSha256"] == stage_payload_sha256("implement", EDITED)
    page = client.get(f"/review/s1.jsonl/{rid}").text
    assert "approve with edits: s1.jsonl" in page and "<b>with edits</b>" in page
    assert '<span class="add">+Next: write the tests first.</span>' in page  # the reviewer's edits
    audit = client.get("/session/s1.jsonl").text  # the session's audit table says so too
    assert re.search(r"<td>approve with edits[^<]*</td>", audit), audit


def test_unchanged_text_is_an_ordinary_approval(tmp_path: Path) -> None:
    client, logs, _ = _client(tmp_path)
    rid = stage_session(logs, "s1", handoff="# Handoff\nsame")
    editor = client.get(f"/review/s1.jsonl/{rid}/edit")
    done = client.post(f"/review/s1.jsonl/{rid}/edit", data={"csrf": _csrf(editor.text),
                                                             "edited": "# Handoff\r\nsame"})
    assert done.status_code == 200 and "document is unchanged: an ordinary approval" in done.text
    (answer,) = _answers(logs / "s1.jsonl")
    assert answer["outcome"] == "approve" and "edited" not in answer
    windows = "# Handoff\r\nwritten on Windows\r\n"
    crlf = stage_session(logs, "s2", handoff=windows)  # a CRLF document sent back as it is
    editor = client.get(f"/review/s2.jsonl/{crlf}/edit")
    done = client.post(f"/review/s2.jsonl/{crlf}/edit", data={"csrf": _csrf(editor.text), "edited": windows})
    assert done.status_code == 200 and "document is unchanged" in done.text
    (answer,) = _answers(logs / "s2.jsonl")
    assert answer["outcome"] == "approve" and "edited" not in answer


def test_an_edited_plan_is_recorded(tmp_path: Path) -> None:
    client, logs, _ = _client(tmp_path)
    rid = plan_session(logs, "p1", "# Plan\n1. do it")
    editor = client.get(f"/review/p1.jsonl/{rid}/edit")
    assert _textarea(editor.text) == "# Plan\n1. do it"
    client.post(f"/review/p1.jsonl/{rid}/edit", data={"csrf": _csrf(editor.text),
                                                      "edited": "# Plan\n1. test it\n2. do it"})
    (answer,) = _answers(logs / "p1.jsonl")
    assert answer["edited"] == "# Plan\n1. test it\n2. do it"
    assert answer["editedSha256"] == plan_payload_sha256("# Plan\n1. test it\n2. do it")


def test_refusals_are_shown_with_the_text_kept_and_nothing_written(tmp_path: Path) -> None:
    client, logs, csrf = _client(tmp_path, "bob")
    rid = stage_session(logs, "s1")
    url = f"/review/s1.jsonl/{rid}/edit"
    before = (logs / "s1.jsonl").read_bytes()
    # a forged form: no CSRF token, or another one
    for data in ({"edited": EDITED}, {"csrf": "forged", "edited": EDITED}):
        assert client.post(url, data=data).status_code == 403
    # too large, empty, control characters
    too_big = client.post(url, data={"csrf": csrf, "edited": "x" * (1 << 20) + "y"})
    assert too_big.status_code == 422 and "at most 1048576 are accepted" in too_big.text
    empty = client.post(url, data={"csrf": csrf, "edited": " \r\n"})
    assert empty.status_code == 422 and "the edited document is empty" in empty.text
    escape = client.post(url, data={"csrf": csrf, "edited": "# Handoff\n\x1b[31mred"})
    assert escape.status_code == 422 and "control characters" in escape.text
    # bytes that are not UTF-8: the form decoder turns them into U+FFFD, which is refused
    raw = client.post(url, content=f"csrf={csrf}&edited=abc%ff%fedef".encode(),
                      headers={"content-type": "application/x-www-form-urlencoded"})
    assert raw.status_code == 422 and "not UTF-8 text" in raw.text
    # a reviewer the rules do not allow
    assert (logs / "s1.jsonl").read_bytes() == before
    add_rules(logs / "s1.jsonl", {"approvers": ["alice"]})
    refused = client.post(url, data={"csrf": csrf, "edited": EDITED})
    assert refused.status_code == 403 and "not among the approvers" in refused.text
    assert 'class="flash refused"' in refused.text and _textarea(refused.text) == EDITED  # kept
    # a quorum above 1: edits need a single approver
    add_rules(logs / "s1.jsonl", {"quorum": 2})
    before = (logs / "s1.jsonl").read_bytes()
    quorum = client.post(url, data={"csrf": csrf, "edited": EDITED})
    assert quorum.status_code == 403 and "an edited document needs a single approver" in quorum.text
    assert (logs / "s1.jsonl").read_bytes() == before
    assert _answers(logs / "s1.jsonl") == []


def test_documents_that_cannot_be_edited_offer_no_editor(tmp_path: Path) -> None:
    client, logs, _ = _client(tmp_path)
    hostile = plan_session(logs, "p1", "# Plan\n\x1b[31mred\x1b[0m")
    page = client.get(f"/review/p1.jsonl/{hostile}")
    assert "/edit\"" not in page.text and "holds control characters or escape sequences" in page.text
    editor = client.get(f"/review/p1.jsonl/{hostile}/edit")
    assert editor.url.path == f"/review/p1.jsonl/{hostile}" and "cannot approve with edits" in editor.text
    assert client.get("/review/p1.jsonl/nope/edit").status_code == 404
    client.post(f"/review/p1.jsonl/{hostile}", data={"csrf": _csrf(page.text), "action": "approve"})
    closed = client.get(f"/review/p1.jsonl/{hostile}/edit")
    assert "this review is closed already" in closed.text
    # a light switch (no handoff document) and a tool review have nothing to edit
    rid = stage_session(logs, "s1")
    with JsonlLog(logs / "s1.jsonl") as log:
        record = log_state(log).records[rid]
    light = attrs.evolve(record, shape="light", handoff_path=None)
    assert "uses no handoff document" in (not_editable(light, "# Handoff", None) or "")
    assert "no document to edit" in (not_editable(attrs.evolve(record, kind="tool"), "{}", None) or "")
    assert not_editable(record, "# Handoff", None) is None


def test_a_review_asked_again_after_a_keep_shows_the_diff_to_the_kept_version(tmp_path: Path) -> None:
    client, logs, _ = _client(tmp_path)
    path, rid = suspended(logs, "verify")  # logs/s.jsonl, rules: approvers [alice]
    with JsonlLog(path) as log:
        answer_review(log, rid, "keep", feedback="say what to test", reviewer="alice")
    revised = "# Handoff\nGo.\nTest the parser."
    loop, opened = host(path, logs, [ModelReply.call("goto_stage", {"stage": "verify", "handoff": revised})])
    (outcome,) = [asyncio.run(loop.resume())]
    opened.session.log.close()
    page = client.get(f"/review/s.jsonl/{outcome.review_id}").text
    assert f"Changes since the version kept in review {rid}" in page
    assert '<span class="add">+Test the parser.</span>' in page
    editor = client.get(f"/review/s.jsonl/{outcome.review_id}/edit").text
    assert f"Changes since the version kept in review {rid}" in editor and _textarea(editor) == revised


def log_state(log: Any) -> Any:
    """The review fold of an open log."""
    from fsm_stage.runtime.session import Session

    return Session(log).read(REVIEW_FOLD)


def test_the_page_shows_a_long_handoff_or_plan_once_and_whole(tmp_path: Path) -> None:
    client, logs, _ = _client(tmp_path)
    tail = "the last words of a long document"
    long_text = "# Handoff\n\n" + "explored the parser; " * 40 + tail
    rid = stage_session(logs, "s1", handoff=long_text)
    page = client.get(f"/review/s1.jsonl/{rid}").text
    (args,) = re.findall(r'<dl class="args">.*?</dl>', page, re.S)
    assert page.count(tail) == 1 and "explored" not in args  # the handoff not again, cut at 300
    assert re.search(r"<dt>stage</dt><dd><pre>implement</pre></dd>", page), page
    plan = "# Plan\n\n" + "1. step\n" * 60 + tail
    prid = plan_session(logs, "p1", plan)
    page = client.get(f"/review/p1.jsonl/{prid}").text
    assert page.count(tail) == 1 and '<dl class="args">' not in page  # the plan is the only argument
