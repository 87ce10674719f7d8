"""One queue across sessions (issue 26 item 7) on a JSONL folder: ``fsm_stage.inbox.queue``
and ``fsm-stage inbox list`` / ``approve-all``; and the web inbox answering through the team
rules (``vote_review`` as the logged-in reviewer: quorum, not_requester)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from inbox_fixtures import (
    TOKENS,
    add_rules,
    dsh_fork,
    plan_session,
    set_requester,
    stage_session,
    write_reviewers,
)

from fsm_stage.cli import main
from fsm_stage.constants import REVIEW_REQUEST
from fsm_stage.inbox.queue import approve_all, open_reviews
from fsm_stage.log.dsh import read_log
from fsm_stage.log.events import wall_clock_ms
from fsm_stage.reviews import load_reviewers


def _answers(path: Path) -> list[dict[str, Any]]:
    return [e.data for e in read_log(path).events if e.type == "fsm/review/answer"]


def _votes(path: Path) -> list[dict[str, Any]]:
    return [e.data for e in read_log(path).events if e.type == "fsm/review/vote"]


def _request(path: Path) -> dict[str, Any]:
    (data,) = [e.data for e in read_log(path).events if e.type == REVIEW_REQUEST]
    return dict(data)


def _folder(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    logs = tmp_path / "logs"
    logs.mkdir()
    rids = {"s1": stage_session(logs, "s1"), "s2": stage_session(logs, "s2", target="verify"),
            "p1": plan_session(logs, "p1", "# Plan\n1. do it")}
    return logs, rids


def test_the_queue_lists_every_session_and_filters(tmp_path: Path) -> None:
    logs, rids = _folder(tmp_path)
    assert {i.record.id for i in open_reviews(logs)} == set(rids.values())
    assert [i.session_id for i in open_reviews(logs, kinds=["plan"])] == ["p1"]
    assert {i.session_id for i in open_reviews(logs, stages=["verify"])} == {"s2"}
    assert {i.session_id for i in open_reviews(logs, stages=["explore"], kinds=["stage"])} == {"s1", "s2"}
    assert open_reviews(logs, older_than=3600) == []
    later = wall_clock_ms() + 7200_000
    assert len(open_reviews(logs, older_than=3600, now_ms=later)) == 3
    add_rules(logs / "s1.jsonl", {"deadlineSeconds": 600})
    assert [i.session_id for i in open_reviews(logs, deadline_within=3600)] == ["s1"]
    assert open_reviews(logs, deadline_within=60) == []


def test_inbox_list_prints_a_table_and_versioned_json(tmp_path: Path) -> None:
    logs, rids = _folder(tmp_path)
    table = CliRunner().invoke(main, ["inbox", "list", str(logs), "--kind", "stage"])
    assert table.exit_code == 0, table.output
    assert rids["s1"] in table.output and rids["s2"] in table.output and rids["p1"] not in table.output
    out = CliRunner().invoke(main, ["inbox", "list", str(logs), "--json", "--stage", "verify"])
    report = json.loads(out.output)
    assert report["format_version"] == 1
    (row,) = report["open"]
    assert (row["session"], row["id"], row["kind"], row["from"], row["target"]) == \
        ("s2", rids["s2"], "stage", "explore", "verify")
    bad = CliRunner().invoke(main, ["inbox", "list", str(logs), "--older-than", "soon"])
    assert bad.exit_code == 1 and "--older-than" in bad.stderr
    missing = CliRunner().invoke(main, ["inbox", "list", str(tmp_path / "nope")])
    assert missing.exit_code == 1 and "not a folder" in missing.stderr


def test_inbox_list_of_a_folder_without_logs_says_so(tmp_path: Path) -> None:
    """A folder with no ``*.jsonl`` file is most likely the wrong folder: the listing says that
    it holds no logs rather than only "no open reviews"; a folder whose logs have none says
    only that."""
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a log\n")
    out = CliRunner().invoke(main, ["inbox", "list", str(empty)])
    assert out.exit_code == 0
    assert out.output.strip() == f"no open reviews: {empty} holds no session logs (*.jsonl)"
    nothing = CliRunner().invoke(main, ["inbox", "approve-all", str(empty), "--yes"])
    assert nothing.exit_code == 0
    assert nothing.output.strip() == f"no open reviews match: {empty} holds no session logs (*.jsonl)"
    logs, _ = _folder(tmp_path)
    narrowed = CliRunner().invoke(main, ["inbox", "list", str(logs), "--stage", "nowhere"])
    assert narrowed.exit_code == 0 and narrowed.output.strip() == "no open reviews"


def test_approve_all_needs_yes_and_writes_nothing_without_it(tmp_path: Path) -> None:
    logs, _ = _folder(tmp_path)
    before = {p.name: p.read_bytes() for p in logs.glob("*.jsonl")}
    out = CliRunner().invoke(main, ["inbox", "approve-all", str(logs)])
    assert out.exit_code == 0 and "3 open review(s) match" in out.stdout and "--yes" in out.stdout
    dry = CliRunner().invoke(main, ["inbox", "approve-all", str(logs), "--json"])
    report = json.loads(dry.stdout)
    assert dry.exit_code == 0 and report["dry_run"] is True and len(report["open"]) == 3
    assert {p.name: p.read_bytes() for p in logs.glob("*.jsonl")} == before


def test_approve_all_answers_each_review_on_its_own_and_goes_on_after_a_refusal(tmp_path: Path) -> None:
    logs, rids = _folder(tmp_path)
    # s1's handoff document changed since the request: its own digest check refuses it
    Path(_request(logs / "s1.jsonl")["handoffPath"]).write_text("# Handoff\nsomething else")
    # s2 needs a named approver: refused without --as
    add_rules(logs / "s2.jsonl", {"approvers": ["alice"]})
    out = CliRunner().invoke(main, ["inbox", "approve-all", str(logs), "--yes", "--json"])
    assert out.exit_code == 1
    results = {r["session"]: r for r in json.loads(out.output)["results"]}
    assert results["p1"]["result"] == "answered"
    assert results["s1"]["result"] == "error" and "changed" in results["s1"]["message"]
    assert results["s2"]["result"] == "refused" and "named reviewer" in results["s2"]["message"]
    (answer,) = _answers(logs / "p1.jsonl")
    assert (answer["id"], answer["outcome"], answer["by"]) == (rids["p1"], "approve", "cli")
    assert _answers(logs / "s1.jsonl") == [] and _answers(logs / "s2.jsonl") == []
    # the same review again: answered already, never twice
    again = approve_all(logs, kinds=["plan"])
    assert again == [] and len(_answers(logs / "p1.jsonl")) == 1


def test_approve_all_as_an_authenticated_reviewer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logs, rids = _folder(tmp_path)
    reviewers = write_reviewers(tmp_path / "reviewers.yaml")
    add_rules(logs / "s1.jsonl", {"approvers": ["@leads"]})
    add_rules(logs / "s2.jsonl", {"approvers": ["alice", "bob"], "quorum": 2})
    add_rules(logs / "p1.jsonl", {"approvers": ["alice"], "notRequester": True})
    set_requester(logs / "p1.jsonl", "alice")
    monkeypatch.setenv("FSM_STAGE_REVIEWER_TOKEN", "wrong")
    bad = CliRunner().invoke(main, ["inbox", "approve-all", str(logs), "--yes", "--as", "alice",
                                    "--reviewers", str(reviewers)])
    assert bad.exit_code == 1 and "wrong token" in bad.stderr
    assert all(_answers(p) == [] for p in logs.glob("*.jsonl"))
    monkeypatch.setenv("FSM_STAGE_REVIEWER_TOKEN", TOKENS["alice"])
    out = CliRunner().invoke(main, ["inbox", "approve-all", str(logs), "--yes", "--json", "--as", "alice",
                                    "--reviewers", str(reviewers)])
    results = {r["session"]: r for r in json.loads(out.output)["results"]}
    assert results["s1"]["result"] == "answered" and results["s1"]["votes"] == ["alice"]  # who approved
    assert results["s2"]["result"] == "voted" and results["s2"]["votes"] == ["alice"]
    assert results["p1"]["result"] == "refused" and "not_requester" in results["p1"]["message"]
    assert out.exit_code == 1
    (answer,) = _answers(logs / "s1.jsonl")
    assert answer["by"] == "cli:alice" and answer["reviewers"] == ["alice"]
    # alice again: no second vote (the quorum is not reached by one person), reported as waiting
    again = approve_all(logs, reviewer="alice", stages=["verify"],
                        reviewers=load_reviewers(reviewers))
    assert again[0].result == "waiting" and again[0].ok and again[0].votes == ("alice",)
    assert "alice voted before" in again[0].message and "1 of 2 approvals" in again[0].message
    assert _answers(logs / "s2.jsonl") == [] and len(_votes(logs / "s2.jsonl")) == 1
    rerun = CliRunner().invoke(main, ["inbox", "approve-all", str(logs), "--yes", "--stage", "verify",
                                      "--as", "alice", "--reviewers", str(reviewers)])
    assert rerun.exit_code == 0 and "alice voted before" in rerun.stdout  # a repeated run is no failure
    assert len(_votes(logs / "s2.jsonl")) == 1
    monkeypatch.setenv("FSM_STAGE_REVIEWER_TOKEN", TOKENS["bob"])
    done = CliRunner().invoke(main, ["inbox", "approve-all", str(logs), "--yes", "--stage", "verify",
                                     "--as", "bob", "--reviewers", str(reviewers)])
    assert done.exit_code == 0, done.output
    (answer,) = _answers(logs / "s2.jsonl")
    assert answer["id"] == rids["s2"] and answer["reviewers"] == ["alice", "bob"]


# -- the web inbox answers through the team rules ------------------------------------------------

def _web(tmp_path: Path, logs: Path) -> Any:
    pytest.importorskip("starlette")
    pytest.importorskip("jinja2")
    pytest.importorskip("markdown_it")
    from starlette.testclient import TestClient

    from fsm_stage.inbox import create_app

    app = create_app(logs, reviewers_file=write_reviewers(tmp_path / "reviewers.yaml"), secret_key="k" * 40)
    return TestClient(app)


def _login(client: Any, name: str) -> str:
    client.cookies.clear()
    page = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    done = client.post("/login", data={"csrf": csrf.group(1), "name": name, "token": TOKENS[name]})
    found = re.search(r'name="csrf" value="([^"]+)"', done.text)
    assert found is not None
    return found.group(1)


def test_the_web_inbox_votes_toward_a_quorum_and_keeps_not_requester(tmp_path: Path) -> None:
    logs, rids = _folder(tmp_path)
    client = _web(tmp_path, logs)
    add_rules(logs / "s1.jsonl", {"approvers": ["alice", "bob"], "quorum": 2})
    add_rules(logs / "p1.jsonl", {"notRequester": True})
    set_requester(logs / "p1.jsonl", "bob")
    csrf = _login(client, "alice")
    page = client.get(f"/review/s1.jsonl/{rids['s1']}").text  # no editor under a quorum of 2
    assert "Approve with edits…" not in page and "needs a single approver (quorum 2)" in page
    first = client.post(f"/review/s1.jsonl/{rids['s1']}", data={"csrf": csrf, "action": "approve"})
    assert "vote recorded" in first.text and "1 of 2" in first.text
    assert _answers(logs / "s1.jsonl") == []
    twice = client.post(f"/review/s1.jsonl/{rids['s1']}", data={"csrf": csrf, "action": "approve"})
    assert twice.status_code == 200  # a repeated vote is no failure: the first one stands
    assert "alice voted before" in twice.text and _answers(logs / "s1.jsonl") == []
    csrf = _login(client, "bob")
    client.post(f"/review/s1.jsonl/{rids['s1']}", data={"csrf": csrf, "action": "approve"})
    (answer,) = _answers(logs / "s1.jsonl")
    assert answer["by"] == "inbox:bob" and answer["reviewers"] == ["alice", "bob"]
    audit = client.get("/session/s1.jsonl").text  # the audit table names the voters
    assert "<td>inbox:bob (alice, bob)</td>" in audit
    page = client.get(f"/review/p1.jsonl/{rids['p1']}").text  # bob started p1: Approve is disabled
    assert "bob started this session and may not approve" in page
    assert re.search(r'class="approve" disabled>', page) and 'class="keep">' in page
    assert "Approve with edits…" not in page
    refused = client.post(f"/review/p1.jsonl/{rids['p1']}", data={"csrf": csrf, "action": "approve"})
    assert refused.status_code == 403 and 'class="flash refused"' in refused.text
    assert "not_requester" in refused.text and _answers(logs / "p1.jsonl") == []
    kept = client.post(f"/review/p1.jsonl/{rids['p1']}",
                       data={"csrf": csrf, "action": "keep", "feedback": "not yet"})
    assert kept.status_code == 200
    (answer,) = _answers(logs / "p1.jsonl")
    assert (answer["outcome"], answer["by"]) == ("keep", "inbox:bob")


def test_an_unreachable_postgresql_store_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    url = f"postgresql://nobody@/nodb?host={tmp_path / 'no-server'}&port=1"
    out = CliRunner().invoke(main, ["inbox", "list", url])
    assert out.exit_code in (1, 75) and out.stderr.count("\n") == 1 and "Traceback" not in out.output
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from fsm_stage.inbox import create_app

    app = create_app(url, reviewers_file=write_reviewers(tmp_path / "r.yaml"), secret_key="k" * 40)
    client = TestClient(app)
    page = client.get("/login")  # the store is not read until a page needs it
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    queue = client.post("/login", data={"csrf": csrf.group(1), "name": "alice", "token": TOKENS["alice"]})
    assert queue.status_code == 503 and "cannot be read" in queue.text and "Traceback" not in queue.text


def test_the_web_queue_and_review_page_show_the_deadline_left_and_who_may_answer(tmp_path: Path) -> None:
    """The queue's deadline cell reads as ``inbox list`` does (``in 9m59s``; the time itself in
    its title), and the review page says the deadline and who may answer."""
    logs, rids = _folder(tmp_path)
    add_rules(logs / "s1.jsonl", {"deadlineSeconds": 600, "approvers": ["alice", "bob"]})
    client = _web(tmp_path, logs)
    _login(client, "alice")
    queue = client.get("/").text
    row = re.search(rf'data-review="s1.jsonl/{rids["s1"]}">(.*?)</tr>', queue, re.S)
    assert row is not None
    when, left = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", r"in (10m|9m5\ds)"
    assert re.search(rf'<td title="{when}">{left}</td>', row.group(1)), row.group(1)
    review = client.get(f"/review/s1.jsonl/{rids['s1']}").text
    assert re.search(rf"Deadline {when} \({left}\) · who may answer: alice, bob", review)
    other = client.get(f"/review/p1.jsonl/{rids['p1']}").text
    assert "Deadline none · who may answer: anyone" in other


@pytest.mark.parametrize("deadline", [1e308, 10**15, float("nan"), "soon"])
def test_an_unreadable_logged_deadline_expires_at_once_and_breaks_nothing(tmp_path: Path,
                                                                          deadline: object) -> None:
    """A logged deadline the config could not have written (above 366 days, not finite, not a
    number: a forged or damaged log) is read as the answers read it: expired at once. The
    queue, ``inbox list`` and the review page show it as overdue; nothing raises. A request
    time no calendar holds is shown as a number."""
    logs, rids = _folder(tmp_path)
    add_rules(logs / "s1.jsonl", {"deadlineSeconds": deadline})
    lines = []
    for line in (logs / "p1.jsonl").read_text().splitlines():
        obj = json.loads(line)
        if obj.get("type") == "fsm/review/request":
            obj["time"] = 10**18
        lines.append(json.dumps(obj, separators=(",", ":")))
    (logs / "p1.jsonl").write_text("\n".join(lines) + "\n")
    listed = CliRunner().invoke(main, ["inbox", "list", str(logs)])
    assert listed.exit_code == 0, listed.output
    row = next(line for line in listed.output.splitlines() if line.startswith("s1"))
    assert row.split("\t")[5].startswith("overdue ")
    client = _web(tmp_path, logs)
    _login(client, "alice")
    assert client.get("/").status_code == 200
    for key in ("s1", "p1"):
        assert client.get(f"/review/{key}.jsonl/{rids[key]}").status_code == 200


def test_deadline_text_reads_at_a_glance_on_both_sides_of_the_deadline() -> None:
    """A deadline in the queue: ``in …`` before it, ``overdue …`` from it on, ``<1s`` within a
    second of it (never ``in 0s`` / ``overdue 0s``), ``-`` without one."""
    from fsm_stage.inbox.queue import deadline_text

    now = 1_800_000_000_000
    assert deadline_text(None, now) == "-"
    assert deadline_text(now + 2 * 3600_000 - 60_000, now) == "in 1h59m"
    assert deadline_text(now - 5 * 60_000, now) == "overdue 5m"
    assert deadline_text(now + 1_000, now) == "in 1s"
    assert deadline_text(now - 1_000, now) == "overdue 1s"
    assert [deadline_text(now + d, now) for d in (999, 1)] == ["in <1s"] * 2
    assert [deadline_text(now + d, now) for d in (0, -1, -999)] == ["overdue <1s"] * 3


def test_a_forks_inherited_reviews_are_not_listed_nor_answered(tmp_path: Path) -> None:
    """A DeepSeek Harness fork copies its parent's open review verbatim; the fork sees it
    redeemed ``forked`` (an approval is used only on the branch it was asked on), so the queue
    lists only the parent's and approve-all answers only that one."""
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from fsm_stage.inbox import create_app
    from fsm_stage.log import open_log
    from fsm_stage.reviews import open_reviews as session_reviews

    logs = tmp_path / "logs"
    logs.mkdir()
    rid = stage_session(logs, "parent")
    child = dsh_fork(logs, "parent", "child")
    with open_log(child) as log:  # the library's own view of the fork
        assert tuple(session_reviews(log)) == ()
    assert [(i.key, i.record.id) for i in open_reviews(logs)] == [("parent.jsonl", rid)]
    client = TestClient(create_app(logs, reviewers_file=write_reviewers(tmp_path / "r.yaml"),
                                   secret_key="k" * 40))
    page = client.get("/login")
    token = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert token is not None
    client.post("/login", data={"csrf": token.group(1), "name": "alice", "token": TOKENS["alice"]})
    assert "<h2>Answer</h2>" not in client.get(f"/review/child.jsonl/{rid}").text
    done = approve_all(logs)
    assert [(d.key, d.result) for d in done] == [("parent.jsonl", "answered")]
    assert _answers(child) == []


def test_a_fork_neither_expires_nor_marks_the_reviews_it_inherited(tmp_path: Path) -> None:
    """Overdue reviews a fork inherited are not its own: expiring overdue reviews writes no
    answer into the fork, and the diagram marks of the fork show no review in progress."""
    from fsm_stage.cli.session_marks import session_marks
    from fsm_stage.log import open_log
    from fsm_stage.reviews._team import expire_overdue
    from fsm_stage.runtime.session import Session

    logs = tmp_path / "logs"
    logs.mkdir()
    stage_session(logs, "parent")
    add_rules(logs / "parent.jsonl", {"deadlineSeconds": 1})
    child = dsh_fork(logs, "parent", "child")
    later = wall_clock_ms() + 3_600_000
    with open_log(child) as log:
        assert expire_overdue(Session(log), now_ms=later) == []
    assert _answers(child) == []
    assert session_marks(str(child)).reviewing is None
    assert session_marks(str(logs / "parent.jsonl")).reviewing is not None
    with open_log(logs / "parent.jsonl") as log:
        assert len(expire_overdue(Session(log), now_ms=later)) == 1
