"""Who answers a review from the command line: ``--as NAME`` authenticated against a reviewers
file with the token of ``--token-file`` or ``$FSM_STAGE_REVIEWER_TOKEN`` (``fsm-stage review``
and ``fsm-stage inbox approve-all`` share it)."""

from __future__ import annotations

import os
from pathlib import Path

import attrs
import click

from fsm_stage.errors import UserError
from fsm_stage.reviews import Reviewers, load_reviewers
from fsm_stage.text import lone_surrogate


def text_option(name: str, value: str | None, command: str = "review") -> None:
    """Refuse an option value that is not text (a lone surrogate: bytes that are not UTF-8 in
    the command line), one line, before anything is written."""
    if value is None:
        return
    at = lone_surrogate(value)
    if at is not None:
        raise UserError(f"{command}: {name} is not UTF-8 text (character {at} is not); nothing was "
                        "written")


#: Environment variable holding the reviewer's token when ``--token-file`` is not given.
TOKEN_ENV = "FSM_STAGE_REVIEWER_TOKEN"
#: Largest token file read (bytes).
MAX_TOKEN_FILE = 4096


@attrs.frozen
class Identity:
    """An authenticated reviewer: their ``name`` and the ``reviewers`` file that resolves
    ``@group`` approvers."""

    name: str
    reviewers: Reviewers


def read_token(token_file: str | os.PathLike[str] | None, command: str = "review") -> str:
    """The reviewer's token: the first line of ``token_file`` (surrounding whitespace
    removed), else ``$FSM_STAGE_REVIEWER_TOKEN``. Raises ``UserError`` (one line) when there
    is none or the file cannot be read."""
    if token_file is not None:
        path = Path(token_file)
        try:
            with path.open("rb") as handle:
                raw = handle.read(MAX_TOKEN_FILE + 1)
            if len(raw) > MAX_TOKEN_FILE:
                raise UserError(f"{command}: --token-file {path}: larger than {MAX_TOKEN_FILE} bytes")
            text = raw.decode("utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise UserError(f"{command}: --token-file {path}: cannot read it "
                            f"({err.strerror if isinstance(err, OSError) else 'not UTF-8'})") from None
        found = text.strip()
        if not found:
            raise UserError(f"{command}: --token-file {path} is empty")
        return found
    found = os.environ.get(TOKEN_ENV, "").strip()
    if not found:
        raise UserError(f"{command}: --as needs the reviewer's token: --token-file FILE or {TOKEN_ENV}")
    return found


def identity(as_name: str | None, token_file: str | os.PathLike[str] | None,
             reviewers_file: str | os.PathLike[str] | None, command: str = "review") -> Identity | None:
    """The authenticated reviewer of ``--as NAME`` (None without ``--as``). Raises
    ``click.UsageError`` for ``--token-file`` / ``--reviewers`` without ``--as`` (or ``--as``
    without ``--reviewers``), ``UserError`` for a bad reviewers or token file and a missing
    token, ``ReviewRefusedError`` for an unknown name or a wrong token — all before the log is
    opened, so nothing is written."""
    if as_name is None:
        if token_file is not None or reviewers_file is not None:
            raise click.UsageError("--token-file and --reviewers go with --as NAME")
        return None
    if reviewers_file is None:
        raise click.UsageError("--as NAME needs --reviewers FILE (reviewers: {name: {token_sha256, groups}})")
    text_option("--as", as_name, command)
    reviewers = load_reviewers(Path(reviewers_file))
    reviewers.authenticate(as_name, read_token(token_file, command))
    return Identity(as_name, reviewers)
