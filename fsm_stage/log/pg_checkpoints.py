"""Projection checkpoints of a PostgreSQL session: what ``PostgresLog`` opens from.

A checkpoint is one ``fsm_checkpoints`` row ``(session, seq, body)``: ``seq`` (the watermark
W) is the last event it reflects and ``body`` a JSON object (``CHECKPOINT_FORMAT``) holding

* ``row``: ``[first seq, n, line digest]`` of the stored row that ends at W (its fingerprint),
* ``header``: the digest of the session's stored header text,
* ``surface``: the surface fold at W (``Surface.dump``),
* ``rows``: one ``{ver, cls, state}`` per projection of ``checkpointed()``, keyed by the
  projection's ``key`` and serialised by its ``dump`` (as ``checkpoints.Checkpoint`` does for
  JSONL logs): ``ver`` its ``STATE_VERSION``, ``cls`` its class's qualified name.

``restore`` checks every part and returns the restored folds, or ``None`` with the reason:
the caller then reads the session from the start (fails closed: a checkpoint that does not
validate is never used). ``encode`` builds a body; ``Seeds`` hands the restored (and later
advanced) states to ``runtime.Session.read`` through ``PostgresLog.projection_seed``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import attrs

from fsm_stage.log.events import Event
from fsm_stage.log.projections import Projection, ProjectionCursor, standard_projections
from fsm_stage.log.projections.spend import SpendFold
from fsm_stage.log.surface import Surface

CHECKPOINT_FORMAT = 1
"""The body format this fsm_stage writes and reads (another format is ignored)."""

CHECKPOINT_EVERY = 256
"""An append writes a checkpoint (inside its own INSERT statement) once this many events
follow the newest checkpoint this log wrote or opened from."""

_METHODS = ("init", "apply", "dump", "load")


def checkpointed() -> tuple[Projection[Any], ...]:
    """The projections a checkpoint holds: ``standard_projections()`` (plan mode, plan, turn,
    stage, told) and the stage/plan spend (``SpendFold``)."""
    return (*standard_projections(), SpendFold())


def digest(text: str) -> str:
    """The fingerprint of a stored header or row text: 16 hex chars of its SHA-256."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _cls(p: object) -> str:
    t = type(p)
    return f"{t.__module__}.{t.__qualname__}"


@attrs.frozen
class Restored:
    """A validated checkpoint: ``seq`` its watermark, ``surface`` the surface fold at it and
    ``states`` each checkpointed projection's state (by key)."""

    seq: int
    surface: Surface
    states: dict[str, Any]


def encode(seq: int, row: tuple[int, int, str], header_text: str, surface: Surface,
           cursors: Sequence[ProjectionCursor[Any]]) -> str:
    """The body of a checkpoint at ``seq`` (``row``: the stored ``(seq, n, line)`` ending at
    it); every cursor must already reflect exactly the events up to ``seq``."""
    rows = {c.projection.key: {"ver": c.projection.STATE_VERSION, "cls": _cls(c.projection),
                               "state": c.projection.dump(c.state)} for c in cursors}
    return json.dumps({"format": CHECKPOINT_FORMAT, "row": [row[0], row[1], digest(row[2])],
                       "header": digest(header_text), "surface": surface.dump(), "rows": rows},
                      ensure_ascii=False, separators=(",", ":"))


def restore(seq: int, body: str, row: tuple[int, int, str] | None, header_text: str, *,
            projections: Sequence[Projection[Any]],
            protect_system_head: bool) -> tuple[Restored | None, str]:
    """The checkpoint at ``seq`` with ``body``, checked against ``row`` (the stored row holding
    event ``seq``, None when there is none) and the stored header: ``(Restored, "")`` or
    ``(None, why it is not used)``. Never raises for a bad body."""
    try:
        raw = json.loads(body)
    except ValueError:
        return None, "checkpoint body is not JSON"
    if not isinstance(raw, dict) or raw.get("format") != CHECKPOINT_FORMAT:
        return None, "checkpoint of another format"
    if row is None or raw.get("row") != [row[0], row[1], digest(row[2])] or row[0] + row[1] - 1 != seq:
        return None, "the checkpoint's watermark row changed"
    if raw.get("header") != digest(header_text):
        return None, "the session's header changed"
    try:
        surface = Surface.load(raw.get("surface"), below=seq + 1, protect_system_head=protect_system_head)
    except ValueError:
        return None, "checkpoint surface does not load"
    stored = raw.get("rows")
    if not isinstance(stored, dict):
        return None, "checkpoint has no projection rows"
    states: dict[str, Any] = {}
    for p in projections:
        got = stored.get(p.key)
        if not isinstance(got, dict) or got.get("ver") != p.STATE_VERSION or got.get("cls") != _cls(p):
            return None, f"checkpoint row {p.key!r} is missing or of another version"
        try:
            states[p.key] = p.load(got.get("state"))
        except (ValueError, TypeError, KeyError, AttributeError) as err:
            return None, f"checkpoint row {p.key!r} does not load: {err}"
    return Restored(seq, surface, states), ""


class Seeds:
    """The log's own cursors over its events, one per ``checkpointed()`` projection, seeded
    from a restored checkpoint (or from the start); ``read_all()`` advances them to the log's
    end (an append does before it writes a checkpoint); ``seed(p)`` gives ``(state, watermark)``
    for a projection that folds exactly as one of them, else None."""

    def __init__(self, events: Sequence[Event], restored: Restored | None) -> None:
        self.cursors = [
            ProjectionCursor(p, events) if restored is None
            else ProjectionCursor(p, events, state=restored.states[p.key], watermark=restored.seq)
            for p in checkpointed()
        ]
        self._by_key = {c.projection.key: c for c in self.cursors}

    def read_all(self) -> None:
        """Fold every cursor up to the log's end."""
        for c in self.cursors:
            c.read()

    def seed(self, projection: object) -> tuple[Any, int] | None:
        """``(state, watermark)`` for ``projection`` when it folds exactly as the checkpointed one
        of its key (same class methods and state version, no instance settings) and the state
        reflects at least one event; else None (fold from the start)."""
        key = getattr(projection, "key", None)
        cursor = self._by_key.get(key) if isinstance(key, str) else None
        if cursor is None or getattr(projection, "__dict__", None):
            return None
        ref, mine = type(cursor.projection), type(projection)
        if getattr(projection, "STATE_VERSION", None) != cursor.projection.STATE_VERSION or not all(
                getattr(mine, m, None) is getattr(ref, m) for m in _METHODS):
            return None
        state, watermark = cursor.snapshot
        return None if watermark < 0 else (state, watermark)
