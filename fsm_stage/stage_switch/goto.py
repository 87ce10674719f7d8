"""The ``goto_stage`` validation chain (docs/contracts.md plus graph edges; S43–S68).

``run_goto_stage(controller, args, agent, signal)`` checks the arguments, the target, the
graph edge and its guards, decides full or light (``requires_handoff``), writes the handoff
document of a full transition, logs the review request (one open stage review per session),
asks the reviewer and logs the answer; the approved, unredeemed review is the pending
transition (``stage_switch.durable``). A resumed call (same call id) reuses its logged review.
Every refusal raises ``ToolFailure``; only the review events are logged.
"""

from __future__ import annotations

import asyncio
import os
import posixpath
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fsm_stage.config.review_rules import merged_rules, rules_json
from fsm_stage.errors import GraphChangedError, ReviewPayloadChangedError, ReviewPending, _ReviewBusy
from fsm_stage.graph import StageCursor
from fsm_stage.handoff import HandoffPathError, LocalHandoffStore, handoff_relative_path
from fsm_stage.reviews._channel import Answer, ReviewDismissed
from fsm_stage.reviews._flow import Outcome, Ticket, conduct, existing, open_request, reserve
from fsm_stage.reviews._fold import stage_payload_sha256
from fsm_stage.reviews._stage import Decline, build_review_question, evaluate_review, stage_option_labels
from fsm_stage.runtime.abort import AbortSignal
from fsm_stage.runtime.tools import ToolFailure, ToolOutput, current_call_id
from fsm_stage.stage_switch.durable import graph_specs
from fsm_stage.stage_switch.texts import NO_AGENT_MESSAGE, RELOADED_MESSAGE
from fsm_stage.stage_switch.tool import goto_stage_argument_problem, presentation_meta, render_result

if TYPE_CHECKING:
    from fsm_stage.runtime.agent import Agent
    from fsm_stage.runtime.session import Session
    from fsm_stage.stage_switch.controller import StageController

__all__ = ["requires_handoff", "run_goto_stage"]


INLINE_HANDOFF_CHARS = 64 * 1024
"""``LocalHandoffStore`` writes handoff documents up to this many characters on the event loop's
thread (the write and its fsyncs cost about what the session log's own appends do there);
longer ones, and every write of another blocking store, go through ``asyncio.to_thread``."""


def _refusal_text(ctl: StageController, agent: Agent, session: Session, target: str,
                  current: str | None = None) -> str | None:
    """The model-facing reason ``current -> target`` is refused, or None when allowed
    (``current``: the stage now, when the caller has just read it)."""
    if current is None:
        current = ctl.current(session)
    if not ctl.graph.has_state(current):
        return None  # a stage no longer in the graph may go to any configured stage
    refusal = ctl.graph.explain_refusal(StageCursor(current), target, ctl.eligible_fn(agent))
    if refusal is None:
        return None
    allowed = ", ".join(ctl.targets(agent, session)) or ctl.catalog.text("errors.no_targets")
    if refusal.kind == "guard":
        return ctl.catalog.text("errors.guard_blocked", stage=target, guards=", ".join(refusal.failing),
                                 count=len(refusal.failing), targets=allowed)
    return ctl.catalog.text("errors.not_a_target", stage=target, current=current, targets=allowed)


def requires_handoff(ctl: StageController, session: Session) -> bool:
    """Full (True) or light (False), decided now (S63, S64, S68). Raises
    ``ToolFailure(errors.missing_token_meter)`` when a threshold is set without a meter."""
    threshold = ctl.config.min_handoff_tokens
    if threshold is None:
        return True
    if ctl.token_meter is None:
        raise ToolFailure(ctl.catalog.text("errors.missing_token_meter"))
    return ctl.token_meter.surface_tokens(session) >= threshold


async def run_goto_stage(ctl: StageController, args: Mapping[str, Any], agent: Agent | None,
                     signal: AbortSignal | None = None) -> ToolOutput:
    """Execute ``goto_stage`` (validation chain plus graph edges; S43–S68).

    ``args`` are first checked against the tool's parameter schema
    (``goto_stage_argument_problem``: the seed's host validates input against the schema
    before ``execute``; fsm_stage has no such host layer), then the spec's chain runs.

    Returns ``ToolOutput(value, text, meta)`` on approval (the approval is then logged and
    pending); raises ``ToolFailure`` with the model-facing reason otherwise (a refusal before
    the review writes nothing; a keep/dismiss is logged as the review's answer).
    ``ReviewPending`` (suspending channel) and ``asyncio.CancelledError`` (after logging a
    dismiss answer) propagate.
    """
    problem = goto_stage_argument_problem(args, ctl.catalog)
    if problem is not None:
        raise ToolFailure(problem)
    if agent is None:
        raise ToolFailure(NO_AGENT_MESSAGE)
    session = agent.session
    target: str = args["stage"]
    if ctl.config.stage(target) is None:
        raise ToolFailure(
            ctl.catalog.text("errors.not_configured", stage=target, stages=ctl.sorted_stages()))
    from_stage = ctl.current(session)
    if target == from_stage:
        raise ToolFailure(ctl.catalog.text("errors.already_current", stage=target))
    refusal = _refusal_text(ctl, agent, session, target, from_stage)
    if refusal is not None:
        raise ToolFailure(refusal)
    review = ctl.review
    if review is None:
        raise ToolFailure(ctl.catalog.text("errors.no_user_questions"))
    full = requires_handoff(ctl, session)
    handoff: str | None = args.get("handoff")
    if full and (handoff is None or not handoff.strip()):
        raise ToolFailure(ctl.catalog.text("errors.requires_handoff"))
    handoff_text = handoff if full else None
    call_id = current_call_id()
    payload = stage_payload_sha256(target, handoff_text)
    # one read of the log until the reviewer is asked, one after (``Session.one_refresh``)
    with session.one_refresh():
        try:
            record = existing(session, "stage", call_id, payload)
            if record is None:
                with reserve(session, "stage", "stage"):
                    graph = graph_specs(ctl, session)  # a changed graph refuses before anything is written
                    handoff_path = (await _write_handoff(ctl, session, target, handoff)
                                    if full and handoff else None)
                    options = stage_option_labels(ctl.catalog, full)
                    ticket = Ticket("stage", from_stage, target, options, "full" if full else "light",
                                    handoff_path, payload, _rules(ctl, from_stage, target), handoff_text)
                    record = open_request(session, ticket, call_id, "stage", graph)
        except _ReviewBusy as busy:
            raise ToolFailure(busy.text) from None
        except (ReviewPayloadChangedError, GraphChangedError) as exc:  # one line to the model, no traceback
            raise ToolFailure(str(exc)) from None
        question = build_review_question(ctl.catalog, target, handoff_text, from_stage=from_stage,
                                         handoff_path=record.handoff_path if full else None)

        asked_from = record.from_  # a resumed call: where the review was asked, not where we are now

        def moved() -> str | None:
            if ctl.closed:
                return "closed"
            with ctl.session_lock(session):
                if (ctl.current(session) != asked_from
                        or _refusal_text(ctl, agent, session, target, asked_from) is not None):
                    return "stage-changed"
            return None

        def interpret(answers: list[Answer]) -> tuple[str, str | None, str | None]:
            verdict = evaluate_review(answers, ctl.catalog)
            if isinstance(verdict, Decline):
                return "keep", None, verdict.feedback
            return "approve", verdict.option, None

        try:
            outcome = await conduct(session, record, ask=lambda: review.ask([question], agent, signal=signal),
                                    interpret=interpret, moved=moved)
        except ReviewDismissed:
            raise ToolFailure(ctl.catalog.text("errors.dismissed")) from None
        except Exception as exc:
            if isinstance(exc, ReviewPending):
                raise
            raise ToolFailure(str(exc) or type(exc).__name__) from exc
    if ctl.closed:
        raise ToolFailure(RELOADED_MESSAGE)
    return _result(ctl, agent, session, outcome, asked_from, target, handoff, full)


def _result(ctl: StageController, agent: Agent, session: Session, outcome: Outcome, from_stage: str,
            target: str, handoff: str | None, full: bool) -> ToolOutput:
    """The tool's output (or ``ToolFailure``) for a settled review (also on a resume)."""
    answer, red = outcome.answer, outcome.redemption
    if answer.expired:  # closed by its deadline: nobody decided
        raise ToolFailure(ctl.catalog.text("errors.expired"))
    if answer.outcome not in ("approve", "keep"):  # dismiss, or nothing any writer logs
        raise ToolFailure(ctl.catalog.text("errors.dismissed"))
    if answer.outcome == "keep":
        feedback = answer.feedback or ""
        if feedback == "":
            raise ToolFailure(ctl.catalog.text("errors.keep_stage"))
        raise ToolFailure(ctl.catalog.text("errors.keep_stage_feedback", feedback=feedback))
    if red is not None and not red.applied:
        if red.reason == "closed" or ctl.closed:
            raise ToolFailure(RELOADED_MESSAGE)
        now = ctl.current(session)
        if now == target:
            raise ToolFailure(ctl.catalog.text("errors.already_current", stage=target))
        if now != from_stage:
            raise ToolFailure(ctl.catalog.text("errors.stage_changed", stage=target, current=now))
        refusal = _refusal_text(ctl, agent, session, target)
        raise ToolFailure(refusal or ctl.catalog.text("errors.stage_changed", stage=target, current=now))
    ctl.pending.clear(session)  # an approval replaces an earlier user selection, as in the seeds
    shape = answer.shape or outcome.record.shape
    handoff_path = outcome.record.handoff_path if shape == "full" else None
    value: dict[str, Any] = {"approved": True, "stage": target}
    if handoff_path is not None:
        value["handoffPath"] = handoff_path
    dropped = shape == "light" and handoff is not None and bool(handoff.strip())
    saved = outcome.record.handoff_path if shape == "light" else None  # written for the review
    text = render_result(ctl.catalog, value, dropped_handoff=dropped, unused_handoff_path=saved)
    return ToolOutput(value, text, presentation_meta(value))


async def _write_handoff(ctl: StageController, session: Session, target: str, handoff: str) -> str:
    """Write the handoff document (the seventh step of the goto_stage chain,
    docs/contracts.md F); returns its absolute path.

    Fails with ``errors.no_fs`` without a store. A ``HandoffPathError`` (a path the store
    refuses) and any exception without an OS error code (a store's own message, e.g.
    ``OSError("disk full")``, S49) pass through unchanged; an ``OSError`` carrying an OS
    error code (``ENAMETOOLONG``, ``EACCES``, ``ENOSPC``…) becomes
    ``errors.handoff_write_failed`` naming the document's path and the OS's reason instead
    of Python's ``[Errno N] …`` text.
    """
    if ctl.handoffs is None:
        raise ToolFailure(ctl.catalog.text("errors.no_fs"))
    cwd = session.header.cwd
    try:
        policy = ctl.sandbox.resolve(session) if ctl.sandbox is not None else None
        relative = handoff_relative_path(ctl.config.handoff_dir, session.id, target)
        store = ctl.handoffs
        if not getattr(store, "blocking", True) or (
            type(store) is LocalHandoffStore and len(handoff) <= INLINE_HANDOFF_CHARS
        ):
            # no I/O (MemoryHandoffStore), or a small document on the local disk: written on the
            # event loop like the session log's own fsynced appends (a thread hop costs more)
            return store.write(relative, handoff, cwd=cwd, policy=policy)
        # a large document, or a store of unknown cost (remote?): keep the event loop responsive
        return await asyncio.to_thread(store.write, relative, handoff, cwd=cwd, policy=policy)
    except HandoffPathError as exc:
        raise ToolFailure(str(exc)) from exc
    except OSError as exc:
        if exc.errno is None:
            raise ToolFailure(str(exc) or type(exc).__name__) from exc
        shown = posixpath.join(cwd, str(relative)) if cwd is not None else str(relative)
        reason = exc.strerror or os.strerror(exc.errno)
        raise ToolFailure(ctl.catalog.text(
            "errors.handoff_write_failed", stage=target, path=shown, reason=reason)) from exc
    except Exception as exc:
        raise ToolFailure(str(exc) or type(exc).__name__) from exc


def _rules(ctl: StageController, from_stage: str, target: str) -> dict[str, Any] | None:
    """The review rules of the edge ``from_stage -> target`` (the graph's ``review`` unless the
    edge has its own), as logged in the request."""
    edge = next((e for e in ctl.config.edges_from(from_stage) if e.target == target), None)
    return rules_json(merged_rules(ctl.config.review, edge.review if edge is not None else None))
