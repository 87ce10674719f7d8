"""What a fleet operator sees and controls: a session recorded under an earlier version of the
graph goes on only with ``accept_graph_change`` (``worker --accept-graph-change``), a failed
run says why (the last error), the worker prints one line per failed drive, and a ``--guard``
the graph does not have is refused."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from fsm_stage import MemoryLog, SessionHeader
from fsm_stage.errors import GraphChangedError
from fsm_stage.fleet import drive, session_state
from fsm_stage.fleet.inputs import record_answer, record_input

HERE = Path(__file__).resolve().parent
GRAPH = HERE / "fleet-graph.yaml"
sys.path.insert(0, str(HERE))
import fleet_model  # noqa: E402


def _drive(log: Any, graph: Path = GRAPH, **kw: Any) -> Any:
    return asyncio.run(drive(log, graph=graph, model=fleet_model.model(), tools=fleet_model.tools(), **kw))


def test_a_session_of_an_earlier_graph_goes_on_only_when_the_change_is_accepted(tmp_path: Path) -> None:
    log = MemoryLog(SessionHeader("s1", cwd=str(tmp_path)))
    record_input(log, "message", "task: 5", input_id="in-5")
    waiting = _drive(log)
    assert waiting.state == "waiting-review"
    changed = tmp_path / "fleet-graph.yaml"  # the deployer edits an instruction meanwhile
    changed.write_text(GRAPH.read_text(encoding="utf-8").replace("Read the task", "Read the whole task"),
                       encoding="utf-8")
    record_answer(log, waiting.review_id, "approve")
    before = len(log.events)
    with pytest.raises(GraphChangedError, match="accept"):
        _drive(log, changed)
    assert len(log.events) == before + 1  # the claim only
    result = _drive(log, changed, accept_graph_change=True)
    for _ in range(4):
        if result.state != "waiting-review":
            break
        record_answer(log, result.review_id, "approve")
        result = _drive(log, changed, accept_graph_change=True)
    assert result.state == "complete"
    graphs = [e.data["fingerprint"] for e in log.events if e.type == "fsm/graph"]
    assert len(graphs) == 2 and graphs[0] != graphs[1]  # the new graph is recorded


class _Exploding(fleet_model.FleetModel):
    async def complete(self, request: Any, *, signal: Any) -> Any:
        raise RuntimeError("model exploded:\n API key missing")


def test_a_failed_run_names_the_last_error() -> None:
    log = MemoryLog(SessionHeader("s1", cwd="/tmp"))
    record_input(log, "message", "hi", input_id="in-1")
    for _ in range(2):
        with pytest.raises(RuntimeError, match="model exploded"):
            asyncio.run(drive(log, graph=GRAPH, model=_Exploding(), max_interrupted=2))
    result = asyncio.run(drive(log, graph=GRAPH, model=_Exploding(), max_interrupted=2))
    assert result.state == "failed" and session_state(log.events)[0] == "failed"
    assert result.message == ("2 turns in a row were interrupted or failed; "
                              "the last: model exploded: API key missing")


def test_the_worker_prints_one_line_per_failed_drive(capsys: pytest.CaptureFixture[str]) -> None:
    from fsm_stage.cli.fleet_cmds import _drive_reporter

    report = _drive_reporter()
    report("s1", {"state": "error", "message": "the graph changed\nsince"})
    report("s1", {"state": "error", "message": "the graph changed\nsince"})  # said already
    report("s2", {"state": "waiting-review", "review_id": "rv_1"})
    report("s1", {"state": "failed", "message": "3 turns in a row were interrupted or failed"})
    report("s1", {"state": "needs-input"})
    report("s1", {"state": "error", "message": "\x1b[31mred"})
    assert capsys.readouterr().err.splitlines() == [
        "fsm-stage worker: session s1: error: the graph changed since",
        "fsm-stage worker: session s1: failed: 3 turns in a row were interrupted or failed",
        "fsm-stage worker: session s1: error: \\x1b[31mred"]


def test_the_worker_refuses_a_guard_the_graph_does_not_have(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from fsm_stage.cli import main
    from fsm_stage.resources import data_dir

    pytest.importorskip("dbos")
    import fsm_stage.fleet.worker

    def started(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the worker started")

    monkeypatch.setattr(fsm_stage.fleet.worker, "run_worker", started)
    graph = str(data_dir("stage_graphs") / "feature-work.yaml")
    typo = CliRunner().invoke(main, ["worker", "--graph", graph, "--store", str(tmp_path / "s"),
                                     "--model", "fleet_model:model", "--guard", "tests_written=true",
                                     "--guard", "tests_writen=false"])
    assert typo.exit_code == 1
    assert typo.stderr.strip().endswith("--guard tests_writen: the graph has no guard of that name "
                                        "(its guards: tests_written)")
    assert not (tmp_path / "s").exists()


class _Routing(fleet_model.FleetModel):
    """One model for every stage that notes each request's model choice (as a fleet's routes)."""

    def __init__(self) -> None:
        self.asked: list[str | None] = []

    async def complete(self, request: Any, *, signal: Any) -> Any:
        self.asked.append(request.model.model)
        return await super().complete(request, signal=signal)


def test_a_fleet_model_routes_on_the_stage_choice_without_a_warning_per_drive(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    graph = tmp_path / "g.yaml"
    graph.write_text(GRAPH.read_text(encoding="utf-8").replace(
        "    targets: [done]\n", "    targets: [done]\n    model: openai:o3\n", 1), encoding="utf-8")
    log = MemoryLog(SessionHeader("s1", cwd=str(tmp_path)))
    record_input(log, "message", "task: 5", input_id="in-5")
    model = _Routing()
    result = asyncio.run(drive(log, graph=graph, model=model, tools=fleet_model.tools()))
    for _ in range(4):
        if result.state != "waiting-review":
            break
        record_answer(log, result.review_id, "approve")
        result = asyncio.run(drive(log, graph=graph, model=model, tools=fleet_model.tools()))
    assert result.state == "complete" and "openai:o3" in model.asked and None in model.asked
    assert not [r for r in caplog.records if "no such model" in r.getMessage()]


def test_sending_to_a_store_that_does_not_exist_names_the_store(tmp_path: Path) -> None:
    from fsm_stage.errors import UserError
    from fsm_stage.fleet import Store

    Store(str(tmp_path / "sessions")).open("s1", create=SessionHeader("s1", cwd=str(tmp_path))).close()
    with pytest.raises(UserError, match="no such store folder"):
        Store(str(tmp_path / "sesions")).open("s1")
    with pytest.raises(UserError, match="no session 's2'"):
        Store(str(tmp_path / "sessions")).open("s2")
