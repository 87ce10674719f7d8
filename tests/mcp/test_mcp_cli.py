"""``fsm-stage mcp`` option handling (no server is started for bad options)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from mcp_helpers import GRAPH

from fsm_stage.cli import main
from fsm_stage.errors import UserError
from fsm_stage.mcp.sessions import parse_log_option


def test_parse_log_option() -> None:
    assert parse_log_option(["a.jsonl"]) == {"default": "a.jsonl"}
    assert parse_log_option(["a.jsonl", "b=sub/b.jsonl"]) == {"default": "a.jsonl", "b": "sub/b.jsonl"}
    assert parse_log_option(["dir=x/a.jsonl"]) == {"dir": "x/a.jsonl"}
    assert parse_log_option(["./k=v.jsonl"]) == {"default": "./k=v.jsonl"}  # a path, not a handle
    for bad, text in [(["x.jsonl", "y.jsonl"], "given twice"), (["b="], "no log location"),
                      (["postgresql://u@h/db?session=s"], "not a URL"), (["b=postgres://h/db"], "not a URL"),
                      (["-b=x"], "must match"), ([], "at least one")]:
        with pytest.raises(UserError, match=text):
            parse_log_option(bad)


@pytest.mark.parametrize("args, code, text", [
    (["--http", "nohost"], 2, "expected HOST:PORT"),
    (["--http", "127.0.0.1:99999"], 2, "expected HOST:PORT"),
    (["--http", "[::1"], 2, "expected HOST:PORT"),  # it was a uvicorn traceback, exit 3
    (["--http", "[host]:8080"], 2, "expected HOST:PORT"),
    (["--http", "a host:8080"], 2, "expected HOST:PORT"),
    (["--http", "127.0.0.1:8\u00b2"], 2, "expected HOST:PORT"),  # a digit to isdigit(), not to int()
    (["--http", "a..b:8080"], 2, "expected HOST:PORT"),
    (["--log", "a=1.jsonl", "--log", "a=2.jsonl"], 1, "given twice"),
])
def test_bad_options(tmp_path: Path, args: list[str], code: int, text: str) -> None:
    base = ["mcp", "--graph", str(GRAPH)]
    if "--log" not in args:
        base += ["--log", str(tmp_path / "s.jsonl")]
    result = CliRunner().invoke(main, base + args)
    assert result.exit_code == code, result.output
    assert text in result.output
    assert not (tmp_path / "s.jsonl").exists()


def test_bad_graph_is_exit_1(tmp_path: Path) -> None:
    bad = tmp_path / "g.yaml"
    bad.write_text("name: x\nstages: []\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["mcp", "--graph", str(bad), "--log", str(tmp_path / "s.jsonl")])
    assert result.exit_code == 1 and "g.yaml" in result.output
    assert not (tmp_path / "s.jsonl").exists()


def test_a_short_state_key_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FSM_STAGE_MCP_STATE_KEY", "short")
    log = tmp_path / "s.jsonl"
    out = CliRunner().invoke(main, ["mcp", "--graph", str(GRAPH), "--log", str(log), "--cwd", str(tmp_path)])
    assert out.exit_code == 1 and "Traceback" not in out.output
    assert "FSM_STAGE_MCP_STATE_KEY" in out.output and out.output.count("\n") == 1, out.output
    assert not log.exists()


def test_the_http_address_forms_it_reads() -> None:
    from fsm_stage.cli.mcp_cmds import _host_port

    assert _host_port("127.0.0.1:8080") == ("127.0.0.1", 8080)
    assert _host_port("[::1]:8080") == _host_port("::1:8080") == ("::1", 8080)
    assert _host_port("localhost:80") == ("localhost", 80)
    assert _host_port("localhost.:80") == ("localhost.", 80)  # a fully qualified name


def test_a_log_it_refuses_leaves_no_key_nor_lock_file_beside_it(tmp_path: Path) -> None:
    """The request-state key is made before the logs are opened (a bad key leaves no log); a
    log then refused takes that new key away with it, and a folder given as the log gets no
    lock file (both used to stay behind, the key a 0600 secret)."""
    folder = tmp_path / "adir"
    folder.mkdir()
    args = ["mcp", "--graph", str(GRAPH), "--log", str(folder), "--cwd", str(tmp_path)]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 1 and out.output.count("\n") == 1, out.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir"]
    kept = tmp_path / "kept.key"
    kept.write_text("k" * 64)  # a key that was there before is the user's: never removed
    again = CliRunner().invoke(main, [*args, "--state-key-file", str(kept)])
    assert again.exit_code == 1 and kept.read_text() == "k" * 64


def test_an_address_it_cannot_listen_on_is_one_line(tmp_path: Path) -> None:
    """A port in use or a name that does not resolve was some 70 lines of uvicorn traceback,
    exit 3: the socket is bound before the server starts."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        for address in (f"127.0.0.1:{port}", "nosuchhost.invalid:8080"):
            args = ["mcp", "--graph", str(GRAPH), "--log", "memory:", "--http", address]
            out = CliRunner().invoke(main, args)
            errors = [line for line in out.stderr.splitlines() if "warning:" not in line]  # a public host's
            assert out.exit_code == 1 and len(errors) == 1, out.output
            assert errors[0].startswith(f"fsm-stage: cannot listen on {address}: ")
