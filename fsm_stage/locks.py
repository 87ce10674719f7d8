"""Process-wide locks that a forked child gets anew: ``process_lock()`` returns a holder whose
``lock`` (a ``threading.Lock``) guards a short critical section shared by every object of a
kind, where a lock per object would cost each one its bytes. Use ``with holder.lock:`` and run
no caller's code under it. After ``fork`` the child's holders hold new locks, so a lock that
another thread of the parent held at the fork is never stuck held in the child."""

from __future__ import annotations

import os
import threading

__all__ = ["ProcessLock", "process_lock"]


class ProcessLock:
    """A holder of one process-wide ``threading.Lock`` (``lock``), replaced in a forked child."""

    __slots__ = ("lock",)

    def __init__(self) -> None:
        self.lock = threading.Lock()


_HOLDERS: list[ProcessLock] = []


def process_lock() -> ProcessLock:
    """A new holder, renewed in every forked child (create them at import: holders live as
    long as the process)."""
    holder = ProcessLock()
    _HOLDERS.append(holder)
    return holder


def _renew_in_child() -> None:
    for holder in _HOLDERS:
        holder.lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_in_child)
