"""Validating a graph costs work proportional to its size, not to stages × stages.

A graph whose stages omit ``targets`` has an edge between every pair of stages; the loader's
trial render of the guidance section must not build that whole list once per stage.
"""

from __future__ import annotations

import pytest

import fsm_stage.prompts as prompts  # the rules import render from it when they check a section
from fsm_stage.config import ConfigError, load_config_text


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


def test_a_section_that_filters_a_variable_is_rendered_per_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    real = prompts.render

    def recording(template: str, **variables: str) -> str:
        seen.append(variables["stage_current"])
        return real(template, **variables)

    monkeypatch.setattr(prompts, "render", recording)
    text = ("name: g\nsection: 'Next: << stage_targets | upper >>'\nstages:\n"
            "  - {name: a, instruction: x, targets: [b]}\n  - {name: b, instruction: y, targets: [a]}\n")
    load_config_text(text, "g.yaml")
    assert seen == ["a", "b"]


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    calls: list[tuple[str, str]] = []
    real = prompts.render

    def counting(template: str, **variables: str) -> str:
        calls.append((variables["stage_current"], variables["stage_targets"]))
        return real(template, **variables)

    monkeypatch.setattr(prompts, "render", counting)
    return calls


def _ring(n: int, section: str) -> str:
    stages = "\n".join(f"  - {{name: s{i}, instruction: x, targets: [s{(i + 1) % n}, s{(i + 2) % n}]}}"
                       for i in range(n))
    return f"name: g\nsection: '{section}'\nstages:\n{stages}\n"


def test_a_plainly_interpolating_section_is_rendered_once_with_the_longest_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A section reading its variables only as bare ``<< name >>`` outputs renders the same way
    for every value but for length: one render, with the longest name and target list."""
    calls = _counting(monkeypatch)
    text = _ring(300, "In << stage_current >>; next: << stage_targets >>.")
    assert load_config_text(text, "g.yaml").graph is not None
    assert calls == [("s100", "s100, s101")]  # the first longest name; the first longest list (s99's)


def test_a_plain_section_too_long_for_one_stage_names_that_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the single render fails, the stages are rendered one by one and the error names
    the stage it fails for."""
    long = [c * 60 for c in "xyz"]
    section = "<% for i in [0] * 2000 %><< stage_targets >><% endfor %>"
    stages = (f"  - {{name: a, instruction: x, targets: [b]}}\n"
              f"  - {{name: b, instruction: x, targets: [{', '.join(long)}]}}\n"
              + "".join(f"  - {{name: {n}, instruction: x, targets: [a]}}\n" for n in long))
    with pytest.raises(ConfigError) as info:
        load_config_text(f"name: g\nsection: '{section}'\nstages:\n{stages}", "g.yaml")
    (line,) = str(info.value).splitlines()
    assert 'rendered for stage "b"' in line and "more than 200000 characters" in line


def test_a_plain_section_too_long_only_for_a_mix_of_stages_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The longest name and the longest target list may come from different stages: their
    combination failing is no problem when every real stage renders."""
    calls = _counting(monkeypatch)
    long = [c * 60 for c in "xyz"]
    section = "<% for i in [0] * 1000 %><< stage_current >><< stage_targets >><% endfor %>"
    stages = (f"  - {{name: a, instruction: x, targets: [{', '.join(long)}]}}\n"
              + "".join(f"  - {{name: {n}, instruction: x, targets: [a]}}\n" for n in long))
    assert load_config_text(f"name: g\nsection: '{section}'\nstages:\n{stages}", "g.yaml").graph is not None
    assert len(calls) == 1 + 4  # the combined render failed, then every stage rendered
