"""Approve with edits in the browser: ``/review/{log}/{id}/edit``.

GET shows an editor (a ``<textarea>`` prefilled with the handoff document or the plan; no
JavaScript needed) under the same CSRF protection as every form; POST approves the edited text
through ``SessionStore.answer(edited=…)``, the ``answer_review`` / ``vote_review`` call the CLI's
``fsm-stage review --approve ID --edited FILE`` makes, so the answer records the edited text
and its digest and the transition uses it (docs/reviews.md, "Approve with edits"). What the
library refuses (the rules, a quorum above 1, a document too large or empty) is shown as such
with the reviewer's text kept in the editor. A browser submits a textarea with CRLF line ends:
they are stored as LF, and text equal to the reviewed document is an ordinary approval.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from fsm_stage.constants import APPROVE_FRESH_LABEL
from fsm_stage.inbox import _render
from fsm_stage.reviews._edits import single_approver_refusal
from fsm_stage.text import is_plain, visible

if TYPE_CHECKING:
    from fsm_stage.inbox._app import _Inbox
    from fsm_stage.inbox._pages import Page
    from fsm_stage.inbox._store import OpenReview, SessionView

__all__ = ["edit", "edit_option", "not_editable"]


def edit_option(record: Any) -> str | None:
    """The approve option an edited document goes with: for a stage review the full switch's
    (``Approve and start fresh`` when offered; else the default, a full-shaped request's
    ``Approve``); None for a plan (its default option)."""
    approve = record.options[:-1] if len(record.options) > 1 else record.options
    if record.kind == "stage" and APPROVE_FRESH_LABEL in approve:
        return APPROVE_FRESH_LABEL
    return None


def not_editable(record: Any, document: str | None, doc_error: str | None, *,
                 quorum: bool = True) -> str | None:
    """Why the review page offers no "Approve with edits" for ``record`` (None: it does). Only
    a plan or a full switch's handoff document can be edited, one the page can read, and one
    without control characters or escape sequences (a textarea would show them raw: approve
    such a document as is, or keep it with feedback), under rules asking one approval (an edit
    is one reviewer's version: a quorum above 1 approves the document as it is; a POST leaves
    that refusal to the library, so the editor keeps the reviewer's text: ``quorum=False``)."""
    if record.kind not in ("stage", "plan"):
        return f"a {record.kind} review has no document to edit"
    needed = (record.rules or {}).get("quorum", 1)
    if quorum and needed != 1:
        return single_approver_refusal(needed)
    if record.kind == "stage" and (record.handoff_path is None
                                   or (record.shape != "full" and edit_option(record) is None)):
        return "this stage switch uses no handoff document (the light switch)"
    if document is None:
        return doc_error or "the document cannot be read here"
    if not is_plain(document):
        return ("the document holds control characters or escape sequences; approve it as is, "
                "or keep the current stage with feedback")
    return None


def _submitted(value: object, document: str) -> str | None:
    """The edited text of the form field (CRLF line ends as LF; ``document`` itself when the
    text is the same up to line ends), None when the field is missing."""
    if not isinstance(value, str):
        return None
    text = value.replace("\r\n", "\n")
    return document if text == document.replace("\r\n", "\n") else text


def edit(inbox: _Inbox) -> Page:
    """The editor page's handler (GET: the editor; POST: approve the edited text)."""
    from fsm_stage.inbox._pages import flash, review_document

    async def run(request: Request, name: str, view: SessionView, item: OpenReview | None) -> Response:
        back = request.url.path.removesuffix("/edit")
        if item is None:
            flash(request, ("error", "this review is closed already"))
            return RedirectResponse(back, status_code=303)
        record = view.state.records[request.path_params["rid"]]
        document, doc_error = review_document(view, record)
        why = not_editable(record, document, doc_error, quorum=request.method != "POST")
        if why is not None or document is None:
            flash(request, ("error", f"cannot approve with edits: {why}"))
            return RedirectResponse(back, status_code=303)
        text, status, message = document, 200, None
        if request.method == "POST":
            form = await request.form()
            edited = _submitted(form.get("edited"), document)
            if edited is None:
                return PlainTextResponse("400: the form has no edited document", status_code=400)
            text = edited
            if edited != document and visible(edited, keep="\n\t") != edited:
                status, message = 422, ("error", "the edited document holds control characters; "
                                                 "nothing was written")
            elif edited.count("\ufffd") > document.count("\ufffd"):  # the form decoder's stand-in
                status, message = 422, ("error", "the edited document is not UTF-8 text (the form "
                                                 "held undecodable bytes); nothing was written")
            else:
                kind, line = inbox.answer_one(name, item, "approve", edit_option(record), None, edited=edited)
                if kind == "ok":
                    flash(request, (kind, line))
                    return RedirectResponse(back, status_code=303)
                status, message = (403 if kind == "refused" else 422), (kind, line)
        return inbox.page(request, "edit.html", {
            "view": view, "record": record, "text": text, "message": message, "back": back,
            "kept": _render.kept_diff_lines(view.state, record),
            "refusal": inbox.refusal(item, name)}, status=status)

    return inbox.on_review(run)

