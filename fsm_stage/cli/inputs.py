"""Input paths of the command line: ``-`` for standard input, pipes and FIFOs spooled to disk.

``spooled(arg)`` yields a path any reader can open and seek: ``-`` and non-seekable paths (a
pipe, ``<(…)``, a FIFO, a character device) are copied in 1 MiB chunks into a private
temporary file, removed on exit; a regular file, a missing path or a directory is yielded
unchanged, so the reader reports it with its usual one-line error. ``display_name(arg)`` is
what messages call the input (``<stdin>`` for ``-``); ``read_text_arg(arg, what=…)`` reads a
UTF-8 text input with ``fileio.read_text_input``'s one-line errors. Use::

    with spooled(arg) as path:
        result = read_log(path)"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from fsm_stage.errors import ConfigError, UserError
from fsm_stage.fileio import InputFileError, read_text_input

STDIN = "-"
STDIN_NAME = "<stdin>"
_CHUNK = 1 << 20


def display_name(arg: str | os.PathLike[str]) -> str:
    """How messages name the input ``arg``: ``<stdin>`` for ``-``, else the path as given."""
    return STDIN_NAME if str(arg) == STDIN else str(arg)


def needs_spooling(arg: str | os.PathLike[str]) -> bool:
    """Whether ``arg`` is ``-`` or names something that exists but cannot seek (pipe, FIFO, tty)."""
    if str(arg) == STDIN:
        return True
    try:
        mode = os.stat(arg).st_mode
    except (OSError, ValueError):
        return False  # missing or unreadable: the reader says so in its own words
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISBLK(mode))


def _copy(source: BinaryIO, name: str) -> Path:
    fd, tmp = tempfile.mkstemp(prefix="fsm-stage-input-", suffix=".spool")
    try:
        with os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(source, out, _CHUNK)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError):
            reason = err.strerror or str(err)
            raise UserError(f"{name}: cannot spool input to a temporary file: {reason}") from None
        raise
    return Path(tmp)


@contextmanager
def spooled(arg: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a seekable path holding the input ``arg`` (see the module docstring).

    Raises ``UserError`` (one line) when the input cannot be opened or the temporary file
    cannot be written (e.g. the disk is full); the temporary file is always removed.
    """
    if not needs_spooling(arg):
        yield Path(arg)
        return
    name = display_name(arg)
    if str(arg) == STDIN:
        tmp = _copy(sys.stdin.buffer, name)
    else:
        try:
            source = open(arg, "rb")  # noqa: SIM115 - closed right below
        except OSError as err:
            raise UserError(f"{name}: cannot read input: {(err.strerror or str(err)).lower()}") from None
        with source:
            tmp = _copy(source, name)
    try:
        yield tmp
    except UserError as err:
        raise _renamed(err, tmp, name) from None
    finally:
        tmp.unlink(missing_ok=True)


def _renamed(err: UserError, tmp: Path, name: str) -> UserError:
    """``err`` with the temporary file's path in its message replaced by the input's name
    (``err`` itself when it does not mention it, or is a ``ConfigError`` with positioned lines)."""
    text = str(err)
    if str(tmp) not in text or isinstance(err, ConfigError):
        return err
    try:
        return type(err)(text.replace(str(tmp), name))
    except TypeError:
        return err


def read_text_arg(arg: str | os.PathLike[str], *, what: str = "file") -> str:
    """The UTF-8 text of input ``arg`` (``-`` reads standard input to its end).

    Raises ``InputFileError`` (``NAME: cannot read WHAT: reason``) like ``read_text_input``.
    """
    if str(arg) != STDIN:
        return read_text_input(arg, what=what)  # reads bytes once: pipes and FIFOs need no spool
    with spooled(arg) as path:
        try:
            return read_text_input(path, what=what)
        except InputFileError as err:
            raise InputFileError(str(err).replace(str(path), STDIN_NAME, 1)) from None
