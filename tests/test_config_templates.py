"""The graph ``section`` template: only ``stage_current`` and
``stage_targets`` may be read, a section that fails when rendered with the graph's own stage
names is a positioned problem at validate time, and the "renders empty" warning fires only when
the section lists ``<< stage_targets >>`` plainly (docs/contracts.md, S31–S34)."""

from __future__ import annotations

import pytest

from fsm_stage.config import ConfigError, load_config_text

STAGES = "stages:\n  - {name: a, instruction: b}\n"


def _problems(section_yaml: str, stages: str = STAGES, *, strict: bool = False) -> list[str]:
    text = f"section: {section_yaml}\n{stages}"
    with pytest.raises(ConfigError) as info:
        load_config_text(text, "g.yaml", strict=strict)
    lines = str(info.value).splitlines()
    assert lines, "an invalid config names its problems"
    return lines


@pytest.mark.parametrize(
    ("section", "name"),
    [('"<< lipsum >>"', "lipsum"), ('"<< range(10) >>"', "range"), ('"<< dict(a=1) >>"', "dict"),
     ('"<< namespace() >>"', "namespace"), ('"<< cycler(1) >>"', "cycler"), ('"<< joiner() >>"', "joiner")],
)
def test_section_may_read_only_stage_current_and_stage_targets(section: str, name: str) -> None:
    """Jinja's default globals are unknown variables, at ``section``."""
    (line,) = _problems(section)
    assert line.startswith("g.yaml:1:10: section: ") and name in line


@pytest.mark.parametrize(
    "section",
    [
        '"<< stage_current.__class__ >>"',  # sandbox (brk/ssti.yaml)
        '"<< stage_current * 100000000000 >>"',  # output that would not fit in memory
        '"<< stage_current + 1 >>"',  # TypeError
        '"<% for y in stage_current * 150000 %>zz<% endfor %>"',
    ],
)
def test_section_that_fails_when_rendered_is_a_positioned_problem(section: str) -> None:
    """The section is trial-rendered with the graph's stage names, so a runtime error
    is one positioned line from validate rather than a traceback from simulate."""
    (line,) = _problems(section)
    assert line.startswith("g.yaml:1:10: section: ")
    assert "Traceback" not in line


def test_section_that_fails_only_for_one_stage_is_found() -> None:
    """The trial render uses each stage's own name and declared targets."""
    stages = ("stages:\n  - {name: a, instruction: b, targets: [long]}\n"
              "  - {name: long, instruction: c, targets: [a]}\n")
    (line,) = _problems('"<< stage_current[3] >>"', stages)
    assert line.startswith("g.yaml:1:10: section: ")


def test_section_branching_on_stage_targets_gets_no_renders_empty_warning() -> None:
    """A section that tests ``stage_targets`` handles the empty case."""
    text = (
        "section: '<% if stage_targets %>one of << stage_targets >><% else %>stay<% endif %>'\n"
        "stages:\n  - {name: a, instruction: b, targets: [c]}\n  - {name: c, instruction: d, targets: []}\n"
    )
    cfg = load_config_text(text, "g.yaml", strict=True)
    assert cfg.warnings == ()


def test_valid_sections_still_load() -> None:
    text = "section: 'In << stage_current >>; next: << stage_targets | upper >>'\n" + STAGES
    assert load_config_text(text, "g.yaml", strict=True).graph is not None
