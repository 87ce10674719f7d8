"""Approve with edits, and what changed since the version a reviewer kept.

``edit_data(record, shape, edited)`` validates a reviewer's edited document for an approval
(a full stage switch's handoff document, or a plan) and returns the answer's ``edited`` /
``editedSha256`` keys; ``kept_before(state, record)`` is the latest earlier review of the same
subject that was answered keep (its stored document is "the version the reviewer rejected"), and
``revision_diff(old, new, ...)`` the unified diff between two versions; ``kept_diff(state, record)``
both together (what ``fsm-stage review`` and the inbox's review page show). docs/reviews.md,
"Approve with edits".
"""

from __future__ import annotations

import difflib
from typing import Any

from fsm_stage.errors import RecordShapeError
from fsm_stage.reviews._fold import (
    MAX_REVIEW_DOCUMENT_BYTES,
    ReviewRecord,
    ReviewState,
    edited_sha256,
)
from fsm_stage.text import is_plain

__all__ = ["MAX_FEEDBACK_CHARS", "edit_data", "edited_sha256", "feedback_problem", "kept_before", "kept_diff",
           "refuse_control_characters", "refuse_feedback", "revision_diff"]

#: Most diff lines shown for a re-asked review (the rest is summarised in one line).
MAX_DIFF_LINES = 400
#: Most lines a version may have to be diffed: ``difflib`` is quadratic in the lines (2,000 take
#: about 0.3 s at worst; 12,000 took 9 s and held a review page), and the document itself is
#: shown whole anyway.
MAX_DIFF_INPUT_LINES = 2_000
#: Longest feedback a reviewer may send (characters): it reaches the model inside a tool result.
MAX_FEEDBACK_CHARS = 20_000

_CONTROL = ("holds control characters or escape sequences (only newlines, tabs and carriage returns "
            "are kept)")


def refuse_control_characters(text: str, what: str) -> None:
    """Raise ``RecordShapeError`` (one line, ``what`` names the text) when ``text`` holds control
    characters or escape sequences (anything ``text.visible`` would escape; newlines, tabs and
    CRs are kept): the one check for what a reviewer sends, an edited document or feedback."""
    if not is_plain(text):
        raise RecordShapeError(f"{what} {_CONTROL}; nothing was written")


def feedback_problem(text: str) -> str | None:
    """Why a reviewer's ``text`` cannot be sent as feedback (None: it can): longer than
    ``MAX_FEEDBACK_CHARS`` characters, or control characters or escape sequences."""
    if len(text) > MAX_FEEDBACK_CHARS:
        return f"is {len(text):,} characters, more than the {MAX_FEEDBACK_CHARS:,} feedback may hold"
    return None if is_plain(text) else _CONTROL


def refuse_feedback(text: str, what: str) -> None:
    """Raise ``RecordShapeError`` (one line, ``what`` names the text) when ``feedback_problem``
    finds one."""
    problem = feedback_problem(text)
    if problem is not None:
        raise RecordShapeError(f"{what} {problem}; nothing was written")


def single_approver_refusal(needed: int) -> str:
    """Why an edited document is refused under a quorum of ``needed`` (> 1) approvals: an edit
    is one reviewer's version."""
    return (f"an edited document needs a single approver (quorum {needed}); "
            "approve as is, or keep with feedback")


def edit_data(record: ReviewRecord, shape: str | None, edited: str | None) -> dict[str, Any]:
    """The answer keys for an approval of ``record`` with the reviewer's ``edited`` document:
    ``{"edited": text, "editedSha256": hex}``, or ``{}`` (no edits, or the text is unchanged).
    Raises ``RecordShapeError`` (one line) for a review whose document cannot be edited (a tool
    or budget review, a light stage switch that uses no document), an empty document, text that
    is not UTF-8, one with control characters or escape sequences (``text.visible`` would
    escape them; newlines, tabs and CRs are kept) or one larger than ``MAX_REVIEW_DOCUMENT_BYTES``."""
    if edited is None:
        return {}
    if record.kind not in ("stage", "plan"):
        raise RecordShapeError(f"review {record.id}: only a handoff document or a plan can be edited "
                               f"(this is a {record.kind} review)")
    if record.kind == "stage" and (shape != "full" or record.handoff_path is None):
        raise RecordShapeError(f"review {record.id}: an edited handoff document needs the full switch "
                               "(the light switch uses no document)")
    try:
        size = len(edited.encode("utf-8"))
    except UnicodeEncodeError as err:
        raise RecordShapeError(f"review {record.id}: the edited document is not UTF-8 text "
                               f"(character {err.start})") from None
    if size > MAX_REVIEW_DOCUMENT_BYTES:
        raise RecordShapeError(f"review {record.id}: the edited document has {size} bytes; at most "
                               f"{MAX_REVIEW_DOCUMENT_BYTES} are accepted")
    if not edited.strip():
        raise RecordShapeError(f"review {record.id}: the edited document is empty")
    refuse_control_characters(edited, f"review {record.id}: the edited document")
    digest = edited_sha256(record, edited)
    if digest == record.payload_sha256:
        return {}  # unchanged: an ordinary approval
    return {"edited": edited, "editedSha256": digest}


def kept_before(state: ReviewState, record: ReviewRecord) -> ReviewRecord | None:
    """The latest review asked before ``record`` about the same subject (same kind; for a stage
    review the same from → target) that was answered keep and stored its document, or None."""
    for other in reversed(list(state.records.values())):
        if other.seq >= record.seq or other.kind != record.kind or other.document is None:
            continue
        if record.kind == "stage" and (other.from_, other.target) != (record.from_, record.target):
            continue
        answer = state.answered.get(other.id)
        if answer is not None and answer.outcome == "keep":
            return other
    return None


def revision_diff(old: str, new: str, *, old_name: str, new_name: str) -> str:
    """The unified diff from ``old`` to ``new`` (``""`` when equal), at most ``MAX_DIFF_LINES``
    lines plus one line saying how many were left out; one line saying why instead when a
    version has more than ``MAX_DIFF_INPUT_LINES`` lines."""
    before, after = old.splitlines(), new.splitlines()
    if before != after and max(len(before), len(after)) > MAX_DIFF_INPUT_LINES:
        return (f"… not compared: {old_name} has {len(before):,} lines and {new_name} {len(after):,}; "
                f"versions of up to {MAX_DIFF_INPUT_LINES:,} lines are diffed")
    lines = list(difflib.unified_diff(before, after, old_name, new_name, lineterm=""))
    if len(lines) > MAX_DIFF_LINES:
        left = len(lines) - MAX_DIFF_LINES
        lines = [*lines[:MAX_DIFF_LINES], f"… {left} more diff line(s) not shown"]
    return "\n".join(lines)


def kept_diff(state: ReviewState, record: ReviewRecord) -> dict[str, Any] | None:
    """``{review, diff}``: the unified diff from the version the reviewer last kept (a review of
    the same subject answered keep, ``kept_before``) to ``record``'s stored document, or None
    when there is nothing to compare."""
    kept = kept_before(state, record)
    if kept is None or kept.document is None or record.document is None:
        return None
    diff = revision_diff(kept.document, record.document, old_name=f"kept ({kept.id})",
                         new_name=f"now ({record.id})")
    return {"review": kept.id, "diff": diff}
