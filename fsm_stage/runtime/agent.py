"""``Agent``: a session plus an inbox (docs/contracts.md, S3; docs/architecture.md).

Two channels feed the next step boundary:

* ``steer(message)`` queues a user message and **wakes** the agent: an idle agent starts a new
  turn, a running one takes it at its next step.
* ``inject(message)`` queues model-facing context **without waking**: a running agent claims it
  at its next step boundary; an idle agent keeps it until a steer (or follow-up) wakes it.

Whether a turn is open is read from the log (``session.is_turn_open``), never from a runtime
status flag: post-turn work still "runs" but no in-turn pre-step will come.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal, Protocol, runtime_checkable

import attrs

from fsm_stage.runtime.messages import Message
from fsm_stage.runtime.session import Session

InboxKind = Literal["steer", "inject"]


@runtime_checkable
class Agent(Protocol):
    """What controllers need from an agent: its session and the two inbox channels."""

    @property
    def session(self) -> Session: ...

    def steer(self, message: Message) -> None:
        """Queue a user message for the next step boundary and wake the agent."""

    def inject(self, message: Message) -> None:
        """Queue model-facing context for the next step boundary without waking the agent."""


def _check_message(message: object, method: str) -> None:
    if not isinstance(message, Mapping):
        hint = " (wrap text with fsm_stage.runtime.user_message(text))" if isinstance(message, str) else ""
        raise TypeError(f"{method}(message): message must be a message dict{hint}, "
                        f"got {type(message).__name__}")


@attrs.frozen
class InboxItem:
    """One queued message and the channel it came through."""

    kind: InboxKind
    message: Message


class InboxAgent:
    """The shipped ``Agent``: a ``Session`` and an ordered inbox.

    ``on_wake`` (optional) is called after every ``steer`` — the reference loop and hosts use it
    to schedule a turn. ``claim()`` takes every queued message in arrival order (both channels);
    ``wants_turn`` is True while a steered message waits.
    """

    def __init__(self, session: Session, *, on_wake: Callable[[InboxAgent], None] | None = None) -> None:
        self._session = session
        self._inbox: list[InboxItem] = []
        self.on_wake = on_wake

    @property
    def session(self) -> Session:
        """The agent's session."""
        return self._session

    @property
    def id(self) -> str:
        """The session id (a stable identity for the agent)."""
        return self._session.id

    @property
    def is_turn_open(self) -> bool:
        """True while the log has an open turn (``turn/start`` with no later ``turn/end``)."""
        return self._session.is_turn_open

    def steer(self, message: Message) -> None:
        """Queue ``message`` (a message dict, e.g. ``user_message(text)``) and wake the agent
        (calls ``on_wake``); ``TypeError`` for anything else (a bare ``str``)."""
        _check_message(message, "steer")
        self._inbox.append(InboxItem("steer", message))
        if self.on_wake is not None:
            self.on_wake(self)

    def inject(self, message: Message) -> None:
        """Queue ``message`` (a message dict) without waking the agent; ``TypeError`` otherwise."""
        _check_message(message, "inject")
        self._inbox.append(InboxItem("inject", message))

    @property
    def inbox(self) -> tuple[InboxItem, ...]:
        """The queued items, oldest first (read-only view)."""
        return tuple(self._inbox)

    @property
    def wants_turn(self) -> bool:
        """True when a steered message is waiting (an idle agent would start a turn)."""
        return any(item.kind == "steer" for item in self._inbox)

    def claim(self) -> list[Message]:
        """Remove and return every queued message in arrival order (the step's inbox batch)."""
        items, self._inbox = self._inbox, []
        return [item.message for item in items]
