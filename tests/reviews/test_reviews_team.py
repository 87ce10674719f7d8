"""Reviews for teams: the reviewers file, approver rules, deadlines, and webhooks against a
local HTTP receiver started by the test."""

from __future__ import annotations

import hashlib
import hmac
import http.server
import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fsm_stage.config import load_config_text
from fsm_stage.config.review_rules import parse_duration, rules_json
from fsm_stage.errors import ReviewRefusedError, UserError
from fsm_stage.reviews._notify import SIGNATURE_HEADER, Notifier, payload, signature
from fsm_stage.reviews._team import Reviewers, deadline_at, load_reviewers, may_answer, refusal, token_sha256


def write_reviewers(tmp_path: Path) -> Path:
    path = tmp_path / "reviewers.yaml"
    path.write_text(
        "reviewers:\n"
        f"  alice: {{token_sha256: {token_sha256('alice-secret')}, groups: [leads]}}\n"
        f"  bob: {{token_sha256: {token_sha256('bob-secret')}}}\n"
        "  carol: {groups: [leads]}\n", encoding="utf-8")
    return path


def test_reviewers_authenticate_by_hashed_token(tmp_path: Path) -> None:
    reviewers = load_reviewers(write_reviewers(tmp_path))
    assert reviewers.authenticate("alice", "alice-secret").groups == ("leads",)
    for name, token in (("alice", "bob-secret"), ("mallory", "x"), ("carol", ""), ("bob", None)):
        with pytest.raises(ReviewRefusedError, match="unknown name or wrong token"):
            reviewers.authenticate(name, token)
    assert reviewers.members("leads") == {"alice", "carol"}
    assert "alice-secret" not in (tmp_path / "reviewers.yaml").read_text(encoding="utf-8")


@pytest.mark.parametrize(("text", "message"), [
    ("[1, 2]", "expected a mapping with one key"),
    ("reviewers: {alice: {token: x}}", "reviewers.alice: expected {token_sha256"),
    ("reviewers: {alice: {token_sha256: abc}}", "token_sha256: expected 64 lowercase hex"),
    ("reviewers: {'a b': {}}", "a reviewer name matches"),
    ("reviewers: {alice: {groups: leads}}", "groups: expected a list of group names"),
    ("reviewers: {alice: [}", "cannot read reviewers file"),
])
def test_bad_reviewers_files_are_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError) as err:
        load_reviewers(path)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_rules_decide_who_may_answer(tmp_path: Path) -> None:
    reviewers = load_reviewers(write_reviewers(tmp_path))
    rules = {"approvers": ["@leads", "bob"], "notRequester": True}
    assert may_answer(rules, "carol", reviewers) and may_answer(rules, "bob", reviewers)
    assert not may_answer(rules, "dave", reviewers)
    assert not may_answer(rules, "carol", Reviewers())  # a group needs the reviewers file
    assert may_answer(None, "anyone", None)
    assert refusal(rules, "dave", requester=None, reviewers=reviewers, outcome="approve") == (
        "dave is not among the approvers of this review (@leads, bob)")
    assert refusal(rules, "bob", requester="bob", reviewers=reviewers, outcome="approve") == (
        "bob started this session and may not approve its reviews (not_requester)")
    assert refusal(rules, "bob", requester="bob", reviewers=reviewers, outcome="keep") is None


def test_graph_rules_become_the_logged_rules() -> None:
    cfg = load_config_text(
        "name: g\nsection: s\nreview: {approvers: ['@leads'], deadline: 2h, on_deadline: keep}\n"
        "stages:\n  - name: a\n    instruction: A.\n    targets:\n"
        "      - {to: b, review: {approvers: [alice, bob], quorum: 2, not_requester: true}}\n"
        "  - {name: b, instruction: B.}\n")
    assert cfg.graph is not None
    edge = cfg.graph.edges_from("a")[0]
    assert rules_json(edge.review) == {"approvers": ["alice", "bob"], "quorum": 2, "notRequester": True}
    assert rules_json(cfg.graph.review) == {"approvers": ["@leads"], "deadlineSeconds": 7200.0,
                                            "onDeadline": "keep"}
    assert deadline_at(rules_json(cfg.graph.review), 1_000) == 1_000 + 7_200_000
    assert deadline_at(None, 5) is None
    assert parse_duration("1.5d") == 129600.0
    with pytest.raises(ValueError):
        parse_duration("2 hours")


# --- webhooks -------------------------------------------------------------------------------------


class Receiver(http.server.BaseHTTPRequestHandler):
    received: list[tuple[dict[str, str], bytes]]
    fail_first: int

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append((dict(self.headers), body))  # type: ignore[attr-defined]
        if self.server.fail_first > 0:  # type: ignore[attr-defined]
            self.server.fail_first -= 1  # type: ignore[attr-defined]
            self.send_response(500)
        else:
            self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[http.server.HTTPServer]:
    server = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
    server.received = []  # type: ignore[attr-defined]
    server.fail_first = 0  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_webhook_is_signed_and_retried(receiver: http.server.HTTPServer) -> None:
    receiver.fail_first = 2  # type: ignore[attr-defined]
    url = f"http://127.0.0.1:{receiver.server_port}/hook"
    notifier = Notifier(b"shared-secret", retries=3, backoff=0.01)
    body = payload("review.requested", "s1", {"id": "rv_1", "kind": "stage", "from": "a", "target": "b"},
                   inbox_url="http://inbox.local/")
    notifier.send([url], body)
    notifier.close(timeout=10)
    got: list[tuple[dict[str, str], bytes]] = receiver.received  # type: ignore[attr-defined]
    assert len(got) == 3 and notifier.delivered == 1 and notifier.failed == 0
    headers, raw = got[-1]
    expected = "sha256=" + hmac.new(b"shared-secret", raw, hashlib.sha256).hexdigest()
    assert headers[SIGNATURE_HEADER] == expected == signature(raw, b"shared-secret")
    sent = json.loads(raw)
    assert sent["event"] == "review.requested" and sent["url"] == "http://inbox.local/reviews/s1/rv_1"
    assert sent["text"] == ("fsm_stage session s1: asks for a review (stage a → b) "
                            "<http://inbox.local/reviews/s1/rv_1|open>")


def test_webhook_failure_is_logged_never_raised(caplog: pytest.LogCaptureFixture) -> None:
    notifier = Notifier(None, retries=1, backoff=0.01, timeout=0.5)
    with caplog.at_level(logging.WARNING, logger="fsm_stage.reviews.notify"):
        notifier.send(["http://127.0.0.1:9/nothing-listens"], {"event": "review.expired"})
        notifier.close(timeout=10)
    assert notifier.failed == 1
    (record,) = [r for r in caplog.records if r.name == "fsm_stage.reviews.notify"]
    assert "failed after 2 attempt(s)" in record.getMessage()
