"""Durable inputs: what a user sends a fleet session is first an event in its log.

``record_input(log, kind, text, input_id=...)`` appends ``fsm/fleet/input {id, kind, text}``
(ignorable; idempotent: an input whose ``id`` is logged already is not written twice) and
returns the ``Input``. ``record_answer`` logs a review answer (``answer_review``, ``by``
naming the channel). The DBOS wake-up that follows is ``fsm_stage.fleet.workflows``' job;
when it is lost (the sender died in between), the workers' sweep finds the input in the log.
"""

from __future__ import annotations

import uuid
from typing import Any

from fsm_stage.errors import UserError
from fsm_stage.fleet.records import INPUT, INPUT_KINDS, Input, fold
from fsm_stage.fleet.store import SESSION_ID

__all__ = ["MAX_INPUT_CHARS", "check_input", "record_answer", "record_input"]

MAX_INPUT_CHARS = 1_000_000
"""The longest input text accepted (characters)."""


def check_input(kind: str, text: str) -> None:
    """Raise ``UserError`` (one line) unless ``kind`` is one of ``INPUT_KINDS`` and ``text`` a
    str of at most ``MAX_INPUT_CHARS`` characters, without NUL, that is valid UTF-8 text (a
    command line holding bytes that are not UTF-8 arrives with lone surrogates), and not blank
    for a command. Checked before a session is created for the input."""
    if kind not in INPUT_KINDS:
        raise UserError(f"unknown input kind {kind!r}: one of {', '.join(INPUT_KINDS)}")
    if not isinstance(text, str) or len(text) > MAX_INPUT_CHARS or "\x00" in text:
        raise UserError(f"an input text is a str of at most {MAX_INPUT_CHARS} characters without NUL")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise UserError(f"the input text is not valid UTF-8 (character {err.start + 1} comes from a "
                        "byte that is not UTF-8; check the terminal's encoding)") from None
    if kind != "message" and not text.strip():
        raise UserError(f"/{kind} needs an argument")


def record_input(log: Any, kind: str, text: str, *, input_id: str | None = None) -> Input:
    """Log one durable input on the open ``log`` (``kind``: ``INPUT_KINDS``). ``input_id``
    (default: a new uuid) is also the idempotency key of its wake-up. Raises ``UserError``
    for what ``check_input`` refuses and an invalid id; ``LogWriteError``."""
    check_input(kind, text)
    iid = input_id if input_id is not None else uuid.uuid4().hex
    if not isinstance(iid, str) or not SESSION_ID.fullmatch(iid):
        raise UserError(f"invalid input id {str(iid)[:40]!r}: 1-128 characters of A-Z a-z 0-9 . _ -")
    refresh = getattr(log, "refresh", None)
    if callable(refresh):
        refresh()
    for ev in reversed(log.events):
        data = ev.data if isinstance(ev.data, dict) else {}
        if ev.type == INPUT and data.get("id") == iid:
            return Input(iid, str(data.get("kind")), str(data.get("text")), ev.seq)
    ev = log.append(INPUT, {"id": iid, "kind": kind, "text": text})
    return Input(iid, kind, text, ev.seq)


def record_answer(log: Any, review_id: str, outcome: str, *, feedback: str | None = None,
                  option: str | None = None, by: str = "api") -> None:
    """Log a human's answer to the open review ``review_id`` (``answer_review``). Raises the
    ``ReviewError``s (not found, answered already, payload changed)."""
    from fsm_stage.reviews import answer_review

    answer_review(log, review_id, outcome, feedback=feedback, option=option, by=by)


def pending_inputs(log: Any) -> tuple[Input, ...]:
    """The inputs of ``log`` not consumed yet, in log order."""
    return fold(log.events).pending
