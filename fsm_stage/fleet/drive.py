"""``drive``: take one session to its next wait point with the reference loop.

The order, each decided from the log alone (a fold after every turn):

1. read the wait point without writing: nothing to do → return it (no claim is written);
2. claim the session (``fence.FencedLog.claim``), compose the runtime (stage switch and plan
   mode of the graph, suspending reviews, the host tools) over the fenced log;
3. loop: an open turn nobody runs → crash repair (``turn/end {kind: interrupted}``); a suspended
   turn whose reviews are all answered → ``Loop.resume``; a review past its deadline → its
   deadline's answer (``by: deadline``), then the same; one still unanswered → return
   ``waiting-review``; a turn that ended ``interrupted`` (a crash) or ``error`` (an exception
   escaped it) after it started work (a user message or a model reply is in it) → one
   continuation turn (the model sees the repaired history,
   ``TOOL_OUTCOME_UNKNOWN`` results included; a turn cut before any work is simply gone) — after
   ``max_interrupted`` (default ``MAX_INTERRUPTED``) in a row the run fails; a turn a stage or
   plan-mode budget stopped before its first step → return ``blocked`` (``waiting-review`` with
   the budget review's id under ``on_budget: review``) unless a command input waits, which is
   applied first, or an input arrived since, which tries again; a pending durable input →
   apply the earliest one (a message becomes the turn's ``user/message`` with the input's id,
   so it is consumed exactly once; ``/stage`` / ``/plan`` run as commands) and run the turn;
   else return
   ``needs-input``, or ``complete`` when the current stage has no outgoing transition.

One input per turn, taken at turn boundaries only, so the log a run leaves does not depend on
when inputs arrived relative to the driver.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from fsm_stage.config import ConfigFile, load_config
from fsm_stage.driver import Loop, Model
from fsm_stage.errors import ClaimLostError, GraphChangedError, LogLockedError, UserError
from fsm_stage.fleet.fence import FencedLog
from fsm_stage.fleet.records import APPLY, END, fold, session_state
from fsm_stage.log.events import log_now
from fsm_stage.runtime import Tool, user_message
from fsm_stage.text import visible

__all__ = ["MAX_INTERRUPTED", "WAIT_POINTS", "DriveResult", "drive"]

WAIT_POINTS = ("needs-input", "waiting-review", "blocked", "complete", "failed")
"""Where ``drive`` stops."""
MAX_INTERRUPTED = 3
"""Turns in a row ending ``interrupted`` (crashes) before the run is declared ``failed``."""


@attrs.frozen
class DriveResult:
    """Where ``drive`` stopped: ``state`` (``WAIT_POINTS``), ``review_id`` for
    ``waiting-review``, ``turns`` run by this call, ``epoch`` of its claim (0 when it wrote
    nothing), ``message`` for ``failed``."""

    state: str
    review_id: str | None = None
    turns: int = 0
    epoch: int = 0
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the DBOS workflow's step output)."""
        return attrs.asdict(self)


def _graph(graph: ConfigFile | str | Path) -> ConfigFile:
    loaded = graph if isinstance(graph, ConfigFile) else load_config(graph)
    if loaded.graph is None:
        raise UserError("drive needs a stage-graph file (a `stages:` list)")
    return loaded


def _final_stages(config: ConfigFile) -> frozenset[str]:
    graph = config.graph
    assert graph is not None
    return frozenset(s.name for s in graph.stages if not graph.edges_from(s.name))


def _read_only(log: Any, final: frozenset[str], config: ConfigFile,
               guards: Mapping[str, bool] | None, accept_graph_change: bool) -> DriveResult | None:
    """The wait point when there is nothing to write, else None (an idle session in a final
    stage without its ``fsm/fleet/end`` record is written by ``_run``)."""
    state, review = session_state(log.events)
    if state == "waiting-review":
        # an overdue review is closed by its deadline's answer, and the session goes on
        return None if _overdue(log) else DriveResult(state, review)
    if state in ("blocked", "complete", "failed"):
        return DriveResult(state)
    if state == "needs-input":
        try:
            probe = _host(log, config, guards, None)  # idle: composing it writes nothing
        except GraphChangedError:
            if accept_graph_change:
                return None  # recorded by the claimed drive, which accepts it
            raise
        try:
            return None if probe.current_stage() in final else DriveResult(state)
        finally:
            _close(probe)
    return None


def _overdue(log: Any) -> bool:
    """Whether an open review of ``log`` is past its deadline (by the log's clock)."""
    from fsm_stage.reviews._fold import fold_reviews
    from fsm_stage.reviews._team import overdue

    records = fold_reviews(log.events, log.header.seed_length).open
    return bool(overdue(records, log_now(log)))


def _expire(session: Any, fenced: FencedLog) -> bool:
    """Close the session's overdue reviews with their deadline's answer (the claim held);
    whether any was closed."""
    from fsm_stage.reviews._team import expire_overdue

    return bool(expire_overdue(session, now_ms=fenced.now()))


def _host(log: Any, config: ConfigFile, guards: Mapping[str, bool] | None,
          model: Model | None, accept_graph_change: bool = False) -> Any:
    from fsm_stage.integrations._host import StageHost

    return StageHost.open(log, graph=config, plan_mode=config.plan_mode is not None, guards=guards,
                          config=None if model is None else {"provider": model.provider,
                                                             "model": model.name},
                          accept_graph_change=accept_graph_change)


def _close(host: Any) -> None:
    for controller in (host.stage, host.plan):
        if controller is not None:
            controller.close()


async def drive(log: Any, *, graph: ConfigFile | str | Path, model: Model,
                tools: Iterable[Tool] = (), worker: str = "local", max_turns: int = 32,
                guards: Mapping[str, bool] | None = None,
                max_interrupted: int = MAX_INTERRUPTED, accept_graph_change: bool = False) -> DriveResult:
    """Drive the session of ``log`` (an open ``EventLog``) to its next wait point (module
    docstring) with ``model`` and the host ``tools`` under the stage ``graph`` (a loaded
    ``ConfigFile`` or a YAML path; plan mode from its ``plan_mode`` section). ``worker`` names
    the driver in its claim; ``max_turns`` bounds the turns of one call (then it returns the
    state reached, ``needs-input`` or a later one, and the next call goes on); ``guards`` fixes
    the graph's guard predicates; ``max_interrupted`` (>= 1) is how many turns in a row may end
``interrupted`` (worker crashes) before the run is declared ``failed``;
``accept_graph_change`` resumes a session recorded under another version of ``graph`` (its
new ``fsm/graph`` is recorded; without it ``GraphChangedError``). Returns a ``DriveResult``.

    Raises ``ClaimLostError`` when another driver claimed the session meanwhile (this one wrote
    nothing after that), ``UserError`` for a file without a stage graph or a ``max_interrupted``
    below 1, and what the log, the
    model (beyond the loop's retries, which end the turn ``error``) or a tool bug raises; the
    turn is then closed (``Loop``) or left for crash repair."""
    if not isinstance(max_interrupted, int) or max_interrupted < 1:
        raise UserError(f"max_interrupted must be an int >= 1, got {max_interrupted!r}")
    config = _graph(graph)
    final = _final_stages(config)
    fenced = FencedLog(log, worker)
    fenced.refresh()
    early = _read_only(log, final, config, guards, accept_graph_change)
    if early is not None:
        return early
    epoch = fenced.claim()
    host = _host(fenced, config, guards, model, accept_graph_change)
    try:
        for tool in tools:
            host.runtime.add_tool(tool)
        return await _run(host, fenced, model, final, epoch, max_turns, max_interrupted)
    except ClaimLostError:
        raise
    except Exception as exc:
        # a driver superseded mid-turn can trip over the newer driver's events in its own
        # checks (a step that already has a reply, say) before an append of its own is refused:
        # that is the lost claim, not a failure of the session
        if _superseded(fenced):
            raise ClaimLostError(f"session {fenced.header.id!r}: claim {epoch} of {worker!r} was "
                                 f"superseded ({type(exc).__name__}: {exc})") from exc
        raise
    finally:
        _close(host)


def _superseded(fenced: FencedLog) -> bool:
    try:
        return fenced.superseded()
    except Exception:  # the store is unreachable: the original error stands
        return False


async def _run(host: Any, fenced: FencedLog, model: Model, final: frozenset[str], epoch: int,
               max_turns: int, max_interrupted: int) -> DriveResult:
    # one Model answers every stage: it routes on each request's ``request.model`` itself
    loop = Loop(host.runtime, host.agent, model, warn_missing_models=False)
    session = host.agent.session
    turns = 0
    while True:
        fenced.refresh()
        if turns >= max_turns:
            state, review = session_state(session.events)
            return DriveResult(state if state in WAIT_POINTS else "needs-input", review, turns, epoch)
        view = fold(session.events)
        if session.is_turn_open:
            suspended = loop.driver.suspended()
            if suspended is None:
                if not loop.repair() and session.is_turn_open:
                    # run by a live loop of this process (another drive of this session, whose
                    # next append the claim just taken refuses): not this one's to close; retry
                    # later instead of looping here without ever yielding the event loop
                    raise LogLockedError(f"session {session.id!r}: its open turn is being run by another "
                                         "loop of this process; try again once it stops")
                continue
            waiting = [c.review_id for c in suspended.calls if not c.answered]
            if waiting and not _expire(session, fenced):
                return DriveResult("waiting-review", waiting[0], turns, epoch)
            if waiting:
                continue  # a review closed by its deadline: its call is answered now
            await loop.resume()
            turns += 1
            continue
        if view.unfinished:
            if view.interrupted >= max_interrupted:
                return _fail(fenced, epoch, turns,
                             f"{view.interrupted} turns in a row were interrupted or failed"
                             + _last_error(session.events))
            await loop.run_turn()
            turns += 1
            continue
        # a turn a budget stopped before its first step waits for a command or an answer (a
        # message would be stopped again): commands queued behind its message go first
        runnable = [i for i in view.pending if i.kind != "message"] if view.blocked else view.pending
        if view.blocked and not runnable:
            if _expire(session, fenced):
                continue  # a budget review closed by its deadline: decided again
            state, review = session_state(session.events)
            return DriveResult(state, review, turns, epoch)
        if runnable:
            item = runnable[0]
            if item.kind == "message":
                loop.agent.steer(user_message(item.text, id_factory=functools.partial(str, item.id)))
                await loop.run_turn()
            else:
                fenced.append(APPLY, {"id": item.id})
                await loop.runtime.run_command(loop.agent, f"/{item.kind} {item.text}".rstrip())
                fenced.append(APPLY, {"id": item.id, "done": True})
                if loop.agent.wants_turn:
                    await loop.run_turn()
            turns += 1
            continue
        if host.current_stage() in final:
            fenced.append(END, {"state": "complete"})
            return DriveResult("complete", None, turns, epoch)
        return DriveResult("needs-input", None, turns, epoch)


def _last_error(events: Any) -> str:
    """``; the last: MESSAGE`` when the last turn ended ``error`` with a message (a model or
    tool exception the loop caught: ``reason.error.message``), "" otherwise."""
    for ev in reversed(events):
        if ev.type != "turn/end":
            continue
        reason = ev.data.get("reason") if isinstance(ev.data, Mapping) else None
        error = reason.get("error") if isinstance(reason, Mapping) else None
        message = error.get("message") if isinstance(error, Mapping) else None
        if isinstance(message, str) and message.strip():
            shown = visible(" ".join(message.split()))
            return f"; the last: {shown[:299] + '…' if len(shown) > 300 else shown}"
        return ""
    return ""


def _fail(fenced: FencedLog, epoch: int, turns: int, message: str) -> DriveResult:
    fenced.append(END, {"state": "failed", "message": message})
    return DriveResult("failed", None, turns, epoch, message)
