"""``AbortSignal``: a cancellation flag forwarded unchanged to tools and reviews (B90).

The reference loop owns one signal per turn; a tool receives it in ``execute`` and passes the
very same object to ``ReviewChannel.ask`` so cancelling the call reaches the reviewer.
"""

from __future__ import annotations

import asyncio


class AbortSignal:
    """A one-shot cancellation flag. ``abort(reason)`` sets it; ``wait()`` blocks until set."""

    def __init__(self) -> None:
        self._reason: str | None = None
        self._event: asyncio.Event | None = None

    @property
    def aborted(self) -> bool:
        """True once ``abort`` was called."""
        return self._reason is not None

    @property
    def reason(self) -> str | None:
        """The reason given to ``abort`` (None while not aborted)."""
        return self._reason

    def abort(self, reason: str = "aborted") -> None:
        """Set the flag (idempotent: the first reason wins) and wake every ``wait()``."""
        if self._reason is None:
            self._reason = reason
            if self._event is not None:
                self._event.set()

    async def wait(self) -> str:
        """Wait until aborted; returns the reason."""
        if self._reason is None:
            if self._event is None:
                self._event = asyncio.Event()
            await self._event.wait()
        assert self._reason is not None
        return self._reason
