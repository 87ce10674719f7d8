"""The safe re-read of a handoff document a review names: ``read_handoff_document(session,
path)`` returns its text (a regular file inside the session's cwd, at most ``MAX_HANDOFF_BYTES``,
UTF-8) or raises ``OSError`` / ``UnicodeDecodeError``, which every caller treats as "unreadable"
(an approval is then closed ``payload-changed``: fail closed).
"""

from __future__ import annotations

import errno
import os
import stat

from fsm_stage.fileio import SEARCH_FLAGS, descend, has_dir_fd, is_link
from fsm_stage.runtime.session import Session

__all__ = ["MAX_HANDOFF_BYTES", "read_handoff_document"]

MAX_HANDOFF_BYTES = 4 * 1024 * 1024
"""The largest handoff document a review re-reads (a log may name any path: it is never trusted)."""

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # none on Windows, which has no FIFO to block on
_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation
# folders are opened to search them only: a folder the reader may pass but not list stays passable
_DIR_FLAGS = SEARCH_FLAGS | _NOFOLLOW
_READ_CHUNK = 64 * 1024


def read_handoff_document(session: Session, path: str) -> str:
    """The text of the handoff document a review request names, read safely: only a regular
    file (no symlink as the last component, no FIFO or device: opened non-blocking) inside the
    session's cwd when the header has one, at most ``MAX_HANDOFF_BYTES``, UTF-8. Inside a cwd the
    document's folder is resolved, checked to lie in the resolved cwd, then opened folder by
    folder from the cwd without following a symlink, so a folder swapped for a symlink after the
    check is refused, not followed out. Raises ``OSError`` (also for a path or cwd that is
    not a string, holds a NUL or a character the filesystem encoding cannot take, and for a
    folder of the path that is missing, not a folder or a symlink loop, even before a ``..``) /
    ``UnicodeDecodeError`` (the caller treats the document as unreadable)."""
    cwd = session.header.cwd
    for given in (path, cwd) if cwd is not None else (path,):
        if not isinstance(given, str) or "\0" in given or not _encodable(given):
            raise OSError(errno.EINVAL, f"{given!r} is not a usable path")
    flags = os.O_RDONLY | _NONBLOCK | _NOFOLLOW | _CLOEXEC | _BINARY
    fd = _open_no_link(path, flags) if cwd is None else _open_inside(cwd, path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path} is not a regular file")
        if info.st_size > MAX_HANDOFF_BYTES:
            raise OSError(f"{path} is larger than {MAX_HANDOFF_BYTES} bytes")
        # buffers of at most the file's size or _READ_CHUNK, never one of the limit; a file that
        # grew after fstat (or a pseudo-file that reports size 0) is read on to its end or the limit
        data = bytearray(os.read(fd, max(info.st_size + 1, _READ_CHUNK)))
        while data and len(data) <= MAX_HANDOFF_BYTES:
            more = os.read(fd, min(_READ_CHUNK, MAX_HANDOFF_BYTES + 1 - len(data)))
            if not more:
                break
            data += more
    finally:
        os.close(fd)
    if len(data) > MAX_HANDOFF_BYTES:
        raise OSError(f"{path} is larger than {MAX_HANDOFF_BYTES} bytes")
    return data.decode("utf-8")


def _encodable(text: str) -> bool:
    """Whether ``text`` encodes in the filesystem encoding (a lone surrogate may not)."""
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        return False
    return True


def _open_no_link(path: str, flags: int) -> int:
    """``os.open(path, flags)``; where the system has no ``O_NOFOLLOW`` (Windows) a ``path``
    that is a link (or junction) is refused first, by ``lstat``, with ``ELOOP`` as the flag would."""
    if not _NOFOLLOW and is_link(os.lstat(path)):
        raise OSError(errno.ELOOP, f"{path} is a link")
    return os.open(path, flags)


def _open_inside(cwd: str, path: str, flags: int) -> int:
    """A descriptor of ``path`` opened with ``flags`` when its folder resolves inside ``cwd``:
    the resolved folders are opened one by one from the resolved cwd, none through a symlink,
    and the document by its own name (``flags`` refuse a symlink there); where the system has
    no ``dir_fd`` (Windows) the resolved folder is used by path and a document that is a link
    (or junction) is refused. Raises ``PermissionError`` outside the cwd, ``OSError`` otherwise."""
    head, name = os.path.split(path)
    if name in ("", os.curdir, os.pardir):
        raise IsADirectoryError(errno.EISDIR, f"{path} names a folder, not a document")
    try:  # the system's own lookup first: a missing name, a file or a loop before a ".." is an
        # error there, which realpath would cancel as text
        if not stat.S_ISDIR(os.stat(head or os.curdir).st_mode):
            raise NotADirectoryError(errno.ENOTDIR, f"{head} is not a folder")
        root, real = os.path.realpath(cwd, strict=True), os.path.realpath(head or os.curdir, strict=True)
    except RecursionError:  # a symlink chain deeper than realpath follows
        raise OSError(errno.ELOOP, f"{path}: too many levels of symbolic links") from None
    if os.path.commonpath([root, real]) != root:
        raise PermissionError(f"{path} is outside the session cwd {cwd}")
    if not has_dir_fd():  # Windows: the resolved folder by path
        return _open_no_link(os.path.join(real, name), flags)
    parts = os.path.relpath(real, root).split(os.sep) if real != root else []
    folder = descend(os.open(root, _DIR_FLAGS & ~_NOFOLLOW), parts,
                     lambda parent, part: os.open(part, _DIR_FLAGS, dir_fd=parent))
    try:
        return os.open(name, flags, dir_fd=folder)
    finally:
        os.close(folder)
