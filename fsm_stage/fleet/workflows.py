"""DBOS workflows that run fleet sessions (needs ``dbos``: extra ``[fleet]``).

One workflow per **session run**, id ``fsm-stage:<session id>:<run>`` (``run``: how many
``fsm/fleet/end`` records the log holds), so DBOS never runs two of one run and any process
can name it from the log. The workflow loops: a step that ``drive``s the session (its output,
the wait point, is recorded), then ``DBOS.recv`` on the topic of that wait point —
``fsm:review:<review id>`` while a review waits, ``fsm:input`` otherwise — with a timeout of
``FleetApp.poll`` seconds (a wake-up lost with a crashed sender is then found in the log). It
ends when the run ends (``complete`` / ``failed``).

Senders (``send_input``, ``answer``; the CLI's ``fsm-stage send`` / ``answer``) write the log
first, then enqueue the run's workflow (idempotent by id) and ``send`` the wake-up with an
idempotency key (the input id; the review id). They use a ``DBOSClient``: no launch needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any, Final

import attrs
from dbos import DBOS, DBOSClient, EnqueueOptions

from fsm_stage.config import ConfigFile
from fsm_stage.driver import Model
from fsm_stage.errors import ClaimLostError, LogLockedError, UserError
from fsm_stage.fleet.drive import MAX_INTERRUPTED, drive
from fsm_stage.fleet.fence import FencedLog
from fsm_stage.fleet.inputs import check_input, record_answer, record_input
from fsm_stage.fleet.records import END, fold
from fsm_stage.fleet.store import Store
from fsm_stage.log.events import SessionHeader
from fsm_stage.runtime import Tool

__all__ = [
    "APP_VERSION",
    "INPUT_TOPIC",
    "QUEUE",
    "WORKFLOW",
    "FleetApp",
    "FleetClient",
    "configure",
    "review_topic",
    "workflow_id",
]

QUEUE: Final = "fsm-stage-fleet"
"""The DBOS queue session workflows are enqueued on."""
WORKFLOW: Final = "fsm_stage.fleet.session"
"""The registered name of the session workflow."""
APP_VERSION: Final = "fsm-stage-fleet-1"
"""The DBOS application version of workers and clients (recovery stays within one version)."""
INPUT_TOPIC: Final = "fsm:input"
SENDER_LOCK_TIMEOUT: Final = 30.0
"""Seconds a sender waits for a JSONL log a driver has open (a drive holds it until its next
wait point)."""
MAX_ERRORS: Final = 8
"""Drive attempts in a row that raise (a database restart, a locked file) before a run fails;
the failure is logged first (``fsm/fleet/end``), and while the log cannot take it the run
keeps trying (back-off up to 10 s)."""


def review_topic(review_id: str) -> str:
    """The DBOS topic a session waiting for review ``review_id`` receives on."""
    return f"fsm:review:{review_id}"


def workflow_id(session_id: str, run: int) -> str:
    """The DBOS workflow id of ``session_id``'s run ``run``."""
    return f"fsm-stage:{session_id}:{run}"


@attrs.define
class FleetApp:
    """What this process's workflows drive with: the ``store``, the stage ``graph``, a
    ``model_factory()`` (called once per drive) and ``tools_factory()`` (host tools), the
    ``worker`` name written in claims, ``slots`` (drives at once in this process), ``poll``
    (seconds a waiting workflow re-reads the log without a wake-up), ``max_interrupted``
    (crashed turns in a row before a run fails, ``drive``), ``guards`` (the graph's guard
    values, ``drive``), ``accept_graph_change`` (sessions recorded under another version of
    ``graph`` go on under this one, ``drive``), ``on_drive(session_id, result)`` (called after
    each drive with its JSON result); ``lost`` is set when a
    workflow met an exception from DBOS (the worker then exits)."""

    store: Store
    graph: ConfigFile
    model_factory: Callable[[], Model]
    tools_factory: Callable[[], Sequence[Tool]] = tuple
    worker: str = "local"
    slots: int = 4
    poll: float = 30.0
    max_interrupted: int = MAX_INTERRUPTED
    guards: Mapping[str, bool] | None = None
    on_drive: Callable[[str, dict[str, Any]], None] | None = None
    accept_graph_change: bool = False
    lost: BaseException | None = None
    _semaphore: asyncio.Semaphore | None = None

    def semaphore(self) -> asyncio.Semaphore:
        """The drive-slot semaphore (created on first use, in the running loop)."""
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.slots)
        return self._semaphore


_APP: FleetApp | None = None


def configure(app: FleetApp) -> None:
    """Make ``app`` what this process's session workflows use (before ``DBOS.launch``)."""
    global _APP
    _APP = app


def _app() -> FleetApp:
    if _APP is None:
        raise UserError("fleet workflows are not configured in this process (fleet.workflows.configure)")
    return _APP


@DBOS.step(name="fsm_stage.fleet.drive")
async def _drive_step(session_id: str) -> dict[str, Any]:
    """Drive the session once; returns the ``DriveResult`` as JSON, or ``{state: busy|error|
    claim-lost, message}`` (the workflow waits and tries again; claim-lost: another driver)."""
    app = _app()
    async with app.semaphore():
        try:
            log = await asyncio.to_thread(app.store.open, session_id)
        except LogLockedError as err:
            return {"state": "busy", "message": str(err)}
        except Exception as err:  # a database restart: try again later
            return {"state": "error", "message": str(err) or type(err).__name__}
        try:
            result = (await drive(log, graph=app.graph, model=app.model_factory(),
                                  tools=app.tools_factory(), worker=app.worker, guards=app.guards,
                                  max_interrupted=app.max_interrupted,
                                  accept_graph_change=app.accept_graph_change)).to_json()
        except ClaimLostError as err:
            result = {"state": "claim-lost", "message": str(err)}
        except LogLockedError as err:
            result = {"state": "busy", "message": str(err)}
        except Exception as err:
            result = {"state": "error", "message": str(err) or type(err).__name__}
        finally:
            with contextlib.suppress(Exception):
                log.close()
    if app.on_drive is not None:
        app.on_drive(session_id, result)
    return result


@DBOS.step(name="fsm_stage.fleet.fail")
async def _fail_step(session_id: str, message: str) -> bool:
    """Record ``fsm/fleet/end {state: failed}``; False when the log could not be written (the
    run then goes on trying: the log, not DBOS, says a run ended)."""
    app = _app()
    try:
        log = await asyncio.to_thread(app.store.open, session_id)
        try:  # claimed first: a driver still running the session stops at its next append
            fenced = FencedLog(log, app.worker)
            fenced.claim()
            fenced.append(END, {"state": "failed", "message": message[:500]})
        finally:
            log.close()
    except Exception:
        return False
    return True


@DBOS.workflow(name=WORKFLOW, max_recovery_attempts=10_000)
async def session_workflow(session_id: str) -> dict[str, Any]:
    """Run one session run: drive, wait on the wait point's topic, repeat until it ends.

    An exception out of DBOS itself (its database went away mid-operation, or another executor
    runs this workflow after a takeover) is never let through, since DBOS would record the run
    as failed: ``FleetApp.lost`` is set and this instance waits forever, and the worker exits
    (``EX_TEMPFAIL``) so the workflow, still pending, is recovered by a live worker."""
    try:
        return await _session(session_id)
    except Exception as err:
        app = _app()
        app.lost = err
        await asyncio.Event().wait()
        raise  # pragma: no cover - never reached


async def _session(session_id: str) -> dict[str, Any]:
    errors = 0
    while True:
        result = await _drive_step(session_id)
        state = result.get("state")
        if state in ("complete", "failed"):
            return result
        if state in ("busy", "error"):
            errors += 1
            if errors >= MAX_ERRORS and await _fail_step(session_id, str(result.get("message"))):
                return {"state": "failed", "message": result.get("message")}
            await DBOS.sleep_async(min(0.2 * 2 ** min(errors, 10), 10.0))
            continue
        errors = 0
        review = result.get("review_id")
        topic = review_topic(review) if state == "waiting-review" and review else INPUT_TOPIC
        await DBOS.recv_async(topic, timeout_seconds=_app().poll)


def _same_header(session_id: str, header: SessionHeader, wanted: SessionHeader,
                 checked: Collection[str]) -> None:
    """Raise ``UserError`` when ``header`` differs from ``wanted`` in a ``checked`` part."""
    def folder(cwd: str | None) -> str | None:  # one folder however it is spelled (``a/../b``)
        return os.path.realpath(cwd) if cwd else cwd

    parts = {"cwd": (folder(header.cwd), folder(wanted.cwd)),
             "requester": (dict(header.extra).get("requester"), dict(wanted.extra).get("requester"))}
    for name in checked:
        have, want = parts[name]
        if have != want:
            raise UserError(f"session {session_id!r} exists already, with {name} {have!r}; its header "
                            f"cannot become {want!r} (--new sets it only for a new session)")


class FleetClient:
    """Talks to a fleet from any process (``DBOSClient``, no launch): ``send_input`` and
    ``answer`` record in the log first, then start the run's workflow and wake it; ``start``
    makes sure a session with work has its workflow; ``wake_answered`` wakes a session whose
    review was answered by another channel. ``dbos_url`` overrides ``store.dbos_url`` (the
    DBOS system database). ``close()`` when done."""

    def __init__(self, store: Store, *, dbos_url: str | None = None) -> None:
        self.store = store
        self.dbos_url = dbos_url
        self._client: DBOSClient | None = None

    @property
    def client(self) -> DBOSClient:
        """The DBOS client (connected on first use)."""
        if self._client is None:
            # on PostgreSQL the workers wait on LISTEN/NOTIFY (DBOS's default): send with it too
            url = self.dbos_url or self.store.dbos_url
            client = DBOSClient(system_database_url=url, system_database_pool_size=2,
                                use_listen_notify=not url.startswith("sqlite:"))
            client._sys_db.run_migrations()  # a store no worker has opened yet (idempotent)
            self._client = client
        return self._client

    def close(self) -> None:
        """Disconnect."""
        if self._client is not None:
            self._client.destroy()
            self._client = None

    def __enter__(self) -> FleetClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _open(self, session_id: str, create: SessionHeader | None = None) -> Iterator[Any]:
        log = self.store.open(session_id, create=create, lock_timeout=SENDER_LOCK_TIMEOUT)
        try:
            yield log
        finally:
            log.close()

    def start(self, session_id: str, run: int | None = None) -> str:
        """Enqueue the workflow of ``session_id``'s current run (or ``run``) unless it exists;
        returns its id."""
        if run is None:
            with self._open(session_id) as log:
                run = fold(log.events).runs
        wid = workflow_id(session_id, run)
        options: EnqueueOptions = {"workflow_name": WORKFLOW, "queue_name": QUEUE, "workflow_id": wid,
                                   "app_version": APP_VERSION}
        self.client.enqueue(options, session_id)
        return wid

    def send_input(self, session_id: str, kind: str, text: str, *, input_id: str | None = None,
                   create: SessionHeader | None = None, checked: Collection[str] = ()) -> str:
        """Log the input (``record_input``; ``create``: start a new session), then wake the
        session's workflow with the input id as idempotency key; returns the input id. A text
        ``check_input`` refuses raises ``UserError`` before any session is created.
        ``checked``: the parts of ``create`` (``"cwd"``, ``"requester"``) a session that exists
        already must have too, else ``UserError`` and nothing is logged (they were asked for, and
        an existing session's header cannot change)."""
        check_input(kind, text)
        with self._open(session_id, create) as log:
            if create is not None:
                _same_header(session_id, log.header, create, checked)
            item = record_input(log, kind, text, input_id=input_id)
            run = fold(log.events).runs
        wid = self.start(session_id, run)
        self._wake(wid, {"input": item.id}, INPUT_TOPIC, f"input:{item.id}")
        return item.id

    def _wake(self, wid: str, message: dict[str, str], topic: str, key: str) -> None:
        """``send`` the wake-up, then push its notification now: a client has no notifier
        thread, and without the push a PostgreSQL waiter would only see it at its poll."""
        client = self.client
        client.send(wid, message, topic, idempotency_key=key)
        flush = getattr(client._sys_db, "_flush_notifications", None)
        if callable(flush) and getattr(client._sys_db, "use_listen_notify", False):
            flush()

    def answer(self, session_id: str, review_id: str, outcome: str, *, feedback: str | None = None,
               option: str | None = None, by: str = "api") -> None:
        """Log the answer to review ``review_id`` (``answer_review``), then wake the session
        with the review id as idempotency key. Raises the ``ReviewError``s."""
        with self._open(session_id) as log:
            record_answer(log, review_id, outcome, feedback=feedback, option=option, by=by)
            run = fold(log.events).runs
        self.wake_answered(session_id, review_id, run)

    def wake_answered(self, session_id: str, review_id: str, run: int | None = None) -> str:
        """Start ``session_id``'s run workflow (idempotent) and wake it on review
        ``review_id``'s topic, the review id as idempotency key (the answer is in the log
        already: ``fsm-stage inbox``, another process). ``run`` defaults to the log's (read
        without the writer lock). Returns the workflow id."""
        if run is None:
            from fsm_stage.log.locations import read_location
            from fsm_stage.log.postgres import read_postgres

            where = self.store.location_of(session_id)
            read = read_postgres if self.store.kind == "postgres" else read_location
            run = fold(read(where).events).runs
        wid = self.start(session_id, run)
        self._wake(wid, {"review": review_id}, review_topic(review_id), review_id)
        return wid
