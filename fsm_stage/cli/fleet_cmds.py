"""``fsm-stage worker``, ``sessions``, ``send`` and ``answer``: a fleet from the command line.

``worker --graph G --store STORE --model module:function [--tools module:function]`` runs a
fleet worker (``fsm_stage.fleet.worker``) until Ctrl-C / SIGTERM; ``sessions STORE [--json]
[--state S]`` lists the sessions and their state; ``send STORE SESSION TEXT [--stage |
--plan] [--new]`` records a durable input and wakes the session; ``answer STORE SESSION
REVIEW --approve | --keep | --dismiss`` records a review answer and wakes it. STORE is a folder
(JSONL logs, SQLite DBOS database) or a ``postgresql://`` URL. ``worker``, ``send`` and
``answer`` need the ``[fleet]`` extra (``dbos``).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import click

from fsm_stage.cli.params import FiniteFloatRange
from fsm_stage.errors import UserError
from fsm_stage.text import visible

#: ``fsm_stage.fleet.records.STATES``, spelt here so ``--help`` imports no fleet code (a test
#: checks they agree).
STATE_NAMES = ("needs-input", "queued", "running", "waiting-review", "blocked", "complete", "failed",
               "damaged")

INSTALL_HINT = "the fleet needs DBOS: pip install 'fsm_stage[fleet]'"


def _dbos() -> None:
    try:
        importlib.import_module("dbos")
    except ImportError:
        raise UserError(INSTALL_HINT) from None


def _load(spec: str, what: str) -> Any:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UserError(f"{what} {spec!r}: write module:function")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` would: the current folder's modules
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise UserError(f"{what} {spec!r}: cannot import {module_name}: {err}") from None
    target = getattr(module, attr, None)
    if not callable(target):
        raise UserError(f"{what} {spec!r}: {module_name} has no callable {attr!r}")
    return target


@click.command("worker")
@click.option("--graph", "graph_path", required=True, type=click.Path(dir_okay=False),
              help="The stage-graph YAML the sessions run under.")
@click.option("--store", required=True, help="Session folder or postgresql:// URL.")
@click.option("--model", "model_spec", required=True,
              help="module:function returning a Model (called once per drive).")
@click.option("--tools", "tools_spec", default=None, help="module:function returning the host tools.")
@click.option("--slots", default=4, show_default=True, type=click.IntRange(1, 1024),
              help="Sessions driven at once by this worker.")
@click.option("--sessions", default=64, show_default=True, type=click.IntRange(1, 100000),
              help="Session workflows this worker holds (waiting ones included).")
@click.option("--dead-after", default=5.0, show_default=True, type=FiniteFloatRange(1.0, 3600.0),
              help="Seconds of silence after which a worker's sessions are taken over.")
@click.option("--poll", default=30.0, show_default=True, type=FiniteFloatRange(0.1, 86400.0),
              help="Seconds a waiting session re-reads its log without a wake-up.")
@click.option("--max-interrupted", default=3, show_default=True, type=click.IntRange(1, 1000),
              help="Turns in a row ending interrupted (worker crashes) before a run is failed.")
@click.option("--guard", "guard_values", multiple=True, metavar="NAME=true|false",
              help="The value of one of the graph's guards (repeatable); every guard needs one.")
@click.option("--accept-graph-change", is_flag=True,
              help="Sessions recorded under another version of the graph go on under this one "
                   "(each records the new graph); without it they fail, saying so.")
def worker(graph_path: str, store: str, model_spec: str, tools_spec: str | None, slots: int, sessions: int,
           dead_after: float, poll: float, max_interrupted: int, guard_values: tuple[str, ...],
           accept_graph_change: bool) -> None:
    """Run a fleet worker: drive the store's sessions as DBOS workflows until stopped. A drive
    that fails, or cannot run (the next is tried later), is one line on stderr."""
    _dbos()
    from fsm_stage.config import load_config
    from fsm_stage.driver import guard_names
    from fsm_stage.fleet import Store
    from fsm_stage.fleet.worker import executor_name, run_worker
    from fsm_stage.fleet.workflows import FleetApp

    config = load_config(graph_path)
    if config.graph is None:
        raise UserError(f"{graph_path}: not a stage graph (no `stages:`)")
    guards = _guards(guard_values)
    missing = sorted(set(guard_names(config.graph)) - set(guards))
    if missing:
        raise UserError(f"{graph_path}: the graph's guard(s) {', '.join(missing)} need a value: "
                        f"--guard {missing[0]}=true|false (an edge is never closed silently)")
    unknown = sorted(set(guards) - set(guard_names(config.graph)))
    if unknown:
        known = ", ".join(sorted(guard_names(config.graph))) or "none"
        raise UserError(f"{graph_path}: --guard {unknown[0]}: the graph has no guard of that name "
                        f"(its guards: {known})")
    app = FleetApp(Store(store), config, _load(model_spec, "--model"),
                   _load(tools_spec, "--tools") if tools_spec else tuple, worker=executor_name(),
                   slots=slots, poll=poll, max_interrupted=max_interrupted, guards=guards,
                   on_drive=_drive_reporter(), accept_graph_change=accept_graph_change)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError):  # Windows: Ctrl-C interrupts instead
                loop.add_signal_handler(sig, stop.set)
        await run_worker(app, sessions=sessions, dead_after=dead_after, stop=stop,
                         on_ready=lambda: click.echo(f"fsm-stage worker {app.worker}: serving "
                                                     f"{app.store.shown}", err=True))

    from fsm_stage.cli._wake import webhooks

    with webhooks():
        asyncio.run(main())


def _drive_reporter() -> Any:
    """``on_drive`` for the worker: one stderr line for a drive that failed the session, and
    for one that could not run (``error``; the workflow tries again later), unless it says what
    the session's last such line said."""
    said: dict[str, str] = {}

    def report(session_id: str, result: dict[str, Any]) -> None:
        state, message = result.get("state"), " ".join(str(result.get("message") or "").split())
        if state not in ("failed", "error"):
            said.pop(session_id, None)
            return
        line = f"fsm-stage worker: session {session_id}: {state}: {message or 'no message'}"
        if state == "error" and said.get(session_id) == line:
            return
        said[session_id] = line
        click.echo(visible(line[:1000]), err=True)

    return report


def _guards(values: tuple[str, ...]) -> dict[str, bool]:
    """``--guard NAME=true|false`` values as a mapping; a malformed one is a usage error."""
    out: dict[str, bool] = {}
    for value in values:
        name, sep, flag = value.partition("=")
        if not sep or not name or flag.lower() not in ("true", "false"):
            raise click.UsageError(f"--guard {value!r}: expected NAME=true or NAME=false")
        out[name] = flag.lower() == "true"
    return out


@click.command("sessions")
@click.argument("store")
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of the table.")
@click.option("--state", "states", multiple=True, type=click.Choice(STATE_NAMES),
              help="Only sessions in this state (repeatable).")
def sessions(store: str, as_json: bool, states: tuple[str, ...]) -> None:
    """List the sessions of STORE (folder or postgresql:// URL) and their state."""
    from fsm_stage.cli import JSON_FORMAT_VERSION
    from fsm_stage.fleet.listing import list_sessions

    infos = list_sessions(store, states=states or None)
    for info in infos:
        if info.state == "damaged":
            click.echo(f"fsm-stage sessions: session {info.id}: its log cannot be read "
                       "(fsm-stage state names the damage)", err=True)
    if as_json:
        click.echo(json.dumps({"format_version": JSON_FORMAT_VERSION,
                               "sessions": [i.to_json() for i in infos]}, indent=2))
        return
    for info in infos:
        extra = f"  review {info.review_id}" if info.review_id else ""
        click.echo(f"{info.id}\t{info.state}\t{info.events} events{extra}")


@click.command("send")
@click.argument("store")
@click.argument("session")
@click.argument("text")
@click.option("--stage", "kind", flag_value="stage", help="TEXT is a /stage argument.")
@click.option("--plan", "kind", flag_value="plan", help="TEXT is a /plan argument.")
@click.option("--new", "new", is_flag=True, help="Start SESSION when it does not exist.")
@click.option("--id", "input_id", default=None, help="The input's id (its idempotency key).")
@click.option("--requester", default=None, metavar="NAME",
              help="With --new: who started the session (a review's not_requester refuses their approval).")
@click.option("--cwd", "cwd", default=None, type=click.Path(path_type=Path, file_okay=False),
              help="With --new: the session's working folder on the workers (default: this folder).")
def send(store: str, session: str, text: str, kind: str | None, new: bool, input_id: str | None,
         requester: str | None, cwd: Path | None) -> None:
    """Record TEXT as a durable input of SESSION in STORE and wake its workflow."""
    if not new and (requester is not None or cwd is not None):
        raise click.UsageError("--requester and --cwd go with --new (a new session's header records them)")
    from fsm_stage.reviews._team import REVIEWER_NAME_RE

    if requester is not None and not REVIEWER_NAME_RE.fullmatch(requester):
        raise click.BadParameter(f"{requester[:70]!r} is not a reviewer name ({REVIEWER_NAME_RE.pattern})",
                                 param_hint="--requester")
    _dbos()
    from fsm_stage.fleet import Store, check_session_id
    from fsm_stage.fleet.workflows import FleetClient
    from fsm_stage.log.events import SessionHeader

    check_session_id(session)
    extra = {"requester": requester} if requester is not None else {}
    header = SessionHeader(session, cwd=str((cwd or Path.cwd()).absolute()), extra=extra) if new else None
    with FleetClient(Store(store)) as client:
        checked = [k for k, v in (("cwd", cwd), ("requester", requester)) if v is not None]
        iid = client.send_input(session, kind or "message", text, input_id=input_id, create=header,
                                checked=checked)
    click.echo(iid)


@click.command("answer")
@click.argument("store")
@click.argument("session")
@click.argument("review")
@click.option("--approve", "outcome", flag_value="approve")
@click.option("--keep", "outcome", flag_value="keep")
@click.option("--dismiss", "outcome", flag_value="dismiss")
@click.option("--feedback", default=None, help="Feedback text with --keep.")
def answer(store: str, session: str, review: str, outcome: str | None, feedback: str | None) -> None:
    """Answer REVIEW of SESSION in STORE and wake the session's workflow."""
    if outcome is None:
        raise click.UsageError("answer: give one of --approve, --keep, --dismiss")
    _dbos()
    from fsm_stage.cli._wake import webhooks
    from fsm_stage.fleet import Store, check_session_id
    from fsm_stage.fleet.workflows import FleetClient

    check_session_id(session)
    with webhooks(), FleetClient(Store(store)) as client:
        client.answer(session, review, outcome, feedback=feedback, by="cli")
    click.echo(f"{review}: {outcome}")


COMMANDS = (worker, sessions, send, answer)
