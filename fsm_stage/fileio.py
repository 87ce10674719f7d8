"""File input/output shared by every layer: reading user-named input files and atomic writes.

``read_text_input`` turns every way a user-named file can be unreadable (missing, a directory,
no permission, not UTF-8, binary) into a one-line ``UserError``. ``atomic_write`` replaces a
file through a temporary sibling, fsync and ``os.replace`` so a reader never sees a half-written
file; the new file gets the usual ``0o666 & ~umask`` permissions (``mkstemp`` alone gives 0600).
"""

from __future__ import annotations

import os
import tempfile
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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike[str], data: bytes, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` atomically (temporary sibling, fsync, ``os.replace``).

    ``mode`` defaults to ``0o666 & ~umask``. The parent folder must exist. Raises ``OSError``
    (nothing is left behind: the temporary file is removed) — callers that write a user-named
    output turn it into a ``UserError`` with ``output_error``.
    """
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, (0o666 & ~_umask()) if mode is None else mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def output_error(path: str | os.PathLike[str], err: OSError, *, what: str = "file") -> UserError:
    """A one-line ``UserError`` for an output that cannot be written (``PATH: cannot write WHAT: reason``)."""
    p = Path(path)
    shown = visible(str(p))
    if isinstance(err, FileNotFoundError):
        return UserError(f"{shown}: cannot write {what}: folder {visible(str(p.parent))} does not exist")
    if isinstance(err, IsADirectoryError) or p.is_dir():
        return UserError(f"{shown}: cannot write {what}: it is a directory")
    return UserError(f"{shown}: cannot write {what}: {_reason(err)}")
