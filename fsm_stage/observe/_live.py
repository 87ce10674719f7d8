"""The live seam: log and trace the events a ``Session`` has just committed.

``appended(session, events)`` is called by ``Session.append``/``append_many`` after a commit.
Its cost when nobody listens is one set lookup per event plus one ``isEnabledFor`` and one
``sys.modules`` lookup per watched event: OpenTelemetry is never imported here; it is used only
when something else in the process already imported ``opentelemetry.trace`` (nobody can have
configured a tracer provider otherwise).
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final, Protocol

from fsm_stage.log.events import Event
from fsm_stage.log.projections.plan import PlanModeFold
from fsm_stage.log.projections.stage import StageFold
from fsm_stage.observe._attributes import REVIEW_SPAN, STEP_BOUNDARY_SPAN, span_attributes, span_event_name
from fsm_stage.observe._describe import LOGGERS, WATCHED, Observation, ScanContext, describe

__all__ = ["appended", "boundary", "tag_request"]

_LOGGERS: Final[dict[str, logging.Logger]] = {}
_TRACE_MODULE: Final = "opentelemetry.trace"
#: observation names that become events on the active span (the rest are spans or nothing)
_SPAN_EVENTS: Final = frozenset({"transition.applied", "tool.refused", "tool.asked", "review.requested",
                                 "review.redeemed", "repair", "graph.changed"})


class _Observed(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def events(self) -> Sequence[Event]: ...

    def read(self, projection: Any) -> Any: ...


def _logger(name: str) -> logging.Logger:
    found = _LOGGERS.get(name)
    if found is None:
        found = _LOGGERS[name] = logging.getLogger(name)
    return found


_STEPS = _logger("fsm_stage.steps")
_MODULES: Final = sys.modules
#: the last answer of ``_listening`` and whether a tracer provider was seen configured
_LAST: Final = [False]
_PROVIDER: Final = [False]
_UNKNOWN: Final = object()
#: each logger at the least severe level it emits (``isEnabledFor`` is cached by ``logging``)
_LISTENERS: Final = tuple((_logger(name), logging.DEBUG if name == "fsm_stage.steps" else logging.INFO)
                          for name in LOGGERS)
#: the session's stage and plan mode at each step (read through ``Session.read``: O(new events))
_STAGE: Final = StageFold()
_PLAN: Final = PlanModeFold()


def _otel() -> Any:
    """``opentelemetry.trace`` when something already imported it, else None (never imports)."""
    return sys.modules.get(_TRACE_MODULE)


#: a level nothing logs at: its entry in the steps logger's level cache says ``_LAST`` is current
_MARK: Final = 3


def _listening() -> bool:
    """Whether any ``fsm_stage.*`` logger is enabled at the level it emits.

    ``logging`` clears every logger's level cache on any configuration change (``setLevel``,
    ``disable``, ``dictConfig``), so the answer computed last stays valid while the steps
    logger's cache holds ``_MARK``, a level only this function asks about (a record logged on
    that logger fills the cache too, for its own level, so a non-empty cache proves nothing):
    the usual call costs one attribute read and one dict lookup."""
    cache = getattr(_STEPS, "_cache", None)
    if cache is not None and _MARK in cache:
        return _LAST[0]
    _STEPS.isEnabledFor(_MARK)  # marked first: a change while the loggers are asked clears it
    listening = [lg.isEnabledFor(level) for lg, level in _LISTENERS]  # all of them: fills the caches
    _LAST[0] = any(listening)
    return _LAST[0]


def _provider_set(otel: Any) -> bool:
    """Whether a global tracer provider is configured (remembered: it cannot be unset)."""
    if _PROVIDER[0]:
        return True
    # the API's global (``get_tracer_provider()`` reads os.environ on every call while unset)
    configured = getattr(otel, "_TRACER_PROVIDER", _UNKNOWN)
    if configured is _UNKNOWN:
        configured = None if isinstance(otel.get_tracer_provider(), otel.ProxyTracerProvider) else True
    if configured is None:
        return False
    _PROVIDER[0] = True
    return True


def _tracing(otel: Any) -> bool:
    """Whether spans can record: a tracer provider is configured, or the active span records
    (a host that passed its own provider to its framework)."""
    return _provider_set(otel) or bool(otel.get_current_span().is_recording())


_APPEND_LISTENERS: list[Callable[[Any, Sequence[Event]], None]] = []


def add_listener(listener: Callable[[Any, Sequence[Event]], None]) -> Callable[[], None]:
    """Call ``listener(session, events)`` after every committed ``Session`` append of this
    process (review webhooks use it); returns the function that removes it. A listener that
    raises is logged at DEBUG and ignored: a committed append never becomes an error."""
    _APPEND_LISTENERS.append(listener)

    def remove() -> None:
        if listener in _APPEND_LISTENERS:
            _APPEND_LISTENERS.remove(listener)

    return remove


def appended(session: _Observed, events: Sequence[Event]) -> None:
    """Log (and, with OpenTelemetry loaded and a provider configured, trace) ``events`` just
    committed to ``session``.

    With logging quiet and no OpenTelemetry loaded it returns after two lookups (bench row 11).
    Never raises: an observer that fails must not turn a committed append into an error, so a
    failure here is logged at DEBUG on ``fsm_stage.steps`` and dropped."""
    for listener in tuple(_APPEND_LISTENERS) if _APPEND_LISTENERS else ():
        try:
            listener(session, events)
        except Exception:  # a listener must never fail a committed append
            _STEPS.debug("a listener on session %s failed", session.id, exc_info=True)
    otel = _MODULES.get(_TRACE_MODULE)
    if otel is not None and not _tracing(otel):
        otel = None
    if otel is None and not _listening():
        return
    watched = [ev for ev in events if ev.type in WATCHED]
    if not watched:
        return
    try:
        ctx = ScanContext(session.events)
        for ev in watched:
            for obs in describe(session.id, ev, ctx):
                _emit(session, obs, otel, ev)
    except Exception:  # an observer must never fail a committed append
        _STEPS.debug("observing session %s failed", session.id, exc_info=True)


def _emit(session: _Observed, obs: Observation, otel: Any, ev: Event) -> None:
    logger = _logger(obs.logger)
    if logger.isEnabledFor(obs.level):
        logger.log(obs.level, obs.message, extra=dict(obs.fields))
    if otel is None:
        return
    if obs.name in ("review.answered", "review.expired"):
        _review_span(otel, obs, ev)
        return
    span = otel.get_current_span()
    if not span.is_recording():
        return
    # the step's stage and plan mode; a notice or plan/mode logged later in the same step (the
    # boundary flush) overwrites them, so the request span ends with what the model was sent
    if obs.name == "step.start":
        _tag(span, {"session": session.id, "stage": session.read(_STAGE), "plan_mode": session.read(_PLAN)})
    elif obs.name in ("transition.applied", "stage.announced"):
        plan = obs.fields.get("plan_mode")
        _tag(span, {"plan_mode": plan} if isinstance(plan, bool) else {"stage": obs.fields.get("to_stage")})
    if obs.name in _SPAN_EVENTS:
        span.add_event(span_event_name(obs.name), span_attributes(obs.fields), timestamp=ev.time * 1_000_000)


def _review_span(otel: Any, obs: Observation, ev: Event) -> None:
    """One span from the review's request to its answer (the wait), ended as it is recorded."""
    wait = obs.fields.get("wait_seconds")
    end = ev.time * 1_000_000
    start = end - round(wait * 1e9) if isinstance(wait, int | float) else end
    tracer = otel.get_tracer("fsm_stage")
    fields = {**obs.fields, "conversation": obs.fields.get("session")}
    span = tracer.start_span(REVIEW_SPAN, start_time=start, attributes=span_attributes(fields))
    if obs.name == "review.expired":
        span.set_status(otel.Status(otel.StatusCode.ERROR, "review expired"))
    span.end(end_time=end)


def _tag(span: Any, fields: Mapping[str, Any]) -> None:
    if span.is_recording():
        span.set_attributes(span_attributes(fields))


def tag_request(session: _Observed) -> None:
    """Put ``session``'s logged stage and plan mode (``fsm_stage.stage``, ``fsm_stage.plan_mode``,
    ``fsm_stage.session.id``) on the active span. The seam already does this at every
    ``step/start``; a host whose model-request span opens only after the step (a LangChain
    callback handler's ``on_chat_model_start``, say) calls it inside that span. The stage is
    the last logged stage record (None, not set, before the first). Does nothing unless
    ``opentelemetry.trace`` is loaded and the active span records."""
    otel = _otel()
    if otel is None:
        return
    span = otel.get_current_span()
    if span.is_recording():
        _tag(span, {"session": session.id, "stage": session.read(_STAGE), "plan_mode": session.read(_PLAN)})


_NO_SPAN: Final = contextlib.nullcontext()


def boundary(session_id: str, turn: int | None = None,
             step: int | None = None) -> contextlib.AbstractContextManager[Any]:
    """A span ``fsm_stage.step.boundary`` around a step's pre-step boundary work (pending
    transitions applied, handoffs written); a shared no-op context unless OpenTelemetry is
    loaded with a global tracer provider configured."""
    otel = _otel()
    if otel is None or not _provider_set(otel):
        return _NO_SPAN
    return _boundary_span(otel, session_id, turn, step)


@contextlib.contextmanager
def _boundary_span(otel: Any, session_id: str, turn: int | None, step: int | None) -> Iterator[Any]:
    tracer = otel.get_tracer("fsm_stage")
    attrs = span_attributes({"session": session_id, "conversation": session_id, "turn": turn, "step": step})
    with tracer.start_as_current_span(STEP_BOUNDARY_SPAN, attributes=attrs) as span:
        yield span
