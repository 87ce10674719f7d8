"""Validating a graph costs work proportional to its size, not to stages × stages.

A graph whose stages omit ``targets`` has an edge between every pair of stages; the loader's
trial render of the guidance section must not build that whole list once per stage.
"""

from __future__ import annotations

import pytest

import fsm_stage.prompts as prompts  # the rules import render from it when they check a section
from fsm_stage.config import load_config_text


def _all_to_all(n: int) -> str:
    stages = "\n".join(f"  - name: s{i}\n    instruction: do {i}" for i in range(n))
    return f"name: big\nsection: 'Next: << stage_targets >>'\nstages:\n{stages}\n"


def test_trial_render_of_an_all_to_all_graph_renders_once(monkeypatch: pytest.MonkeyPatch) -> None:
    rendered: list[int] = []
    real = prompts.render

    def counting(template: str, **variables: str) -> str:
        rendered.append(len(variables.get("stage_targets", "")))
        return real(template, **variables)

    monkeypatch.setattr(prompts, "render", counting)
    cfg = load_config_text(_all_to_all(400), "big.yaml")
    assert cfg.graph is not None and len(cfg.graph.stages) == 400
    assert len(rendered) == 1  # not 400 renders of a 399-name list


def test_declared_targets_are_still_rendered_per_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    real = prompts.render

    def recording(template: str, **variables: str) -> str:
        seen.append(variables["stage_current"])
        return real(template, **variables)

    monkeypatch.setattr(prompts, "render", recording)
    text = ("name: g\nsection: 'Next: << stage_targets >>'\nstages:\n"
            "  - {name: a, instruction: x, targets: [b]}\n  - {name: b, instruction: y, targets: [a]}\n")
    load_config_text(text, "g.yaml")
    assert seen == ["a", "b"]
