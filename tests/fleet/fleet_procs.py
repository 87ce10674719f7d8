"""Processes of the fleet tests: stopping a worker (or any child) the way a supervisor does."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from typing import Any


def stop(proc: subprocess.Popen[Any], timeout: float = 30) -> None:
    """SIGTERM ``proc`` and wait up to ``timeout`` s for it, then kill it."""
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
