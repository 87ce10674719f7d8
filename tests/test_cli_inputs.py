"""The CLI conventions of issue 16: ``-h``, ``-`` and non-seekable inputs (spooled), JSON
``format_version``, Ctrl-C exit 130 and shell completion of paths."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.shell_completion import ShellComplete
from click.testing import CliRunner

from fsm_stage.cli import COMMAND_MODULES, main
from fsm_stage.cli.inputs import display_name, needs_spooling, read_text_arg, spooled
from fsm_stage.errors import UserError
from fsm_stage.fileio import InputFileError
from fsm_stage.log.events import Replace, SessionHeader
from fsm_stage.log.jsonl import JsonlLog

REPO = Path(__file__).resolve().parents[1]
FEATURE_WORK = REPO / "stage_graphs" / "feature-work.yaml"
GRAPH = (
    "name: g\nsection: s\nstages:\n"
    "  - {name: a, instruction: x, targets: [b]}\n  - {name: b, instruction: y}\n"
)


def _log(path: Path, stage: str | None = "b", *, plan_active: bool | None = None) -> Path:
    """A small session log whose stage notice says ``stage`` and, optionally, a plan/mode record."""
    with JsonlLog(path, header=SessionHeader(id="s1", cwd="/w"), clock=lambda: 1) as log:
        log.append("turn/start", {"turn": 1})
        log.append(
            "user/message",
            {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}},
            surface_op="append",
        )
        if stage is not None:
            log.append(
                "user/message",
                {
                    "content": [{"type": "text", "text": f"Current stage: {stage}"}],
                    "source": {
                        "kind": "stage-switch",
                        "form": "notice",
                        "summary": f"Current stage: {stage}",
                    },
                },
                surface_op=Replace(1, 1),
                source_event_seqs=[1],
            )
        if plan_active is not None:
            log.append("plan/mode", {"active": plan_active})
        log.append("request/header", {"header": {"config": {}}, "reason": "initial"})
    return path


# --------------------------------------------------------------------------- -h


@pytest.mark.parametrize("command", [[], *([c] for c in COMMAND_MODULES)])
def test_dash_h_is_help_on_every_command(command: list[str]) -> None:
    short = CliRunner().invoke(main, [*command, "-h"])
    long = CliRunner().invoke(main, [*command, "--help"])
    assert short.exit_code == 0, short.output
    assert short.stdout == long.stdout and "Usage:" in short.stdout


# --------------------------------------------------------------------------- '-' and pipes


def test_validate_reads_standard_input() -> None:
    result = CliRunner().invoke(main, ["validate", "-"], input=GRAPH)
    assert result.exit_code == 0, result.output
    assert "<stdin>: ok (stage graph 'g' with 2 stages)" in result.stderr
    bad = CliRunner().invoke(main, ["validate", "--json", "-"], input="name: g\nsection: s\nstages: 3\n")
    assert bad.exit_code == 1
    report = json.loads(bad.stdout)
    assert report["format_version"] == 1 and report["ok"] is False
    assert {p["path"] for p in report["problems"]} == {"<stdin>"}


def test_draw_reads_the_graph_from_standard_input() -> None:
    result = CliRunner().invoke(main, ["draw", "-", "--format", "dot"], input=GRAPH)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith('digraph "g" {') and '"a" -> "b";' in result.stdout


def test_state_reads_the_log_from_standard_input(tmp_path: Path) -> None:
    data = _log(tmp_path / "s.jsonl").read_bytes()
    result = CliRunner().invoke(main, ["state", "--json", "-"], input=data)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["path"] == "<stdin>" and report["stage"]["current"] == "b"
    garbage = CliRunner().invoke(main, ["state", "-"], input=b"not json\n")
    assert garbage.exit_code == 1 and "Traceback" not in garbage.output
    assert str(tmp_path) not in garbage.stderr and "fsm-stage-input-" not in garbage.stderr
    both = CliRunner().invoke(main, ["state", "-", "--graph", "-"], input=data)
    assert both.exit_code == 2


def _fifo_with(tmp_path: Path, data: bytes) -> tuple[Path, threading.Thread]:
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "wb") as fh:
            fh.write(data)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    return fifo, writer


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_state_reads_a_fifo_instead_of_failing_to_seek(tmp_path: Path) -> None:
    """``state <(cat log)`` / a FIFO used to die with io.UnsupportedOperation (not seekable)."""
    fifo, writer = _fifo_with(tmp_path, _log(tmp_path / "s.jsonl").read_bytes())
    result = CliRunner().invoke(main, ["state", "--json", str(fifo)])
    writer.join(5)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["stage"]["current"] == "b"


@pytest.mark.skipif(not Path("/dev/stdin").exists(), reason="needs /dev/stdin")
def test_state_reads_dev_stdin_from_a_pipe(tmp_path: Path) -> None:
    data = _log(tmp_path / "s.jsonl").read_bytes()
    proc = subprocess.run(
        [sys.executable, "-m", "fsm_stage", "state", "--json", "/dev/stdin"],
        input=data,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"not seekable" not in proc.stderr
    assert json.loads(proc.stdout)["stage"]["current"] == "b"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_spooled_copies_a_fifo_and_removes_the_copy(tmp_path: Path) -> None:
    fifo, writer = _fifo_with(tmp_path, b"x" * (3 << 20))
    assert needs_spooling(fifo) and not needs_spooling(FEATURE_WORK) and not needs_spooling(tmp_path / "nope")
    with spooled(str(fifo)) as path:
        assert path != fifo and path.stat().st_size == 3 << 20
        with open(path, "rb") as fh:
            fh.seek(-1, os.SEEK_END)  # seekable
    writer.join(5)
    assert not path.exists()
    with spooled(FEATURE_WORK) as same:
        assert same == FEATURE_WORK


def test_spooled_names_the_input_in_errors_not_the_temporary_file(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"abc")))
    with pytest.raises(UserError, match=r"^<stdin>: bad$"), spooled("-") as path:
        raise UserError(f"{path}: bad")
    assert not path.exists()
    assert display_name("-") == "<stdin>" and display_name("a/b") == "a/b"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"caf\xe9")))
    with pytest.raises(InputFileError, match=r"^<stdin>: cannot read stage graph: not UTF-8"):
        read_text_arg("-", what="stage graph")


# --------------------------------------------------------------------------- JSON


def test_every_json_output_carries_format_version(tmp_path: Path) -> None:
    log = _log(tmp_path / "s.jsonl")
    state = json.loads(CliRunner().invoke(main, ["state", "--json", str(log)]).stdout)
    validate = json.loads(CliRunner().invoke(main, ["validate", "--json", str(FEATURE_WORK)]).stdout)
    assert state["format_version"] == 1 and validate["format_version"] == 1


def _paths(obj: object, prefix: str = "") -> set[str]:
    """Every key of ``obj`` as a dotted path (``stage.current``, ``problems[].path``)."""
    if isinstance(obj, dict):
        out = set()
        for k, v in obj.items():
            out |= {prefix + k} | _paths(v, prefix + k + ".")
        return out
    if isinstance(obj, list):
        return {p for v in obj for p in _paths(v, prefix.rstrip(".") + "[].")}
    return set()


def test_state_json_keys_are_snake_case_and_documented(tmp_path: Path) -> None:
    """Every key of `state --json` (checkpointed too) and `validate --json` is snake_case and
    listed, as its dotted path, in the key tables of docs/cli.md."""
    log = _log(tmp_path / "s.jsonl")
    plain = json.loads(CliRunner().invoke(main, ["state", "--json", str(log)]).stdout)
    cp = CliRunner().invoke(main, ["state", "--json", "--checkpoint-dir", str(tmp_path / "ck"), str(log)])
    validate = json.loads(CliRunner().invoke(main, ["validate", "--json", "-"], input="x: [").stdout)
    paths = _paths(plain) | _paths(json.loads(cp.stdout)) | _paths(validate)
    assert {"plan_mode", "folded_events", "last_header", "torn_tail_offset", "unknown_types"} <= paths
    assert {"problems[].severity", "header.delegation_depth", "checkpoint.resumed_from"} <= paths
    assert all(p == p.lower() for p in paths), sorted(p for p in paths if p != p.lower())
    doc = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    for path in paths:
        assert f"| `{path}` |" in doc, path


# --------------------------------------------------------------------------- Ctrl-C


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_exits_130_without_a_traceback() -> None:
    """SIGINT while `state -` waits on standard input: exit 130, no traceback (was 1, `Aborted!`)."""
    code = (
        "import sys\nfrom fsm_stage.cli import main\n"
        "sys.stderr.write('ready\\n'); sys.stderr.flush()\nmain(['state', '-'], prog_name='fsm-stage')\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.stderr is not None and proc.stderr.readline() == b"ready\n"
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(1.0)  # let it reach the read of standard input
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err.decode()
    assert b"Traceback" not in err and b"KeyboardInterrupt" not in err and b"Aborted" not in err


# --------------------------------------------------------------------------- completion


def _complete(args: list[str], incomplete: str) -> list[tuple[str, str]]:
    comp = ShellComplete(main, {}, "fsm-stage", "_FSM_STAGE_COMPLETE")
    return [(c.type, c.value) for c in comp.get_completions(args, incomplete)]


@pytest.mark.parametrize(
    "args",
    [["validate"], ["validate", "a.yaml"], ["state"], ["state", "x.jsonl", "--graph"], ["draw"],
     ["draw", "g.yaml", "--log"], ["draw", "g.yaml", "-o"]],
    ids=["validate", "validate-2nd", "state", "state-graph", "draw", "draw-log", "draw-o"],
)
def test_paths_complete_as_files(args: list[str]) -> None:
    """click's `file` completion item: the shell (bash `compgen -f`, zsh, fish) lists files."""
    assert _complete(args, "sta") == [("file", "sta")]


def test_bash_completion_script_is_offered() -> None:
    result = CliRunner().invoke(main, [], env={"_FSM_STAGE_COMPLETE": "bash_source"}, prog_name="fsm-stage")
    assert "complete -o nosort -F _fsm_stage_completion fsm-stage" in result.stdout


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_in_a_session_folder_is_refused_never_waited_for(tmp_path: Path) -> None:
    """Readers that open a log by path (folder listings, the inbox, ``read_log``) refuse a FIFO
    named ``*.jsonl`` at once: nobody writes to it, so reading would block for ever. (The
    command line's own input arguments still read pipes and FIFOs: they are spooled.)"""
    import subprocess
    import sys

    os.mkfifo(tmp_path / "stuck.jsonl")
    code = ("import sys\nfrom fsm_stage.errors import LogFormatError\n"
            "from fsm_stage.log.dsh import read_log\n"
            "try:\n    read_log(sys.argv[1])\nexcept LogFormatError as err:\n    print(err)\n")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "stuck.jsonl")], capture_output=True,
                          text=True, timeout=60)
    assert "not a regular file" in done.stdout, done.stderr
    for argv in (["sessions", str(tmp_path)], ["inbox", "list", str(tmp_path)]):
        listed = subprocess.run([sys.executable, "-m", "fsm_stage", *argv], capture_output=True,
                                text=True, timeout=60)
        assert listed.returncode == 0 and "Traceback" not in listed.stderr, (argv, listed.stderr)
