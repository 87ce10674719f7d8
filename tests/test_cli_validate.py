"""``fsm-stage validate`` and ``fsm-stage schema`` (issue: stage graphs, item 7 and 9).

Exit 0 valid, 1 invalid, 2 usage error; every problem one positioned line; ``--json``; never
a traceback for bad input. Runs through click's ``CliRunner`` and, for a few files, through a
real subprocess of the installed console script.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_config_bad_graphs import BAD_GRAPHS, BadGraph

from fsm_stage.cli import main
from fsm_stage.resources import data_dir

EXAMPLES = sorted(data_dir("stage_graphs").glob("*.yaml"))


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def _options(bad: BadGraph) -> list[str]:
    return ["--strict"] if bad.strict else []


@pytest.mark.parametrize("bad", BAD_GRAPHS, ids=lambda g: g.id)
def test_validate_bad_graph_exits_1_with_one_positioned_line_per_problem(bad: BadGraph) -> None:
    """Exit 1; stdout holds exactly the announced problems, each naming its key; no traceback."""
    code, out, err = _run("validate", *_options(bad), str(bad.path))
    assert code == 1
    lines = out.splitlines()
    assert len(lines) == len(bad.expected), out
    for line, want in zip(lines, bad.expected, strict=True):
        assert line.startswith(f"{bad.path}:{want.line}:{want.column}: {want.key}: "), line
        assert want.fragment in line
    assert "Traceback" not in out + err


@pytest.mark.parametrize("bad", BAD_GRAPHS, ids=lambda g: g.id)
def test_validate_json_lists_the_same_problems_as_records(bad: BadGraph) -> None:
    """``--json`` prints {format_version, ok, problems: [{path, line, column, key, message, severity}]}."""
    code, out, _ = _run("validate", "--json", *_options(bad), str(bad.path))
    assert code == 1
    report = json.loads(out)
    assert report["format_version"] == 1 and report["ok"] is False
    records = report["problems"]
    assert [(r["line"], r["column"], r["key"]) for r in records] == [
        (w.line, w.column, w.key) for w in bad.expected
    ]
    for record, want in zip(records, bad.expected, strict=True):
        assert record["path"] == str(bad.path)
        assert want.fragment in record["message"]
        assert record["severity"] == "error"


def _console_script() -> list[str]:
    script = Path(sys.executable).with_name("fsm-stage")
    if script.exists():
        return [str(script)]
    found = shutil.which("fsm-stage")
    return [found] if found else [sys.executable, "-m", "fsm_stage"]


SUBPROCESS_SAMPLES = [
    g
    for g in BAD_GRAPHS
    if g.id.split("-", 1)[1]
    in {
        "syntax-tab",
        "syntax-duplicate-key",
        "plugin-unknown-config-key",
        "target-self",
        "empty-file",
    }
]


@pytest.mark.parametrize("bad", SUBPROCESS_SAMPLES, ids=lambda g: g.id)
def test_validate_in_a_real_process_exits_1_without_traceback(bad: BadGraph) -> None:
    """The installed ``fsm-stage`` prints the positioned line(s) and exits 1, no traceback."""
    proc = subprocess.run(
        [*_console_script(), "validate", str(bad.path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    want = bad.expected[0]
    assert proc.stdout.splitlines()[0].startswith(f"{bad.path}:{want.line}:{want.column}: {want.key}: ")


def test_validate_shipped_examples_exit_0() -> None:
    """Every example in stage_graphs/ is valid, even under --strict (issue: Done when)."""
    assert {p.name for p in EXAMPLES} >= {
        "feature-work.yaml",
        "seed-stage-switch.yaml",
        "seed-plan-mode.yaml",
        "release-train.yaml",
    }
    code, out, err = _run("validate", "--strict", *map(str, EXAMPLES))
    assert code == 0, out
    assert out == ""
    assert err.count(": ok (") == len(EXAMPLES)


def test_validate_reports_every_file_and_fails_if_any_is_bad(tmp_path: Path) -> None:
    good = data_dir("stage_graphs") / "feature-work.yaml"
    bad = BAD_GRAPHS[0].path
    code, out, err = _run("validate", str(good), str(bad))
    assert code == 1
    assert len(out.splitlines()) == 1 and out.startswith(str(bad))
    assert f"{good}: ok" in err


def test_validate_missing_file_is_one_line_error_exit_1(tmp_path: Path) -> None:
    """An unreadable input is `fsm-stage: PATH: cannot read …` on stderr, exit 1."""
    missing = tmp_path / "nope.yaml"
    code, out, err = _run("validate", str(missing))
    assert code == 1
    assert out == ""
    assert err == f"fsm-stage: {missing}: cannot read stage graph: no such file\n"


def test_validate_directory_is_one_line_error(tmp_path: Path) -> None:
    code, out, err = _run("validate", str(tmp_path))
    assert code == 1
    assert out == ""
    assert err == f"fsm-stage: {tmp_path}: cannot read stage graph: it is a directory\n"


def test_validate_non_utf8_file_is_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"section: caf\xe9\n")
    code, out, err = _run("validate", str(path))
    assert code == 1 and out == ""
    assert err.startswith(f"fsm-stage: {path}: cannot read stage graph: not UTF-8 text")
    assert len(err.splitlines()) == 1


def test_validate_binary_file_is_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "graph.yaml"
    path.write_bytes(b"stages:\x00\x01")
    code, _, err = _run("validate", str(path))
    assert code == 1
    assert err.startswith(f"fsm-stage: {path}: cannot read stage graph: it is a binary file")


def test_validate_unreadable_file_does_not_stop_the_others(tmp_path: Path) -> None:
    good = data_dir("stage_graphs") / "feature-work.yaml"
    missing = tmp_path / "nope.yaml"
    code, out, err = _run("validate", str(missing), str(good))
    assert code == 1 and out == ""
    assert f"{good}: ok" in err and f"fsm-stage: {missing}: cannot read" in err
    code, out, _ = _run("validate", "--json", str(missing), str(good))
    assert code == 1
    (record,) = json.loads(out)["problems"]
    assert record == {
        "path": str(missing),
        "line": 1,
        "column": 1,
        "key": "(file)",
        "message": "cannot read stage graph: no such file",
        "severity": "error",
    }


def test_validate_without_paths_is_a_usage_error_exit_2() -> None:
    code, _, err = _run("validate")
    assert code == 2
    assert "Missing argument" in err


def test_validate_unknown_option_is_a_usage_error_exit_2() -> None:
    code, _, _ = _run("validate", "--bogus", "x.yaml")
    assert code == 2


def test_validate_prints_warnings_but_exits_0_without_strict(tmp_path: Path) -> None:
    """An unreachable stage is a warning line (exit 0); --strict makes it an error (exit 1)."""
    path = tmp_path / "island.yaml"
    path.write_text(
        "stages:\n"
        "  - {name: alpha, instruction: a, targets: []}\n"
        "  - {name: beta, instruction: b}\n"
        "section: s\n"
    )
    code, out, err = _run("validate", str(path))
    assert code == 0
    # a warning says so, and the summary counts it
    assert out.startswith(f"{path}:3:12: warning: stages[1].name: ")
    assert "unreachable" in out and len(out.splitlines()) == 1
    assert err == f"{path}: ok (stage graph 'island' with 2 stages; 1 warning)\n"
    code, out_json, _ = _run("validate", "--json", str(path))
    assert code == 0
    assert [r["severity"] for r in json.loads(out_json)["problems"]] == ["warning"]
    code, out_strict, _ = _run("validate", "--strict", str(path))
    assert code == 1
    assert out_strict == out.replace(": warning: ", ": ", 1)


def test_validate_summary_counts_several_warnings(tmp_path: Path) -> None:
    """Two warnings (an unreachable stage, a terminal stage under a section that
    lists << stage_targets >>) print as warning lines; the summary says `2 warnings`."""
    path = tmp_path / "g.yaml"
    path.write_text(
        "stages:\n"
        "  - {name: alpha, instruction: a, targets: []}\n"
        "  - {name: beta, instruction: b}\n"
        "section: 'go to one of << stage_targets >>'\n"
    )
    code, out, err = _run("validate", str(path))
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 2 and all(": warning: " in line for line in lines)
    assert lines[0].startswith(f"{path}:2:44: warning: stages[0].targets: ")
    assert err.endswith("; 2 warnings)\n")


def test_validate_json_of_valid_files_lists_no_problems() -> None:
    code, out, _ = _run("validate", "--json", *map(str, EXAMPLES))
    assert code == 0
    assert json.loads(out) == {"format_version": 1, "ok": True, "problems": []}


def test_schema_command_prints_the_json_schema() -> None:
    code, out, _ = _run("schema")
    assert code == 0
    document = json.loads(out)
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert set(document["$defs"]) >= {"NativeFile", "PluginList", "StageConfig", "EdgeConfig"}


def test_schema_takes_no_arguments_usage_error_exit_2() -> None:
    code, _, err = _run("schema", "extra")
    assert code == 2
    assert "Got unexpected extra argument" in err
