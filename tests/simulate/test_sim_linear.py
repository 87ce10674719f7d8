"""A run's cost is linear in the session length: request records share one message history,
and nothing keeps every request's own message list alive (structural checks, not timings)."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path
from typing import Any, cast

import pytest

from fsm_stage.scenario import load_scenario_text
from fsm_stage.simulate import SimulationResult, simulate

GRAPH = """name: lin
language: en
stages:
  - {name: explore, instruction: Read.}
  - {name: implement, instruction: Write.}
section: "Stage << stage_current >>; next: << stage_targets >>."
"""


def _scenario_text(turns: int) -> str:
    """``turns`` user prompts, each answered by one model step (a tool-less reply ends the turn)."""
    steps = "".join(f"  - user: prompt {i} asks for a little more work\n"
                    f"  - model: answer {i} does a little more work\n" for i in range(turns))
    return f"graph: g.yaml\nsteps:\n{steps}"


def _run(tmp_path: Path, turns: int) -> SimulationResult:
    (tmp_path / "g.yaml").write_text(GRAPH, encoding="utf-8")
    scenario = load_scenario_text(_scenario_text(turns), str(tmp_path / f"s{turns}.yaml"))
    return simulate(scenario, cwd=tmp_path / f"w{turns}")


def _peak_bytes(tmp_path: Path, turns: int) -> int:
    """Peak traced allocation of one run (the scenario is parsed before tracing starts)."""
    (tmp_path / "g.yaml").write_text(GRAPH, encoding="utf-8")
    scenario = load_scenario_text(_scenario_text(turns), str(tmp_path / f"s{turns}.yaml"))
    simulate(scenario, cwd=tmp_path / "warm")  # imports, catalogs, compiled graph: not per turn
    gc.collect()
    tracemalloc.start()
    try:
        result = simulate(scenario, cwd=tmp_path / f"w{turns}")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(result.records) == turns
    return peak


def test_records_share_one_history_and_keep_only_new_messages(tmp_path: Path) -> None:
    """Every record's ``messages`` views one shared, append-only history: the whole run holds
    each message view once, not once per request (which made memory quadratic)."""
    from fsm_stage.simulate.history import MessageHistory

    result = _run(tmp_path, 40)
    records = result.records
    histories = [r.messages for r in records if isinstance(r.messages, MessageHistory)]
    assert len(histories) == len(records)
    shared = {id(h.shared): h.shared for h in histories}
    assert len(shared) == 1  # no transition here: one history for the whole run
    (history,) = shared.values()
    assert len(history.items) == len(records[-1].messages)
    listed = sum(len(r.messages) for r in records)
    assert listed > 10 * len(history.items)  # each request lists all, the run stores each once
    distinct = {id(m) for r in records for m in r.messages}
    assert len(distinct) == len(history.items)
    # the records still read as tuples of the same views
    assert records[-1].messages == tuple(records[-1].messages)
    assert records[-2].messages == tuple(records[-1].messages)[: len(records[-2].messages)]
    assert records[-1].messages[-1:] == (records[-1].messages[len(records[-1].messages) - 1],)
    assert records[-1].message_tokens == sum(m.tokens for m in records[-1].messages)


def test_run_memory_grows_linearly_with_the_number_of_turns(tmp_path: Path) -> None:
    """4x the turns takes well under 5x the memory (quadratic growth would be ~16x): no request
    list (the loop's, the scripted model's) keeps every request's message copies alive."""
    small = _peak_bytes(_dir(tmp_path, "a"), 60)
    large = _peak_bytes(_dir(tmp_path, "b"), 240)
    assert large < 5 * small, (small, large)


def _dir(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.mkdir()
    return path


def test_the_simulator_reads_the_history_without_copying_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A deep copy of the whole history per request made long runs quadratic in time; the
    simulator only reads the messages, so its loop asks the driver for no copies."""
    import fsm_stage.driver._step as driver_module
    from fsm_stage.resources import data_dir
    from fsm_stage.scenario import load_scenario_text
    from fsm_stage.simulate import simulate_scenario

    copies: list[int] = []
    real = driver_module.deep_copies

    def counting(messages: object) -> object:
        copies.append(1)
        return real(cast(Any, messages))

    monkeypatch.setattr(driver_module, "deep_copies", counting)
    graph = data_dir("stage_graphs") / "feature-work.yaml"
    steps = "\n".join(f"  - user: hello {i}\n  - model: {{text: answer {i}}}" for i in range(30))
    result = simulate_scenario(load_scenario_text(f"graph: {graph}\nsteps:\n{steps}\n", "s.yaml"))
    assert len(result.records) == 30 and copies == []
