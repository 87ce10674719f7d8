"""Data flows one way (DESIGN.md §3): config → compiled graph → log → runtime → controllers → simulator/CLI.

Each module may import only from its own layer or the layers below it. The check reads the
package's import statements (``ast``), so a new upward import fails here with its file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "fsm_stage"

#: layer number of each module (lower = closer to the data); a module may import layers <= its own.
LAYERS: dict[str, int] = {
    "fsm_stage.constants": 0,
    "fsm_stage.errors": 0,
    "fsm_stage._lazy": 0,
    "fsm_stage.resources": 0,
    "fsm_stage.fileio": 0,
    "fsm_stage.text": 0,
    "fsm_stage._template_limits": 1,
    "fsm_stage.prompts": 1,
    "fsm_stage._yaml": 1,
    "fsm_stage.config": 2,
    "fsm_stage.config.schema": 3,
    "fsm_stage.schema": 3,
    "fsm_stage.graph": 3,
    "fsm_stage.diagram": 3,
    "fsm_stage.log": 4,
    "fsm_stage.handoff": 4,
    "fsm_stage.tokens": 5,
    "fsm_stage.runtime": 6,
    "fsm_stage.plan_mode": 7,
    "fsm_stage.plan_mode_reviews": 7,
    "fsm_stage.stage_switch": 7,
    "fsm_stage.scenario": 8,
    "fsm_stage.simulate": 9,
    "fsm_stage.integrations": 9,
    "fsm_stage.mcp": 9,
    "fsm_stage.fleet": 9,
    "fsm_stage.cli": 10,
    "fsm_stage.__main__": 11,
    "fsm_stage": 11,
}


def _layer(module: str) -> int:
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        if name in LAYERS:
            return LAYERS[name]
    raise KeyError(module)


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out.append((".".join(parts), path))
    return out


def test_every_module_has_a_layer() -> None:
    for module, _ in _modules():
        _layer(module)


@pytest.mark.parametrize(("module", "path"), _modules(), ids=[m for m, _ in _modules()])
def test_imports_only_flow_downward(module: str, path: Path) -> None:
    own = _layer(module)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    upward = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            if name.startswith("fsm_stage") and _layer(name) > own:
                upward.append(f"{path.name}:{node.lineno} imports {name}")
    assert not upward, f"{module} (layer {own}) imports a higher layer: {upward}"
