"""Issue 15 items 6 (a full disk under ``simulate --log``), 8 (unknown envelope keys warn)
and 9 (control characters never reach the terminal raw) at the command line."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

import fsm_stage.log.jsonl as jsonl_module
from fsm_stage.cli import main
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog

REPO = Path(__file__).resolve().parent.parent
SCENARIO = REPO / "stage_graphs" / "scenarios" / "feature-work.yaml"


def _run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, list(args))
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, res.output


def test_a_full_disk_under_simulate_log_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_space(fd: int, blob: bytes, offset: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(jsonl_module, "_write_all_at", no_space)
    code, err = _run("simulate", "--log", str(tmp_path / "out.jsonl"), str(SCENARIO))
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fsm-stage: ") and "No space left" in lines[0]
    assert "Traceback" not in err


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_really_full_tmpfs_under_simulate_log_is_one_line(tmp_path: Path) -> None:
    mnt = tmp_path / "full"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        (mnt / "fill").write_bytes(b"\0" * 40_000)
        code, err = _run("simulate", "--log", str(mnt / "out.jsonl"), str(SCENARIO))
        assert code == 1 and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1 and "No space left" in err
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_an_unknown_envelope_key_is_a_warning_and_strict_refuses(tmp_path: Path) -> None:
    log_path = tmp_path / "log.jsonl"
    with JsonlLog(log_path, header=SessionHeader(id="s1", delegation_depth=0)) as log:
        log.append("fsm/note", {"i": 0}, ignorable=True)
    lines = log_path.read_text().splitlines()
    lines.append('{"type":"fsm/note","seq":1,"time":0,"data":{},"ignorable":true,"3urfaceOp":"append"}')
    log_path.write_text("\n".join(lines) + "\n")
    code, out = _run("state", str(log_path))
    assert code == 0
    assert 'unknown event envelope key(s) ignored' in out and '"3urfaceOp" ×1 (first on line 3)' in out
    code, err = _run("state", "--strict", str(log_path))
    assert code == 1 and "invalid event envelope key(s) 3urfaceOp" in err


def test_control_characters_in_keys_are_escaped_in_problems(tmp_path: Path) -> None:
    graph = tmp_path / "g.yaml"
    graph.write_text(
        'section: s\nstages: [{name: a, instruction: x}]\n"bad\\e[31m\\akey": 1\n', encoding="utf-8"
    )
    code, err = _run("validate", str(graph))
    assert code == 1
    assert "\x1b" not in err and "\x07" not in err
    assert "bad\\x1b[31m\\x07key" in err


def test_control_characters_in_user_error_lines_are_escaped(tmp_path: Path) -> None:
    code, err = _run("state", str(tmp_path / "no\x07such\x1b[2J.jsonl"))
    assert code == 1 and err.startswith("fsm-stage: ")
    assert "\x1b" not in err and "\x07" not in err and "no\\x07such\\x1b[2J" in err


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf"])
@pytest.mark.parametrize("args", [
    ["inbox", "list", "{tmp}", "--follow", "--interval", "{value}"],
    ["draw", "stage_graphs/feature-work.yaml", "-o", "{tmp}/g.png", "--scale", "{value}"],
    ["worker", "--graph", "g.yaml", "--store", "{tmp}", "--model", "m:f", "--dead-after", "{value}"],
    ["worker", "--graph", "g.yaml", "--store", "{tmp}", "--model", "m:f", "--poll", "{value}"],
], ids=["inbox-interval", "draw-scale", "fleet-dead-after", "fleet-poll"])
def test_a_float_option_refuses_nan_and_infinities_as_a_usage_error(tmp_path: Path, args: list[str],
                                                                     value: str) -> None:
    """NaN passes every range comparison (``time.sleep(nan)`` then raised): every float option
    of the command line refuses it, and the infinities, in one usage line."""
    argv = [a.format(tmp=tmp_path, value=value) for a in args]
    out = CliRunner().invoke(main, argv)
    assert out.exit_code == 2, out.output
    assert "is not a finite number" in out.stderr or "not in the range" in out.stderr, out.stderr
    assert "Traceback" not in out.output
