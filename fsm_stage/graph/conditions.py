"""The shared conditions and ``before`` callback of every model transition.

``eligible`` holds when ctx ``eligible(guard_names)`` answers exactly ``True`` (an edge
without guards is always eligible); ``approved`` when ctx ``approval`` equals the
destination. Both return exactly ``True`` or ``False``: a guard answering ``1`` or ``"yes"``
counts as refused. ``_commit`` is the ``before`` callback: it calls ctx ``commit()`` after
the guards passed and before the state changes (durable first, docs/architecture.md invariant 2); if it
raises, the cursor keeps its old state. ``commit`` must be passed explicitly (``None`` states
there is nothing durable to write); leaving it out is a ``TypeError``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from transitions import EventData


def _eligible(guards: tuple[str, ...], event: EventData) -> bool:
    """Condition ``eligible``: ctx ``eligible(guards)`` is exactly True (no guards: True)."""
    if not guards:
        return True
    check = event.kwargs.get("eligible")
    if check is None:
        raise TypeError(
            f"trigger {event.event.name!r} has guards {list(guards)} but no eligible= callable was passed"
        )
    return check(guards) is True


def _approved(event: EventData) -> bool:
    """Condition ``approved``: ctx ``approval`` equals the transition's destination."""
    approval = event.kwargs.get("approval")
    return event.transition is not None and approval is not None and approval == event.transition.dest


def _commit(event: EventData) -> None:
    """``before`` callback: the durable append (ctx ``commit``), before the state changes."""
    if "commit" not in event.kwargs:
        raise TypeError(
            f"trigger {event.event.name!r} needs commit= (a callable, or None when nothing is durable)"
        )
    commit = event.kwargs["commit"]
    if commit is not None:
        commit()


def _eligible_condition(guards: tuple[str, ...]) -> Callable[[EventData], bool]:
    cond = functools.partial(_eligible, guards)
    cond.__name__ = "eligible"  # type: ignore[attr-defined]  # shown by transitions' logging/diagrams
    return cond
