"""The framework examples (``examples/*.py``) run offline in a subprocess, restart themselves
and finish in ``verify`` with nothing pending; killed between an approval and the next step and
resumed, each leaves the same final log shape as an uninterrupted run."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {"pydantic_ai_feature_work.py": "pydantic_ai", "langgraph_feature_work.py": "langgraph",
            "openai_agents_feature_work.py": "agents"}


def _require(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        if os.environ.get("CI") not in (None, "", "0"):
            pytest.fail(f"{module} is missing in CI (pip install 'fsm_stage[test]')")
        pytest.skip(f"{module} is not installed (pip install 'fsm_stage[test]')")


def _run(example: str, log: Path, *args: str, kill: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("FSM_EXAMPLE_KILL", None)
    env.pop("PYTHONUNBUFFERED", None)  # stdout a pipe, block-buffered, as for a user
    if kill:
        env["FSM_EXAMPLE_KILL"] = "after-approval"
    return subprocess.run([sys.executable, str(ROOT / "examples" / example), *args, str(log)],
                          env=env, capture_output=True, text=True, timeout=300)


def _shape(log: Path) -> tuple[list[str], list[str], str | None, int]:
    """Event types, the stages entered, the final stage and how many reviews stay open."""
    from fsm_stage.integrations._host import StageHost
    from fsm_stage.log.jsonl import JsonlLog

    sys.path.insert(0, str(ROOT / "examples"))
    from scripted_llm import example_graph

    with JsonlLog(log) as opened:
        host = StageHost.open(opened, graph=example_graph(), guards={"tests_written": True})
        types = [e.type for e in host.session.events]
        stages = [e.data["source"]["summary"] for e in host.session.events
                  if e.type == "user/message" and e.data.get("source", {}).get("kind") == "stage-switch"
                  and e.data["source"].get("form") == "notice"]
        return types, stages, host.current_stage(), len(host.pending_reviews())


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_example_runs_restarts_and_finishes_in_verify(example: str, tmp_path: Path) -> None:
    _require(EXAMPLES[example])
    done = _run(example, tmp_path / "session.jsonl")
    assert done.returncode == 0, done.stderr
    assert "review pending: restarting the process" in done.stdout
    assert done.stdout.strip().endswith("stage: verify")
    types, stages, stage, open_reviews = _shape(tmp_path / "session.jsonl")
    assert stage == "verify" and open_reviews == 0
    assert types.count("fsm/review/request") == 3 == types.count("fsm/review/redeemed")
    assert types[-1] == "turn/end" and types.count("turn/start") == 1
    assert stages == ["Current stage: explore", "Stage switched to implement", "Stage switched to verify"]


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_example_switches_fully_with_the_handoff_the_refusal_asked_for(example: str, tmp_path: Path) -> None:
    """Both switches are full: the model's first goto_stage is refused with the handoff template
    (it decides from that message alone), the second carries a handoff in the template's
    structure, which is written as the target stage's document and the answer is a full
    transition."""
    _require(EXAMPLES[example])
    assert _run(example, tmp_path / "session.jsonl").returncode == 0
    lines = [json.loads(line) for line in (tmp_path / "session.jsonl").read_text().splitlines()[1:]]
    gotos = [e for e in lines if e["type"] == "tool/call" and e["data"]["name"] == "goto_stage"]
    results = {e["data"]["message"]["source"]["callId"]: e["data"]
               for e in lines if e["type"] == "tool/result"}
    assert len(gotos) == 4
    refused, approved = gotos[0::2], gotos[1::2]
    for call in refused:
        assert "handoff" not in json.loads(call["data"]["arguments"])
        assert "## Primary Request and Intent" in json.dumps(results[call["data"]["callId"]])
    for call, stage in zip(approved, ("implement", "verify"), strict=True):
        document = json.loads(call["data"]["arguments"])["handoff"]
        assert document.startswith("## Primary Request and Intent")
        written = tmp_path / "handoff" / "feature" / f"{stage}.md"
        assert written.read_text(encoding="utf-8").strip() == document.strip()
        assert results[call["data"]["callId"]]["meta"] == {"fullTransition": True}


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_killed_after_an_approval_and_resumed_gives_the_uninterrupted_log(example: str,
                                                                           tmp_path: Path) -> None:
    _require(EXAMPLES[example])
    whole = tmp_path / "whole.jsonl"
    assert _run(example, whole).returncode == 0
    killed = tmp_path / "killed.jsonl"
    first = _run(example, killed, kill=True)  # the --resume child dies right after the approval
    assert first.returncode == 3 and "Traceback" not in first.stderr, first.stderr
    types, _stages, stage, _open = _shape(killed)
    assert types[-1] == "fsm/review/answer" and stage == "explore"  # approved, not applied yet
    resumed = _run(example, killed, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert _shape(killed) == _shape(whole)


def test_fleet_example_runs_a_one_machine_worker_offline(tmp_path: Path) -> None:
    _require("dbos")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "fleet_feature_work.py"), str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith("session demo: needs-input")
    from fsm_stage.fleet.listing import list_sessions
    from fsm_stage.log.dsh import read_log

    (info,) = list_sessions(tmp_path)
    assert info.id == "demo" and info.state == "needs-input"
    events = read_log(tmp_path / "demo.jsonl").events
    assert [e.data["id"] for e in events if e.type == "user/message"
            and e.data.get("source", {}).get("kind") == "user"] == ["task-1"]
    assert [e.type for e in events].count("fsm/review/redeemed") == 1
