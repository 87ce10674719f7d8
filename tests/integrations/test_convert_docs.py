"""docs/integrations.md's Python blocks run as written, and importing fsm_stage or its
integrations package loads no model SDK (the SDKs are optional extras)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "integrations.md"


def _blocks(name: str) -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split(f"<!-- BEGIN {name} -->", 1)[1].split(f"<!-- END {name} -->", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


@pytest.mark.parametrize("name", ["converters", "toolspecs"])
def test_doc_examples_run(name: str) -> None:
    blocks = _blocks(name)
    assert blocks, f"no python block in the {name} section"
    for i, code in enumerate(blocks):
        exec(compile(code, f"docs/integrations.md#{name}-{i}", "exec", dont_inherit=True),
             {"__name__": "doc_example"})


def test_importing_fsm_stage_and_integrations_loads_no_sdk() -> None:
    code = ("import sys, fsm_stage, fsm_stage.integrations, fsm_stage.integrations.convert, "
            "fsm_stage.integrations.toolspecs\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'openai', 'anthropic', 'mcp', "
            "'mcp_types', 'google', 'pydantic_ai', 'langgraph', 'langchain_core', 'agents', 'pydantic'})\n"
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         check=True)
    assert out.stdout.strip() == "[]", out.stdout
