"""Fork (issue 11 item 6), graph fingerprint (item 7) and the ``state`` additions (item 8)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from rig import Rig, run

from fsm_stage.cli import main
from fsm_stage.config import load_config_text
from fsm_stage.constants import TURN_END
from fsm_stage.errors import GraphChangedError, ReviewPending
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.reviews import Answer, ScriptedReviewChannel, SuspendingReviewChannel, answer_review, fork_log

GRAPH = """\
name: reviewed
initial: explore
stages:
  - name: explore
    instruction: Look around.
  - name: implement
    instruction: Build it.
section: "Stage <<stage_current>>"
"""


def _approving() -> ScriptedReviewChannel:
    return ScriptedReviewChannel(default=lambda q: [Answer(q[0].id, ("Approve",))])


def _approved_then_aborted(path: Path, cwd: Path) -> Rig:
    """A turn whose goto_stage was approved, then the turn aborted before the next step."""
    rig = Rig(JsonlLog(path, header=SessionHeader(id="parent", cwd=str(cwd))), _approving())
    rig.open_turn()
    rig.step()
    assert not run(rig.call(rig.goto_call("implement"))).is_error
    rig.session.append(TURN_END, {"turn": 1, "reason": {"kind": "aborted"}})
    return rig


def test_state_shows_an_approved_unapplied_switch_and_a_new_process_applies_it(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _approved_then_aborted(path, tmp_path).close()
    out = CliRunner().invoke(main, ["state", "--json", str(path)])
    report = json.loads(out.output)
    assert report["stage"]["pending"] == "implement" and report["reviews"]["open"] == []
    assert report["graph"]["name"] == "reviewed" and report["graph"]["fingerprint"].startswith("sha256:")
    assert "approved switch to implement pending" in CliRunner().invoke(main, ["state", str(path)]).output
    with JsonlLog(path) as log:
        review = _approving()
        rig = Rig(log, review)
        rig.open_turn()
        rig.step()
        assert rig.stage.current(rig.session) == "implement" and review.requests == []


def test_fork_inherits_the_state_but_not_an_unredeemed_approval(tmp_path: Path) -> None:
    parent = _approved_then_aborted(tmp_path / "parent.jsonl", tmp_path)
    cut = len(parent.session.events) - 1
    child_session = fork_log(parent.session, cut, tmp_path / "child.jsonl")
    header = child_session.header
    assert (header.parent_session, header.seed_length) == ("parent", cut + 1)
    assert [e.type for e in child_session.events[cut + 1:]] == ["session/end-seed", "fsm/review/redeemed"]
    child_review = _approving()
    child = Rig(child_session.log, child_review)
    assert child.stage.pending_stage(child.session) is None and child.reviews().approved == ()
    child.open_turn()
    child.step()
    assert child.stage.current(child.session) == "explore"  # nothing applied on the fork
    assert not run(child.call(child.goto_call("implement", call_id="call_again"))).is_error  # asked again
    assert len(child_review.requests) == 1
    child.close()
    parent.open_turn()
    parent.step()  # the parent still redeems its own approval
    assert parent.stage.current(parent.session) == "implement"
    parent.close()


def test_fork_command_drops_an_open_review(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    rig = Rig(JsonlLog(path, header=SessionHeader(id="p", cwd=str(tmp_path))), SuspendingReviewChannel())
    rig.open_turn()
    rig.step()
    with pytest.raises(ReviewPending):
        run(rig.call(rig.goto_call("implement")))
    n = len(rig.session.events)
    rig.close()
    child = str(tmp_path / "c.jsonl")
    out = CliRunner().invoke(main, ["fork", str(path), "--at", str(n - 1), "-o", child, "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["seed_length"] == n
    listing = CliRunner().invoke(main, ["review", str(tmp_path / "c.jsonl"), "--json"])
    assert json.loads(listing.output)["open"] == []
    assert len(json.loads(CliRunner().invoke(main, ["review", str(path), "--json"]).output)["open"]) == 1
    bad = CliRunner().invoke(main, ["fork", str(path), "--at", "999", "-o", str(tmp_path / "d.jsonl")])
    assert bad.exit_code == 1 and "not an event seq" in bad.output


def test_the_graph_fingerprint_is_logged_once_and_a_changed_graph_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    graph_file = tmp_path / "graph.yaml"
    graph_file.write_text(GRAPH)
    config = load_config_text(GRAPH, str(graph_file)).graph
    assert config is not None
    rig = Rig(JsonlLog(path, header=SessionHeader(id="g", cwd=str(tmp_path))),
              ScriptedReviewChannel().keep().keep(), graph_config=config)
    rig.open_turn()
    rig.step()
    run(rig.call(rig.goto_call("implement", call_id="a")))
    run(rig.call(rig.goto_call("implement", call_id="b")))
    assert rig.types().count("fsm/graph") == 1
    rig.close()
    clean = CliRunner().invoke(main, ["state", "--json", "--graph", str(graph_file), str(path)])
    assert json.loads(clean.output)["warnings"] == []
    changed = tmp_path / "changed.yaml"
    changed.write_text(GRAPH.replace("section:", "  - name: ship\n    instruction: Ship it.\nsection:"))
    argv = ["state", "--json", "--graph", str(changed), str(path)]
    warned = json.loads(CliRunner().invoke(main, argv).output)
    assert any("graph changed" in w for w in warned["warnings"])
    other = load_config_text(changed.read_text(), str(changed)).graph
    assert other is not None
    with JsonlLog(path) as log:
        with pytest.raises(GraphChangedError):  # at open, before any tool runs under the new graph
            Rig(log, None, graph_config=other)
        accepted = Rig(log, None, graph_config=other, accept_graph_change=True)
        accepted.step(2)
        fps = [e.data["fingerprint"] for e in log.events if e.type == "fsm/graph"]
        assert len(fps) == 2 and fps[0] != fps[1]
        accepted.step(3)
        assert sum(e.type == "fsm/graph" for e in log.events) == 2  # logged once per change


def test_answer_review_reads_a_plain_log_too(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    rig = Rig(JsonlLog(path, header=SessionHeader(id="l", cwd=str(tmp_path))), SuspendingReviewChannel())
    rig.enter_plan()
    rig.open_turn()
    rig.step()
    with pytest.raises(ReviewPending) as pending:
        run(rig.call(rig.exit_call()))
    answer = answer_review(rig.log, pending.value.review_id, "keep", feedback="more detail")
    assert (answer.outcome, answer.option, answer.feedback) == ("keep", "Keep planning", "more detail")
    rig.close()


def test_a_call_suspended_before_the_fork_is_asked_again_when_resumed_on_the_fork(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    rig = Rig(JsonlLog(path, header=SessionHeader(id="p", cwd=str(tmp_path))), SuspendingReviewChannel())
    rig.open_turn()
    rig.step()
    call = rig.goto_call("implement")
    with pytest.raises(ReviewPending):
        run(rig.call(call))
    n = len(rig.session.events)
    rig.close()
    child_session = fork_log(str(path), n - 1, tmp_path / "c.jsonl")
    review = _approving()
    child = Rig(child_session.log, review)
    result = run(child.resume(call))  # the same model call, resumed on the fork
    assert not result.is_error, result.text
    assert len(review.requests) == 1  # asked again, not "the stage changed"
    requests = [e for e in child.session.events if e.type == "fsm/review/request"]
    assert [e.data["callId"] for e in requests] == ["call_goto", "call_goto"]
    child.close()


def test_fork_into_an_unwritable_place_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    with JsonlLog(path, header=SessionHeader(id="p", cwd=str(tmp_path))) as log:
        log.append("turn/start", {"turn": 1})
    out = CliRunner().invoke(main, ["fork", str(path), "--at", "0", "-o", "/proc/no/such/dir/x.jsonl"])
    assert out.exit_code == 1 and "Traceback" not in out.output
    assert out.output.count("\n") == 1 and "cannot write fork" in out.output, out.output
