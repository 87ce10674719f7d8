"""The public front door: ``from fsm_stage import …`` resolves every exported name, lazily.

``import fsm_stage`` must stay as cheap as a bare package import (no transitions, jinja2,
ruamel.yaml or click), each exported name must resolve to the object its defining module
holds, and the static view (the ``TYPE_CHECKING`` imports mypy and editors read) must list
exactly the names of the runtime table.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import fsm_stage
import fsm_stage.errors

INIT = Path(fsm_stage.__file__)
HEAVY = ("transitions", "jinja2", "ruamel.yaml", "click", "attrs", "cattrs", "filelock")


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_import_fsm_stage_loads_no_dependency() -> None:
    code = (
        "import sys, fsm_stage\n"
        f"print('heavy=' + ','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
        "print('loaded=' + ','.join(sorted(m for m in sys.modules if m.startswith('fsm_stage.'))))"
    )
    lines = dict(line.split("=", 1) for line in _run(code).splitlines())
    heavy, loaded = lines["heavy"], lines["loaded"]
    assert heavy == ""
    assert loaded == "fsm_stage._lazy"  # the PEP 562 helper alone (it imports only importlib)


def test_touching_one_name_loads_only_its_layer() -> None:
    code = (
        "import sys, fsm_stage\n"
        "fsm_stage.load_config\n"
        "print(','.join(m for m in ('fsm_stage.simulate', 'fsm_stage.driver._loop', 'click') "
        "if m in sys.modules))"
    )
    assert _run(code) == ""


@pytest.mark.parametrize("name", sorted(set(fsm_stage.__all__) - {"__version__"}))
def test_every_exported_name_resolves_to_its_module_object(name: str) -> None:
    value = getattr(fsm_stage, name)
    module = importlib.import_module(f"fsm_stage.{fsm_stage._EXPORTS[name]}")
    assert (module if fsm_stage._EXPORTS[name] == name else getattr(module, name)) is value


def test_the_top_level_is_small() -> None:
    """The top level holds the names a host needs first; the rest live in their packages."""
    assert len(fsm_stage.__all__) <= 35


def test_static_view_matches_the_lazy_table() -> None:
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    static: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module is not None
                for alias in imp.names:  # `from fsm_stage import errors`: the submodule itself
                    static[alias.name] = alias.name if imp.module == "fsm_stage" else imp.module[10:]
    assert static == fsm_stage._EXPORTS
    assert sorted(fsm_stage.__all__) == sorted([*fsm_stage._EXPORTS, "__version__"])


def test_the_errors_module_and_its_roots_are_at_the_top_and_user_errors_share_one_base() -> None:
    assert fsm_stage.errors is fsm_stage.__getattr__("errors")
    assert {"FsmStageError", "UserError", "errors"} <= set(fsm_stage.__all__)
    assert issubclass(fsm_stage.errors.ConfigError, fsm_stage.UserError)
    assert issubclass(fsm_stage.errors.LogFormatError, fsm_stage.UserError)


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        fsm_stage.Nope  # noqa: B018


def test_version_matches_the_package_metadata() -> None:
    text = (INIT.parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    assert f'version = "{fsm_stage.__version__}"' in text


@pytest.mark.parametrize("package", ["fsm_stage.runtime", "fsm_stage.log", "fsm_stage.driver",
                                     "fsm_stage.reviews", "fsm_stage.policy", "fsm_stage.plan_mode"])
def test_subpackages_re_export_their_names_lazily(package: str) -> None:
    pkg = importlib.import_module(package)
    for name in pkg.__all__:
        value = getattr(pkg, name)
        module = importlib.import_module(f"{package}.{pkg._EXPORTS[name]}")
        assert getattr(module, name) is value, name
    assert sorted(pkg.__all__) == sorted(pkg._EXPORTS)
    code = f"import sys, {package}\nprint(sorted(m for m in sys.modules if m.startswith('{package}.')))"
    loaded = _run(code)
    assert loaded == "[]"


def test_no_exception_class_lives_outside_errors() -> None:
    stray = []
    for path in sorted(INIT.parent.rglob("*.py")):
        if path.name == "errors.py":
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                bases = {ast.unparse(b) for b in node.bases}
                if any(b.endswith(("Error", "Exception", "Dismissed")) for b in bases):
                    stray.append(f"{path.relative_to(INIT.parent)}:{node.name}")
    assert stray == [], stray


def test_errors_docstring_names_every_exception() -> None:
    doc = fsm_stage.errors.__doc__ or ""
    classes = [n for n, c in vars(fsm_stage.errors).items()
               if isinstance(c, type) and issubclass(c, BaseException) and c.__module__ == "fsm_stage.errors"]
    assert [n for n in classes if n not in doc] == []
