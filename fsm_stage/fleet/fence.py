"""``FencedLog``: an ``EventLog`` wrapper through which a fleet driver writes, so a driver that
lost its claim cannot write, whatever the timing.

``claim()`` appends ``fsm/fleet/claim {epoch: highest + 1, worker}`` as a conditional append on
the position it folded (``expect_last_seq``). Every later append catches up with other writers
(``refresh``), refuses with ``ClaimLostError`` when a claim of a higher epoch appeared, and is
itself conditional on the position just checked: a claim slipping in between makes the append
conflict, and the retry sees the claim. Inputs and review answers other processes append in
between are not claims, so the driver just continues after them. On a single-writer JSONL file
the writer lock already excludes a second driver; the epoch check still runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fsm_stage.errors import AppendConflictError, ClaimLostError, LogWriteError
from fsm_stage.fleet.records import CLAIM
from fsm_stage.log.events import Event, NewEvent, SessionHeader, SurfaceOp, log_now
from fsm_stage.log.surface import Surface

__all__ = ["FencedLog"]

_ATTEMPTS = 50
"""How often an append re-checks and retries after other writers' appends (inputs, answers)."""


class FencedLog:
    """The fenced view of ``log`` for the driver ``worker`` (see the module docstring).

    Reading delegates to ``log``; ``append`` / ``append_many`` raise ``ClaimLostError`` before
    ``claim()`` and after a newer claim, ``LogWriteError`` as ``log`` does (nothing written)."""

    def __init__(self, log: Any, worker: str) -> None:
        self._log = log
        self.worker = worker
        self.epoch: int | None = None
        self._checked = 0  # events up to here were checked for newer claims
        self._superseded_by = 0  # the highest claim epoch seen in them

    @property
    def inner(self) -> Any:
        """The wrapped log."""
        return self._log

    def now(self) -> int:
        """Epoch ms by the wrapped log's clock (``log_now``): review deadlines compare event
        times with it."""
        return log_now(self._log)

    @property
    def header(self) -> SessionHeader:
        """The session header."""
        return self._log.header  # type: ignore[no-any-return]

    @property
    def events(self) -> Sequence[Event]:
        """The committed events."""
        return self._log.events  # type: ignore[no-any-return]

    @property
    def surface(self) -> Surface:
        """The folded surface."""
        return self._log.surface  # type: ignore[no-any-return]

    def __len__(self) -> int:
        return len(self._log)

    def refresh(self) -> int:
        """Catch up with other writers (0 for a single-writer log)."""
        refresh = getattr(self._log, "refresh", None)
        return int(refresh()) if callable(refresh) else 0

    def _highest(self, start: int) -> tuple[int, int]:
        """``(highest claim epoch, end)`` of the events from ``start`` to ``end``, the end of
        the copy scanned (events another thread appends meanwhile are left for the next scan)."""
        top = 0
        scanned = self._log.events[start:]
        for ev in scanned:
            if ev.type == CLAIM and isinstance(ev.data, Mapping) and isinstance(ev.data.get("epoch"), int):
                top = max(top, ev.data["epoch"])
        return top, start + len(scanned)

    def claim(self) -> int:
        """Append this driver's claim (epoch one above the log's highest); returns the epoch.
        Raises ``LogWriteError`` when other writers kept winning the race."""
        for _ in range(_ATTEMPTS):
            self.refresh()
            top, end = self._highest(0)
            epoch = top + 1
            try:  # conditional on the end scanned: nothing unseen lies before the claim
                self._log.append(CLAIM, {"epoch": epoch, "worker": self.worker}, expect_last_seq=end - 1)
            except AppendConflictError:
                continue
            self.epoch = epoch
            self._checked = end + 1
            return epoch
        raise LogWriteError(f"session {self.header.id!r}: could not claim it: other writers kept appending")

    def _check(self) -> int:
        """Raise ``ClaimLostError`` unless this driver's claim is the newest; returns how many
        events were checked (an append is conditional on that end). A lost claim stays lost: the
        events scanned once are not scanned again, so a caller that caught the error and
        appended again (closing its turn, say) must be refused again, not let through."""
        if self.epoch is None:
            raise ClaimLostError(f"session {self.header.id!r}: this driver has not claimed it")
        newest, end = self._newest_claim()
        if newest > self.epoch:
            raise ClaimLostError(f"session {self.header.id!r}: claim {self.epoch} of {self.worker!r} was "
                                 f"superseded by claim {newest}; this driver stops")
        return end

    def _newest_claim(self) -> tuple[int, int]:
        """``(the highest claim epoch in the log as read, the end this call scanned to)``: each
        event is scanned once, and the end is this call's own (another thread's scan may move
        ``_checked`` on meanwhile)."""
        top, end = self._highest(self._checked)
        self._checked = max(self._checked, end)
        self._superseded_by = max(self._superseded_by, top)
        return self._superseded_by, end

    def superseded(self) -> bool:
        """Whether a newer claim than this driver's is in the log (after catching up); False
        before ``claim()``. Raises what ``refresh`` raises (the store's errors)."""
        if self.epoch is None:
            return False
        self.refresh()
        return self._newest_claim()[0] > self.epoch

    def append_many(self, specs: Sequence[NewEvent], *, expect_last_seq: int | None = None) -> list[Event]:
        """Append ``specs`` atomically if this driver still holds the claim (module docstring)."""
        for _ in range(_ATTEMPTS):
            self.refresh()
            end = self._check()
            if expect_last_seq is not None:
                if expect_last_seq >= end:  # events read meanwhile (another thread's refresh)
                    end = self._check()
                if expect_last_seq >= end:  # the caller expects events this fence has not checked
                    raise AppendConflictError(expect_last_seq, end - 1)
                return self._log.append_many(specs, expect_last_seq=expect_last_seq)  # type: ignore[no-any-return]
            try:  # conditional on the end checked: a claim appended since makes it conflict
                return self._log.append_many(specs, expect_last_seq=end - 1)  # type: ignore[no-any-return]
            except AppendConflictError:
                continue
        raise LogWriteError(f"session {self.header.id!r}: append kept conflicting with other writers")

    def append(self, type: str, data: Any, *, surface_op: SurfaceOp | None = None,
               source_event_seqs: Sequence[int] | None = None, ignorable: bool = False,
               expect_last_seq: int | None = None) -> Event:
        """Append one event (see ``append_many``)."""
        spec = NewEvent(type, data, surface_op, source_event_seqs, ignorable)
        return self.append_many([spec], expect_last_seq=expect_last_seq)[0]

    def close(self) -> None:
        """Close the wrapped log (releases a JSONL writer lock)."""
        close = getattr(self._log, "close", None)
        if callable(close):
            close()
