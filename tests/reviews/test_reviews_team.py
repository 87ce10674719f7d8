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
from two_stages import move, two_stages

from fsm_stage.config import load_config_text
from fsm_stage.config.review_rules import parse_duration, rules_json
from fsm_stage.errors import ReviewRefusedError, UserError
from fsm_stage.reviews._notify import SIGNATURE_HEADER, Notifier, payload, signature
from fsm_stage.reviews._team import (
    Reviewer,
    Reviewers,
    deadline_at,
    load_reviewers,
    may_answer,
    refusal,
    token_sha256,
)

LEADS = Reviewers({"carol": Reviewer("carol", None, ("leads",))})


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


@pytest.mark.parametrize(("text", "where", "message"), [
    ("[1, 2]", "", "expected a mapping with one key"),
    ("reviewers: {}\nextra: 1\n", ":2:1", "expected a mapping with one key"),
    ("reviewers: {alice: {token: x}}", ":1:13", "reviewers.alice: expected {token_sha256"),
    ("reviewers:\n  alice:\n    token_sha256: abc\n", ":3:5",
     "reviewers.alice.token_sha256: expected 64 lowercase hex"),
    ("reviewers: {'a b': {}}", ":1:13", "reviewers.a b: a reviewer name matches"),
    ("reviewers:\n  alice: {groups: leads}\n", ":2:11",
     "reviewers.alice.groups: expected a list of group names"),
    ("reviewers: {alice: [}", ":1:21", "cannot read reviewers file"),
    ("reviewers:\n  alice: {}\n  alice: {}\n", ":3:3", "cannot read reviewers file"),
])
def test_bad_reviewers_files_are_one_line(tmp_path: Path, text: str, where: str, message: str) -> None:
    """Each problem is one ``FILE:LINE:COLUMN: KEY: message`` line (``FILE: message`` where the
    file gives no position), as stage-graph files report theirs."""
    path = tmp_path / "r.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError) as err:
        load_reviewers(path)
    shown = str(err.value)
    assert shown.startswith(f"{path}{where}: ") and message in shown and "\n" not in shown


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
    # without the reviewers file a group member is refused, and told why
    assert refusal(rules, "carol", requester=None, reviewers=None, outcome="approve") == (
        "carol is not among the approvers of this review (@leads, bob); "
        "@groups resolve only with the reviewers file (--reviewers FILE, reviewers=, a "
        "scenario's reviewers:)")


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


def test_a_webhook_redirect_is_a_failed_delivery_and_the_signature_stays(
        receiver: http.server.HTTPServer, caplog: pytest.LogCaptureFixture) -> None:
    """urllib followed a 302 as a GET without the body, sent the signature header to the host it
    named and counted the notification delivered: now a redirect is a failure, logged."""
    from http_doubles import redirecting

    target = f"http://127.0.0.1:{receiver.server_port}/hook"
    with redirecting(target) as port:
        notifier = Notifier(b"shared-secret", retries=0, backoff=0.01)
        with caplog.at_level(logging.WARNING, logger="fsm_stage.reviews.notify"):
            notifier.send([f"http://127.0.0.1:{port}/hook"], {"event": "review.expired"})
            notifier.close(timeout=10)
    assert (notifier.delivered, notifier.failed) == (0, 1)
    assert receiver.received == []  # type: ignore[attr-defined]
    assert any("HTTP Error 302" in r.getMessage() for r in caplog.records)


# --- rules at the API, end to end over the reference loop -----------------------------------------

TEAM_GRAPH = """
name: team
section: When done, call goto_stage.
review: {deadline: 1h}
stages:
  - name: explore
    instruction: Explore.
    targets:
      - to: implement
        review: {approvers: [alice, bob, '@leads'], quorum: 2, not_requester: true, deadline: 1h}
  - name: implement
    instruction: Implement.
"""


def team_session(tmp_path: Path, *, requester: str | None = "bob", clock: Any = None) -> Any:
    import asyncio

    from fsm_stage import open_session
    from fsm_stage.driver import Loop, ModelReply, ScriptedModel
    from fsm_stage.log import MemoryLog
    from fsm_stage.log.events import SessionHeader
    from fsm_stage.reviews import SuspendingReviewChannel

    cfg = load_config_text(TEAM_GRAPH)
    assert cfg.graph is not None
    extra = {"requester": requester} if requester else {}
    options = {"clock": clock} if clock is not None else {}
    log = MemoryLog(SessionHeader("team-1", cwd=str(tmp_path), extra=extra), **options)
    host = open_session(cfg.graph, log, review=SuspendingReviewChannel(), guidance=False, repair=False)
    runtime, stage, agent = host.runtime, host.stage, host.agent
    model = ScriptedModel([ModelReply.call("goto_stage", {"stage": "implement", "handoff": "# Handoff\nGo."}),
                           ModelReply.say("implementing")])
    loop = Loop(runtime, agent, model)
    (outcome,) = asyncio.run(loop.prompt("go"))
    assert outcome.reason == "suspended"
    return loop, stage, agent.session, outcome.review_id


def test_a_quorum_of_distinct_allowed_reviewers_approves(tmp_path: Path) -> None:
    import asyncio

    from fsm_stage.reviews import answer_review, open_reviews
    from fsm_stage.reviews._answer import vote_review

    loop, stage, session, rid = team_session(tmp_path)
    (record,) = open_reviews(session)
    assert record.rules == {"approvers": ["alice", "bob", "@leads"], "quorum": 2, "notRequester": True,
                            "deadlineSeconds": 3600.0, "onDeadline": "dismiss"}
    assert record.document == "# Handoff\nGo."
    reviewers = LEADS
    seen = len(session.events)
    refusals = [
        lambda: answer_review(session, rid, "approve"),  # no named reviewer
        lambda: vote_review(session, rid, "approve", reviewer="mallory"),  # not an approver
        lambda: vote_review(session, rid, "approve", reviewer="bob"),  # started the session
        lambda: answer_review(session, rid, "approve", reviewer="alice"),  # needs votes
    ]
    messages = []
    for attempt in refusals:
        with pytest.raises(ReviewRefusedError) as err:
            attempt()
        messages.append(str(err.value))
    assert len(session.events) == seen  # nothing written by a refusal
    assert "its rules need a named reviewer" in messages[0]
    assert "mallory is not among the approvers" in messages[1]
    assert "bob started this session" in messages[2] and "needs 2 approvals" in messages[3]
    first = vote_review(session, rid, "approve", reviewer="alice")
    assert (first.answer, first.votes, first.needed) == (None, ("alice",), 2)
    with pytest.raises(ReviewRefusedError, match="alice already voted"):
        vote_review(session, rid, "approve", reviewer="alice")
    second = vote_review(session, rid, "approve", reviewer="carol", reviewers=reviewers)
    assert second.answer is not None and second.answer.outcome == "approve"
    assert second.answer.reviewers == ("alice", "carol")
    (outcome,) = [asyncio.run(loop.resume())]
    assert outcome.reason == "completed" and stage.current(session) == "implement"


def test_any_allowed_keep_closes_a_quorum_review(tmp_path: Path) -> None:
    from fsm_stage.reviews import open_reviews
    from fsm_stage.reviews._answer import vote_review

    _loop, _stage, session, rid = team_session(tmp_path)
    vote_review(session, rid, "approve", reviewer="alice")
    kept = vote_review(session, rid, "keep", reviewer="bob", feedback="not yet")  # the requester may keep
    assert kept.answer is not None and kept.answer.outcome == "keep" and kept.answer.reviewers == ("bob",)
    assert open_reviews(session) == ()


def test_an_expired_review_never_approves(tmp_path: Path) -> None:
    from fsm_stage.reviews import open_reviews
    from fsm_stage.reviews._answer import vote_review
    from fsm_stage.reviews._team import expire_overdue

    now = [0]
    _loop, _stage, session, rid = team_session(tmp_path, clock=lambda: now[0])
    now[0] = 3_600_000 + 1  # the graph's deadline: 1h
    assert expire_overdue(session, now_ms=0) == []  # not yet, by the reader's clock
    with pytest.raises(ReviewRefusedError, match="expired"):
        vote_review(session, rid, "approve", reviewer="alice")
    answers = [e.data for e in session.events if e.type == "fsm/review/answer"]
    assert answers[-1]["outcome"] == "dismiss" and answers[-1]["by"] == "deadline"
    assert open_reviews(session) == ()


def test_readers_close_overdue_reviews_once(tmp_path: Path) -> None:
    from fsm_stage.reviews._team import expire_overdue

    _loop, _stage, session, rid = team_session(tmp_path, clock=lambda: 0)
    assert expire_overdue(session, now_ms=3_600_001) == [rid]
    assert expire_overdue(session, now_ms=3_600_001) == []


def test_a_reviewer_elsewhere_approves_the_stored_document(tmp_path: Path) -> None:
    """The handoff file is not on the reviewer's machine: the approval is of the stored bytes;
    the worker applies it while its own file still matches, and closes it when not."""
    import asyncio

    from fsm_stage.reviews import open_reviews
    from fsm_stage.reviews._answer import vote_review

    for tampered in (False, True):
        work = tmp_path / ("tampered" if tampered else "same")
        work.mkdir()
        loop, stage, session, rid = team_session(work)
        (record,) = open_reviews(session)
        local = Path(record.handoff_path or "")
        away = local.with_suffix(".away")
        local.rename(away)  # the reviewer's machine has no such file
        vote_review(session, rid, "approve", reviewer="alice")
        vote_review(session, rid, "approve", reviewer="carol", reviewers=LEADS)
        away.rename(local)
        if tampered:
            local.write_text("# Handoff\nSomething else.", encoding="utf-8")
        asyncio.run(loop.resume())
        assert stage.current(session) == ("explore" if tampered else "implement")


def test_review_events_post_their_notify_webhooks_end_to_end(tmp_path: Path,
                                                            receiver: http.server.HTTPServer) -> None:
    """``notify_webhooks`` posts, for a review whose rules name ``notify``, the request and then
    its answer — whoever logged them — signed, without the session waiting for the receiver."""
    import asyncio

    from fsm_stage import Loop, MemoryLog, ModelReply, ScriptedModel, SessionHeader, open_session
    from fsm_stage.reviews import ScriptedReviewChannel, notify_webhooks

    url = f"http://127.0.0.1:{receiver.server_port}/hook"
    graph = load_config_text(two_stages(review=f'notify: ["{url}"]'))
    stop = notify_webhooks(b"hook-secret", inbox_url="http://inbox.local")
    try:
        host = open_session(graph, MemoryLog(SessionHeader("n1", cwd=str(tmp_path))),
                            review=ScriptedReviewChannel().approve())
        model = ScriptedModel([move(), ModelReply.say("ok")])
        asyncio.run(Loop(host.runtime, host.agent, model).prompt("go"))
    finally:
        stop()
    got: list[tuple[dict[str, str], bytes]] = receiver.received  # type: ignore[attr-defined]
    bodies = [json.loads(raw) for _headers, raw in got]
    assert [b["event"] for b in bodies] == ["review.requested", "review.answered"]
    assert bodies[1]["answer"]["outcome"] == "approve" and bodies[1]["review"]["target"] == "implement"
    assert all(h[SIGNATURE_HEADER] == signature(raw, b"hook-secret") for h, raw in got)
    assert host.current_stage() == "implement"


def test_an_answer_from_the_cli_posts_the_reviews_webhook(tmp_path: Path, receiver: http.server.HTTPServer,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from click.testing import CliRunner

    from fsm_stage import Loop, ScriptedModel, SessionHeader, open_session
    from fsm_stage.cli import main
    from fsm_stage.log.jsonl import JsonlLog
    from fsm_stage.reviews import SuspendingReviewChannel, open_reviews

    url = f"http://127.0.0.1:{receiver.server_port}/hook"
    graph = load_config_text(two_stages(review=f'notify: ["{url}"]'))
    path = tmp_path / "s.jsonl"
    with JsonlLog(path, header=SessionHeader("n2", cwd=str(tmp_path))) as log:
        host = open_session(graph, log, review=SuspendingReviewChannel())
        model = ScriptedModel([move()])
        asyncio.run(Loop(host.runtime, host.agent, model).prompt("go"))
        (record,) = open_reviews(host.session)
        host.close()
    monkeypatch.setenv("FSM_STAGE_WEBHOOK_SECRET", "cli-secret")
    done = CliRunner().invoke(main, ["review", str(path), "--approve", record.id])
    assert done.exit_code == 0, done.output
    got: list[tuple[dict[str, str], bytes]] = receiver.received  # type: ignore[attr-defined]
    ((headers, raw),) = got
    assert json.loads(raw)["event"] == "review.answered"
    assert headers[SIGNATURE_HEADER] == signature(raw, b"cli-secret")


@pytest.mark.parametrize("where", ["graph", "edge", "plan"])
def test_an_empty_approvers_list_is_a_positioned_error(where: str) -> None:
    """``approvers: []`` names nobody: every reader refuses such logged rules, so the config
    refuses to write them (omit the key to let anyone answer)."""
    from fsm_stage.errors import ConfigError

    graph = "review: {approvers: []}\n" if where == "graph" else ""
    edge = "{to: b, review: {approvers: []}}" if where == "edge" else "b"
    plan = "plan_mode:\n  section: p\n  review: {approvers: []}\n" if where == "plan" else ""
    text = (f"name: g\nsection: s\n{graph}stages:\n  - name: a\n    instruction: A.\n"
            f"    targets: [{edge}]\n  - {{name: b, instruction: B.}}\n{plan}")
    with pytest.raises(ConfigError) as err:
        load_config_text(text)
    key = {"graph": "review.approvers", "edge": "stages[0].targets[0].review.approvers",
           "plan": "plan_mode.review.approvers"}[where]
    assert f"{key}: is empty" in str(err.value)


@pytest.mark.parametrize("edge_rules", ["{}", "{quorum: 1}", "{deadline: 1h}"])
def test_edge_rules_that_let_anyone_answer_under_graph_rules_that_do_not_warn(edge_rules: str) -> None:
    """An edge's ``review`` replaces the graph's whole: one that names no approvers, quorum or
    not_requester lets anyone answer that edge's reviews, which the validator says."""
    text = ("name: g\nsection: s\nreview: {approvers: [alice]}\nstages:\n  - name: a\n    instruction: A.\n"
            f"    targets: [{{to: b, review: {edge_rules}}}]\n  - {{name: b, instruction: B.}}\n")
    cfg = load_config_text(text)
    (warning,) = [w for w in cfg.warnings if "review" in str(w)]
    assert "stages[0].targets[0].review" in str(warning) and "anyone may answer" in str(warning)
    strict = text.replace(f"review: {edge_rules}", "review: {approvers: [bob]}")
    assert [w for w in load_config_text(strict).warnings if "review" in str(w)] == []


def test_a_quorum_that_ran_out_of_time_says_how_far_it_got(tmp_path: Path) -> None:
    """The deadline's answer of a quorum review with votes logged says the quorum was not
    reached (1 of 2), not that nobody answered."""
    from fsm_stage.log.events import wall_clock_ms
    from fsm_stage.reviews._answer import vote_review
    from fsm_stage.reviews._team import expire_overdue

    _loop, _stage, session, rid = team_session(tmp_path)  # answers are judged by the wall clock
    vote_review(session, rid, "approve", reviewer="alice")
    assert expire_overdue(session, now_ms=wall_clock_ms() + 3_600_001) == [rid]
    (answer,) = [e.data for e in session.events if e.type == "fsm/review/answer"]
    assert answer["by"] == "deadline" and answer["feedback"] == (
        "The review's quorum was not reached before its deadline (3600 s): 1 of 2 approvals; "
        "nobody decided on it.")
