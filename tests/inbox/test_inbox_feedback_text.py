"""Reviewer feedback with control characters or escape sequences is refused, as an edited
document is (one shared check, ``reviews._edits.refuse_control_characters``), through the
API, the ``inbox`` command line and the web form; newlines and tabs stay allowed."""

from __future__ import annotations

from pathlib import Path

import pytest
from inbox_fixtures import stage_session

from fsm_stage.errors import RecordShapeError
from fsm_stage.inbox._store import SessionStore
from fsm_stage.inbox.queue import answer_one, open_reviews
from fsm_stage.log.dsh import read_log
from fsm_stage.log.locations import open_log
from fsm_stage.reviews import answer_review
from fsm_stage.reviews._edits import refuse_control_characters


def _answers(path: Path) -> list[object]:
    return [e.data for e in read_log(path).events if e.type == "fsm/review/answer"]


@pytest.mark.parametrize("bad", ["red \x1b[31malert", "bell\x07", "nul\x00", "bidi \u202e txt"])
def test_feedback_with_control_characters_is_refused_and_nothing_is_written(tmp_path: Path,
                                                                           bad: str) -> None:
    rid = stage_session(tmp_path, "s1")
    log = open_log(str(tmp_path / "s1.jsonl"))
    try:
        with pytest.raises(RecordShapeError, match="the feedback holds control characters"):
            answer_review(log, rid, "keep", feedback=bad)
    finally:
        log.close()
    assert _answers(tmp_path / "s1.jsonl") == []
    store = SessionStore(tmp_path)
    (item,) = open_reviews(store)
    done = answer_one(store, item, "keep", reviewer=None, by="cli", feedback=bad)
    assert not done.ok and "control characters" in done.message and _answers(tmp_path / "s1.jsonl") == []


def test_feedback_with_newlines_and_tabs_is_kept(tmp_path: Path) -> None:
    stage_session(tmp_path, "s1")
    store = SessionStore(tmp_path)
    (item,) = open_reviews(store)
    done = answer_one(store, item, "keep", reviewer=None, by="cli", feedback="line 1\n\tline 2\r\n")
    assert done.ok
    (answer,) = _answers(tmp_path / "s1.jsonl")
    assert isinstance(answer, dict) and answer["feedback"] == "line 1\n\tline 2\r\n"


def test_the_shared_check_is_the_edited_documents_one() -> None:
    refuse_control_characters("ok\n\ttext", "x")
    with pytest.raises(RecordShapeError, match=r"^x holds control characters"):
        refuse_control_characters("\x1b]0;title\x07", "x")


def test_the_web_form_keeps_refused_feedback_in_the_page(tmp_path: Path) -> None:
    """A refused keep answers 422 with the reason and the review page again, the typed
    feedback back in its textarea (control characters shown as visible escapes), so the
    reviewer fixes it instead of typing it again; nothing is written."""
    import html
    import re

    pytest.importorskip("starlette")
    pytest.importorskip("jinja2")
    pytest.importorskip("markdown_it")
    from inbox_fixtures import TOKENS, write_reviewers
    from starlette.testclient import TestClient

    from fsm_stage.inbox import create_app

    logs = tmp_path / "logs"
    logs.mkdir()
    rid = stage_session(logs, "s1")
    client = TestClient(create_app(logs, reviewers_file=write_reviewers(tmp_path / "r.yaml"),
                                   secret_key="k" * 40))
    token = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text)
    assert token is not None
    page = client.post("/login", data={"csrf": token.group(1), "name": "alice", "token": TOKENS["alice"]})
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    typed = "please split step 2\nred \x1b[31malert"
    url = f"/review/s1.jsonl/{rid}"
    got = client.post(url, data={"csrf": csrf.group(1), "action": "keep", "feedback": typed},
                      follow_redirects=False)
    assert got.status_code == 422
    assert "control characters" in got.text
    area = re.search(r'<textarea name="feedback"[^>]*>(.*?)</textarea>', got.text, re.S)
    assert area is not None and html.unescape(area.group(1)) == "please split step 2\nred \\x1b[31malert"
    assert _answers(logs / "s1.jsonl") == []
    for bad in ("ok" + "x" * 20_000, "\x85\x1c\u2028"):  # too long (never cut); blank but not plain
        refused = client.post(url, data={"csrf": csrf.group(1), "action": "keep", "feedback": bad},
                              follow_redirects=False)
        assert refused.status_code == 422, bad[:10]
        assert ("more than the 20,000" in refused.text) or ("control characters" in refused.text)
    assert _answers(logs / "s1.jsonl") == []
    fine = client.post(url, data={"csrf": csrf.group(1), "action": "keep",
                                  "feedback": "please split step 2\r\n\tand test it"}, follow_redirects=False)
    assert fine.status_code == 303
    (answer,) = _answers(logs / "s1.jsonl")  # the browser's CRLF stored as LF, as an edited document
    assert isinstance(answer, dict) and answer["feedback"] == "please split step 2\n\tand test it"
    # the review is closed now: feedback typed on a page opened before comes back to copy
    # (409, read-only, nothing sent); a closed review without feedback just redirects
    late = client.post(url, data={"csrf": csrf.group(1), "action": "keep", "feedback": "one more\r\nthing"},
                       follow_redirects=False)
    assert late.status_code == 409 and "this review is closed already" in late.text
    area = re.search(r'<textarea name="feedback"[^>]*readonly>(.*?)</textarea>', late.text, re.S)
    assert area is not None and html.unescape(area.group(1)) == "one more\nthing"
    assert "Your feedback (not sent)" in late.text and 'class="keep"' not in late.text
    assert len(_answers(logs / "s1.jsonl")) == 1
    for data in ({"action": "keep", "feedback": "  "}, {"action": "approve"}):
        again = client.post(url, data={"csrf": csrf.group(1), **data}, follow_redirects=False)
        assert again.status_code == 303
    assert len(_answers(logs / "s1.jsonl")) == 1
