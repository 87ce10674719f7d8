"""Checks every writer runs before an event is committed, so a strict reader never refuses the log.

``prepare_batch`` is the append path ``MemoryLog`` and ``JsonlLog`` share: it checks each
event of a batch (``check_new_event``), builds its ``Event`` (contiguous seqs, one integer
``time``) and probes its surface ops (``Surface.probe``), all before anything is written, so a
refused event (``LogWriteError``) leaves the log unchanged. Rules:

* ``type`` matches ``EVENT_TYPE_RE`` (``domain/verb``); ``data`` passes
  ``json.dumps(allow_nan=False)`` unless ``check_json=False``;
* a type outside ``constants.KNOWN_EVENT_TYPES`` must be ignorable (``is_ignorable``: passed
  ``ignorable=True``, ``fsm/…``, ``OWN_EVENT_TYPES`` or the writer's ``ignorable_types``)
  unless ``allow_unknown``; such events may carry any JSON ``data``;
* a DSH type's ``data`` is a JSON object, and ``user/message`` has ``content``.

Why, and why ``plan/mode`` payloads are not checked here: ``docs/log-decisions.md``."""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence

from fsm_stage.constants import FSM_EVENT_PREFIX, KNOWN_EVENT_TYPES, SYSTEM_MESSAGE, USER_MESSAGE
from fsm_stage.errors import LogWriteError as LogWriteError
from fsm_stage.log.events import Event, NewEvent
from fsm_stage.log.surface import Surface

#: ``domain/verb`` event type grammar (full match).
EVENT_TYPE_RE = re.compile(r"[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+")

#: Types fsm_stage invents that are always written ``ignorable: true`` besides ``fsm/…``.
OWN_EVENT_TYPES: frozenset[str] = frozenset({SYSTEM_MESSAGE})

# ``json.dumps(data, allow_nan=False)`` with its encoder built once (dumps builds one per call)
_JSON_CHECK = json.JSONEncoder(allow_nan=False).encode
_PLAIN_SCALARS = frozenset({str, bool, type(None)})
_PLAIN_DEPTH = 4
_PLAIN_INT_BITS = 64


def _plain_json(value: object, depth: int = 0) -> bool:
    """True when ``value`` is certainly JSON that ``json.dumps(allow_nan=False)`` accepts: only
    exact ``dict`` (``str`` keys), ``list``, ``str``, ``bool``, ``None`` and ``int`` of at most
    64 bits, nested at most ``_PLAIN_DEPTH`` deep. False means "not decided here" (floats,
    subclasses, tuples, deep or cyclic data): the caller runs ``json.dumps``."""
    if type(value) in _PLAIN_SCALARS:
        return True
    if type(value) is int:
        return value.bit_length() <= _PLAIN_INT_BITS
    if depth >= _PLAIN_DEPTH:
        return False
    if type(value) is dict:
        for k, v in value.items():
            if type(k) is not str or (type(v) not in _PLAIN_SCALARS and not _plain_json(v, depth + 1)):
                return False
        return True
    if type(value) is list:
        return all(type(v) in _PLAIN_SCALARS or _plain_json(v, depth + 1) for v in value)
    return False


def is_ignorable(type_: str, ignorable: bool, ignorable_types: Collection[str] = ()) -> bool:
    """Whether an event of ``type_`` is written with ``"ignorable": true``: when the caller asks, for
    ``fsm/…`` and ``OWN_EVENT_TYPES``, and for the writer's ``ignorable_types``."""
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

    Raises ``LogWriteError`` naming the type and what is wrong.
    """
    t = spec.type
    if not isinstance(t, str) or not EVENT_TYPE_RE.fullmatch(t):
        raise LogWriteError(
            f"invalid event type {t!r}: expected `domain/verb` (e.g. `turn/start`, `fsm/note`)"
        )
    if check_json and not _plain_json(spec.data):
        try:
            _JSON_CHECK(spec.data)
        except (TypeError, ValueError, RecursionError) as err:
            raise LogWriteError(f"event {t!r} data is not JSON: {err or 'nested too deep'}") from None
    ignorable = is_ignorable(t, spec.ignorable, ignorable_types)
    if t not in KNOWN_EVENT_TYPES:
        if not ignorable and not allow_unknown:
            raise LogWriteError(
                f"unknown event type {t!r} without ignorable: a strict DSH reader refuses it; "
                "append it with ignorable=True (or list it in the log's ignorable_types)"
            )
        return ignorable
    data = spec.data
    if not isinstance(data, dict):
        raise LogWriteError(f"{t} data must be a JSON object, got {type(data).__name__}")
    if t == USER_MESSAGE and "content" not in data:
        raise LogWriteError(f"{t} data needs `content` (the message parts), got keys {sorted(data)}")
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

    Raises ``LogWriteError`` for the first
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
