"""Running a check as an unprivileged user: root passes every permission check, so a test of
what a folder's mode allows runs its action in a forked child that dropped to ``nobody``."""

from __future__ import annotations

import os
from collections.abc import Callable

NOBODY = 65534


def as_nobody(action: Callable[[], str]) -> str:
    """``"ok:" + action()``, or ``"error:" + the OSError's text``, run in a forked child that
    dropped to ``nobody`` when this process is root, else in this process. The child runs no
    code anew (its modules are loaded already) and exits at once."""
    def attempt() -> str:
        try:
            return "ok:" + action()
        except OSError as exc:
            return f"error:{exc}"

    if os.geteuid() != 0:
        return attempt()
    readable, writable = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(NOBODY, NOBODY, NOBODY)
            os.setresuid(NOBODY, NOBODY, NOBODY)
            os.write(writable, attempt().encode("utf-8", "replace"))
        finally:
            os._exit(0)
    os.close(writable)
    with os.fdopen(readable, "rb") as pipe:
        got = pipe.read().decode("utf-8")
    os.waitpid(pid, 0)
    return got
