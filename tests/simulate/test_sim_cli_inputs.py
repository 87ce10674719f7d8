"""``simulate`` / ``scenario`` on standard input and pipes, ``--json``'s layout, the ``--log``
without ``--cwd`` warning (issue 16). Real processes: standard input is a pipe, not a file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sim_helpers import REPO, SCENARIOS, graph_ref

FEATURE_WORK = SCENARIOS / "feature-work.yaml"
_ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def _run(*args: str, stdin: bytes | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "fsm_stage", *args], input=stdin, capture_output=True,
                          env=_ENV, cwd=cwd, timeout=120, check=False)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())


def _scenario_text() -> str:
    return f"graph: {graph_ref('seed-plan-mode.yaml')}\nsteps:\n  - user: hi\n  - model: hello\n"


def test_simulate_reads_a_scenario_from_standard_input(tmp_path: Path) -> None:
    done = _run("simulate", "-", "--json", "--cwd", str(tmp_path / "w"), stdin=_scenario_text().encode())
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    record = json.loads(line)
    assert list(record)[:3] == ["format_version", "scenario", "request"]
    assert record["format_version"] == 1 and record["scenario"] == "<stdin>"


def test_simulate_from_stdin_anchors_a_relative_graph_at_the_current_folder(tmp_path: Path) -> None:
    (tmp_path / "g.yaml").write_text((REPO / "stage_graphs" / "seed-plan-mode.yaml").read_text("utf-8"),
                                     encoding="utf-8")
    text = "graph: g.yaml\nsteps:\n  - user: hi\n  - model: hello\n"
    done = _run("simulate", "-", "--cwd", "w", stdin=text.encode(), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "scenario <stdin> · graph g.yaml" in done.stdout


def test_simulate_errors_name_stdin(tmp_path: Path) -> None:
    done = _run("simulate", "-", stdin=b"graph: nowhere.yaml\nsteps: []\n", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("<stdin>:1:8: graph: graph file"), done.stderr
    assert "Traceback" not in done.stderr


def test_simulate_refuses_stdin_twice() -> None:
    done = _run("simulate", "-", "-", stdin=_scenario_text().encode())
    assert done.returncode == 2 and "standard input (-) can be read only once" in done.stderr


def test_simulate_reads_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "scenario.fifo"
    os.mkfifo(fifo)
    argv = [sys.executable, "-m", "fsm_stage", "simulate", str(fifo), "--cwd", str(tmp_path / "w")]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_ENV)
    fifo.write_text(_scenario_text(), encoding="utf-8")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    assert "━━ request 1 " in out.decode()


def test_json_keys_are_snake_case_and_documented(tmp_path: Path) -> None:
    """Every key of a `simulate --json` record (nested too) is snake_case and in docs/cli.md."""
    done = _run("simulate", str(FEATURE_WORK), "--json", "--cwd", str(tmp_path))
    assert done.returncode == 0, done.stderr
    docs = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    section = docs[docs.index("### `simulate --json`"):]
    keys: set[str] = set()

    def walk(value: object, prefix: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                keys.add(prefix + k)
                walk(v, prefix + k + ".")
        elif isinstance(value, list):
            for v in value:
                walk(v, prefix.rstrip(".") + "[].")

    for line in done.stdout.splitlines():
        walk(json.loads(line), "")
    assert keys
    for key in keys:
        assert key.split(".")[-1].split("[")[0].islower() or "_" in key, key
        assert f"`{key}`" in section, f"{key} is not documented in docs/cli.md"


def test_log_without_cwd_warns_that_the_header_cwd_is_temporary(tmp_path: Path) -> None:
    log = tmp_path / "out.jsonl"
    scenario = tmp_path / "s.yaml"
    scenario.write_text(_scenario_text(), encoding="utf-8")
    done = _run("simulate", str(scenario), "--log", str(log))
    assert done.returncode == 0, done.stderr
    assert f"warning: --log without --cwd: the header of {log} names a temporary folder" in done.stderr
    cwd = json.loads(log.read_text(encoding="utf-8").splitlines()[0])["cwd"]
    assert not Path(cwd).exists()
    again = _run("simulate", str(scenario), "--log", str(log), "--force", "--cwd", str(tmp_path / "w"))
    assert again.returncode == 0 and "warning" not in again.stderr


def test_scenario_reads_a_log_from_a_pipe(tmp_path: Path) -> None:
    log = tmp_path / "out.jsonl"
    scenario = tmp_path / "s.yaml"
    scenario.write_text(_scenario_text(), encoding="utf-8")
    assert _run("simulate", str(scenario), "--log", str(log), "--cwd", str(tmp_path / "w")).returncode == 0
    from_file = _run("scenario", str(log))
    piped = _run("scenario", "-", stdin=log.read_bytes())
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == from_file.stdout.replace(f"Replay of {log.name}", "Replay of <stdin>")
    assert "Replay of <stdin>" in piped.stdout
    empty = _run("scenario", "-", stdin=b"")
    assert empty.returncode == 1 and "<stdin>: the file is empty" in empty.stderr, empty.stderr
    assert "Traceback" not in empty.stderr
