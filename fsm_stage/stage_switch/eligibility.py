"""Eligibility predicates and named guards of the stage switch (docs/contracts.md).

An ``Eligibility`` holds two kinds of synchronous ``(agent) -> bool`` predicates: *unnamed*
ones gate the ``stage:policy`` guidance (shown while any is true, S31–S33), *named* ones are
guards that graph edges reference (``targets: [{to: verify, guards: [tests_green]}]``); an edge
is open only when every guard it names is registered and returns exactly ``True``. A predicate
that raises counts as false (fail closed) and is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from fsm_stage.runtime.commands import Disposer
from fsm_stage.stage_switch.texts import PREDICATE_TYPE_MESSAGE

if TYPE_CHECKING:
    from fsm_stage.runtime.agent import Agent

__all__ = ["Eligibility", "Predicate"]

Predicate = Callable[["Agent"], bool]
"""A synchronous eligibility predicate or guard: ``(agent) -> bool``."""


class Eligibility:
    """Registered predicates and guards; ``logger`` receives a raising predicate's traceback."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger
        self._predicates: dict[Predicate, None] = {}
        self._guards: dict[str, Predicate] = {}

    def register(self, predicate: Predicate, *, name: str | None = None) -> Disposer:
        """Register ``predicate``; returns its disposer.

        Unnamed: gates the guidance (S31–S33; the same callable is stored once, S37f). Named: a
        guard graph edges reference by ``name``; a name holds one predicate (another callable
        under a taken name raises ``ValueError``). Raises ``TypeError`` for a non-callable (S37e).
        """
        if not callable(predicate):
            raise TypeError(PREDICATE_TYPE_MESSAGE)
        if name is None:
            self._predicates[predicate] = None

            def dispose() -> None:
                self._predicates.pop(predicate, None)

            return dispose
        existing = self._guards.get(name)
        if existing is not None and existing is not predicate:
            raise ValueError(f"eligibility guard {name!r} is already registered")
        self._guards[name] = predicate

        def dispose_named() -> None:
            if self._guards.get(name) is predicate:
                del self._guards[name]

        return dispose_named

    def clear(self) -> None:
        """Forget every predicate and guard."""
        self._predicates.clear()
        self._guards.clear()

    def _holds(self, predicate: Predicate, agent: Agent, what: str) -> bool:
        try:
            return predicate(agent) is True
        except Exception:
            self.logger.exception("stage switch: eligibility %s raised; treating it as false", what)
            return False

    def is_eligible(self, agent: Agent) -> bool:
        """True when any unnamed predicate returns true (registration order, stops at the
        first true); False with none."""
        return any(self._holds(p, agent, "predicate") for p in list(self._predicates))

    def guards_hold(self, agent: Agent | None, names: Sequence[str]) -> bool:
        """True when every named guard is registered and returns exactly True for ``agent``
        (an agent-less check holds only for an edge without guards)."""
        if agent is None:
            return not names
        for name in names:
            predicate = self._guards.get(name)
            if predicate is None or not self._holds(predicate, agent, f"guard {name!r}"):
                return False
        return True
