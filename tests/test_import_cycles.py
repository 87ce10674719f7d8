"""No import cycle inside ``fsm_stage``: module-level imports form a DAG.

Reads every module with ``ast``: imports at module level count (also inside ``try``/``if``),
imports inside functions and ``if TYPE_CHECKING:`` blocks do not. ``from pkg import name``
counts as an import of ``pkg.name`` when that is a module, else of ``pkg``; importing a
module also imports its parent packages.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "fsm_stage"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.append(node)
            elif isinstance(node, ast.If):
                if not _is_type_checking(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                    visit(block)
            elif isinstance(node, ast.With):
                visit(node.body)

    visit(tree.body)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        is_pkg = path.name == "__init__.py"
        for node in _module_level_imports(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = module.split(".")[: len(module.split(".")) - node.level + (1 if is_pkg else 0)]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                parts = target.split(".")
                for end in range(1, len(parts) + 1):  # importing a.b.c runs a and a.b too
                    name = ".".join(parts[:end])
                    if name in modules and name != module:
                        graph[module].add(name)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := dfs(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := dfs(node)):
            return found
    return None


def _without_parent_edges(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """A package's ``__init__`` importing its own submodules is how re-exports work; the
    submodule "importing" its parent package (implicitly) is not a real cycle."""
    return {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in graph.items()}


def test_module_level_imports_form_no_cycle() -> None:
    cycle = _cycle(_without_parent_edges(_graph()))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_checker_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_type_checking_and_function_imports_are_ignored() -> None:
    tree = ast.parse(
        "import x\nif TYPE_CHECKING:\n    import y\ndef f():\n    import z\n"
        "try:\n    import w\nexcept ImportError:\n    pass\n"
    )
    names = [a.name for node in _module_level_imports(tree) for a in node.names]
    assert names == ["x", "w"]


FRONT_DOORS = ["fsm_stage", "fsm_stage.runtime", "fsm_stage.driver", "fsm_stage.reviews", "fsm_stage.policy",
               "fsm_stage.plan_mode", "fsm_stage.log"]


def test_front_doors_import_only_the_lazy_helper() -> None:
    """The package faces load their names on first use (PEP 562), so importing one runs none of
    its rooms' modules and cannot close a cycle between rooms."""
    graph, modules = _graph(), _modules()
    for face in FRONT_DOORS:
        assert modules[face].name == "__init__.py", face
        assert graph[face] <= {"fsm_stage", "fsm_stage._lazy"}, f"{face} imports {sorted(graph[face])}"
