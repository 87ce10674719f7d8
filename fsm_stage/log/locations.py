"""``open_log(location)``: the one way to open a session log for writing, by location string.

* a file path (``str`` or ``os.PathLike``) opens a ``JsonlLog`` (one writer, durable);
* ``memory:`` opens a fresh ``MemoryLog`` (nothing is shared between two opens);
* ``-`` (standard input) is refused: it is read-only. ``read_location("-")`` reads it;
* ``<scheme>:…`` opens through the opener registered with ``register_log_scheme`` (the
  extension point of a future PostgreSQL store, ``postgresql://…`` / ``postgres://…``).

A location is a scheme when it starts with a registered name and ``:`` (case-insensitive).
Any other ``name://…`` is an unknown scheme (``UserError`` naming the known ones); every other
string is a file path, so ``C:\\logs\\a.jsonl`` and ``notes:v2.jsonl`` open as files. Pass a
``Path`` (or ``./name``) to open a file whose name looks like a scheme.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from fsm_stage.errors import UserError
from fsm_stage.log.events import EventLog, SessionHeader, check_header

if TYPE_CHECKING:  # the stores and the reader load when a log is opened or read
    from fsm_stage.log.dsh import ReadResult

STDIN_LOCATION = "-"
"""The location of standard input: readable with ``read_location``, never writable."""

MEMORY_SCHEME = "memory"

_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):")
"""An RFC 3986 scheme of two or more characters (one letter is a Windows drive)."""


@runtime_checkable
class StoredLog(EventLog, Protocol):
    """What ``open_log`` returns: an ``EventLog`` that can be closed (also as a context
    manager). ``close()`` releases what the store holds (a file lock, a connection)."""

    def close(self) -> None: ...

    def __enter__(self) -> Any: ...

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None, /
    ) -> None: ...


LogOpener = Callable[..., StoredLog]
"""``opener(location, *, create, **options) -> StoredLog``: ``location`` is the whole string
(``"postgresql://host/db?session=…"``), ``create`` the ``SessionHeader`` to create the log
with when it does not exist (None: it must exist), ``options`` the store's keyword options.
Raise ``UserError`` (or a subclass) for a bad location or a missing log."""


def _open_memory(location: str, *, create: SessionHeader | None = None, **options: Any) -> StoredLog:
    rest = location.partition(":")[2]
    if rest:
        raise UserError(
            f"log location {location!r}: memory logs have no names (write 'memory:'); "
            "every open gives a new, private log: share the object to share the log"
        )
    if create is None:
        raise UserError("log location 'memory:' opens a new log: pass create=<SessionHeader>")
    options.pop("strict", None)  # nothing is read from anywhere
    from fsm_stage.log.memory import MemoryLog

    return MemoryLog(create, **options)


def _open_postgres(location: str, *, create: SessionHeader | None = None, **options: Any) -> StoredLog:
    from fsm_stage.log.postgres import open_postgres_log  # loads psycopg only when used

    return open_postgres_log(location, create=create, **options)


_schemes: dict[str, LogOpener] = {
    MEMORY_SCHEME: _open_memory,
    "postgresql": _open_postgres,
    "postgres": _open_postgres,
}
_schemes_lock = threading.Lock()


def register_log_scheme(name: str, opener: LogOpener, *, replace: bool = False) -> None:
    """Make ``open_log("<name>:…")`` call ``opener`` (see ``LogOpener``).

    ``name`` is a scheme of two or more characters (letters, digits, ``+ . -``, starting with
    a letter), matched case-insensitively; register each alias (``postgresql``, ``postgres``).
    Raises ``ValueError`` for an invalid name, or one already registered unless ``replace``.
    """
    key = name.lower()
    if not _SCHEME_RE.fullmatch(key + ":"):
        raise ValueError(f"invalid log scheme name {name!r} (two or more characters: letters, digits, + . -)")
    with _schemes_lock:
        if key in _schemes and not replace:
            raise ValueError(f"log scheme {key!r} is already registered (pass replace=True)")
        _schemes[key] = opener


def unregister_log_scheme(name: str) -> None:
    """Forget the opener of ``name``; raises ``KeyError`` when none is registered."""
    with _schemes_lock:
        del _schemes[name.lower()]


def log_schemes() -> tuple[str, ...]:
    """The registered scheme names, sorted (``("memory",)`` by default)."""
    with _schemes_lock:
        return tuple(sorted(_schemes))


def _scheme_of(location: str) -> str | None:
    """The registered scheme ``location`` names, None for a file path; raises ``UserError`` for
    an unknown ``name://…`` scheme."""
    m = _SCHEME_RE.match(location)
    if m is None:
        return None
    key = m.group(1).lower()
    with _schemes_lock:
        if key in _schemes:
            return key
    if location[m.end() : m.end() + 2] == "//":
        known = ", ".join(f"{s}:" for s in log_schemes())
        raise UserError(
            f"unknown log location scheme {m.group(1)!r} in {location!r} "
            f"(known: {known}; anything else is a file path)"
        )
    return None


def file_location(location: str | os.PathLike[str], what: str) -> Path:
    """``location`` as a file path, for ``what`` (a message prefix) that needs a file or folder:
    a ``scheme:`` location (``memory:``, ``postgresql://…``, any ``name://…``) raises
    ``UserError`` (one line) instead of being made into folders named after it."""
    text = os.fspath(location)
    if _scheme_of(text) is not None:  # an unknown ``name://`` scheme raises there
        raise UserError(f"{what}: {text!r:.120} is a log location, not a file or folder path")
    return Path(text)


def open_log(
    location: str | os.PathLike[str], *, create: SessionHeader | None = None, **options: Any
) -> StoredLog:
    """Open the session log at ``location`` for reading and appending (module docstring).

    ``create`` is the header to start the log with when it does not exist yet (a JSONL file
    that is missing or empty; always for ``memory:``); an existing log is opened as it is,
    and a ``create`` header with another session id is a ``LogFormatError``. Without
    ``create`` a missing file is a ``LogFormatError`` ("no such session log").
    ``options`` go to the store: ``clock``, ``ignorable_types``, ``protect_system_head``,
    ``allow_unknown_types`` (both stores), ``strict`` (files: read the existing log strictly).
    Raises ``UserError`` for ``-``, an empty location, an unknown scheme or a ``create`` header
    whose ``cwd`` is not an absolute path (handoff documents are placed under it), and what the
    store raises (``LogLockedError`` when another writer holds the file, ``LogWriteError``).
    """
    check_header(create, "open_log(create=)", optional=True)
    if create is not None and create.cwd is not None and not os.path.isabs(create.cwd):
        raise UserError(
            f"open_log(create=): session cwd {create.cwd!r} is not an absolute path "
            "(handoff documents are written under it): pass os.path.abspath(...)"
        )
    from fsm_stage.log.jsonl import JsonlLog

    if isinstance(location, os.PathLike):
        return JsonlLog(location, header=create, **options)
    if not isinstance(location, str):
        raise TypeError(f"a log location is a str or os.PathLike, not {type(location).__name__}")
    if location == STDIN_LOCATION:
        raise UserError(
            "log location '-' is standard input, which is read-only: "
            "write the session log to a file path or 'memory:'"
        )
    if not location:
        raise UserError("empty log location: pass a file path or 'memory:'")
    scheme = _scheme_of(location)
    if scheme is None:
        return JsonlLog(location, header=create, **options)
    with _schemes_lock:
        opener = _schemes[scheme]
    return opener(location, create=create, **options)


def read_location(
    location: str | os.PathLike[str], *, strict: bool = False, allow_newer: bool = False
) -> ReadResult:
    """Read the whole log at ``location`` without opening it for writing (no writer lock).

    A file path is read with ``read_log`` (plain or zstd); ``-`` reads standard input's bytes
    (``read_log_data``, source ``<stdin>``). A scheme location (``memory:``, ``postgresql://…``)
    has no file to read: ``UserError`` (open it with ``open_log``). Raises what ``read_log``
    raises otherwise (``LogFormatError``, ``FileNotFoundError``).
    """
    from fsm_stage.log.dsh import read_log, read_log_data

    if isinstance(location, str):
        if location == STDIN_LOCATION:
            return read_log_data(sys.stdin.buffer.read(), strict=strict, allow_newer=allow_newer)
        if not location:
            raise UserError("empty log location: pass a file path or '-'")
        if _scheme_of(location) is not None:
            raise UserError(f"log location {location!r} is not a file: open it with open_log")
    return read_log(location, strict=strict, allow_newer=allow_newer)
