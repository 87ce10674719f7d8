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
import sys
from pathlib import Path
from typing import Any

import attrs
import click

from fsm_stage._listen import listen
from fsm_stage.cli._reviewer import TOKEN_ENV, Identity, identity, text_option
from fsm_stage.cli._wake import waker, webhooks
from fsm_stage.cli.params import FiniteFloatRange
from fsm_stage.errors import UserError

#: Environment variable holding the cookie-signing key (default: random per start).
SECRET_ENV = "FSM_STAGE_INBOX_SECRET"



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
@click.option("--forwarded-allow-ips", "forwarded", metavar="IPS", default=None,
              help="Take each client's address from X-Forwarded-For / X-Forwarded-Proto when the "
                   "connection comes from one of these proxy addresses (comma-separated; uvicorn's "
                   "option). Without it the connection's own address is the client's, so no client "
                   "can choose the address failed logins are counted under.")
def serve_cmd(location: str, host: str, port: int, reviewers_file: Path | None, trusted_header: str | None,
              graph_path: Path | None, secure_cookie: bool, forwarded: str | None) -> None:
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
    sock = listen(host, port)  # connections queue from the moment the URL is printed
    bound = sock.getsockname()[1]
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    click.echo(f"fsm-stage inbox: listening on http://{shown}:{bound}/")
    if one_time is not None:
        click.echo(f"fsm-stage inbox: log in as {one_time[0]} with the one-time token {one_time[1]}")
    config = uvicorn.Config(app, log_level="warning", access_log=False, server_header=False,
                            proxy_headers=forwarded is not None, forwarded_allow_ips=forwarded)
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


#: The kinds of review a session asks (``reviews._answer.PAYLOAD_NAMES``): ``--kind`` refuses any
#: other word instead of matching nothing.
REVIEW_KINDS = ("stage", "plan", "tool", "budget")


def _filters(func: Any) -> Any:
    """The queue filters shared by ``list`` and ``approve-all``."""
    for option in reversed((
        click.option("--kind", "kinds", multiple=True, type=click.Choice(REVIEW_KINDS),
                     help="Only reviews of this kind (repeatable)."),
        click.option("--stage", "stages", multiple=True,
                     help="Only reviews from or to this stage (repeatable)."),
        click.option("--target", "targets", multiple=True,
                     help="Only reviews whose target is this (a stage, or a tool's name; repeatable)."),
        click.option("--reviewer", "allowed", metavar="NAME", default=None,
                     help="Only reviews whose rules let reviewer NAME answer (@groups resolved "
                          "from --reviewers FILE)."),
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


@attrs.frozen
class Filters:
    """The queue filters of one command line (``_filters``' options)."""

    kinds: tuple[str, ...] = ()
    stages: tuple[str, ...] = ()
    older_than: str | None = None
    deadline_within: str | None = None
    targets: tuple[str, ...] = ()
    allowed: str | None = None
    reviewers: Any = None


def _queue(store: Any, given: Filters, warned: set[str] | None = None) -> list[Any]:
    """The open reviews of ``store`` that ``given`` selects; a session log that could not be
    read is one warning line on stderr (``warned``: the lines said already, to say each once),
    and so are reviews left out because ``--reviewer NAME`` came without the reviewers file
    that resolves their approvers' ``@group``s."""
    from fsm_stage.inbox._auth import refusal
    from fsm_stage.inbox.queue import open_reviews, unreadable_warnings
    from fsm_stage.reviews._team import names_groups

    # without the reviewers file, filter by --reviewer here (names only, as open_reviews would)
    # so the reviews left out for their @groups can be counted from the same listing
    name = given.allowed if given.reviewers is None else None
    items = open_reviews(store, kinds=given.kinds, stages=given.stages, targets=given.targets,
                         older_than=_seconds(given.older_than, "--older-than"),
                         deadline_within=_seconds(given.deadline_within, "--deadline-within"),
                         reviewer=given.allowed if name is None else None, reviewers=given.reviewers)
    lines = list(unreadable_warnings(store))
    if name is not None:
        kept, grouped = [], 0
        for item in items:
            if refusal(item.rules, name, ()) is None:
                kept.append(item)
            elif names_groups(item.rules):
                grouped += 1
        items = kept
        if grouped:
            lines.append(f"{grouped} open review(s) name @groups among their approvers and were left "
                         f"out: --reviewer {name} matches names only without --reviewers FILE")
    for line in lines:
        if warned is None or line not in warned:
            click.echo(f"fsm-stage: warning: {line}", err=True)
            if warned is not None:
                warned.add(line)
    return items


def _answering(as_name: str | None, allowed: str | None) -> str | None:
    """The ``--reviewer`` filter of a command that answers: ``--as NAME`` selects the reviews
    NAME may answer (the others would only be refused); a different ``--reviewer`` is a usage
    error."""
    if as_name is None:
        return allowed
    if allowed is not None and allowed != as_name:
        raise click.UsageError(f"--reviewer {allowed} with --as {as_name}: --as answers as {as_name} and "
                               "selects the reviews they may answer; leave --reviewer out")
    return as_name


def _who(command: str, as_name: str | None, token_file: Path | None, reviewers_file: Path | None,
         allowed: str | None) -> tuple[Identity | None, Any]:
    """The authenticated reviewer of ``--as`` (None without it) and the reviewers file that
    resolves ``--reviewer NAME``'s groups (``--reviewers`` may go with ``--reviewer`` alone)."""
    text_option("--reviewer", allowed, command)
    who = identity(as_name, token_file, reviewers_file if as_name is not None or allowed is None else None,
                   command)
    if who is not None:
        return who, who.reviewers
    from fsm_stage.reviews import load_reviewers

    return None, load_reviewers(reviewers_file) if reviewers_file is not None else None


@inbox_cmd.command("list")
@click.argument("location")
@_filters
@click.option("--reviewers", "reviewers_file", type=click.Path(path_type=Path, dir_okay=False),
              help="Reviewers file resolving the @groups of --reviewer NAME.")
@click.option("--follow", is_flag=True, help="Then print the reviews asked and closed from now on, "
                                             "until Ctrl-C (exit 130).")
@click.option("--interval", default=1.0, show_default=True, type=FiniteFloatRange(0.05, 3600),
              help="With --follow: seconds between two looks at LOCATION.")
def list_cmd(location: str, kinds: tuple[str, ...], stages: tuple[str, ...], older_than: str | None,
             deadline_within: str | None, as_json: bool, targets: tuple[str, ...], allowed: str | None,
             reviewers_file: Path | None, follow: bool, interval: float) -> None:
    """List the open reviews of every session in LOCATION (a folder or a postgresql:// URL), oldest first."""
    from fsm_stage.cli import JSON_FORMAT_VERSION
    from fsm_stage.inbox._store import SessionStore
    from fsm_stage.inbox.queue import review_json
    from fsm_stage.log.events import wall_clock_ms

    if reviewers_file is not None and allowed is None:
        raise click.UsageError("--reviewers goes with --reviewer NAME")
    _follow_only(follow)
    given = Filters(kinds, stages, older_than, deadline_within, targets, allowed,
                    _who("inbox list", None, None, reviewers_file, allowed)[1])
    store = SessionStore(location)
    items = _queue(store, given)
    now = wall_clock_ms()
    if follow:
        _follow(store, given, items, as_json, interval)
        return
    if as_json:
        click.echo(json.dumps({"format_version": JSON_FORMAT_VERSION, "location": store.shown,
                               "open": [review_json(i, now) for i in items]}, indent=2, ensure_ascii=False))
        return
    if not items:
        click.echo(_nothing(store, "no open reviews"))
        return
    click.echo("session\treview\tkind\tfrom → target\tage\tdeadline")
    for item in items:
        click.echo(_row(item, now))


def _nothing(store: Any, said: str) -> str:
    """``said`` (nothing to list or answer), naming the folder when it holds no session log at
    all: most likely the wrong folder."""
    return f"{said}: {store.shown} holds no session logs (*.jsonl)" if store.listed_nothing() else said


#: ``inbox list`` options that only mean something with ``--follow``.
FOLLOW_ONLY = ("interval",)


def _follow_only(follow: bool) -> None:
    """Refuse (a usage error, exit 2) an option of ``FOLLOW_ONLY`` given without ``--follow``:
    a listing without it looks once, so the option would be ignored silently."""
    if follow:
        return
    ctx = click.get_current_context()
    for name in FOLLOW_ONLY:
        if ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT):
            raise click.UsageError(f"--{name} goes with --follow (without it, inbox list looks once)")


def _row(item: Any, now: int, mark: str = "") -> str:
    """One table line of ``item`` (control characters escaped)."""
    from fsm_stage.inbox.queue import deadline_text, review_json
    from fsm_stage.text import coarse_duration, review_route, visible

    row = review_json(item, now)
    cells = (row["session"], row["id"], row["kind"], review_route(row["kind"], row["from"], row["target"]),
             coarse_duration(row["age_seconds"]), deadline_text(item.deadline_ms, now))
    return mark + "\t".join(visible(str(c)) for c in cells)


def _closed(store: Any, item: Any) -> dict[str, Any]:
    """How the review of ``item`` closed: ``{outcome, by, reviewers}`` from its session's log
    (``outcome`` ``closed`` when it was closed without an answer, e.g. forked or call-closed)."""
    view = store.load(item.key)
    answer = view.state.answered.get(item.record.id) if view is not None else None
    if answer is None:
        red = view.state.redeemed.get(item.record.id) if view is not None else None
        return {"outcome": "closed", "by": None, "reviewers": [], "reason": red.reason if red else None}
    return {"outcome": answer.outcome, "by": answer.by, "reviewers": list(answer.reviewers), "reason": None}


def _follow(store: Any, given: Filters, items: list[Any], as_json: bool, interval: float) -> None:
    """Print ``items``, then every review asked (``+``) or closed (``-``) from now on, polling
    ``store`` every ``interval`` seconds until Ctrl-C. ``--json``: one object per line,
    ``{format_version, event: open|closed, review, closed?}``."""
    import time

    from fsm_stage.cli import JSON_FORMAT_VERSION
    from fsm_stage.inbox.queue import review_json
    from fsm_stage.log.events import wall_clock_ms
    from fsm_stage.text import visible

    def show(event: str, item: Any, now: int) -> None:
        closed = _closed(store, item) if event == "closed" else None
        if as_json:
            line: dict[str, Any] = {"format_version": JSON_FORMAT_VERSION, "event": event,
                                    "review": review_json(item, now)}
            if closed is not None:
                line["closed"] = closed
            click.echo(json.dumps(line, ensure_ascii=False))
        elif closed is None:
            click.echo(_row(item, now, "+ "))
        else:
            who = f" by {', '.join(closed['reviewers']) or closed['by']}" if closed["by"] else ""
            why = f" ({closed['reason']})" if closed["reason"] else ""
            cells = (item.session_id, item.record.id, f"{closed['outcome']}{who}{why}")
            click.echo("- " + "\t".join(visible(str(c)) for c in cells))

    if not as_json:
        click.echo(f"following {visible(store.shown)} (Ctrl-C stops)")
    from fsm_stage.inbox.queue import unreadable_warnings

    warned = set(unreadable_warnings(store))  # said by the first listing
    seen = {(i.key, i.record.id): i for i in items}
    now = wall_clock_ms()
    for item in items:
        show("open", item, now)
    while True:
        time.sleep(interval)
        current = {(i.key, i.record.id): i for i in _queue(store, given, warned)}
        now = wall_clock_ms()
        for key in [k for k in seen if k not in current]:
            show("closed", seen.pop(key), now)
        for key, item in current.items():
            if key not in seen:
                seen[key] = item
                show("open", item, now)


def _answerer(func: Any) -> Any:
    """``--as NAME --reviewers FILE [--token-file FILE]``: who answers (``approve-all``, ``answer``)."""
    for option in reversed((
        click.option("--as", "as_name", default=None,
                     help="Answer as this reviewer (checked against --reviewers)."),
        click.option("--reviewers", "reviewers_file", type=click.Path(path_type=Path, dir_okay=False),
                     help="Reviewers file (YAML: reviewers: {name: {token_sha256, groups}})."),
        click.option("--token-file", type=click.Path(path_type=Path, dir_okay=False),
                     help=f"File holding the reviewer's token (default: ${TOKEN_ENV})."),
    )):
        func = option(func)
    return func


@inbox_cmd.command("approve-all")
@click.argument("location")
@_filters
@_answerer
@click.option("--yes", is_flag=True, help="Approve them (without it, nothing is written).")
def approve_all_cmd(location: str, kinds: tuple[str, ...], stages: tuple[str, ...], older_than: str | None,
                    deadline_within: str | None, as_json: bool, targets: tuple[str, ...], allowed: str | None,
                    as_name: str | None, reviewers_file: Path | None, token_file: Path | None,
                    yes: bool) -> None:
    """Approve each open review of LOCATION that the filters select, one at a time: each through
    the same checks as a single answer (its own document digest, its rules, racing answers); a
    refused one is reported and the rest go on. Exit 1 when any was refused or failed."""
    from fsm_stage.cli import JSON_FORMAT_VERSION
    from fsm_stage.inbox._store import SessionStore
    from fsm_stage.inbox.queue import answer_one

    who, reviewers = _who("inbox approve-all", as_name, token_file, reviewers_file, allowed)
    allowed = _answering(as_name, allowed)
    reviewer = who.name if who is not None else None
    store = SessionStore(location)
    items = _queue(store, Filters(kinds, stages, older_than, deadline_within, targets, allowed, reviewers))
    if not items and not as_json:
        click.echo(_nothing(store, "no open reviews match"))
        return
    if not yes:  # a dry run: say what --yes would approve, write nothing, exit 0
        if as_json:
            from fsm_stage.inbox.queue import review_json
            from fsm_stage.log.events import wall_clock_ms

            now = wall_clock_ms()
            click.echo(json.dumps({"format_version": JSON_FORMAT_VERSION, "location": store.shown,
                                   "dry_run": True, "open": [review_json(i, now) for i in items]},
                                  indent=2, ensure_ascii=False))
        else:
            click.echo(f"approve-all: {len(items)} open review(s) match; add --yes to approve each of "
                       "them (fsm-stage inbox list shows them); nothing was written")
        return
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


@inbox_cmd.command("answer")
@click.argument("location")
@_filters
@_answerer
@click.option("--language", type=click.Choice(["en", "zh"]), default="en", show_default=True,
              help="Language of the interactive review.")
def answer_cmd(location: str, kinds: tuple[str, ...], stages: tuple[str, ...], older_than: str | None,
               deadline_within: str | None, as_json: bool, targets: tuple[str, ...], allowed: str | None,
               as_name: str | None, reviewers_file: Path | None, token_file: Path | None,
               language: str) -> None:
    """Answer the open reviews of LOCATION that the filters select, one at a time, on a terminal:
    each is shown with the terminal review (the document, the diff since a kept version) and
    answered through the same checks as a single answer (its own digest, its rules)."""
    from fsm_stage.cli.review_cmds import ask_rows, on_terminal
    from fsm_stage.inbox._store import SessionStore

    if as_json:
        raise click.UsageError("inbox answer is interactive; --json goes with inbox list and approve-all")
    if not on_terminal():
        raise UserError("inbox answer: standard input and output must be a terminal (answer on a TTY; "
                        "inbox approve-all or fsm-stage review LOG --approve ID answer without one)")
    who, reviewers = _who("inbox answer", as_name, token_file, reviewers_file, allowed)
    allowed = _answering(as_name, allowed)
    store = SessionStore(location)
    items = _queue(store, Filters(kinds, stages, older_than, deadline_within, targets, allowed, reviewers))
    if not items:
        click.echo(_nothing(store, "no open reviews match"))
        return
    hook = store.on_answer = waker(location)
    refused: list[str] = []
    try:
        with webhooks():
            ask_rows(_rows(store, items), language, _answer_row(store, items, who, refused))
    finally:
        if hook is not None:
            hook.close()
    if refused:
        sys.exit(1)  # at least one answer was refused (rules, answered already): say so to scripts


def _rows(store: Any, items: list[Any]) -> Any:
    """The terminal rows of ``items`` (``review_cmds.listing``), each read when it is its turn;
    a review answered meanwhile is said so in one line and skipped."""
    from fsm_stage.cli.review_cmds import listing
    from fsm_stage.log.memory import MemoryLog
    from fsm_stage.runtime.session import Session
    from fsm_stage.text import visible

    for n, item in enumerate(items, 1):
        view = store.load(item.key)
        rows = listing(Session(MemoryLog(view.header, view.events))) if view is not None else []
        row = next((r for r in rows if r["id"] == item.record.id), None)
        if row is None:
            click.echo(visible(f"{item.session_id} {item.record.id}: answered meanwhile; skipped"))
            continue
        click.echo(visible(f"session {item.session_id} — review {n} of {len(items)}"))
        yield {**row, "session_key": item.key}


def _answer_row(store: Any, items: list[Any], who: Identity | None, refused: list[str]) -> Any:
    """Record one interactive answer with ``answer_one`` (as ``who``; ``by: "cli:NAME"``); the
    id of each answer refused or failed is appended to ``refused``."""
    from fsm_stage.inbox.queue import answer_one

    by_key = {(i.key, i.record.id): i for i in items}
    reviewer = who.name if who is not None else None
    by = f"cli:{reviewer}" if reviewer is not None else "cli"

    def answer(row: dict[str, Any], outcome: str, option: str | None, feedback: str | None) -> None:
        item = by_key[(row["session_key"], row["id"])]
        done = answer_one(store, item, outcome, reviewer=reviewer, by=by, option=option, feedback=feedback,
                          reviewers=who.reviewers if who is not None else None)
        click.echo(done.message, err=not done.ok)
        if not done.ok:
            refused.append(done.review_id)

    return answer


COMMANDS = (inbox_cmd,)
