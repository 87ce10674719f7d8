"""File input/output shared by every layer: reading user-named input files and atomic writes.

``read_text_input`` turns every way a user-named file can be unreadable (missing, a directory,
no permission, not UTF-8, binary) into a one-line ``UserError``. ``atomic_write`` (by path) and
``replace_at`` (in an open folder) replace a file through a temporary sibling, fsync and a
rename so a reader never sees a half-written file; the new file gets the usual
``0o666 & ~umask`` permissions. ``descend`` walks open folders name by name without resolving
a path first; where the system has no ``dir_fd`` (``has_dir_fd``: Windows) callers walk by path
and refuse what ``is_link`` names.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from fsm_stage.errors import InputFileError as InputFileError
from fsm_stage.errors import UserError
from fsm_stage.text import visible


def _reason(err: OSError) -> str:
    return err.strerror.lower() if err.strerror else type(err).__name__


def read_text_input(path: str | os.PathLike[str], *, what: str = "file") -> str:
    """Read a user-named UTF-8 text file.

    Returns the text. Raises ``InputFileError`` (one line: ``PATH: cannot read WHAT: reason``)
    when the path does not exist, is a directory, cannot be opened, contains NUL bytes (binary)
    or is not valid UTF-8.
    """
    p = Path(path)
    shown = visible(str(p))
    if p.is_dir():
        raise InputFileError(f"{shown}: cannot read {what}: it is a directory")
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputFileError(f"{shown}: cannot read {what}: no such file") from None
    except OSError as err:
        raise InputFileError(f"{shown}: cannot read {what}: {_reason(err)}") from None
    except ValueError as err:  # e.g. an embedded NUL in the path
        raise InputFileError(f"{p!r}: cannot read {what}: {err}") from None
    if b"\x00" in data:
        raise InputFileError(
            f"{shown}: cannot read {what}: it is a binary file (NUL bytes), expected UTF-8 text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputFileError(
            f"{shown}: cannot read {what}: not UTF-8 text (byte {err.start} is 0x{data[err.start]:02x})"
        ) from None


_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
FOLDER_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC
"""``os.open`` flags of a folder opened for reading (listing it, fsync)."""
SEARCH_FLAGS = FOLDER_FLAGS & ~os.O_RDONLY | getattr(os, "O_PATH", os.O_RDONLY)
"""``os.open`` flags of a folder opened only to open, create or rename names in it (``O_PATH``
where the system has it): that needs search (and write) permission only, as by path, so a
folder of mode 0711 stays passable."""
_REPARSE_POINT = getattr(stat, "FILE_ATTRIBUTE_REPARSE_POINT", 0)


_OPEN_TAKES_DIR_FD = os.open in os.supports_dir_fd  # by identity: asked before anyone wraps os.open


def has_dir_fd() -> bool:
    """Whether ``os.open`` takes ``dir_fd`` here (POSIX); where it does not (Windows, whose
    ``os.supports_dir_fd`` is empty) the writers and readers of this package work by path."""
    return _OPEN_TAKES_DIR_FD and bool(os.supports_dir_fd)


def is_link(info: os.stat_result) -> bool:
    """Whether an ``lstat`` result is a symlink, or on Windows any reparse point (a junction
    too): what a confined walk by path refuses to pass."""
    return stat.S_ISLNK(info.st_mode) or bool(getattr(info, "st_file_attributes", 0) & _REPARSE_POINT)


_TMP_NAME_PREFIX = 200  # bytes of the target's name kept in its temporary sibling's name
_TMP_ATTEMPTS = 8
_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation


def replace_at(folder: int, name: str, data: bytes, *, mode: int | None = None,
               sync_folder: bool = True) -> None:
    """Replace the entry ``name`` of the open folder ``folder`` with ``data`` atomically: a
    temporary sibling ``.<name>.<12 hex>.tmp`` (the name cut to 200 bytes in the filesystem
    encoding, so any name the folder takes fits) is created exclusively and never through a
    symlink, written whole, fsynced and renamed over ``name``; then the folder is fsynced when
    ``sync_folder`` (so the name survives a crash; that needs ``folder`` opened with
    ``FOLDER_FLAGS``; a folder opened with ``SEARCH_FLAGS``, or a filesystem that refuses fsync
    on folders, is let be). A reader sees the old or the new file, never part of one.

    ``mode``: exact permission bits, set after the data is written (until then the file is its
    owner's only, so nobody opens it under looser bits than ``mode``); None gives ``0o666``
    less the umask, applied by the kernel (the process umask is never changed). Raises
    ``OSError`` (``IsADirectoryError`` for the names ``""``, ``.`` and ``..``); the temporary
    file is removed on every failure."""
    _replace(folder, "", name, data, mode=mode, sync_folder=sync_folder)


def _replace(folder: int | None, parent: str, name: str, data: bytes, *, mode: int | None,
             sync_folder: bool) -> None:
    """``replace_at`` in the open ``folder``, or, where the system has no ``dir_fd`` (Windows),
    by paths in the folder ``parent`` (``folder`` None; the folder is not fsynced there)."""
    if name in ("", os.curdir, os.pardir):
        raise IsADirectoryError(errno.EISDIR, "a folder's own name cannot be replaced by a file", name)
    prefix = name[:_TMP_NAME_PREFIX]
    while len(os.fsencode(prefix)) > _TMP_NAME_PREFIX:  # at most 200 characters to drop
        prefix = prefix[:-1]
    target = name if folder is not None else os.path.join(parent, name)
    for attempt in range(_TMP_ATTEMPTS):
        tmp = f".{prefix}.{secrets.token_hex(6)}.tmp"
        if folder is None:
            tmp = os.path.join(parent, tmp)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC | _BINARY,
                         0o666 if mode is None else 0o600, dir_fd=folder)
            break
        except FileExistsError:
            if attempt == _TMP_ATTEMPTS - 1:
                raise
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if mode is not None:
                if hasattr(os, "fchmod"):
                    os.fchmod(fd, mode)
                else:  # Windows before Python 3.13: by path (``tmp`` is one there)
                    os.chmod(tmp, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=folder)
        raise
    if sync_folder and folder is not None:
        with contextlib.suppress(OSError):  # some filesystems refuse fsync on folders
            os.fsync(folder)


def atomic_write(path: str | os.PathLike[str], data: bytes, *, mode: int | None = None,
                 sync_folder: bool = False) -> None:
    """Replace ``path`` with ``data`` atomically (``replace_at`` in its folder: temporary
    sibling, fsync, rename), also fsyncing the folder when ``sync_folder`` (a new file that must
    survive a crash: a log, a backup taken before the original is cut).

    ``mode`` defaults to ``0o666 & ~umask``. The parent folder must exist; a path that names a
    folder (``"out/"``, ``"a/."``) raises ``IsADirectoryError``. Where the system has
    no ``dir_fd`` (Windows), or the folder cannot be opened (no ``O_PATH`` and no read
    permission), the same steps run by path, without the folder's fsync. Raises
    ``OSError`` (nothing is left behind: the temporary file is removed) — callers that write a
    user-named output turn it into a ``UserError`` with ``output_error``.
    """
    if os.path.basename(os.fspath(path)) in ("", os.curdir, os.pardir):  # "out/", "a/.": a folder
        raise IsADirectoryError(errno.EISDIR, "a folder cannot be replaced by a file", os.fspath(path))
    target = Path(path)
    fd = -1
    if has_dir_fd():  # else (Windows) by path
        if sync_folder:
            with contextlib.suppress(PermissionError):  # a folder one may write in but not list:
                fd = os.open(target.parent, FOLDER_FLAGS)  # its fsync is refused, and let be
        if fd == -1:
            # without O_PATH (macOS) opening a folder needs read permission, which a write by path
            # does not: a folder one may not read is written in by path
            with contextlib.suppress(PermissionError):
                fd = os.open(target.parent, SEARCH_FLAGS)
    if fd == -1:
        _replace(None, str(target.parent), target.name, data, mode=mode, sync_folder=sync_folder)
        return
    try:
        _replace(fd, "", target.name, data, mode=mode, sync_folder=sync_folder)
    finally:
        os.close(fd)


def descend(folder: int, names: Iterable[str], enter: Callable[[int, str], int]) -> int:
    """The descriptor of the folder reached from the open ``folder`` through ``names``, each
    opened by ``enter(parent descriptor, name)`` relative to its parent (so a path is never
    resolved first and opened later). ``folder`` is handed over: it and every folder passed
    are closed, also when ``enter`` raises (the error propagates); the caller closes the
    returned descriptor."""
    fd = folder
    try:
        for name in names:
            parent, fd = fd, enter(fd, name)
            os.close(parent)
    except BaseException:
        os.close(fd)  # the parent when ``enter`` raised, else the child whose parent's close did
        raise
    return fd


def _is_dir(p: Path) -> bool:
    """``p.is_dir()``, False where even asking fails (a name too long, a loop)."""
    try:
        return p.is_dir()
    except OSError:
        return False


def output_error(path: str | os.PathLike[str], err: OSError, *, what: str = "file") -> UserError:
    """A one-line ``UserError`` for an output that cannot be written (``PATH: cannot write WHAT: reason``)."""
    p = Path(path)
    shown = visible(str(p))
    if isinstance(err, FileNotFoundError):
        return UserError(f"{shown}: cannot write {what}: folder {visible(str(p.parent))} does not exist")
    if isinstance(err, IsADirectoryError) or _is_dir(p):
        return UserError(f"{shown}: cannot write {what}: it is a directory")
    return UserError(f"{shown}: cannot write {what}: {_reason(err)}")
