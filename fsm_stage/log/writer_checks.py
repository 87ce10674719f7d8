"""Checks every writer runs before an event is committed.

A log fsm_stage writes must never be one that a strict reader refuses (DSH's loader, or
``fsm-stage state --strict``, i.e. ``dsh.read_log(strict=True)``), nor one whose folds
misread. ``check_new_event`` is called by ``MemoryLog`` and ``JsonlLog`` for each event of an
``append``/``append_many`` batch before anything is written, so a refused event leaves the log
unchanged. (Surface-op rules, including "only the surface types carry a ``surfaceOp`` or
``sourceEventSeqs``", are checked by the same writers through ``Surface.probe``.)

Rules
-----
* ``type`` is ``domain/verb``: non-empty segments of ``[A-Za-z0-9_.-]`` joined by ``/``
  (``turn/start``, ``agent/inbox/spliced``, ``tool-workflow/run-end``). Storage-only row tags
  (``text-chunks``) and the header type ``session`` are not event types.
* ``data`` is JSON: ``json.dumps(data, allow_nan=False)`` succeeds (``check_json=False``
  skips this for a caller that encodes the line itself and fails the same way).
* A type outside DSH's vocabulary (``constants.KNOWN_EVENT_TYPES``) must be written
  ``ignorable: true`` — DSH's strict loader refuses it otherwise. It is ignorable when the
  caller passes ``ignorable=True``, when it starts with ``fsm/``, when it is fsm_stage's own
  ``system/message`` (the protected surface head; DSH has no such type) or is listed in the
  writer's ``ignorable_types``. ``allow_unknown=True`` (the writers' ``allow_unknown_types``)
  writes it without the flag anyway (for tests of readers; ``state --strict`` will refuse it).
* For DSH's types: ``data`` is a JSON object (every DSH event's is), and ``user/message``
  has ``content`` (every DSH message has it; the stage fold reads it). ``plan/mode``'s
  ``{active: bool}`` invariant stays with the plan-mode runtime validators
  (``fsm_stage.plan_mode``), which also judge existing logs (B109/B111): a writer-level check
  would stop those validators from ever seeing, and reporting, such an event. Such a log
  reads under ``read_log(strict=True)``, but ``fsm-stage state`` warns about the record and
  ``state --strict`` refuses it.

Unknown event types that are ignorable may carry any JSON ``data``.

``prepare_batch`` is the one append path both shipped writers share (review M2): it checks
each spec of a batch, builds its ``Event`` (contiguous seqs, one integer ``time`` for the
batch) and probes the batch's surface ops, all before the writer changes anything.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence

from fsm_stage.constants import FSM_EVENT_PREFIX, KNOWN_EVENT_TYPES, SYSTEM_MESSAGE, USER_MESSAGE
from fsm_stage.errors import InvalidEventError as InvalidEventError
from fsm_stage.log.events import Event, NewEvent
from fsm_stage.log.surface import Surface

#: ``domain/verb`` event type grammar (full match).
EVENT_TYPE_RE = re.compile(r"[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+")

#: Types fsm_stage invents that are always written ``ignorable: true`` besides ``fsm/…``.
OWN_EVENT_TYPES: frozenset[str] = frozenset({SYSTEM_MESSAGE})


def is_ignorable(type_: str, ignorable: bool, ignorable_types: Collection[str] = ()) -> bool:
    """Whether an event of ``type_`` is written with ``"ignorable": true`` (see module docs)."""
    own = type_.startswith(FSM_EVENT_PREFIX) or type_ in OWN_EVENT_TYPES
    return bool(ignorable or own or type_ in ignorable_types)


def check_new_event(
    spec: NewEvent,
    *,
    ignorable_types: Collection[str] = (),
    allow_unknown: bool = False,
    check_json: bool = True,
) -> bool:
    """Validate one event about to be appended; returns whether it is written ignorable.

    Raises ``InvalidEventError`` (a ``LogWriteError``) naming the type and what is wrong.
    """
    t = spec.type
    if not isinstance(t, str) or not EVENT_TYPE_RE.fullmatch(t):
        raise InvalidEventError(
            f"invalid event type {t!r}: expected `domain/verb` (e.g. `turn/start`, `fsm/note`)"
        )
    if check_json:
        try:
            json.dumps(spec.data, allow_nan=False)
        except (TypeError, ValueError) as err:
            raise InvalidEventError(f"event {t!r} data is not JSON: {err}") from None
    ignorable = is_ignorable(t, spec.ignorable, ignorable_types)
    if t not in KNOWN_EVENT_TYPES:
        if not ignorable and not allow_unknown:
            raise InvalidEventError(
                f"unknown event type {t!r} without ignorable: a strict DSH reader refuses it; "
                "append it with ignorable=True (or list it in the log's ignorable_types)"
            )
        return ignorable
    data = spec.data
    if not isinstance(data, dict):
        raise InvalidEventError(f"{t} data must be a JSON object, got {type(data).__name__}")
    if t == USER_MESSAGE and "content" not in data:
        raise InvalidEventError(f"{t} data needs `content` (the message parts), got keys {sorted(data)}")
    return ignorable


def prepare_batch(
    specs: Sequence[NewEvent],
    *,
    next_seq: int,
    now: int,
    surface: Surface,
    ignorable_types: Collection[str] = (),
    allow_unknown: bool = False,
    check_json: bool = True,
) -> list[Event]:
    """Validate a batch about to be appended and build its events; changes nothing.

    ``specs``: ``NewEvent``s (a plain tuple of the same five fields, in order, is accepted
    too). Event ``i`` gets seq ``next_seq + i`` and ``time=int(now)`` (epoch ms);
    ``source_event_seqs`` becomes a tuple and ``ignorable`` is decided by ``check_new_event``
    (``ignorable_types``, ``allow_unknown``, ``check_json`` as there). Surface ops are checked
    in order against ``surface`` as the batch would evolve it (``Surface.probe``; the surface
    itself is not mutated — apply the returned events after the write succeeded).

    Raises ``InvalidEventError`` or ``SurfaceOpError`` (both ``LogWriteError``) for the first
    refused event.
    """
    time = int(now)
    probe = surface.probe()
    evs: list[Event] = []
    for i, spec in enumerate(specs):
        if isinstance(spec, tuple):
            spec = NewEvent(*spec)
        ignorable = check_new_event(
            spec, ignorable_types=ignorable_types, allow_unknown=allow_unknown, check_json=check_json
        )
        srcs = tuple(spec.source_event_seqs) if spec.source_event_seqs is not None else None
        ev = Event(spec.type, next_seq + i, time, spec.data, spec.surface_op, srcs, ignorable)
        probe.check(ev)
        evs.append(ev)
    return evs
