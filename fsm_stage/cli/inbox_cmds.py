"""``fsm-stage inbox serve LOCATION``: the review inbox web page (extra ``fsm_stage[inbox]``).

Starlette, uvicorn and jinja2 are imported inside the command only. Authentication is always
on: ``--reviewers FILE`` (hashed tokens), ``--trusted-header NAME`` (an authenticating reverse
proxy), or, on a loopback host with neither, a one-time token for the local user printed at
start. A non-loopback ``--host`` without ``--reviewers`` or ``--trusted-header`` is refused.
"""

from __future__ import annotations

import getpass
import os
import secrets
import socket
from pathlib import Path

import click

from fsm_stage.errors import UserError

#: Environment variable holding the cookie-signing key (default: random per start).
SECRET_ENV = "FSM_STAGE_INBOX_SECRET"


@click.group("inbox")
def inbox_cmd() -> None:
    """The review inbox: a web page listing every open review of a folder of session logs."""


@inbox_cmd.command("serve")
@click.argument("location")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Interface to bind (loopback by default).")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535),
              help="TCP port (0: any free).")
@click.option("--reviewers", "reviewers_file", type=click.Path(path_type=Path, dir_okay=False),
              help="Reviewers file (YAML: reviewers: {name: {token_sha256, groups}}).")
@click.option("--trusted-header", help="Take the reviewer's name from this header, set by an "
                                       "authenticating reverse proxy (e.g. X-Forwarded-User).")
@click.option("--graph", "graph_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Stage-graph YAML: draw it on review pages.")
@click.option("--secure-cookie", is_flag=True, help="Mark the session cookie Secure (served over HTTPS).")
def serve_cmd(location: str, host: str, port: int, reviewers_file: Path | None, trusted_header: str | None,
              graph_path: Path | None, secure_cookie: bool) -> None:
    """Serve the review inbox over the session logs in the folder LOCATION."""
    try:
        import uvicorn

        from fsm_stage.inbox._app import create_app
        from fsm_stage.inbox._auth import Reviewer, Reviewers, token_sha256
        from fsm_stage.inbox._security import is_loopback
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise UserError("fsm-stage inbox needs the inbox extra: "
                        f"pip install 'fsm_stage[inbox]' ({exc})") from None
    reviewers = None
    one_time: tuple[str, str] | None = None
    if reviewers_file is None and not trusted_header:
        if not is_loopback(host):
            raise UserError(f"--host {host} is not a loopback address: give --reviewers FILE or "
                            "--trusted-header NAME so that reviewers authenticate")
        name = getpass.getuser() or "local"
        token = secrets.token_urlsafe(24)
        reviewers = Reviewers({name: Reviewer(name, token_sha256(token))})
        one_time = (name, token)
    graph = None
    if graph_path is not None:
        from fsm_stage.config import load_config

        graph = load_config(graph_path).graph
        if graph is None:
            raise UserError(f"{graph_path}: no stage graph to draw")
    app = create_app(location, reviewers_file=reviewers_file, reviewers=reviewers,
                     secret_key=os.environ.get(SECRET_ENV) or None, trusted_header=trusted_header,
                     graph=graph, https_only=secure_cookie)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(128)  # connections queue from the moment the URL is printed
    except OSError as err:
        sock.close()
        raise UserError(f"cannot listen on {host}:{port}: {err.strerror or err}") from None
    bound = sock.getsockname()[1]
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    click.echo(f"fsm-stage inbox: listening on http://{shown}:{bound}/")
    if one_time is not None:
        click.echo(f"fsm-stage inbox: log in as {one_time[0]} with the one-time token {one_time[1]}")
    config = uvicorn.Config(app, log_level="warning", access_log=False, server_header=False)
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    # uvicorn returns after SIGINT / SIGTERM (it handles them itself): leave as Ctrl-C does
    raise KeyboardInterrupt


COMMANDS = (inbox_cmd,)
