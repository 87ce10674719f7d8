"""``fsm-stage mcp``: serve a stage graph's sessions over the Model Context Protocol.

``mcp --graph GRAPH.yaml --log LOG [--log NAME=LOG ...] [--cwd DIR] [--http HOST:PORT]
[--state-key-file FILE] [--eligibility [NAME=]MODULE:FUNCTION ...] [--as NAME --reviewers FILE
[--token-file FILE]]``: with ``--as`` every review answer the client gives is NAME's
(authenticated like ``fsm-stage review --as``), so the reviews' rules apply; the reviews'
``notify`` webhooks are posted while the server runs. The ``mcp`` SDK (extra
``fsm_stage[mcp]``) is imported inside the command only, so ``import fsm_stage`` and the other
commands never load it.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import re
import sys
from pathlib import Path

import click

from fsm_stage.cli._reviewer import TOKEN_ENV, identity
from fsm_stage.cli._wake import webhooks
from fsm_stage.config import ConfigFile, load_config
from fsm_stage.errors import UserError
from fsm_stage.stage_switch.eligibility import Predicate


def _guard_names(config: ConfigFile) -> list[str]:
    graph = config.graph
    stages = graph.stages if graph is not None else ()
    return sorted({g for st in stages for e in st.targets or () for g in e.guards})


def load_guards(specs: tuple[str, ...], config: ConfigFile) -> dict[str, Predicate]:
    """``--eligibility [NAME=]module:function`` values → ``{guard name: predicate}``. NAME
    defaults to the function's name; the module is imported with the current directory on
    ``sys.path`` (as ``python -m`` does). Raises ``UserError`` (one line) for a bad spec, a module
    or function that cannot be loaded, a non-callable, a name given twice or a name no edge of
    the graph uses."""
    out: dict[str, Predicate] = {}
    known = _guard_names(config)
    if specs and "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for spec in specs:
        name, sep, target = spec.rpartition("=")
        module_name, colon, attr = target.partition(":")
        if not colon or not module_name or not attr:
            raise UserError(f"--eligibility {spec}: expected [NAME=]module:function")
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # a user's module: any import failure is their mistake
            raise UserError(f"--eligibility {spec}: cannot import {module_name!r}: "
                            f"{type(exc).__name__}: {exc}") from None
        predicate = getattr(module, attr, None)
        if not callable(predicate):
            raise UserError(f"--eligibility {spec}: {module_name} has no function {attr!r}")
        guard = name if sep else attr
        if guard in out:
            raise UserError(f"--eligibility: guard {guard!r} is given twice")
        if guard not in known:
            raise UserError(f"--eligibility {spec}: no edge of the graph uses guard {guard!r}; its guards "
                            f"are: {', '.join(known) or '(none)'}")
        out[guard] = predicate
    return out


def _host_port(value: str) -> tuple[str, int]:
    """``(host, port)`` of ``HOST:PORT`` (``[IPv6]:PORT``; an unbracketed IPv6 address before its
    port is read too); a usage error for anything else."""
    import ipaddress

    if value.startswith("["):
        host, sep, port = value[1:].partition("]:")
    else:
        host, sep, port = value.rpartition(":")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    label = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
    named = len(host) <= 254 and re.fullmatch(rf"{label}(?:\.{label})*\.?", host) is not None  # FQDN dot
    if (not sep or (ip is None and not named) or (value.startswith("[") and ip is None)
            or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536):
        raise click.BadParameter(f"expected HOST:PORT ([ADDRESS]:PORT for IPv6), got {value!r}",
                                 param_hint="--http")
    return host, int(port)


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
@click.option("--eligibility", "eligibility", multiple=True, metavar="[NAME=]MODULE:FUNCTION",
              help="Register a guard predicate (agent) -> bool under NAME (default: the function's "
                   "name), for the graph's guarded edges (repeatable).")
@click.option("--as", "as_name", metavar="NAME", default=None,
              help="Record the client's review answers as reviewer NAME (authenticated; the reviews' "
                   "rules decide).")
@click.option("--reviewers", "reviewers_file", metavar="FILE", default=None,
              help="With --as: the reviewers file (reviewers: {name: {token_sha256, groups}}).")
@click.option("--token-file", "token_file", metavar="FILE", default=None,
              help=f"With --as: a file holding the reviewer's token (default: ${TOKEN_ENV}).")
@click.option("--accept-graph-change", is_flag=True,
              help="Go on with logs recorded under another version of the stage graph (a renamed or "
                   "removed stage, an edited edge): the next stage write records this graph. Without "
                   "it such a session refuses every transition.")
def mcp_cmd(graph_path: Path, logs: tuple[str, ...], cwd: Path | None, http: str | None,
            state_key_file: Path | None, eligibility: tuple[str, ...], as_name: str | None,
            reviewers_file: str | None, token_file: str | None, accept_graph_change: bool) -> None:
    """Serve goto_stage / exit_plan_mode / get_stage with human review through the MCP client."""
    try:
        from fsm_stage.mcp.durable import McpReviewer
        from fsm_stage.mcp.run import KEY_ENV, serve_http, serve_stdio, state_security
        from fsm_stage.mcp.server import build_server
        from fsm_stage.mcp.sessions import DEFAULT_SESSION, SessionRegistry, parse_log_option
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise UserError(f"fsm-stage mcp needs the mcp extra: pip install 'fsm_stage[mcp]' ({exc})") from None
    target = _host_port(http) if http is not None else None
    if target is not None and target[0] not in ("127.0.0.1", "localhost", "::1"):
        click.echo(f"fsm-stage: warning: serving {target[0]} without authentication; anyone who can "
                   "reach it can call the tools (prefer a loopback host)", err=True)
    who = identity(as_name, token_file, reviewers_file, "mcp")  # before any log is opened
    reviewer = McpReviewer(who.name, who.reviewers) if who is not None else None
    config = load_config(graph_path)
    guards = load_guards(eligibility, config)
    table = parse_log_option(logs)
    workdir = cwd if cwd is not None else Path.cwd()
    if not workdir.is_dir():
        raise UserError(f"--cwd {workdir}: not a directory")
    default_log = table.get(DEFAULT_SESSION, next(iter(table.values())))
    key_file = state_key_file
    if key_file is None and default_log != "memory:":
        key_file = Path(default_log + ".mcp-key")
    made = key_file is not None and not key_file.exists()
    try:  # before any log is opened: a bad key leaves nothing behind
        security = state_security(key_file)
    except (ValueError, OSError) as err:
        raise UserError(f"request-state key ({KEY_ENV} or --state-key-file): {err}") from None
    try:
        registry = SessionRegistry(config, table, cwd=workdir, guards=guards,
                                   accept_graph_change=accept_graph_change)
    except BaseException:
        if made and key_file is not None:  # a key made for logs that were refused: not left behind
            key_file.unlink(missing_ok=True)
        raise
    try:  # Ctrl-C reaches the CLI's handler (exit 130) on every transport, logs closed first
        app = build_server(registry, security=security, reviewer=reviewer)
        with webhooks():  # the reviews' notify rules: requested / answered / expired
            if target is None:
                asyncio.run(serve_stdio(app))
            else:
                asyncio.run(serve_http(app, *target, announce=lambda url: click.echo(
                    f"fsm-stage mcp: listening on {url}", err=True)))
    finally:
        registry.close()


COMMANDS = (mcp_cmd,)
