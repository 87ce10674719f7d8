"""``JsonlLog``: an ``EventLog`` on a DSH-shaped JSONL file (docs/session-log.md).

A header line (``SessionHeader.to_json``) then one event per line, seqs contiguous from 0,
integer ``time``, a replace written ``{"op":"replace","start":S,"end":E}``; fsm_stage-owned
event types (``fsm/…`` or listed in ``ignorable_types``) carry ``"ignorable": true`` so a DSH
reader skips them. One writer per file (a second gets ``LogLockedError``); every append writes
whole lines, fsyncs, and is rolled back on failure (``LogWriteError``); on open a torn final
line is saved aside and cut, an earlier damaged line refuses to open until ``JsonlLog.repair``.
The durability rules in full: docs/log-decisions.md ("JsonlLog durability").
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import hashlib
import json
import os
import threading
from array import array
from collections.abc import Collection, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # filelock loads when a writer takes the lock
    import filelock

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the `<log>.lock` file lock alone
    fcntl = None  # type: ignore[assignment]

from fsm_stage.errors import LockFileError as LockFileError
from fsm_stage.errors import LogFormatError as LogFormatError
from fsm_stage.errors import LogLockedError, LogWriteError
from fsm_stage.fileio import atomic_write, output_error
from fsm_stage.log.dsh import ZSTD_MAGIC, read_log
from fsm_stage.log.events import (
    Clock,
    Event,
    LogBase,
    NewEvent,
    SessionHeader,
    check_header,
    check_last_seq,
    wall_clock_ms,
)
from fsm_stage.log.surface import Surface
from fsm_stage.log.writer_checks import prepare_batch

__all__ = [
    "JsonlLog",
    "LockFileError",
    "LogFormatError",
    "NewEvent",
    "encode_line",
    "lock_path",
    "writer_lock",
]


def encode_line(ev: Event) -> bytes:
    """The event as one compact JSON line with a trailing newline (UTF-8, no NaN).

    Raises ``LogWriteError`` if ``data`` is not lossless JSON (or nested past the encoder's
    recursion limit). A string holding a lone surrogate (text decoded with ``surrogateescape``,
    such as a file name that is not UTF-8) is written as a ``\\udcXX`` JSON escape, which reads
    back as the same string.
    """
    try:
        text = json.dumps(ev.to_json(), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as err:
        raise LogWriteError(f"event {ev.type!r} data is not JSON: {err}") from None
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (a file name that is not UTF-8): kept, escaped
        return (json.dumps(ev.to_json(), separators=(",", ":"), allow_nan=False) + "\n").encode("ascii")


def _refuse_missing(path: Path) -> None:
    """Raise ``LogFormatError`` when ``path`` holds no log to open and no header was given to
    create one: it is missing, or empty."""
    if not path.exists():
        raise LogFormatError(f"{path}: no such session log (create one with "
                             "open_log(path, create=SessionHeader(...)))")
    if path.stat().st_size == 0:
        raise LogFormatError(f"{path}: the file is empty (no session header line); "
                             "start a session log in it with open_log(path, create=SessionHeader(...))")


#: Bytes a JSON text may start with (after none or more whitespace); ``ZSTD_MAGIC`` starts a
#: compressed DSH log, which the reader refuses in its own words.
_JSON_START = frozenset(b'{["-0123456789tfn')


def _refuse_not_json(path: Path) -> None:
    """Raise ``LogFormatError`` when the file at ``path`` cannot start with a JSON line (a README,
    a binary file), before a lock file is left beside it."""
    if not path.is_file():
        return  # missing (to be created), a FIFO or a device (never read here): the open says why
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
    except OSError:
        return  # unreadable: the open says why
    first = head.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")[:1]  # a BOM is read as the reader reads it
    if first and first[0] not in _JSON_START and not head.startswith(ZSTD_MAGIC):
        raise LogFormatError(f"not a session log: {path}: first line is not JSON")


def lock_path(path: str | os.PathLike[str]) -> Path:
    """The lock file guarding a log: ``<log>.lock`` beside the file ``path`` finally names
    (symlinks resolved, so every name of one file shares one lock file)."""
    p = Path(os.path.realpath(path))
    return p.with_name(p.name + ".lock")


def writer_lock(path: str | os.PathLike[str], *, timeout: float = 0.0) -> filelock.BaseFileLock:
    """Take the one-writer lock of the log at ``path`` (``lock_path(path)``; waits up to
    ``timeout`` seconds for another writer to let go, 0 = do not wait) and
    return it held; the caller releases it (``.release()``). ``JsonlLog`` and the simulator's
    ``--log`` target both use it, so they exclude each other.

    Missing parent folders are created. Raises ``LogLockedError`` when another writer (another
    process, or another lock object in this one) holds it, and ``LockFileError`` naming the
    folder when the lock file cannot be created (filelock itself reports a folder that refuses
    new files as contention; the two are told apart by whether the lock file exists).
    """
    import filelock

    lock_file = lock_path(path)
    lock = filelock.FileLock(str(lock_file), timeout=timeout, thread_local=False)
    try:
        if timeout > 0:
            lock.acquire(timeout=timeout, poll_interval=0.01)
        else:
            lock.acquire(blocking=False)
    except filelock.Timeout:
        if not lock_file.exists():
            raise LockFileError(
                f"{path}: cannot write session log: cannot create files in {lock_file.parent} "
                f"(lock file {lock_file.name})"
            ) from None
        raise LogLockedError(
            f"{path} is locked by another writer (lock file {lock_file}); "
            "close the other writer first — fsm_stage allows one writer per log"
        ) from None
    except OSError as err:
        raise LockFileError(str(output_error(path, err, what="session log"))) from err
    return lock


class JsonlLog(LogBase):
    """A durable, single-writer ``EventLog`` on a JSONL file.

    ``JsonlLog(path, header=h)`` creates the file (header line) when it does not exist or is
    empty; otherwise opens it, validates that ``h.id`` (if given) matches, and reads every
    event. ``ignorable_types`` adds types (besides ``fsm/…`` and ``system/message``) written
    with ``ignorable: true``. Every new event is checked with ``writer_checks.check_new_event``
    first (nothing a strict reader refuses is written), through the
    ``writer_checks.prepare_batch`` that ``MemoryLog`` shares.

    **``allow_unknown_types`` defaults to False here but to True on ``MemoryLog``**: a type
    outside DSH's vocabulary must be appended ``ignorable=True`` (or be ``fsm/…`` or listed in
    ``ignorable_types``), or ``append`` raises ``LogWriteError`` — code tested only on a
    ``MemoryLog`` with made-up types fails here. Pass True only for reader tests (a strict
    reader will refuse the file).
    ``lock_timeout`` (seconds, default 0) waits that long for another writer's lock, so short
    writers (``fsm-stage review``) queue instead of failing.
    ``protect_system_head`` enables the protected-head rule on appends (docs/contracts.md). Missing parent
    directories are created (by the lock).

    Raises ``LogLockedError`` (another writer), ``LogFormatError`` (not a session log, id
    mismatch, corruption, no ``header=`` for a missing or an empty file — each named as such),
    ``LogWriteError`` (the OS refused to create or open the file; ``LockFileError``, also a
    ``UserError``, for the lock file — see ``writer_lock``). ``append`` raises
    ``LogWriteError`` with the log unchanged — or, when its
    rollback failed, unusable until reopened (module docs).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        header: SessionHeader | None = None,
        clock: Clock = wall_clock_ms,
        ignorable_types: Collection[str] = (),
        protect_system_head: bool = True,
        strict: bool = False,
        allow_unknown_types: bool = False,
        lock_timeout: float = 0.0,
    ) -> None:
        check_header(header, "JsonlLog(header=)", optional=True)
        self.path = Path(path)
        self._clock = clock
        self._ignorable_types = frozenset(ignorable_types)
        self._allow_unknown_types = allow_unknown_types
        if self.path.is_dir():  # refused before a lock file is left beside it
            err = IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(self.path))
            raise LogWriteError(f"{self.path}: cannot open the log for writing: {err}")
        if header is None:
            _refuse_missing(self.path)
        _refuse_not_json(self.path)
        self._lock = writer_lock(self.path, timeout=lock_timeout)
        self._fd: int | None = None  # raw, unbuffered O_RDWR descriptor; None once closed
        self._unusable: str | None = None  # why appends are refused until the log is reopened
        self._mutex = threading.Lock()  # appends from several threads of one process serialise
        self.warnings: list[str] = []
        self.surface = Surface(protect_system_head=protect_system_head)
        try:
            self._open(header, strict)
        except OSError as err:
            self._release_after_failed_open()
            raise LogWriteError(f"{self.path}: cannot open the log for writing: {err}") from err
        except BaseException:
            self._release_after_failed_open()
            raise

    def _release_after_failed_open(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._lock.release()

    # -- opening ------------------------------------------------------------------------
    def _open(self, header: SessionHeader | None, strict: bool) -> None:
        if not self.path.exists() or self.path.stat().st_size == 0:
            if header is None:
                _refuse_missing(self.path)
            assert header is not None
            line = (json.dumps(header.to_json(), ensure_ascii=False, separators=(",", ":")) + "\n").encode()
            # the folder is fsynced too: a log must survive a crash right after it was created
            atomic_write(self.path, line, sync_folder=True)
            self._fd = self._open_locked()
            self._header = header
            self._events: list[Event] = []
            self._line_offsets: array[int] = array("q")
            size = len(line)
        else:
            # lock the file itself before reading it: a writer that reached it by another name
            # (hard link) must not be cut or read mid-append
            self._fd = self._open_locked()
            res = read_log(self.path, strict=strict)
            if res.compressed:
                raise LogFormatError(f"{self.path}: zstd logs are read-only for fsm_stage (DSH owns them)")
            if header is not None and header.id != res.header.id:
                raise LogFormatError(
                    f"{self.path}: session id {res.header.id!r} does not match {header.id!r}"
                )
            if res.torn_tail_offset is not None and res.lines_after_damage:
                raise LogFormatError(
                    f"{self.path}: line {res.damaged_line} is damaged ({res.damage}) and "
                    f"{res.lines_after_damage} line(s) follow it; refusing to write (it would "
                    f"cut them): run `fsm-stage repair {self.path}` (JsonlLog.repair) first"
                )
            self._header = res.header
            self._events = res.events
            self._line_offsets = res.line_offsets
            self.warnings.extend(res.warnings)
            size = res.good_end
            if res.torn_tail_offset is not None:
                backup = _save_tail(self.path, res.torn_tail_offset)
                os.ftruncate(self._fd, res.torn_tail_offset)
                os.fsync(self._fd)
                self.warnings.append(
                    f"{self.path}: truncated torn tail at byte {res.torn_tail_offset} "
                    f"(the cut bytes are in {backup})"
                )
            try:
                self.surface.extend(self._events)
            except LogWriteError as err:
                raise LogFormatError(f"{self.path}: invalid surface op in the stored log: {err}") from None
        self._size = size

    def _open_locked(self) -> int:
        """Open the log file read-write and take its inode lock (``flock``); raises
        ``LogLockedError`` when another writer holds the file under any name."""
        fd = os.open(self.path, os.O_RDWR | getattr(os, "O_BINARY", 0))
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise LogLockedError(
                    f"{self.path} is locked by another writer (another process has the file open "
                    "for writing, possibly under another name: a symlink or hard link); close the "
                    "other writer first — fsm_stage allows one writer per log"
                ) from None
        return fd

    @classmethod
    def repair(cls, path: str | os.PathLike[str]) -> str:
        """Make a log with a damaged line writable again without losing an intact line.

        Under the writer lock: when dropping the damaged line alone leaves a log that reads
        cleanly (seqs contiguous), only that line is removed — also when a later ``turn/end``
        makes readers refuse the log as corrupt, provided it is the one line that is not JSON;
        otherwise the file is cut at the damaged line. Either way every removed byte is first
        saved (fsynced) to ``<log>.damaged-<ms>``. Returns a one-line summary; a log with
        nothing to repair is left alone. Raises ``LogFormatError`` (not a session log;
        corruption before a later ``turn/end`` that removing one stray line does not clear),
        ``LogLockedError``, ``LogWriteError``.
        """
        from fsm_stage.log.dsh import read_log_data

        p = Path(path)
        if not p.is_file():
            raise LogFormatError(f"{p}: no such session log")
        lock = writer_lock(p)
        fd: int | None = None
        try:
            fd = os.open(p, os.O_RDWR | getattr(os, "O_BINARY", 0))
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    raise LogLockedError(f"{p} is open by another writer; close it first") from None
            try:
                res = read_log(p)
            except LogFormatError:  # damage before a later turn/end: a stray line, maybe
                data = p.read_bytes()
                span = _stray_line(data, str(p))
                if span is None:
                    raise
                start, end = span
                line = data.count(b"\n", 0, start) + 1
                return _removed(p, f"line {line}", _drop_line(p, data, start, end))
            if res.torn_tail_offset is None:
                return f"{p}: nothing to repair ({len(res.events)} events)"
            data = p.read_bytes()
            start = res.torn_tail_offset
            end = data.find(b"\n", start)
            end = len(data) if end == -1 else end + 1
            only_line = False
            if res.lines_after_damage:
                with contextlib.suppress(LogFormatError):
                    rest = read_log_data(data[:start] + data[end:], source=str(p))
                    only_line = rest.torn_tail_offset is None
            if only_line:
                backup = _drop_line(p, data, start, end)
            else:
                backup = _backup_path(p, "damaged")
                atomic_write(backup, data[start:], sync_folder=True)  # saved before the cut
                os.ftruncate(fd, start)
                os.fsync(fd)
        except OSError as err:
            raise LogWriteError(str(output_error(p, err, what="session log"))) from err
        finally:
            if fd is not None:
                os.close(fd)
            lock.release()
        where = f"line {res.damaged_line}" if res.damaged_line is not None else f"byte {start}"
        if only_line:
            return _removed(p, where, backup)
        return (
            f"{p}: cut the log at the damaged {where}; the {len(data) - start} bytes from there "
            f"are saved to {backup}; {len(res.events)} events kept"
        )

    # -- EventLog -------------------------------------------------------------------------
    @property
    def header(self) -> SessionHeader:
        return self._header

    @property
    def events(self) -> Sequence[Event]:
        return self._events

    @property
    def size(self) -> int:
        """Committed byte length of the file."""
        return self._size

    @property
    def closed(self) -> bool:
        """True after ``close()`` — or after a failure left the log unusable (see module docs)."""
        return self._fd is None

    def line_offset(self, seq: int) -> int:
        """Byte offset of the start of the line holding event ``seq``."""
        return self._line_offsets[seq]

    def line_start_seq(self, seq: int) -> int:
        """The first seq on the line holding event ``seq`` (differs only inside packed rows)."""
        return bisect.bisect_left(self._line_offsets, self._line_offsets[seq])

    def line_hash(self, seq: int) -> str:
        """SHA-256 (hex, 16 chars) of the line holding event ``seq`` (checkpoint verification)."""
        start = self._line_offsets[seq]
        return _hash_line_at(self.path, start)

    def append_many(self, specs: Sequence[NewEvent], *, expect_last_seq: int | None = None) -> list[Event]:
        """Append a batch atomically: all events become durable in one write, or none do.

        Surface ops are validated against the surface as it evolves through the batch.
        Raises ``LogWriteError`` (log, surface and file unchanged); with ``expect_last_seq``
        (seq of the last event the writer saw, ``-1`` when empty) ``AppendConflictError``
        when the log no longer ends there.
        """
        with self._mutex:
            check_last_seq(expect_last_seq, len(self._events))
            return self._append_many(specs)

    def refresh(self) -> int:
        """Catch up with other writers: the writer lock excludes them, so always 0 (docs/session-log.md)."""
        return 0

    def _append_many(self, specs: Sequence[NewEvent]) -> list[Event]:
        if self._unusable is not None:
            raise LogWriteError(self._unusable)
        if self._fd is None:
            raise LogWriteError(f"{self.path}: log is closed")
        if not specs:
            return []
        evs = prepare_batch(
            specs,
            next_seq=len(self._events),
            now=self._clock(),
            surface=self.surface,
            ignorable_types=self._ignorable_types,
            allow_unknown=self._allow_unknown_types,
            check_json=False,  # ``encode_line`` below refuses non-JSON data the same way
        )
        lines = [encode_line(ev) for ev in evs]
        blob = b"".join(lines)
        prev = self._size
        fd = self._fd
        synced = False
        try:
            _write_all_at(fd, blob, prev)
            synced = True
            os.fsync(fd)
        except BaseException as err:
            what = f"{self.path}: append of {len(evs)} event(s) failed"
            try:
                os.ftruncate(fd, prev)
                os.fsync(fd)
            except OSError as rb_err:
                self._make_unusable(
                    f"{what} ({err}) and so did its rollback ({rb_err}): the file's state is "
                    "unknown; reopen the log (JsonlLog(path)) to repair it"
                )
                raise LogWriteError(self._unusable) from err
            if synced:  # fsync failed: the page cache may have dropped the error (fsyncgate)
                self._make_unusable(
                    f"{what} in fsync and was rolled back ({err}); a failed fsync cannot be "
                    "retried safely: reopen the log (JsonlLog(path)) to continue"
                )
                raise LogWriteError(self._unusable) from err
            if isinstance(err, Exception):
                raise LogWriteError(f"{what} and was rolled back: {err}") from err
            raise
        off = prev
        for line in lines:
            self._line_offsets.append(off)
            off += len(line)
        self._size = prev + len(blob)
        self._events.extend(evs)
        for ev in evs:
            self.surface.apply(ev)
        return evs

    def _make_unusable(self, why: str) -> None:
        """Refuse every later append with ``why``; close the file and release the writer lock
        so the log can be reopened (in this process too)."""
        self._unusable = why
        self._close()

    # -- lifecycle ------------------------------------------------------------------------
    def close(self) -> None:
        """Close the file and release the writer lock (idempotent)."""
        with self._mutex:
            self._close()

    def _close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.close(fd)
            finally:
                self._lock.release()

    def __enter__(self) -> JsonlLog:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def __repr__(self) -> str:
        return f"JsonlLog({str(self.path)!r}, events={len(self._events)})"


def _write_all_at(fd: int, blob: bytes, offset: int) -> None:
    """Write all of ``blob`` at byte ``offset`` of ``fd`` (``os.write`` may write less than asked)."""
    os.lseek(fd, offset, os.SEEK_SET)
    view = memoryview(blob)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(f"write returned {n} with {len(view)} byte(s) left")
        view = view[n:]


def _hash_line_at(path: Path, offset: int) -> str:
    with open(path, "rb") as fh:
        fh.seek(offset)
        return hashlib.sha256(fh.readline()).hexdigest()[:16]


def _drop_line(path: Path, data: bytes, start: int, end: int) -> Path:
    """Remove the damaged line ``data[start:end]`` of the log at ``path`` (its bytes ``data``):
    the line is saved (fsynced) to a new ``<log>.damaged-<ms>`` first, then the rest is written
    as a new file under the name (the damaged one stays under other links). Returns the backup."""
    backup = _backup_path(path, "damaged")
    atomic_write(backup, data[start:end], sync_folder=True)
    atomic_write(path, data[:start] + data[end:], sync_folder=True)
    return backup


def _removed(path: Path, where: str, backup: Path) -> str:
    """``repair``'s summary after ``_drop_line``."""
    return f"{path}: removed the damaged {where} (saved to {backup}); every other line kept"


def _stray_line(data: bytes, source: str) -> tuple[int, int] | None:
    """The byte span of the one body line of ``data`` that is not JSON, when removing it
    leaves a log that reads cleanly; None otherwise (no such line, several, or the rest is
    damaged too)."""
    from fsm_stage.log.dsh import read_log_data

    spans: list[tuple[int, int]] = []
    start = data.find(b"\n") + 1  # the header line stays
    while 0 < start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end == -1 else end + 1
        line = data[start:end]
        if line.strip():
            try:
                json.loads(line)
            except ValueError:  # also bytes that are not UTF-8
                spans.append((start, end))
                if len(spans) > 1:
                    return None
        start = end
    if len(spans) != 1:
        return None
    first, last = spans[0]
    try:
        rest = read_log_data(data[:first] + data[last:], source=source)
    except LogFormatError:
        return None
    return spans[0] if rest.torn_tail_offset is None else None


def _backup_path(path: Path, kind: str) -> Path:
    """A new ``<log>.<kind>-<ms>`` name beside ``path`` (suffixed ``-N`` if taken)."""
    stamp = wall_clock_ms()
    candidate = path.with_name(f"{path.name}.{kind}-{stamp}")
    n = 1
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.{kind}-{stamp}-{n}")
        n += 1
    return candidate


def _save_tail(path: Path, offset: int) -> Path:
    """Save the bytes of ``path`` from ``offset`` on to ``<log>.torn-<ms>`` (durably)."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        tail = fh.read()
    backup = _backup_path(path, "torn")
    atomic_write(backup, tail, sync_folder=True)
    return backup
