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


#: what the host import (``load_config, open_log, open_session``) must not load: each is loaded
#: when a config is loaded, a file log is opened or a session is composed, not at import
HOST_IMPORT_FREE = ("transitions", "jinja2", "ruamel.yaml", "yaml", "cattrs", "filelock", "click", "psycopg",
                    "asyncio", "fsm_stage.prompts", "fsm_stage.policy", "fsm_stage.stage_switch",
                    "fsm_stage.driver._step", "fsm_stage.log.jsonl", "fsm_stage.config.rules")


def test_the_host_import_defers_the_heavy_parts() -> None:
    code = (
        "import sys\n"
        "from fsm_stage import load_config, open_log, open_session\n"
        f"print(','.join(m for m in {HOST_IMPORT_FREE!r} if m in sys.modules))"
    )
    assert _run(code) == ""


def test_the_deferred_parts_load_on_use(tmp_path: Path) -> None:
    graph = tmp_path / "graph.yaml"
    graph.write_text("section: 'Stage << stage_current >>; next: << stage_targets >>'\n"
                     "stages:\n  - {name: a, instruction: do a, targets: [b]}\n"
                     "  - {name: b, instruction: do b, targets: [a]}\n", encoding="utf-8")
    code = (
        "import sys\n"
        "from fsm_stage import SessionHeader, load_config, open_log, open_session\n"
        f"host = open_session(load_config({str(graph)!r}), open_log('memory:', create=SessionHeader('s')))\n"
        f"log = open_log({str(tmp_path / 'log.jsonl')!r}, create=SessionHeader('f'))\n"
        "log.close()\n"
        "print(host.current_stage(), ','.join(m for m in ('jinja2', 'cattrs', 'filelock', 'transitions') "
        "if m not in sys.modules))"
    )
    assert _run(code) == "a"


def test_the_lazy_config_names_are_the_loaders() -> None:
    import fsm_stage.config as config
    import fsm_stage.config.load as load
    import fsm_stage.config.model as model
    import fsm_stage.config.vocabulary as vocabulary

    assert config.load_config is load.load_config and config.GraphConfig is model.GraphConfig
    assert load._EXTENSION_PREFIX == model.EXTENSION_PREFIX  # kept in step with the model's
    assert vocabulary.CONVERTER is vocabulary.graph_converter()
    with pytest.raises(AttributeError):
        _ = config.no_such_name  # type: ignore[attr-defined]


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


def test_errors_are_few_with_one_root_per_area_and_private_signals() -> None:
    """At most 31 public classes, all in ``__all__``; every review condition is a ``ReviewError``;
    the internal signals are private and exported nowhere."""
    errors = fsm_stage.errors
    classes = {n: c for n, c in vars(errors).items()
               if isinstance(c, type) and issubclass(c, BaseException) and c.__module__ == errors.__name__}
    public = sorted(n for n in classes if not n.startswith("_"))
    assert len(public) <= 31, public
    assert public == sorted(n for n in errors.__all__ if isinstance(getattr(errors, n), type))
    for name in public:
        assert issubclass(classes[name], errors.FsmStageError), name
        if name.startswith("Review"):
            assert issubclass(classes[name], errors.ReviewError), name
    private = [n for n in classes if n.startswith("_")]
    assert private and not set(private) & set(errors.__all__)
    for path in (Path(fsm_stage.__file__).parent).rglob("__init__.py"):
        assert not any(f'"{n}"' in path.read_text(encoding="utf-8") for n in private), path


def test_a_review_answer_the_user_got_wrong_is_a_user_error_and_ctrl_c_is_a_dismissal() -> None:
    """Answer mistakes (unknown, answered, refused by the team rules, payload changed) print as
    one-line ``UserError``s; Ctrl-C at the terminal review is a ``ReviewDismissed`` flagged
    ``interrupted`` (a plain dismissal is not)."""
    errors = fsm_stage.errors
    for cls in (errors.ReviewNotFoundError, errors.ReviewAlreadyAnsweredError, errors.ReviewRefusedError,
                errors.ReviewPayloadChangedError):
        assert issubclass(cls, errors.ReviewError) and issubclass(cls, errors.UserError), cls
    assert errors.ReviewDismissed("ctrl-c", interrupted=True).interrupted
    plain = errors.ReviewDismissed()
    assert not plain.interrupted and str(plain) == ""
