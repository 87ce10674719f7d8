"""``fsm-stage inbox``: one queue of every open review across the sessions of a store.

``inbox serve LOCATION`` is the review inbox web page (extra ``fsm_stage[inbox]``; Starlette,
uvicorn and jinja2 are imported inside the command only). Authentication is always on:
``--reviewers FILE`` (hashed tokens), ``--trusted-header NAME`` (an authenticating reverse
proxy), or, on a loopback host with neither, a one-time token for the local user printed at
start. A non-loopback ``--host`` without ``--reviewers`` or ``--trusted-header`` is refused.
``inbox list LOCATION`` prints the queue (table or ``--json``); ``inbox approve-all LOCATION
--yes`` approves each review the filters select, one at a time through the same checks as a
single answer. LOCATION is a folder of JSONL session logs or a ``postgresql://`` URL; when a
fleet runs there (``fsm_stage.fleet.wake``), every answer also wakes its session.
"""

from __future__ import annotations

import getpass
import json
import os
import secrets
import socket
import sys
from pathlib import Path
from typing import Any

import click

from fsm_stage.cli._reviewer import TOKEN_ENV, identity
from fsm_stage.cli._wake import waker, webhooks
from fsm_stage.errors import UserError

#: Environment variable holding the cookie-signing key (default: random per start).
SECRET_ENV = "FSM_STAGE_INBOX_SECRET"


#: Environment variable holding the reviewer's token for ``approve-all --as NAME``.


@click.group("inbox")
def inbox_cmd() -> None:
    """The review inbox: every open review of a store's sessions (a web page, a list, bulk approval)."""


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
    hook = waker(location)
    app = create_app(location, reviewers_file=reviewers_file, reviewers=reviewers,
                     secret_key=os.environ.get(SECRET_ENV) or None, trusted_header=trusted_header,
                     graph=graph, https_only=secure_cookie, on_answer=hook)
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
        with webhooks():
            server.run(sockets=[sock])
    finally:
        sock.close()
        if hook is not None:
            hook.close()
    # uvicorn returns after SIGINT / SIGTERM (it handles them itself): leave as Ctrl-C does
    raise KeyboardInterrupt


def _filters(func: Any) -> Any:
    """The queue filters shared by ``list`` and ``approve-all``."""
    for option in reversed((
        click.option("--kind", "kinds", multiple=True,
                     help="Only reviews of this kind (stage, plan, tool, budget; repeatable)."),
        click.option("--stage", "stages", multiple=True,
                     help="Only reviews from or to this stage (repeatable)."),
        click.option("--older-than", default=None,
                     help="Only reviews asked at least this long ago (90s, 15m, 2h, 1d)."),
        click.option("--deadline-within", default=None,
                     help="Only reviews whose deadline is at most this far away, or past (90s, 2h)."),
        click.option("--json", "as_json", is_flag=True, help="One JSON object instead of the table."),
    )):
        func = option(func)
    return func


def _seconds(value: str | None, flag: str) -> float | None:
    from fsm_stage.config.review_rules import parse_duration

    if value is None:
        return None
    try:
        return parse_duration(value)
    except ValueError as err:
        raise UserError(f"{flag}: {err}") from None


def _queue(location: str, kinds: tuple[str, ...], stages: tuple[str, ...], older_than: str | None,
           deadline_within: str | None, store: Any = None) -> list[Any]:
    from fsm_stage.inbox.queue import open_reviews

    return open_reviews(store if store is not None else location, kinds=kinds, stages=stages,
                        older_than=_seconds(older_than, "--older-than"),
                        deadline_within=_seconds(deadline_within, "--deadline-within"))


@inbox_cmd.command("list")
@click.argument("location")
@_filters
def list_cmd(location: str, kinds: tuple[str, ...], stages: tuple[str, ...], older_than: str | None,
             deadline_within: str | None, as_json: bool) -> None:
    """List the open reviews of every session in LOCATION (a folder or a postgresql:// URL), oldest first."""
    from fsm_stage.cli import JSON_FORMAT_VERSION
    from fsm_stage.inbox._store import SessionStore
    from fsm_stage.inbox.queue import review_json
    from fsm_stage.log.events import wall_clock_ms
    from fsm_stage.text import visible

    store = SessionStore(location)
    items = _queue(location, kinds, stages, older_than, deadline_within, store)
    now = wall_clock_ms()
    if as_json:
        click.echo(json.dumps({"format_version": JSON_FORMAT_VERSION, "location": store.shown,
                               "open": [review_json(i, now) for i in items]}, indent=2, ensure_ascii=False))
        return
    if not items:
        click.echo("no open reviews")
        return
    click.echo("session\treview\tkind\tfrom → target\tage\tdeadline in")
    for item in items:
        row = review_json(item, now)
        deadline = "-" if item.deadline_ms is None else f"{(item.deadline_ms - now) // 1000}s"
        cells = (row["session"], row["id"], row["kind"], f"{row['from']} → {row['target']}",
                 f"{row['age_seconds']}s", deadline)
        click.echo("\t".join(visible(str(c)) for c in cells))


@inbox_cmd.command("approve-all")
@click.argument("location")
@_filters
@click.option("--as", "as_name", default=None, help="Answer as this reviewer (checked against --reviewers).")
@click.option("--reviewers", "reviewers_file", type=click.Path(path_type=Path, dir_okay=False),
              help="Reviewers file (YAML: reviewers: {name: {token_sha256, groups}}).")
@click.option("--token-file", type=click.Path(path_type=Path, dir_okay=False),
              help=f"File holding the reviewer's token (default: ${TOKEN_ENV}).")
@click.option("--yes", is_flag=True, help="Approve them (without it, nothing is written).")
def approve_all_cmd(location: str, kinds: tuple[str, ...], stages: tuple[str, ...], older_than: str | None,
                    deadline_within: str | None, as_json: bool, as_name: str | None,
                    reviewers_file: Path | None, token_file: Path | None, yes: bool) -> None:
    """Approve each open review of LOCATION that the filters select, one at a time: each through
    the same checks as a single answer (its own document digest, its rules, racing answers); a
    refused one is reported and the rest go on. Exit 1 when any was refused or failed."""
    from fsm_stage.cli import JSON_FORMAT_VERSION
    from fsm_stage.inbox._store import SessionStore
    from fsm_stage.inbox.queue import answer_one

    who = identity(as_name, token_file, reviewers_file, "inbox approve-all")
    reviewer, reviewers = (who.name, who.reviewers) if who is not None else (None, None)
    store = SessionStore(location)
    items = _queue(location, kinds, stages, older_than, deadline_within, store)
    if not items and not as_json:
        click.echo("no open reviews match")
        return
    if not yes and items:
        raise UserError(f"approve-all: {len(items)} open review(s) match; add --yes to approve each of them "
                        "(fsm-stage inbox list shows them)")
    hook = store.on_answer = waker(location)
    by = f"cli:{reviewer}" if reviewer is not None else "cli"
    try:
        with webhooks():
            done = [answer_one(store, item, "approve", reviewer=reviewer, by=by, reviewers=reviewers)
                    for item in items]
    finally:
        if hook is not None:
            hook.close()
    if as_json:
        click.echo(json.dumps({"format_version": JSON_FORMAT_VERSION, "location": store.shown,
                               "results": [d.to_json() for d in done]}, indent=2, ensure_ascii=False))
    else:
        for d in done:
            click.echo(d.message, err=not d.ok)
    if any(not d.ok for d in done):
        sys.exit(1)


COMMANDS = (inbox_cmd,)
