"""Failed logins and wrong bearer tokens, limited: ``LoginThrottle``.

The inbox counts every failed web login and every API request with a wrong ``Bearer NAME:TOKEN``
in moving windows kept by the ``limits`` library (in memory, per inbox process): per client
address and reviewer name (``PER_NAME``) and per client address (``PER_CLIENT``). Past either
limit every attempt from that address (for that name) is answered 429 with ``Retry-After``
before its token is checked, so a right token guessed during the lockout gains nothing.
Behind a reverse proxy every client has the proxy's address: the per-client limit then
counts the failures of everyone together.
"""

from __future__ import annotations

import math
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from limits import RateLimitItem
    from limits.strategies import MovingWindowRateLimiter

__all__ = ["PER_CLIENT", "PER_NAME", "SWEEP_EVERY", "LoginThrottle"]

PER_NAME = "5/minute"
"""Failed attempts allowed per client address and reviewer name in any minute."""
PER_CLIENT = "20/minute"
"""Failed attempts allowed per client address, whatever the names, in any minute."""
SWEEP_EVERY = 256
"""Failures between two sweeps of expired windows."""


class LoginThrottle:
    """Moving-window counts of failed authentications (``limits``' ``MovingWindowRateLimiter``
    over ``MemoryStorage``; thread-safe). ``per_name`` and ``per_client`` are ``limits``
    strings such as ``"5/minute"``; a malformed one raises ``ValueError``."""

    def __init__(self, per_name: str = PER_NAME, per_client: str = PER_CLIENT) -> None:
        from limits import parse, storage, strategies

        self._storage = storage.MemoryStorage()
        self._limiter: MovingWindowRateLimiter = strategies.MovingWindowRateLimiter(self._storage)
        self._per_name: RateLimitItem = parse(per_name)
        self._per_client: RateLimitItem = parse(per_client)
        self._windows: set[tuple[RateLimitItem, tuple[str, ...]]] = set()
        self._failures = 0
        self._guard = threading.Lock()

    @property
    def windows(self) -> int:
        """How many (client, name) and client windows are kept: those with a failure in them
        and, until the next sweep, those whose failures all expired."""
        with self._guard:
            return len(self._windows)

    def _keys(self, client: str, name: str) -> tuple[tuple[RateLimitItem, tuple[str, ...]], ...]:
        return ((self._per_name, ("name", client, name[:128])), (self._per_client, ("client", client)))

    def retry_after(self, client: str, name: str) -> int | None:
        """Whole seconds (≥ 1) until ``client`` may try ``name`` again, or None when it may now."""
        for item, keys in self._keys(client, name):
            if not self._limiter.test(item, *keys):
                reset = float(self._limiter.get_window_stats(item, *keys).reset_time)
                return max(1, math.ceil(reset - time.time()))
        return None

    def failed(self, client: str, name: str) -> None:
        """Count one failed attempt by ``client`` for ``name`` in both windows; every
        ``SWEEP_EVERY`` failures, windows whose failures all expired are dropped (``limits``'
        memory storage keeps their keys for ever), so memory follows the failures of the last
        window, not of the process's life."""
        with self._guard:
            for item, keys in self._keys(client, name):
                self._limiter.hit(item, *keys)
                self._windows.add((item, keys))
            self._failures += 1
            if self._failures % SWEEP_EVERY == 0:
                self._sweep()

    def _sweep(self) -> None:
        for item, keys in list(self._windows):
            if self._limiter.get_window_stats(item, *keys).remaining >= item.amount:
                self._limiter.clear(item, *keys)
                self._windows.discard((item, keys))
