"""The inbox's JSON API (``fsm_stage.inbox._api``): reviewers elsewhere list and answer reviews with
a bearer token or through the trusted proxy, under the same rules as the pages; the browser's
cookie never authenticates it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from inbox_fixtures import TOKENS, add_rules, set_requester, stage_session, write_reviewers

from fsm_stage.log.dsh import read_log

pytest.importorskip("starlette")
pytest.importorskip("jinja2")
pytest.importorskip("markdown_it")


def _answers(path: Path) -> list[dict[str, Any]]:
    return [dict(e.data) for e in read_log(path).events if e.type == "fsm/review/answer"]


def _client(tmp_path: Path, logs: Path, **kw: Any) -> Any:
    from starlette.testclient import TestClient

    from fsm_stage.inbox import create_app

    if "trusted_header" not in kw:
        kw["reviewers_file"] = write_reviewers(tmp_path / "reviewers.yaml")
    return TestClient(create_app(logs, secret_key="k" * 40, **kw))


def _bearer(name: str, token: str | None = None) -> dict[str, str]:
    return {"Authorization": f"Bearer {name}:{TOKENS[name] if token is None else token}"}


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    folder = tmp_path / "logs"
    folder.mkdir()
    return folder


def test_listing_needs_a_bearer_token_and_says_who_may_answer(tmp_path: Path, logs: Path) -> None:
    s1, s2 = stage_session(logs, "s1"), stage_session(logs, "s2", target="verify")
    add_rules(logs / "s2.jsonl", {"approvers": ["alice"]})
    client = _client(tmp_path, logs)
    bare = client.get("/api/reviews")
    assert bare.status_code == 401 and bare.headers["www-authenticate"].startswith("Bearer")
    assert client.get("/api/reviews", headers=_bearer("bob", "wrong-token")).status_code == 401
    assert client.get("/api/reviews", headers={"Authorization": "Basic Ym9iOng="}).status_code == 401
    listed = client.get("/api/reviews", headers=_bearer("bob"))
    assert listed.status_code == 200
    body = listed.json()
    assert body["format_version"] == 1 and body["reviewer"] == "bob"
    rows = {r["id"]: r for r in body["open"]}
    assert set(rows) == {s1, s2}
    assert rows[s1]["refusal"] is None and rows[s1]["key"] == "s1.jsonl" and rows[s1]["target"] == "implement"
    assert "bob is not among the approvers" in rows[s2]["refusal"]


def test_the_cookie_of_a_browser_login_does_not_authenticate_the_api(tmp_path: Path, logs: Path) -> None:
    rid = stage_session(logs, "s1")
    client = _client(tmp_path, logs)
    page = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    client.post("/login", data={"csrf": csrf.group(1), "name": "alice", "token": TOKENS["alice"]})
    assert client.get("/").status_code == 200  # logged in for the pages
    assert client.get("/api/reviews").status_code == 401
    sent = client.post(f"/api/reviews/s1.jsonl/{rid}", json={"action": "approve"})
    assert sent.status_code == 401 and _answers(logs / "s1.jsonl") == []
    # a cross-site JSON POST needs a CORS preflight, which the inbox never grants
    preflight = client.options(f"/api/reviews/s1.jsonl/{rid}", headers={
        "Origin": "https://elsewhere.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type, authorization"})
    assert preflight.status_code >= 400 and "access-control-allow-origin" not in preflight.headers


def test_approve_and_keep_answer_through_the_review_rules(tmp_path: Path, logs: Path) -> None:
    s1, s2 = stage_session(logs, "s1"), stage_session(logs, "s2", target="verify")
    add_rules(logs / "s2.jsonl", {"approvers": ["alice"]})
    client = _client(tmp_path, logs)
    refused = client.post(f"/api/reviews/s2.jsonl/{s2}", json={"action": "approve"}, headers=_bearer("bob"))
    assert refused.status_code == 403 and refused.json()["result"] == "refused"
    assert "not among the approvers" in refused.json()["message"] and _answers(logs / "s2.jsonl") == []
    done = client.post(f"/api/reviews/s2.jsonl/{s2}", json={"action": "approve"}, headers=_bearer("alice"))
    assert done.status_code == 200
    assert {k: done.json()[k] for k in ("key", "id", "result", "votes")} == {
        "key": "s2.jsonl", "id": s2, "result": "answered", "votes": ["alice"]}
    (answer,) = _answers(logs / "s2.jsonl")
    assert (answer["outcome"], answer["by"]) == ("approve", "inbox:alice")
    again = client.post(f"/api/reviews/s2.jsonl/{s2}", json={"action": "keep"}, headers=_bearer("alice"))
    assert again.status_code == 409 and len(_answers(logs / "s2.jsonl")) == 1
    kept = client.post(f"/api/reviews/s1.jsonl/{s1}", json={"action": "keep", "feedback": "split it\nfirst"},
                       headers=_bearer("bob"))
    assert kept.status_code == 200
    (answer,) = _answers(logs / "s1.jsonl")
    assert (answer["outcome"], answer["feedback"], answer["by"]) == ("keep", "split it\nfirst", "inbox:bob")
    missing = client.post("/api/reviews/s1.jsonl/rv_nope", json={"action": "keep"}, headers=_bearer("bob"))
    assert missing.status_code == 404


def test_not_requester_is_listed_and_refused_for_approval_only(tmp_path: Path, logs: Path) -> None:
    rid = stage_session(logs, "s1")
    add_rules(logs / "s1.jsonl", {"notRequester": True})
    set_requester(logs / "s1.jsonl", "bob")
    client = _client(tmp_path, logs)
    (row,) = client.get("/api/reviews", headers=_bearer("bob")).json()["open"]
    assert "bob started this session and may not approve" in row["refusal"]
    (row,) = client.get("/api/reviews", headers=_bearer("alice")).json()["open"]
    assert row["refusal"] is None
    refused = client.post(f"/api/reviews/s1.jsonl/{rid}", json={"action": "approve"}, headers=_bearer("bob"))
    assert refused.status_code == 403 and _answers(logs / "s1.jsonl") == []
    kept = client.post(f"/api/reviews/s1.jsonl/{rid}", json={"action": "keep"}, headers=_bearer("bob"))
    assert kept.status_code == 200 and _answers(logs / "s1.jsonl")[0]["outcome"] == "keep"


@pytest.mark.parametrize(("kw", "status", "says"), [
    ({"content": b'{"action": "approve"}', "headers": {"Content-Type": "text/plain"}}, 415,
     "application/json"),
    ({"data": {"action": "approve"}}, 415, "application/json"),  # a form, as another site could send
    ({"content": b"{not json", "headers": {"Content-Type": "application/json"}}, 400, "not JSON"),
    ({"json": ["approve"]}, 400, "JSON object"),
    ({"json": {"action": "approve", "by": "x"}}, 400, "unknown field(s) 'by'"),
    ({"json": {"action": "merge"}}, 400, "action must be"),
    ({"json": {"action": "approve", "option": 3}}, 400, "option must be a string"),
    ({"json": {"action": "keep", "option": "Approve"}}, 400, "go with approve"),
    ({"json": {"action": "approve", "feedback": "no"}}, 400, "goes with keep"),
])
def test_a_bad_request_is_refused_in_one_line_and_writes_nothing(
        tmp_path: Path, logs: Path, kw: dict[str, Any], status: int, says: str) -> None:
    rid = stage_session(logs, "s1")
    client = _client(tmp_path, logs)
    headers = {**_bearer("alice"), **kw.pop("headers", {})}
    sent = client.post(f"/api/reviews/s1.jsonl/{rid}", headers=headers, **kw)
    assert sent.status_code == status and says in sent.json()["error"]
    assert _answers(logs / "s1.jsonl") == []


def test_refused_feedback_and_an_oversized_body_write_nothing(tmp_path: Path, logs: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from fsm_stage.inbox import _api

    rid = stage_session(logs, "s1")
    client = _client(tmp_path, logs)
    url = f"/api/reviews/s1.jsonl/{rid}"
    control = client.post(url, json={"action": "keep", "feedback": "\x1b[2J"}, headers=_bearer("alice"))
    assert control.status_code == 422 and "control characters" in control.json()["message"]
    monkeypatch.setattr(_api, "MAX_API_BODY_BYTES", 100)
    big = client.post(url, json={"action": "keep", "feedback": "x" * 200}, headers=_bearer("alice"))
    assert big.status_code == 413
    assert _answers(logs / "s1.jsonl") == []


def test_behind_a_trusted_proxy_the_header_names_the_caller(tmp_path: Path, logs: Path) -> None:
    rid = stage_session(logs, "s1")
    add_rules(logs / "s1.jsonl", {"approvers": ["carol"]})
    client = _client(tmp_path, logs, trusted_header="X-Forwarded-User")
    assert client.get("/api/reviews").status_code == 401
    assert client.get("/api/reviews", headers=_bearer("alice")).status_code == 401  # the proxy decides
    as_dave = client.post(f"/api/reviews/s1.jsonl/{rid}", json={"action": "approve"},
                          headers={"X-Forwarded-User": "dave"})
    assert as_dave.status_code == 403
    as_carol = client.post(f"/api/reviews/s1.jsonl/{rid}", json={"action": "approve"},
                           headers={"X-Forwarded-User": "carol"})
    assert as_carol.status_code == 200 and _answers(logs / "s1.jsonl")[0]["by"] == "inbox:carol"


def test_the_listing_names_logs_it_could_not_read(tmp_path: Path, logs: Path) -> None:
    stage_session(logs, "s1")
    (logs / "s3.jsonl").write_text("", encoding="utf-8")  # empty: not a session log
    body = _client(tmp_path, logs).get("/api/reviews", headers=_bearer("alice")).json()
    assert len(body["open"]) == 1 and set(body["unreadable"]) == {"s3.jsonl"} and body["damaged"] == {}


@pytest.mark.parametrize(("content", "says"), [
    (b'{"action": "keep", "action": "approve"}', "the key 'action' is given twice"),
    ('{"action": "approve"}'.encode("utf-16"), "not JSON (UTF-8)"),
    (b'\xef\xbb\xbf{"action": "approve"}', "not JSON (UTF-8)"),
])
def test_a_repeated_key_or_a_body_not_in_utf8_is_refused(tmp_path: Path, logs: Path, content: bytes,
                                                         says: str) -> None:
    rid = stage_session(logs, "s1")
    sent = _client(tmp_path, logs).post(f"/api/reviews/s1.jsonl/{rid}", content=content,
                                        headers={**_bearer("alice"), "Content-Type": "application/json"})
    assert sent.status_code == 400 and says in sent.json()["error"] and _answers(logs / "s1.jsonl") == []


def test_a_proxy_name_that_is_no_reviewer_name_or_a_repeated_header_answers_nothing(tmp_path: Path,
                                                                                   logs: Path) -> None:
    rid = stage_session(logs, "s1")
    client = _client(tmp_path, logs, trusted_header="X-Forwarded-User")
    (row,) = client.get("/api/reviews", headers={"X-Forwarded-User": "Alice Smith"}).json()["open"]
    assert "is not a reviewer name" in row["refusal"]
    page = client.get(f"/review/s1.jsonl/{rid}", headers={"X-Forwarded-User": "Alice Smith"}).text
    assert "is not a reviewer name" in page and 'class="keep" disabled' in page
    twice = client.post(f"/api/reviews/s1.jsonl/{rid}", json={"action": "approve"},
                        headers=[("X-Forwarded-User", "mallory"), ("X-Forwarded-User", "alice")])
    assert twice.status_code == 401 and _answers(logs / "s1.jsonl") == []


def _bob_answers_first(monkeypatch: pytest.MonkeyPatch, logs: Path) -> None:
    """Make every inbox answer lose a race: bob keeps the review on s1 just before it is decided."""
    from fsm_stage.inbox import queue
    from fsm_stage.inbox._store import SessionStore

    real = queue.answer_one

    def racing(store: Any, item: Any, *args: Any, **kw: Any) -> Any:
        SessionStore(logs).answer("s1.jsonl", item.record.id, "keep", feedback=None, option=None,
                                  by="inbox:bob", reviewer="bob")
        return real(store, item, *args, **kw)

    monkeypatch.setattr(queue, "answer_one", racing)


def test_an_answer_that_loses_a_race_or_meets_the_deadline_gets_409(tmp_path: Path, logs: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from fsm_stage.inbox import queue

    rid = stage_session(logs, "s1")
    real = queue.answer_one
    _bob_answers_first(monkeypatch, logs)
    lost = _client(tmp_path, logs).post(f"/api/reviews/s1.jsonl/{rid}", json={"action": "approve"},
                                        headers=_bearer("alice"))
    assert lost.status_code == 409 and [a["by"] for a in _answers(logs / "s1.jsonl")] == ["inbox:bob"]
    monkeypatch.setattr(queue, "answer_one", real)
    late = stage_session(logs, "s2")
    add_rules(logs / "s2.jsonl", {"deadlineSeconds": 0.001})
    time.sleep(0.05)
    # the listing says so before anyone answers (its refusal was null, helper-83)
    listed = _client(tmp_path, logs).get("/api/reviews", headers=_bearer("alice")).json()["open"]
    (row,) = [r for r in listed if r["id"] == late]
    assert row["refusal"] is not None and "deadline passed" in row["refusal"]
    expired = _client(tmp_path, logs).post(f"/api/reviews/s2.jsonl/{late}", json={"action": "approve"},
                                           headers=_bearer("alice"))
    assert expired.status_code == 409 and "expired" in expired.json()["message"]
    assert [a["by"] for a in _answers(logs / "s2.jsonl")] == ["deadline"]  # closed by its deadline


def test_a_refused_or_kept_answer_reports_the_quorum_and_no_votes(tmp_path: Path, logs: Path) -> None:
    s1, s2 = stage_session(logs, "s1"), stage_session(logs, "s2", target="verify")
    add_rules(logs / "s1.jsonl", {"approvers": ["alice", "bob"], "quorum": 2})
    client = _client(tmp_path, logs, trusted_header="X-Forwarded-User")
    refused = client.post(f"/api/reviews/s1.jsonl/{s1}", json={"action": "approve"},
                          headers={"X-Forwarded-User": "dave"}).json()
    assert (refused["result"], refused["votes"], refused["needed"]) == ("refused", [], 2)
    voted = client.post(f"/api/reviews/s1.jsonl/{s1}", json={"action": "approve"},
                        headers={"X-Forwarded-User": "alice"}).json()
    assert (voted["result"], voted["votes"], voted["needed"]) == ("voted", ["alice"], 2)
    kept = client.post(f"/api/reviews/s2.jsonl/{s2}", json={"action": "keep"},
                       headers={"X-Forwarded-User": "dave"}).json()
    assert (kept["result"], kept["votes"], kept["needed"]) == ("answered", [], 1)


def test_rules_holding_nan_are_listed_as_valid_json(tmp_path: Path, logs: Path) -> None:
    """A log's rules may hold NaN (Python's reader takes it): the listing stays JSON, the number
    shown as its token, instead of a 500 for every caller (inbox list --json printed NaN)."""
    import json

    from click.testing import CliRunner

    from fsm_stage.cli import main

    def strict(text: str) -> Any:
        def refuse(token: str) -> Any:
            raise ValueError(f"not JSON: {token}")

        return json.loads(text, parse_constant=refuse)

    rid = stage_session(logs, "s1")
    add_rules(logs / "s1.jsonl", {"deadlineSeconds": float("nan"), "approvers": ["alice"]})
    listed = _client(tmp_path, logs).get("/api/reviews", headers=_bearer("alice"))
    assert listed.status_code == 200
    (row,) = strict(listed.text)["open"]
    assert row["id"] == rid and row["rules"]["deadlineSeconds"] == "NaN"
    out = CliRunner().invoke(main, ["inbox", "list", str(logs), "--json"])
    assert out.exit_code == 0 and strict(out.stdout)["open"][0]["rules"]["deadlineSeconds"] == "NaN"


def test_a_client_gone_mid_body_is_a_400_and_writes_nothing(tmp_path: Path, logs: Path) -> None:
    """The API's body and the page's form both end in one 400 when the client disconnects (it
    was a traceback in the server's log)."""
    import asyncio

    from fsm_stage.inbox import create_app

    rid = stage_session(logs, "s1")
    app = create_app(logs, secret_key="k" * 40, reviewers_file=write_reviewers(tmp_path / "r.yaml"))

    async def post(path: str, headers: dict[str, str]) -> list[int]:
        messages = [{"type": "http.request", "body": b'{"act', "more_body": True}]
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return messages.pop(0) if messages else {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
                 "root_path": "", "client": ("127.0.0.1", 1), "server": ("testserver", 80),
                 "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}
        await app(scope, receive, send)
        return [m["status"] for m in sent if m["type"] == "http.response.start"]

    json_type = {"Content-Type": "application/json"}
    api = asyncio.run(post(f"/api/reviews/s1.jsonl/{rid}", {**_bearer("alice"), **json_type}))
    page = asyncio.run(post(f"/review/s1.jsonl/{rid}", {"Content-Type": "application/x-www-form-urlencoded"}))
    assert api == [400] and page == [400] and _answers(logs / "s1.jsonl") == []


def test_the_page_answers_409_when_a_racing_answer_closed_the_review(
        tmp_path: Path, logs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    rid = stage_session(logs, "s1")
    client = _client(tmp_path, logs, trusted_header="X-Forwarded-User")
    who = {"X-Forwarded-User": "alice"}
    csrf = re.search(r'name="csrf" value="([^"]+)"', client.get(f"/review/s1.jsonl/{rid}", headers=who).text)
    assert csrf is not None
    _bob_answers_first(monkeypatch, logs)
    lost = client.post(f"/review/s1.jsonl/{rid}", data={"csrf": csrf.group(1), "action": "approve"},
                       headers=who, follow_redirects=False)
    assert lost.status_code == 409 and "answered already" in lost.text
    assert [a["by"] for a in _answers(logs / "s1.jsonl")] == ["inbox:bob"]


def test_one_review_is_read_with_the_document_an_approval_binds(tmp_path: Path, logs: Path) -> None:
    from inbox_fixtures import plan_session

    rid = stage_session(logs, "s1", handoff="# Handoff\nwhat was done")
    pid = plan_session(logs, "p1", "# Plan\n1. do it")
    client = _client(tmp_path, logs)
    one = client.get(f"/api/reviews/s1.jsonl/{rid}", headers=_bearer("bob"))
    assert one.status_code == 200, one.text
    review = one.json()["review"]
    assert (review["id"], review["target"], review["refusal"]) == (rid, "implement", None)
    assert review["document"] == "# Handoff\nwhat was done" and review["document_error"] is None
    listed = {r["id"]: r for r in client.get("/api/reviews", headers=_bearer("bob")).json()["open"]}
    assert {k: v for k, v in review.items() if k not in ("document", "document_error")} == listed[rid]
    plan = client.get(f"/api/reviews/p1.jsonl/{pid}", headers=_bearer("bob")).json()["review"]
    assert plan["document"] == "# Plan\n1. do it"
    assert client.get(f"/api/reviews/s1.jsonl/{rid}").status_code == 401
    gone = client.get("/api/reviews/s1.jsonl/rv_nope", headers=_bearer("bob"))
    assert gone.status_code == 404 and gone.json() == {"format_version": 1, "error": "no such review"}
    client.post(f"/api/reviews/s1.jsonl/{rid}", json={"action": "keep"}, headers=_bearer("bob"))
    assert client.get(f"/api/reviews/s1.jsonl/{rid}", headers=_bearer("bob")).status_code == 409


@pytest.mark.parametrize(("method", "path", "status"), [
    ("DELETE", "/api/reviews/s1.jsonl/rv_x", 405), ("PUT", "/api/reviews", 405),
    ("GET", "/api/nothing/here", 404), ("GET", "/api/reviews/a/b/c", 404)])
def test_every_api_error_body_is_json(tmp_path: Path, logs: Path, method: str, path: str,
                                      status: int) -> None:
    client = _client(tmp_path, logs)
    response = client.request(method, path, headers=_bearer("bob"))
    assert response.status_code == status
    assert response.json()["format_version"] == 1 and response.json()["error"]
    assert client.get("/no/such/page").text == "Not Found"  # the pages keep plain text


def test_a_budget_review_is_named_by_its_stage_not_an_empty_move(tmp_path: Path, logs: Path) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from two_stages import budget_review_waiting

    budget_review_waiting(logs / "b1.jsonl", "b1")
    client = _client(tmp_path, logs)
    (row,) = client.get("/api/reviews", headers=_bearer("bob")).json()["open"]
    assert row["kind"] == "budget" and row["target"] == ""
    done = client.post(f"/api/reviews/b1.jsonl/{row['id']}", json={"action": "keep"}, headers=_bearer("bob"))
    assert done.status_code == 200 and "(explore (its budget ran out))" in done.json()["message"]
    assert "→ )" not in done.json()["message"]
