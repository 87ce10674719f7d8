"""``fsm-stage mcp``: serve a stage graph's sessions over the Model Context Protocol.

``mcp --graph GRAPH.yaml --log LOG [--log NAME=LOG ...] [--cwd DIR] [--http HOST:PORT]
[--state-key-file FILE]``. The ``mcp`` SDK (extra ``fsm_stage[mcp]``) is imported inside the
command only, so ``import fsm_stage`` and the other commands never load it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from fsm_stage.config import load_config
from fsm_stage.errors import UserError


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(f"expected HOST:PORT, got {value!r}", param_hint="--http")
    return host.strip("[]"), int(port)


@click.command("mcp")
@click.option("--graph", "graph_path", required=True, type=click.Path(path_type=Path),
              help="The stage-graph YAML file (may also configure plan mode).")
@click.option("--log", "logs", required=True, multiple=True,
              help="Session log (JSONL, created when missing; `memory:` for a throwaway one). "
                   "`LOG` is the default session; `NAME=LOG` serves session NAME too (repeatable).")
@click.option("--cwd", type=click.Path(path_type=Path, file_okay=False),
              help="Session working directory for new logs and handoff documents (default: .).")
@click.option("--http", "http", metavar="HOST:PORT",
              help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio.")
@click.option("--state-key-file", type=click.Path(path_type=Path, dir_okay=False),
              help="Key sealing input_required request states (created when missing); default: "
                   "<default log>.mcp-key beside a file log, so a review survives a restart.")
def mcp_cmd(graph_path: Path, logs: tuple[str, ...], cwd: Path | None, http: str | None,
            state_key_file: Path | None) -> None:
    """Serve goto_stage / exit_plan_mode / get_stage with human review through the MCP client."""
    try:
        from fsm_stage.mcp.run import KEY_ENV, serve_http, serve_stdio, state_security
        from fsm_stage.mcp.server import build_server
        from fsm_stage.mcp.sessions import DEFAULT_SESSION, SessionRegistry, parse_log_option
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise UserError(f"fsm-stage mcp needs the mcp extra: pip install 'fsm_stage[mcp]' ({exc})") from None
    target = _host_port(http) if http is not None else None
    if target is not None and target[0] not in ("127.0.0.1", "localhost", "::1"):
        click.echo(f"fsm-stage: warning: serving {target[0]} without authentication; anyone who can "
                   "reach it can call the tools (prefer a loopback host)", err=True)
    config = load_config(graph_path)
    table = parse_log_option(logs)
    workdir = cwd if cwd is not None else Path.cwd()
    if not workdir.is_dir():
        raise UserError(f"--cwd {workdir}: not a directory")
    default_log = table.get(DEFAULT_SESSION, next(iter(table.values())))
    key_file = state_key_file
    if key_file is None and default_log != "memory:":
        key_file = Path(default_log + ".mcp-key")
    try:  # before any log is opened: a bad key leaves nothing behind
        security = state_security(key_file)
    except (ValueError, OSError) as err:
        raise UserError(f"request-state key ({KEY_ENV} or --state-key-file): {err}") from None
    registry = SessionRegistry(config, table, cwd=workdir)
    try:
        app = build_server(registry, security=security)
        if target is None:
            asyncio.run(serve_stdio(app))
        else:
            asyncio.run(serve_http(app, *target))
    except KeyboardInterrupt:  # pragma: no cover - interactive stop
        pass
    finally:
        registry.close()


COMMANDS = (mcp_cmd,)
