"""The README's stage-switch example runs and prints what it claims (so it cannot rot)."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from docs_text import doc_section
from ruamel.yaml import YAML

from fsm_stage.stage_switch import section_lists_targets_plainly

README = Path(__file__).resolve().parents[2] / "README.md"


def _section() -> str:
    return doc_section("stage-switch")


def test_readme_stage_switch_example_runs(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The example attaches the stage switch like plan mode, takes the explore → implement edge
    (light: a short conversation), and reads the state back with ``stage.get(agent)``; the guard
    ``tests_written`` is false, so the guidance lists only ``explore``."""
    blocks = re.findall(r"```python\n(.*?)```", _section(), re.DOTALL)
    assert len(blocks) == 1, "the stage-switch README section has exactly one python example"
    monkeypatch.setattr(tempfile, "mkdtemp", lambda: str(tmp_path))  # the example's workspace
    exec(compile(blocks[0], "README.md#stage-switch", "exec"), {"__name__": "readme_example"})
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "{'current': 'implement'}",
        "When the current stage (implement) is complete, call goto_stage with one of:",
        "explore. Submit a handoff document with the completed work, the user's",
        "requirements and the results of the discussion.",
        "Current stage: implement. Stages: explore, implement, verify. Switch with /stage <name> [message].",
        "['Current stage: explore', 'Current stage: implement']",
    ]


def test_readme_no_targets_section_example_is_a_valid_branching_section() -> None:
    """The YAML snippet for wording the no-targets case branches on ``stage_targets``, so it is
    rendered as written."""
    yaml_blocks = re.findall(r"```yaml\n(.*?)```", _section(), re.DOTALL)
    snippet = next(b for b in yaml_blocks if "stage_targets" in b)
    section = YAML(typ="safe", pure=True).load(snippet)["section"]
    assert "<% if stage_targets %>" in section
    assert not section_lists_targets_plainly(section)


def test_readme_cites_no_file_outside_the_repo() -> None:
    """The section names the behaviour contract without paths to files this repo does not ship."""
    section = _section()
    for name in ("DESIGN.md", "spec.md", "Appendix B", "shared/"):
        assert name not in section
