"""Data flows one way: config → graph, log → runtime → controllers → driver → adapters / MCP / inbox / CLI.

Each module may import only from its own layer or the layers below it. The check reads the
package's import statements (``ast``), so a new upward import fails here with its file and line;
no module may exceed ``MAX_MODULE_LINES``. The layer map, what each room holds and may import:
docs/architecture.md.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "fsm_stage"

#: layer number of each module (lower = closer to the data); a module may import layers <= its own.
#: Above the log: the runtime kernel; the driver's pending flush and open-step fold (which the
#: reviews and the controllers share); reviews; the tool gate; the controllers; the step driver
#: and reference loop that drive them; then the tools and hosts over them.
LAYERS: dict[str, int] = {
    "fsm_stage.constants": 0,
    "fsm_stage.errors": 0,
    "fsm_stage._lazy": 0,
    "fsm_stage.resources": 0,
    "fsm_stage.fileio": 0,
    "fsm_stage.locks": 0,
    "fsm_stage._listen": 0,
    "fsm_stage._http": 0,
    "fsm_stage.text": 0,
    "fsm_stage.prompts": 1,
    "fsm_stage._yaml": 1,
    "fsm_stage.config": 2,
    "fsm_stage.config.schema": 3,
    "fsm_stage.schema": 3,
    "fsm_stage.graph": 3,
    "fsm_stage.diagram": 3,
    "fsm_stage.log": 4,
    "fsm_stage.observe": 4,
    "fsm_stage.handoff": 4,
    "fsm_stage.tokens": 5,
    "fsm_stage.runtime": 6,
    # pure ToolSpec -> dict exports (ToolSpec.to_openai() and the others call them)
    "fsm_stage.integrations._toolspecs": 6,
    "fsm_stage.driver._pending": 7,
    "fsm_stage.driver._openstep": 7,
    "fsm_stage.reviews": 8,
    "fsm_stage.policy": 9,
    "fsm_stage.plan_mode": 10,
    "fsm_stage.stage_switch": 10,
    "fsm_stage.driver": 11,
    "fsm_stage.scenario": 12,
    "fsm_stage.simulate": 13,
    "fsm_stage.integrations": 13,
    "fsm_stage.mcp": 13,
    "fsm_stage.inbox": 13,
    "fsm_stage.fleet": 13,
    "fsm_stage.cli": 14,
    "fsm_stage.__main__": 15,
    "fsm_stage": 15,
}

#: Upward imports allowed as exceptions: (module, imported). None remain: the controllers hand
#: the kernel what it needs through their registration (``Registration.tool_gate``, the review
#: channel protocol and the session lock live in the kernel). The list may only shrink:
#: an entry that no longer occurs fails ``test_known_upward_imports_still_occur``.
KNOWN_UPWARD: frozenset[tuple[str, str]] = frozenset()

#: the size limit of a module, in lines (one concept per module)
MAX_MODULE_LINES = 600


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


def _upward(module: str, tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, imported module)`` of each import in ``tree`` of a higher layer than ``module``'s
    (function-level imports count too)."""
    own = _layer(module)
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        found += [(node.lineno, n) for n in names if n.startswith("fsm_stage") and _layer(n) > own]
    return found


def _upward_imports() -> set[tuple[str, str]]:
    return {(module, name) for module, path in _modules()
            for _line, name in _upward(module, ast.parse(path.read_text(encoding="utf-8")))}


@pytest.mark.parametrize(("module", "path"), _modules(), ids=[m for m, _ in _modules()])
def test_imports_only_flow_downward(module: str, path: Path) -> None:
    upward = [f"{path.name}:{line} imports {name}"
              for line, name in _upward(module, ast.parse(path.read_text(encoding="utf-8")))
              if (module, name) not in KNOWN_UPWARD]
    assert not upward, f"{module} (layer {_layer(module)}) imports a higher layer: {upward}"


def test_the_layer_check_sees_upward_imports() -> None:
    tree = ast.parse("from fsm_stage.driver import StagedSession\ndef f():\n    import fsm_stage.reviews\n"
                     "from fsm_stage.log import open_log\n")
    assert _upward("fsm_stage.runtime.tools", tree) == [(1, "fsm_stage.driver"), (3, "fsm_stage.reviews")]
    assert _upward("fsm_stage.reviews._flow", tree) == [(1, "fsm_stage.driver")]
    assert _upward("fsm_stage.integrations._host", tree) == []


def test_known_upward_imports_still_occur() -> None:
    stale = KNOWN_UPWARD - _upward_imports()
    assert not stale, f"remove these from KNOWN_UPWARD, they no longer occur: {sorted(stale)}"


@pytest.mark.parametrize(("module", "path"), _modules(), ids=[m for m, _ in _modules()])
def test_no_module_exceeds_the_size_limit(module: str, path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{module}: {lines} lines, limit {MAX_MODULE_LINES}"


def test_open_session_is_the_only_place_the_library_composes_a_session() -> None:
    """Controllers, agents and step drivers are built in ``driver/_host.py`` (``open_session``)
    only (the reference ``Loop`` builds the driver of the agent it is given); see
    docs/architecture.md."""
    composing = {"StageController", "PlanModeController", "InboxAgent", "StagedSession"}
    allowed = {PKG / "driver" / "_host.py", PKG / "driver" / "_loop.py"}
    found = []
    for _module, path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            name = node.func.id
            loop_driver = path.name == "_loop.py" and name == "StagedSession"
            if name in composing and (path not in allowed or (path.name == "_loop.py" and not loop_driver)):
                found.append(f"{path.relative_to(PKG)}:{node.lineno} {name}(...)")
    assert found == []
