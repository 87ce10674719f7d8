"""``CompiledGraph``: one read-only ``transitions`` machine shared by every session.

``fire`` runs a model transition (guards, then ``commit``, then the state change);
``can_fire`` evaluates the same condition objects without ``commit``; ``explain_refusal``
names why an edge would be refused so a controller can tell the model before firing (the
guard stays the final enforcement). ``jump`` is the user's ``/stage <name>``: no guards, it
calls ``commit()`` and only then ``machine.set_state``; no transitions are built for jumps,
so N stages cost O(edges), not O(N²).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from transitions import EventData, Machine

from fsm_stage.config import EdgeConfig, GraphConfig
from fsm_stage.graph.machine import _add_lazy_edges, _add_transitions, _GotoTransitions
from fsm_stage.graph.vocabulary import Refusal, StageCursor, UnknownStageError, goto


class CompiledGraph:
    """A compiled, read-only state machine shared by every session of one graph.

    Attributes: ``config`` (the ``GraphConfig`` compiled, or an equivalent one with the same
    fingerprint compiled earlier; ``None`` for plan mode), ``name``, ``machine`` (the
    ``transitions.Machine``: ``model=None``, ``auto_transitions=False``, ``send_event=True``,
    ``queued=False``), ``fingerprint`` (hex sha256), ``initial`` (stage name), ``states``
    (stage names in configured order).

    Instances never change what they answer after construction and are safe to share across
    threads (transitions and trigger lists are built on first use: idempotent, a concurrent
    first use keeps one); serialise fire/jump per session (one lock around fold -> fire ->
    append, docs/architecture.md).
    """

    __slots__ = (
        "_all_edges",
        "_any",
        "_edges",
        "_gotos",
        "_triggers",
        "config",
        "fingerprint",
        "initial",
        "machine",
        "name",
        "states",
    )

    def __init__(
        self,
        *,
        states: tuple[str, ...],
        initial: str,
        transitions: list[dict[str, Any]],
        fingerprint: str,
        config: GraphConfig | None,
        edges: Mapping[str, tuple[EdgeConfig, ...]],
        name: str,
        any_sources: tuple[str, ...] = (),
    ) -> None:
        self.config = config
        self.name = name
        self.fingerprint = fingerprint
        self.initial = initial
        self.states = states
        self._edges = dict(edges)
        self._any = frozenset(any_sources)
        # one shared EdgeConfig / trigger name per stage for the stages with omitted targets
        self._all_edges = tuple(EdgeConfig(n) for n in states) if any_sources else ()
        self._gotos = tuple(goto(n) for n in states) if any_sources else ()
        # trigger names out of each stage, in configured order: the eager transitions' now,
        # the edges' on first use (``triggers``)
        triggers: dict[str, dict[str, None]] = {}
        for t in transitions:
            triggers.setdefault(t["source"], {})[t["trigger"]] = None
        self._triggers = {state: tuple(names) for state, names in triggers.items()}
        self.machine = Machine(
            model=None,
            states=list(states),
            initial=initial,
            auto_transitions=False,
            send_event=True,
            queued=False,
            ignore_invalid_triggers=False,
            name=name,
        )
        _add_transitions(self.machine, transitions)
        if self._edges or any_sources:
            _add_lazy_edges(self.machine, states, self._edges, any_sources)

    def __repr__(self) -> str:
        return f"<CompiledGraph {self.name!r} {len(self.states)} states {self.fingerprint[:12]}>"

    # -- cursors -----------------------------------------------------------------------

    def new_cursor(self, state: str | None = None) -> StageCursor:
        """A cursor at ``state`` (default: ``initial``). Raises ``UnknownStageError`` for a stage
        the graph does not have."""
        state = self.initial if state is None else state
        self._check_state(state, "cursor")
        return StageCursor(state)

    def has_state(self, state: str) -> bool:
        """Whether ``state`` is a stage of this graph."""
        return state in self.machine.states

    def _check_state(self, state: str, what: str) -> None:
        if state not in self.machine.states:
            raise UnknownStageError(f"{what} stage {state!r} is not in graph {self.name!r}")

    def triggers(self, state: str) -> tuple[str, ...]:
        """Trigger names with a transition out of ``state``, ignoring guards, in configured order
        (empty for an unknown stage). O(stages) for a stage with omitted targets."""
        if state in self._any:
            return tuple(t for n, t in zip(self.states, self._gotos, strict=True) if n != state)
        known = self._triggers.get(state)
        if known is None:
            out = self._edges.get(state)
            if out is None:
                return ()  # an unknown stage (nothing kept for it) or one without edges
            known = self._triggers[state] = tuple(dict.fromkeys(goto(e.target) for e in out))
        return known

    def edges_from(self, state: str) -> tuple[EdgeConfig, ...]:
        """Model edges out of ``state`` in configured order (empty for an unknown stage).

        A stage with omitted targets gets one ``EdgeConfig`` (no guards) per other stage, from
        one tuple shared by the whole graph: O(stages) per call, nothing allocated per edge.
        """
        if state in self._any:
            return tuple(e for e in self._all_edges if e.target != state)
        return self._edges.get(state, ())

    def built_transitions(self) -> int:
        """How many ``Transition`` objects the machine holds now (benchmarks, tests): the
        explicit edges plus the omitted-targets edges fired or listed so far."""
        return sum(
            ev.transitions.built()
            if isinstance(ev.transitions, _GotoTransitions)
            else sum(len(ts) for ts in ev.transitions.values())
            for ev in self.machine.events.values()
        )

    # -- firing -----------------------------------------------------------------------

    def _event_transitions(self, cursor: StageCursor, trigger: str) -> list[Any]:
        event = self.machine.events.get(trigger)
        if event is None:
            raise KeyError(f"graph {self.name!r} has no trigger {trigger!r}")
        self._check_state(cursor.state, "cursor")
        # `get`, not `[]`: no empty list inserted; a _GotoTransitions builds an omitted-targets
        # stage's transition here, on first use
        result: list[Any] = event.transitions.get(cursor.state, [])
        return result

    def can_fire(self, cursor: StageCursor, trigger: str, **ctx: Any) -> bool:
        """Whether ``fire(cursor, trigger, **ctx)`` would change the state, without side effects.

        Evaluates the trigger's transitions out of ``cursor.state`` in order with the same
        condition objects ``fire`` uses; never calls ``commit`` or any other callback. False when
        there is no such transition. Raises ``KeyError`` for a trigger the graph does not define
        and ``UnknownStageError`` when ``cursor.state`` is not in the graph.
        """
        candidates = self._event_transitions(cursor, trigger)
        if not candidates:
            return False
        event = self.machine.events[trigger]
        for transition in candidates:
            data = EventData(self.machine.get_state(cursor.state), event, self.machine, cursor, (), ctx)
            data.transition = transition
            if all(cond.check(data) for cond in transition.conditions):
                return True
        return False

    def fire(self, cursor: StageCursor, trigger: str, **ctx: Any) -> bool:
        """Fire ``trigger`` for ``cursor`` through the machine; True when the state changed.

        ``ctx`` is passed to conditions and callbacks as trigger kwargs: ``commit`` (required;
        callable or None), ``eligible`` (required when the edge has guards), ``approval``.
        Returns False (state unchanged, nothing committed) when no transition exists from the
        cursor's stage or a guard refuses. Exceptions from ``commit`` or a guard propagate with
        the state unchanged. Raises ``KeyError`` for an unknown trigger, ``UnknownStageError``
        when ``cursor.state`` is not in the graph.
        """
        if not self._event_transitions(cursor, trigger):
            return False
        result: bool = self.machine.events[trigger].trigger(cursor, **ctx)
        return result

    def jump(self, cursor: StageCursor, target: str, *, commit: Callable[[], None] | None) -> None:
        """Move ``cursor`` to ``target`` with no guards (a user jump: ``/stage <name>``).

        Durable first: ``commit()`` runs before the state is assigned; if it raises, the state is
        unchanged and the exception propagates. Raises ``UnknownStageError`` (before committing)
        when ``target`` is not a stage of this graph. A jump to the current stage still commits
        (the caller decides whether that is a no-op).
        """
        self._check_state(target, "jump target")
        if commit is not None:
            commit()
        self.machine.set_state(target, model=cursor)

    def explain_refusal(
        self,
        cursor: StageCursor,
        target: str,
        eligible: Callable[[tuple[str, ...]], bool] | None = None,
    ) -> Refusal | None:
        """Why the model transition ``cursor.state -> target`` would be refused, or None.

        Checks, in order: target configured, target not current, current stage known, an edge
        exists, the edge's guards hold (``eligible(guards) is True``; when not, each guard is
        evaluated alone to name the failing ones). Review approval is not checked (it is asked
        after these checks pass). Pure: never commits.
        """
        current = cursor.state
        if not self.has_state(target):
            return Refusal("unknown_target", current, target)
        if target == current:
            return Refusal("current", current, target)
        if not self.has_state(current):
            return Refusal("unknown_current", current, target)
        if current in self._any:
            return None  # omitted targets: an unguarded edge to every other stage
        edges = self.edges_from(current)
        edge = next((e for e in edges if e.target == target), None)
        if edge is None:
            return Refusal("not_an_edge", current, target, allowed=tuple(e.target for e in edges))
        if edge.guards and (eligible is None or eligible(edge.guards) is not True):
            failing = edge.guards
            if eligible is not None:
                failing = tuple(g for g in edge.guards if eligible((g,)) is not True) or edge.guards
            return Refusal("guard", current, target, failing=failing)
        return None
