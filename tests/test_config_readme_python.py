"""The Python blocks of the README's ``config`` and ``log`` sections run as written: every name
an example uses is defined or imported in it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from docs_text import doc_section

from fsm_stage.config import ConfigError

REPO = Path(__file__).resolve().parents[1]


def _blocks(name: str) -> list[str]:
    section = doc_section(name)
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


def _run(code: str, where: str) -> None:
    exec(compile(code, where, "exec", dont_inherit=True), {"__name__": "readme_example"})


def test_readme_config_python_blocks_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The "From Python" block loads a shipped graph; the ``ProblemReport`` block defines its
    own class and text and ends in the ``ConfigError`` it says, with positioned lines."""
    monkeypatch.chdir(REPO)
    load_block, report_block = _blocks("config")
    _run(load_block, "README.md#config-1")
    with pytest.raises(ConfigError) as info:
        _run(report_block, "README.md#config-2")
    claimed = [line.lstrip("# ").removeprefix("ConfigError: ")
               for line in report_block.splitlines() if line.startswith("# ")]
    assert str(info.value).splitlines() == claimed
    assert "scenario.yaml:5:10: steps[2].id: duplicate call id" in claimed


def test_readme_log_python_block_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The log example writes ``session.jsonl`` (and, by design, ``session.jsonl.lock``) and
    prints the plan view it claims."""
    monkeypatch.chdir(tmp_path)
    (block,) = _blocks("log")
    _run(block, "README.md#log")
    assert capsys.readouterr().out.splitlines() == ["{'active': True, 'pending': False}"]
    assert (tmp_path / "session.jsonl").is_file()
    assert (tmp_path / "session.jsonl.lock").exists()  # filelock leaves it; see the README
