"""The surface: the ordered list of model-visible node seqs, folded from ``surfaceOp``.

``Surface`` folds incrementally (``apply``; ``probe()`` checks a batch without changing it);
``fold_surface(events)`` folds a whole log. Rules (DSH session-log format):

* only ``SURFACE_TYPES`` may carry a ``surfaceOp`` or ``sourceEventSeqs``;
* ``"append"`` pushes the event's seq;
* ``Replace(start, end)`` finds the list *positions* of the boundary seqs ``start`` and ``end``
  (both on the surface, start not after end), splices out that inclusive run, puts the
  replacing event's seq in its place and bumps ``replace_generation``; after an earlier
  replace ``start`` may be numerically greater than ``end``. A replace cites every node it
  shadows in ``sourceEventSeqs``;
* with ``protect_system_head``, a replace covering a ``system/message`` node 0 must itself be a
  ``system/message`` over exactly that node."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from fsm_stage.constants import SURFACE_EVENT_TYPES, SYSTEM_MESSAGE
from fsm_stage.errors import LogWriteError as LogWriteError
from fsm_stage.log.events import Event, Replace, SurfaceOp

SURFACE_TYPES = SURFACE_EVENT_TYPES | {SYSTEM_MESSAGE}
"""Event types allowed to carry a surface op (the DSH three plus fsm_stage's ``system/message``)."""


#: The node-type map of every empty surface (never written: ``apply`` swaps in its own dict).
_NO_NODES: dict[int, str] = {}

class Surface:
    """Incremental surface fold (docs/session-log.md).

    ``nodes`` is the current list of node seqs (do not mutate it); ``replace_generation``
    counts replaces; ``head_is_system`` tells whether node 0 is a ``system/message``.
    ``protect_system_head=True`` enables the protected-head rule (docs/contracts.md).
    """

    __slots__ = ("_types", "nodes", "protect_system_head", "replace_generation")

    def __init__(self, *, protect_system_head: bool = False) -> None:
        self.nodes: list[int] = []
        self._types: dict[int, str] = _NO_NODES  # shared until the first node
        self.replace_generation = 0
        self.protect_system_head = protect_system_head

    def __len__(self) -> int:
        return len(self.nodes)

    @property
    def head_is_system(self) -> bool:
        """True when node 0 exists and is a ``system/message``."""
        return bool(self.nodes) and self._types.get(self.nodes[0]) == SYSTEM_MESSAGE

    def node_type(self, seq: int) -> str | None:
        """The event type of surface node ``seq`` (None if it is not on the surface)."""
        return self._types.get(seq)

    def check(
        self,
        type: str,
        seq: int,
        op: SurfaceOp | None,
        source_event_seqs: Sequence[int] | None = None,
        *,
        validate_sources: bool = False,
    ) -> tuple[int, int] | None:
        """Validate an op without applying it; raises ``LogWriteError`` with a one-line reason.

        Returns the list positions ``(start, end)`` a replace splices (so ``apply`` does not
        look them up again), None for other ops. O(1) for an append, O(surface) for a replace.

        ``validate_sources`` adds the writer-side ``sourceEventSeqs`` rules (entries are earlier
        seqs; a replace cites every shadowed node). Readers leave it off: DSH fixtures treat
        ``sourceEventSeqs`` as informational (docs/session-log.md, hand-trimmed fixtures).
        """
        if op is None:
            if source_event_seqs is not None and type not in SURFACE_TYPES:
                raise LogWriteError(f"seq {seq}: {type} may not carry sourceEventSeqs (not a surface type)")
            return None
        if type not in SURFACE_TYPES:
            raise LogWriteError(f"seq {seq}: {type} may not carry a surfaceOp (not a surface type)")
        if validate_sources and source_event_seqs is not None:
            for s in source_event_seqs:
                if not isinstance(s, int) or s < 0 or s >= seq:
                    raise LogWriteError(f"seq {seq}: sourceEventSeqs entry {s!r} must be an earlier seq")
        if op == "append":
            return None
        if not isinstance(op, Replace):
            raise LogWriteError(f"seq {seq}: unknown surfaceOp {op!r}")
        si, ei = self._positions(seq, op)
        shadowed = self.nodes[si : ei + 1]
        if validate_sources and (source_event_seqs is None or not set(shadowed) <= set(source_event_seqs)):
            raise LogWriteError(
                f"seq {seq}: a replace must cite every shadowed node {shadowed} in sourceEventSeqs"
            )
        head_covered = self.protect_system_head and si == 0 and self.head_is_system
        if head_covered and not (type == SYSTEM_MESSAGE and ei == 0):
            raise LogWriteError(
                f"seq {seq}: replace over the protected system head (node {self.nodes[0]}) "
                "is only allowed for a system/message replacing exactly that node"
            )
        return si, ei

    def _positions(self, seq: int, op: Replace) -> tuple[int, int]:
        try:
            si = self.nodes.index(op.start)
            ei = self.nodes.index(op.end)
        except ValueError:
            raise LogWriteError(
                f"seq {seq}: replace boundaries {op.start}..{op.end} are not both on the surface"
            ) from None
        if si > ei:
            raise LogWriteError(
                f"seq {seq}: replace start {op.start} comes after end {op.end} on the surface"
            )
        return si, ei

    def apply(self, event: Event, *, validate_sources: bool = False) -> None:
        """Apply one event (no-op for events without a surface op); raises ``LogWriteError``.

        ``validate_sources``: see ``check`` (on for new appends, off for logs being read).
        """
        op = event.surface_op
        if op is None and event.source_event_seqs is None:
            return
        srcs = event.source_event_seqs
        pos = self.check(event.type, event.seq, op, srcs, validate_sources=validate_sources)
        if op is None:
            return
        if pos is None:  # "append"
            self.nodes.append(event.seq)
        else:
            si, ei = pos
            for s in self.nodes[si : ei + 1]:
                del self._types[s]
            self.nodes[si : ei + 1] = [event.seq]
            self.replace_generation += 1
        if self._types is _NO_NODES:
            self._types = {}
        self._types[event.seq] = event.type

    def copy(self) -> Surface:
        """An independent copy (same nodes, types, generation and head rule)."""
        s = Surface(protect_system_head=self.protect_system_head)
        s.nodes = list(self.nodes)
        s._types = dict(self._types)
        s.replace_generation = self.replace_generation
        return s

    def dump(self) -> dict[str, object]:
        """The fold as plain JSON (checkpoints): ``{"nodes": [seq…], "types": [type…],
        "generation": int}`` (``types[i]`` is node ``i``'s event type)."""
        return {"nodes": list(self.nodes), "types": [self._types[s] for s in self.nodes],
                "generation": self.replace_generation}

    @classmethod
    def load(cls, raw: object, *, below: int, protect_system_head: bool = False) -> Surface:
        """The surface ``dump`` gave, checked: distinct int seqs under ``below`` (the first seq
        it does not reflect), surface types, a generation ≥ 0; raises ``ValueError``."""
        if not isinstance(raw, dict) or set(raw) != {"nodes", "types", "generation"}:
            raise ValueError("bad surface")
        nodes, types, gen = raw["nodes"], raw["types"], raw["generation"]
        if (not isinstance(nodes, list) or not isinstance(types, list) or len(nodes) != len(types)
                or not isinstance(gen, int) or isinstance(gen, bool) or gen < 0
                or not all(type(s) is int and 0 <= s < below for s in nodes)
                or len(set(nodes)) != len(nodes) or not all(t in SURFACE_TYPES for t in types)):
            raise ValueError("bad surface")
        s = cls(protect_system_head=protect_system_head)
        s.nodes = nodes
        s._types = dict(zip(nodes, types, strict=True)) if nodes else _NO_NODES
        s.replace_generation = gen
        return s

    def probe(self) -> SurfaceProbe:
        """A validator for a batch of new events that never mutates this surface."""
        return SurfaceProbe(self)

    def extend(self, events: Iterable[Event]) -> None:
        """Apply every event in order."""
        for ev in events:
            self.apply(ev)


class SurfaceProbe:
    """Checks a batch's surface ops in order without mutating the surface it probes.

    The first event with a surface op is checked straight against the live surface (no copy:
    a one-op append — almost every message append — costs O(1), invariant 4). Only a
    second op in the same batch needs the first one's effect: then the surface is copied once,
    the first op applied to the copy, and every later op checked and applied on that copy.
    """

    def __init__(self, surface: Surface) -> None:
        self._base = surface
        self._first: Event | None = None  # the one op event checked against the base so far
        self._copy: Surface | None = None

    def check(self, ev: Event) -> None:
        """Raise ``LogWriteError`` if ``ev`` cannot follow the events already checked."""
        if ev.surface_op is None and ev.source_event_seqs is None:
            return
        if self._copy is not None:
            self._copy.apply(ev, validate_sources=True)
        elif ev.surface_op is None or self._first is None:
            # no op (only a type check), or the batch's first op: the live surface is exact
            self._base.check(ev.type, ev.seq, ev.surface_op, ev.source_event_seqs, validate_sources=True)
            if ev.surface_op is not None:
                self._first = ev
        else:
            self._copy = self._base.copy()
            self._copy.apply(self._first)
            self._copy.apply(ev, validate_sources=True)


def fold_surface(events: Iterable[Event], *, protect_system_head: bool = False) -> list[int]:
    """Node seqs of the surface after ``events`` (docs/session-log.md); raises ``LogWriteError``."""
    s = Surface(protect_system_head=protect_system_head)
    s.extend(events)
    return s.nodes


def shadow_range(nodes: Sequence[int], head_is_system: bool) -> list[int]:
    """The nodes a full stage transition may shadow (docs/contracts.md).

    Empty surface → ``[]``; protected system head → ``nodes[1:]``; otherwise every node.
    An empty result means the handoff notice is appended instead of replacing.
    """
    if not nodes:
        return []
    return list(nodes[1:]) if head_is_system else list(nodes)
