"""README.md is a map: its Python example runs and imports only from package faces, its links
resolve, no paragraph runs long, and its API list is exactly the package's exported names.

``FSM_STAGE_REGEN_DOCS=1 python -m pytest tests/test_readme.py`` rewrites the API list.
"""

from __future__ import annotations

import ast
import os
import re
from collections import defaultdict
from pathlib import Path

import pytest
from docs_text import REPO, doc_pages, doc_section

import fsm_stage

README = REPO / "README.md"
GROUP_TITLES = {
    "config": "Stage graphs", "graph": "Stage graphs", "stage_switch": "Controllers",
    "plan_mode": "Controllers", "runtime": "Runtime", "driver": "Step driver", "log": "Session log",
    "handoff": "Session log", "reviews": "Reviews", "errors": "Errors",
}


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.DOTALL)


def api_list() -> str:
    """The README's API list, generated from ``fsm_stage._EXPORTS`` (grouped by concept)."""
    groups: dict[str, list[str]] = defaultdict(list)
    for name, module in fsm_stage._EXPORTS.items():
        first = module.split(".")[0]
        title = GROUP_TITLES.get(module, GROUP_TITLES.get(first, first))
        groups[title].append(name)
    order = list(dict.fromkeys(GROUP_TITLES.values()))
    titles = sorted(groups, key=lambda t: (order.index(t) if t in order else len(order), t))
    lines = ["The top level (`from fsm_stage import NAME`) holds the names a host needs first; the",
             "rest are exported from their packages (`fsm_stage.runtime`, `.driver`, `.reviews`, `.policy`,",
             "`.plan_mode`, `.stage_switch`, `.log`, `.graph`, `.config`, `.errors`; tools in `.simulate`,",
             "`.scenario`, `.integrations`, `.mcp`):", ""]
    for title in titles:
        names = ", ".join(f"`{n}`" for n in sorted(groups[title], key=str.lower))
        lines.append(f"- **{title}**: {names}")
    return "\n".join(lines)


def test_readme_api_list_is_the_exported_names() -> None:
    text = README.read_text(encoding="utf-8")
    begin, end = "<!-- BEGIN api -->\n", "<!-- END api -->"
    current = text[text.index(begin) + len(begin):text.index(end)].strip()
    expected = api_list()
    if os.environ.get("FSM_STAGE_REGEN_DOCS") and current != expected:
        README.write_text(text.replace(current, expected) if current else
                          text.replace(begin + end, f"{begin}{expected}\n{end}"), encoding="utf-8")
        current = expected
    assert current == expected, "run FSM_STAGE_REGEN_DOCS=1 python -m pytest tests/test_readme.py"


def _is_face(module: str) -> bool:
    """``fsm_stage`` or one of its packages, never an implementation module."""
    return module == "fsm_stage" or (module.count(".") == 1 and module.startswith("fsm_stage.")
                                     and not module.split(".")[1].startswith("_"))


def test_readme_python_imports_only_from_package_faces() -> None:
    blocks = _python_blocks(README.read_text(encoding="utf-8"))
    assert blocks, "the README has a Python example"
    for block in blocks:
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("fsm_stage"):
                assert _is_face(node.module), node.module
            if isinstance(node, ast.Import):
                assert all(_is_face(a.name) for a in node.names if a.name.startswith("fsm_stage"))


def test_front_door_example_runs(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    (block,) = _python_blocks(doc_section("front-door"))
    monkeypatch.chdir(REPO)
    exec(compile(block, "README.md#front-door", "exec"), {"__name__": "readme_example"})
    assert capsys.readouterr().out == "{'current': 'implement'}\n"


LANDING: set[str] = set()


@pytest.mark.parametrize("page", doc_pages(), ids=lambda p: p.name)
def test_relative_links_resolve(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target or target.startswith("mailto:") or target in LANDING:
            continue
        assert (page.parent / target).exists(), f"{page.name}: broken link {target}"


def test_readme_paragraphs_stay_short() -> None:
    text = re.sub(r"```.*?```", "", README.read_text(encoding="utf-8"), flags=re.DOTALL)
    for para in re.split(r"\n\s*\n", text):
        if para.lstrip().startswith(("|", "- ", "<!--")):
            continue
        assert len(para.split()) <= 130, para[:80]
