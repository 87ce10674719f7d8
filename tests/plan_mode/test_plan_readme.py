"""The README's plan-mode example runs and prints what it claims (so it cannot rot)."""

from __future__ import annotations

import re

import pytest
from docs_text import doc_section


def _example() -> str:
    section = doc_section("plan-mode")
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert len(blocks) == 1, "the plan-mode README section has exactly one python example"
    return blocks[0]


def test_readme_plan_mode_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The example wires plan mode into a runtime, runs /plan and an approved exit, and ends
    with plan mode off and the recorded session's event shape."""
    exec(compile(_example(), "README.md#plan-mode", "exec"), {"__name__": "readme_example"})
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "Plan mode on. Use /plan off to leave.",
        "{'active': False}",
        "plan section sent: [True, False]",
        "['command/run', 'plan/mode', 'command/done', 'step/start', 'step/end', 'plan/mode', "
        "'step/start', 'step/end']",
    ]
