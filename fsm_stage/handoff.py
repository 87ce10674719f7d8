"""Handoff documents: where a full stage transition writes its markdown, confined and atomic.

A full transition writes the model's handoff document, before the human review, to
``<session cwd>/<handoff_dir>/<session_segment(id)>/<stage>.md`` (``handoff_relative_path``).

``HandoffStore``          protocol ``write(relative, text, *, cwd, policy=None) -> str``
                          (the absolute path written).
``LocalHandoffStore``     the real filesystem: stays inside the cwd, follows no symlink,
                          replaces the document atomically.
``MemoryHandoffStore``    test double: records ``writes`` and ``policies``; ``fail_with``
                          makes the next write raise.
``SandboxPolicyProvider`` optional ``resolve(session) -> policy``, handed to the store.

A refused path raises ``HandoffPathError`` (a ``UserError``); OS failures propagate as
``OSError``. Rules and why: ``docs/handoff-decisions.md``."""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import posixpath
import re
import stat
from contextlib import suppress
from pathlib import Path, PurePosixPath
from typing import Any, Protocol, runtime_checkable

import attrs

from fsm_stage.errors import HandoffPathError as HandoffPathError
from fsm_stage.fileio import (
    FOLDER_FLAGS,
    SEARCH_FLAGS,
    atomic_write,
    descend,
    has_dir_fd,
    is_link,
    replace_at,
)

__all__ = [
    "DEFAULT_HANDOFF_DIR",
    "MAX_SEGMENT_LENGTH",
    "HandoffPathError",
    "HandoffStore",
    "HandoffWrite",
    "LocalHandoffStore",
    "MemoryHandoffStore",
    "SandboxPolicyProvider",
    "atomic_write_text",
    "handoff_relative_path",
    "read_handoff",
    "session_segment",
]

DEFAULT_HANDOFF_DIR = "handoff"
"""``handoff_dir`` used when a graph does not set one (docs/contracts.md)."""

MAX_SEGMENT_LENGTH = 128
"""Longest session segment (characters = bytes: a segment is ASCII); longer ones are shortened
with a hash suffix (see ``session_segment``)."""

_SEGMENT_HASH_HEX = 16
_UNSAFE_SEGMENT_CHAR = re.compile(r"[^A-Za-z0-9._-]")
_RESERVED_SEGMENTS = frozenset({"", ".", ".."})
_FALLBACK_SEGMENT = "session"


def session_segment(session_id: str) -> str:
    """The folder name a session's handoffs live in (docs/contracts.md, S69, S70, S72a–c).

    An id made only of ``[A-Za-z0-9._-]``, other than ``""``, ``"."`` and ``".."`` and at most
    ``MAX_SEGMENT_LENGTH`` characters, is its own folder (``"abc-123"`` → ``"abc-123"``).

    Any other id is changed by the seed's rule (every code point outside the safe set becomes
    ``-``, one per code point; ``""``/``"."``/``".."`` become ``"session"``), and that rule is
    not one-to-one (``"user 1"``, ``"user/1"`` and ``"user:1"`` would all be ``"user-1"``). So a
    changed id gets the sanitised text cut to ``MAX_SEGMENT_LENGTH - 17`` characters, then ``-``
    and the first 16 hex digits of the SHA-256 of the original id (UTF-8, lone surrogates
    passed through): ``"odd id/../x"`` → ``"odd-id-..-x-<16 hex>"``. Distinct ids get distinct
    folders (up to a 64-bit hash collision, or an id deliberately spelled like another's
    hashed folder), every folder fits in a file name, and none can add a path component.
    """
    segment = _UNSAFE_SEGMENT_CHAR.sub("-", session_id)
    if segment == session_id and segment not in _RESERVED_SEGMENTS and len(segment) <= MAX_SEGMENT_LENGTH:
        return segment
    if segment in _RESERVED_SEGMENTS:
        segment = _FALLBACK_SEGMENT
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:_SEGMENT_HASH_HEX]
    return f"{segment[:MAX_SEGMENT_LENGTH - _SEGMENT_HASH_HEX - 1]}-{digest}"


def _normalised_dir(handoff_dir: str) -> PurePosixPath:
    """``handoff_dir`` normalised lexically; raises ``HandoffPathError`` when it escapes."""
    if not handoff_dir.strip():
        raise HandoffPathError("handoff_dir must be a non-empty relative folder name")
    if "\x00" in handoff_dir:
        raise HandoffPathError(f"handoff_dir {handoff_dir!r} contains a NUL character")
    if posixpath.isabs(handoff_dir) or os.path.isabs(handoff_dir):
        raise HandoffPathError(
            f"handoff_dir {handoff_dir!r} is absolute; it must be relative to the session cwd"
        )
    norm = posixpath.normpath(handoff_dir)
    if norm == "." or norm == ".." or norm.startswith("../"):
        raise HandoffPathError(
            f"handoff_dir {handoff_dir!r} does not name a folder inside the session cwd"
        )
    return PurePosixPath(norm)


@functools.lru_cache(maxsize=1024)
def handoff_relative_path(handoff_dir: str, session_id: str, stage: str) -> PurePosixPath:
    """``<handoff_dir>/<segment(session_id)>/<stage>.md``, normalised (docs/contracts.md, S72d).

    ``stage`` must be a valid stage name (``[a-z][a-z0-9_-]*``), which guarantees a safe file
    name; anything else raises ``HandoffPathError``. ``handoff_dir`` must be relative and stay
    inside the cwd (``HandoffPathError`` otherwise). A pure function of its three strings, so
    the last 1,024 answers are kept (a refusal is raised again each time).
    """
    if not re.fullmatch(r"[a-z][a-z0-9_-]*", stage):
        raise HandoffPathError(f"stage name {stage!r} is not a safe handoff file name")
    return _normalised_dir(handoff_dir) / session_segment(session_id) / f"{stage}.md"


@runtime_checkable
class SandboxPolicyProvider(Protocol):
    """Optional seam: the per-session sandbox policy a handoff write carries (docs/contracts.md, S71)."""

    def resolve(self, session: Any) -> Any:
        """The policy for ``session`` (opaque to fsm_stage; passed to ``HandoffStore.write``)."""
        ...


@runtime_checkable
class HandoffStore(Protocol):
    """Writes handoff documents inside a session cwd (docs/architecture.md "handoff file writer").

    A store may set a class attribute ``blocking = False`` when ``write`` does no I/O (like
    ``MemoryHandoffStore``); the stage switch then calls it directly instead of in a worker
    thread. Stores without the attribute are treated as blocking (run via ``asyncio.to_thread``),
    except ``LocalHandoffStore`` itself, which writes documents up to
    ``fsm_stage.stage_switch.goto.INLINE_HANDOFF_CHARS`` (64 KiB) on the event loop, as the
    session log's fsynced appends are.
    """

    def write(self, relative: PurePosixPath, text: str, *, cwd: str | None, policy: Any = None) -> str:
        """Write ``text`` (UTF-8) to ``cwd / relative`` atomically and return its absolute path.

        ``relative`` comes from ``handoff_relative_path``. ``cwd`` is the session header's cwd
        (``None``: the store's default root). Raises ``HandoffPathError`` when the target would
        leave the cwd; other ``OSError``s propagate unchanged.
        """
        ...


def _root_for(cwd: str | None, default_root: str | None) -> str:
    root = cwd if cwd is not None else default_root
    if root is None:
        raise HandoffPathError(
            "the session has no cwd and the handoff store has no default root; "
            "cannot place the handoff document"
        )
    if not os.path.isabs(root):
        raise HandoffPathError(f"session cwd {root!r} is not an absolute path")
    return os.path.normpath(root)


def _check_relative(relative: PurePosixPath) -> tuple[str, ...]:
    parts = relative.parts
    if relative.is_absolute() or not parts or any(p in ("", ".", "..") for p in parts) or len(parts) < 3:
        raise HandoffPathError(f"handoff path {str(relative)!r} is not <handoff_dir>/<session>/<stage>.md")
    return parts


@attrs.frozen
class HandoffWrite:
    """One recorded write of ``MemoryHandoffStore``: absolute ``path``, ``text``, ``policy``."""

    path: str
    text: str
    policy: Any = None


class MemoryHandoffStore:
    """In-memory ``HandoffStore`` for tests (docs/contracts.md "in-memory fs that records writes").

    ``writes`` lists every successful write in order; ``policies`` the policy of every write
    attempt; ``files`` maps absolute path → current text. Setting ``fail_with`` to an
    exception makes the next write raise it (the write is not recorded). Paths are checked
    with the same lexical rules as the local store (no filesystem, so no symlinks).
    """

    #: ``write`` does no I/O, so the stage switch calls it without a thread hop.
    blocking = False

    def __init__(self, default_root: str | None = "/workspace") -> None:
        self.default_root = default_root
        self.writes: list[HandoffWrite] = []
        self.policies: list[Any] = []
        self.files: dict[str, str] = {}
        self.fail_with: BaseException | None = None

    def write(self, relative: PurePosixPath, text: str, *, cwd: str | None, policy: Any = None) -> str:
        """Record the write and return ``<root>/<relative>`` (see ``HandoffStore.write``)."""
        root = _root_for(cwd, self.default_root)
        _check_relative(relative)
        self.policies.append(policy)
        if self.fail_with is not None:
            err, self.fail_with = self.fail_with, None
            raise err
        path = posixpath.join(root, str(relative))
        _utf8(text, path)  # refused exactly as the local store refuses it
        self.writes.append(HandoffWrite(path, text, policy))
        self.files[path] = text
        return path

    def document(self, path: str) -> str | None:
        """The current text of the document at absolute ``path`` (None when there is none): what
        a redemption hashes again, since this store has no file to re-read."""
        return self.files.get(path)


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _utf8(text: str, shown: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise HandoffPathError(
            f"handoff document {shown!r} cannot be written: the text has a lone surrogate "
            f"(U+{ord(exc.object[exc.start]):04X}) at character {exc.start}, which is not UTF-8"
        ) from None


class LocalHandoffStore:
    """``HandoffStore`` on the local filesystem, confined to the session cwd and atomic.

    ``default_root`` (absolute) is used for sessions whose header has no cwd; when it is None
    such a write raises ``HandoffPathError`` rather than guessing the process cwd (docs/contracts.md:
    the workspace root is the *session* cwd). ``policy`` is accepted for the seam's sake; the
    confinement below is what a workspace-write sandbox policy asks for.

    Layout rules are in the module docstring. The returned path is ``<cwd>/<relative>`` as the
    session knows its cwd (not symlink-resolved), e.g. ``/workspace/handoff/agent-1/beta.md``.
    """

    def __init__(self, default_root: str | os.PathLike[str] | None = None) -> None:
        self.default_root = None if default_root is None else os.fspath(default_root)

    def write(self, relative: PurePosixPath, text: str, *, cwd: str | None, policy: Any = None) -> str:
        """Write ``text`` to ``cwd / relative`` atomically (see ``HandoffStore.write``).

        Every folder below the cwd is opened (or created) by name relative to its parent's
        file descriptor with ``O_NOFOLLOW | O_DIRECTORY``: nothing is resolved first and opened
        later, so swapping a folder for a symlink mid-write cannot redirect it. Raises
        ``HandoffPathError`` when the cwd does not exist or is not a folder, when any folder
        below the cwd or the document is a symlink (or not of the expected kind), or when
        ``text`` cannot be UTF-8 encoded (a lone surrogate). Where the system has no ``dir_fd``
        (Windows) the same refusals are checked by path (``_document_by_path``).
        """
        root = _root_for(cwd, self.default_root)
        parts = _check_relative(relative)
        data = _utf8(text, posixpath.join(root, str(relative)))
        if not has_dir_fd():
            target, _shown = self._document_by_path(root, parts, create=True)
            atomic_write(target, data, sync_folder=True)
            return posixpath.join(root, str(relative))
        fd, shown = self._open_folders(root, parts[:-1], create=True)
        try:
            shown = posixpath.join(shown, parts[-1])
            self._refuse_symlinked_file(fd, parts[-1], shown)
            replace_at(fd, parts[-1], data)
        finally:
            os.close(fd)
        return posixpath.join(root, str(relative))

    def read(self, relative: PurePosixPath, *, cwd: str | None) -> str:
        """Read the document at ``cwd / relative`` back (UTF-8), through the same confined walk.

        Raises ``HandoffPathError`` for a symlinked folder or document (as ``write``),
        ``FileNotFoundError`` when it does not exist. Folders need search permission only.
        """
        root = _root_for(cwd, self.default_root)
        parts = _check_relative(relative)
        if not has_dir_fd():
            target, _shown = self._document_by_path(root, parts, create=False)
            with open(target, "rb") as handle:
                return handle.read().decode("utf-8")
        fd, shown = self._open_folders(root, parts[:-1], create=False)
        try:
            shown = posixpath.join(shown, parts[-1])
            try:
                file_fd = os.open(parts[-1], os.O_RDONLY | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0), dir_fd=fd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise HandoffPathError(
                        f"handoff document {shown!r} is a symlink; refusing to read it") from exc
                raise
            with os.fdopen(file_fd, "rb") as handle:
                return handle.read().decode("utf-8")
        finally:
            os.close(fd)

    @staticmethod
    def _open_folders(root: str, names: tuple[str, ...], *, create: bool) -> tuple[int, str]:
        """Descriptor of ``root/names…`` (left open) and its shown path; see ``write``. A
        write (``create``) opens the folders for reading (the last one is fsynced), a read
        for searching only."""
        flags = FOLDER_FLAGS if create else SEARCH_FLAGS
        try:
            fd = os.open(root, flags)
        except OSError as exc:
            if exc.errno == errno.ENOTDIR:
                raise HandoffPathError(f"session cwd {root!r} is not a folder") from exc
            raise HandoffPathError(f"session cwd {root!r} does not exist or is not reachable") from exc
        shown = root

        def enter(parent: int, name: str) -> int:
            nonlocal shown
            shown = posixpath.join(shown, name)
            return LocalHandoffStore._enter(parent, name, shown, create=create, flags=flags)

        folder = descend(fd, names, enter)
        return folder, shown

    @staticmethod
    def _enter(parent: int, name: str, shown: str, *, create: bool, flags: int) -> int:
        """Open folder ``name`` under ``parent`` with ``flags`` without following a symlink
        (creating it when ``create``)."""
        for _attempt in range(3):
            try:
                return os.open(name, flags | _NOFOLLOW, dir_fd=parent)
            except FileNotFoundError:
                if not create:
                    raise
                with suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=parent)
                    with suppress(OSError):  # the new folder's name survives a crash too (some
                        os.fsync(parent)  # filesystems refuse fsync on folders)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                try:
                    st = os.lstat(name, dir_fd=parent)
                except FileNotFoundError:
                    continue
                _refuse_non_folder(st, shown, exc)
        raise HandoffPathError(f"could not open folder {shown!r}: it keeps changing")  # pragma: no cover

    @staticmethod
    def _document_by_path(root: str, parts: tuple[str, ...], *, create: bool) -> tuple[str, str]:
        """Where the system has no ``dir_fd`` (Windows): the document's path and shown path,
        each folder below ``root`` checked by ``lstat`` (created when ``create``) and refused as
        ``write`` refuses it, symlinks and junctions alike, and so is the document. The checks
        come before the use, so unlike the walk by descriptors this one is not proof against a
        folder swapped for a link in between."""
        if not os.path.isdir(root):
            what = "is not a folder" if os.path.lexists(root) else "does not exist or is not reachable"
            raise HandoffPathError(f"session cwd {root!r} {what}")
        path, shown = root, root
        for name in parts[:-1]:
            path, shown = os.path.join(path, name), posixpath.join(shown, name)
            for _attempt in range(3):
                try:
                    st = os.lstat(path)
                except FileNotFoundError:
                    if not create:
                        raise
                    with suppress(FileExistsError):
                        os.mkdir(path, 0o755)
                    continue
                _refuse_non_folder(st, shown)
                break
            else:  # pragma: no cover - created and removed again three times
                raise HandoffPathError(f"could not open folder {shown!r}: it keeps changing")
        path, shown = os.path.join(path, parts[-1]), posixpath.join(shown, parts[-1])
        LocalHandoffStore._refuse_symlinked_file(None, path, shown, "write" if create else "read")
        return path, shown

    @staticmethod
    def _refuse_symlinked_file(dir_fd: int | None, name: str, shown: str, doing: str = "write") -> None:
        """Raise ``HandoffPathError`` when the document ``name`` exists and is a link or not a
        regular file (``doing``: what is refused, for the message)."""
        try:
            st = os.lstat(name, dir_fd=dir_fd)
        except FileNotFoundError:
            return
        if is_link(st):
            raise HandoffPathError(f"handoff document {shown!r} is a symlink; refusing to {doing} it")
        if not stat.S_ISREG(st.st_mode):
            raise HandoffPathError(f"handoff document {shown!r} exists and is not a regular file")


def _refuse_non_folder(st: os.stat_result, shown: str, cause: BaseException | None = None) -> None:
    """Raise ``HandoffPathError`` unless ``st`` (an ``lstat``) is a real folder."""
    if is_link(st):
        raise HandoffPathError(
            f"{shown!r} is a symlink; handoff documents are only written through real "
            "folders inside the session cwd"
        ) from cause
    if not stat.S_ISDIR(st.st_mode):
        raise HandoffPathError(f"{shown!r} exists and is not a folder") from cause


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically: ``fileio.atomic_write`` with the
    folder fsynced. Hard links to the old file keep the old content. The folder must exist;
    ``OSError`` propagates and no temporary file is left behind; ``HandoffPathError`` when
    ``text`` is not UTF-8 encodable (a lone surrogate)."""
    atomic_write(path, _utf8(text, os.fspath(path)), sync_folder=True)


def read_handoff(path: str | os.PathLike[str]) -> str:
    """Read a written handoff document back (UTF-8). Convenience for tests and tools."""
    return Path(path).read_text(encoding="utf-8")
