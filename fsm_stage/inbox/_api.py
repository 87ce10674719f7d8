"""The inbox's JSON API, for reviewers who answer from elsewhere (a chat bot, a CI job, a script).

``GET /api/reviews`` lists the open reviews as ``fsm-stage inbox list --json`` does, each with
``refusal`` (why the caller may not answer it, or null). ``POST /api/reviews/{key}/{rid}`` with a
JSON object ``{"action": "approve" | "keep", "option"?, "feedback"?, "edited"?}`` answers one review
through the same path as the review page (``vote_review`` as the caller, the review's logged
rules deciding) and returns the ``Decision`` as ``inbox approve-all --json`` prints it. Callers
authenticate with ``Authorization: Bearer NAME:TOKEN`` (the reviewers file) or through the
trusted proxy header, never with the browser's cookie, and a POST must be
``Content-Type: application/json``: no page of another site can answer in a reviewer's name.
Statuses and shapes: docs/inbox.md, "JSON API".
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from fsm_stage.errors import DatabaseError
from fsm_stage.policy._gate import unique_keys
from fsm_stage.text import is_plain

if TYPE_CHECKING:
    from fsm_stage.inbox._app import _Inbox

__all__ = ["API_VERSION", "MAX_API_BODY_BYTES", "answer_route", "reviews_route"]

#: ``format_version`` of every JSON body the API returns (bumped on incompatible changes).
API_VERSION = 1

#: Largest request body accepted (bytes): an edited document of the largest size the library
#: takes, JSON-escaped; a larger body is refused with 413 before it is parsed.
MAX_API_BODY_BYTES = 8 * 1024 * 1024

#: The HTTP status of each ``Decision.result``: logged (or, ``waiting``, logged before) 200;
#: refused by the review's rules 403; not logged for another reason (feedback refused, the
#: document changed, a store error) 422; either of those on a review that is closed now (a
#: racing answer won, or its deadline closed it as this answer arrived) 409.
RESULT_STATUS = {"answered": 200, "voted": 200, "waiting": 200, "refused": 403, "error": 422}

_FIELDS = frozenset({"action", "option", "feedback", "edited"})


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"format_version": API_VERSION, "error": message}, status_code=status)


def caller(inbox: _Inbox, request: Request) -> tuple[str | None, int | None]:
    """The reviewer an API request comes from, and None; or None and the seconds to wait when
    this client's wrong tokens are over a limit (``_throttle``). The trusted proxy header's name
    when the inbox takes one, else ``Authorization: Bearer NAME:TOKEN`` checked against the
    reviewers file (constant time; None for a wrong or missing token, a wrong one counted).
    The session cookie is never read."""
    if inbox.trusted_header is not None:
        return inbox.reviewer(request), None
    if inbox.reviewers is None:
        return None, None
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    name, sep, token = credentials.strip().partition(":")
    if scheme.lower() != "bearer" or not sep or not name or not token:
        return None, None
    found, wait = inbox.authenticate(request, name, token)
    return (name if found is not None else None), wait


Handler = Callable[[Request], Awaitable[Response]]


def _authenticated(inbox: _Inbox, handler: Callable[[Request, str], Awaitable[Response]]) -> Handler:
    """``handler`` behind the API's authentication (401 with ``WWW-Authenticate: Bearer``
    without a caller) and its store errors (503, one line)."""

    async def run(request: Request) -> Response:
        name, wait = caller(inbox, request)
        if wait is not None:
            response = _error(429, f"too many wrong tokens from this address: try again in {wait} s")
            response.headers["Retry-After"] = str(wait)
            return response
        if name is None and inbox.trusted_header is not None:
            return _error(401, "the authenticating proxy sent no reviewer")
        if name is None:
            response = _error(401, "authenticate with Authorization: Bearer NAME:TOKEN")
            response.headers["WWW-Authenticate"] = 'Bearer realm="fsm-stage inbox"'
            return response
        try:
            return await handler(request, name)
        except DatabaseError as err:
            return _error(503, f"the session store cannot be read: {err}"[:500])

    return run


def reviews_route(inbox: _Inbox) -> Handler:
    """``GET /api/reviews``: ``{format_version, reviewer, open: [review_json + refusal]}``,
    oldest first."""
    from fsm_stage.log.events import wall_clock_ms

    async def run(request: Request, name: str) -> Response:
        items = sorted(inbox.store.open_reviews(), key=lambda i: i.asked_ms)
        now = wall_clock_ms()
        rows = [_row(inbox, item, name, now) for item in items]
        # logs the store could not read, or read only in part: their reviews are missing here
        return JSONResponse({"format_version": API_VERSION, "reviewer": name, "open": rows,
                             "unreadable": inbox.store.unreadable(), "damaged": inbox.store.damaged()})

    return _authenticated(inbox, run)


def _row(inbox: _Inbox, item: Any, name: str, now: int) -> dict[str, Any]:
    """``review_json`` of the open review ``item`` and its ``refusal`` for reviewer ``name``:
    why an answer (or an approval) would be refused, or that its deadline passed; None."""
    from fsm_stage.inbox.queue import review_json

    row = review_json(item, now)
    overdue = item.deadline_ms is not None and now >= item.deadline_ms
    row["refusal"] = (inbox.refusal(item, name) or inbox.approve_refusal(item, name)
                      or ("its deadline passed: an answer now closes it with the deadline's "
                          "answer" if overdue else None))
    return row


def review_route(inbox: _Inbox) -> Handler:
    """``GET /api/reviews/{key}/{rid}``: one open review as the listing gives it, with the
    ``document`` an approval binds (the plan, the handoff document, or a tool call's exact
    argument text, unescaped: JSON carries any text) or, when it cannot be read, ``document``
    null and ``document_error`` saying why (for a tool review, also a note on a stored copy);
    404 for no such review, 409 for one that is closed already."""
    from fsm_stage.inbox import _render
    from fsm_stage.inbox._pages import review_document
    from fsm_stage.log.events import wall_clock_ms

    async def run(request: Request, name: str) -> Response:
        found = inbox.find(request.path_params["key"], request.path_params["rid"])
        if found is None:
            return _error(404, "no such review")
        view, item = found
        if item is None:
            return _error(409, "this review is closed already")
        record = item.record
        document, problem = review_document(view, record)
        if record.kind == "tool":  # the exact text, not the page's escaped view of it
            document, problem = _render.exact_tool_arguments(view.events, record)
        return JSONResponse({"format_version": API_VERSION, "reviewer": name,
                             "review": {**_row(inbox, item, name, wall_clock_ms()), "document": document,
                                        "document_error": problem}})

    return _authenticated(inbox, run)


async def _body(request: Request) -> dict[str, Any] | JSONResponse:
    """The request's JSON object, or the error response: 415 without a JSON content type, 413
    above ``MAX_API_BODY_BYTES``, 400 for anything but a JSON object of known string fields."""
    kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if kind != "application/json":
        return _error(415, "send the answer as Content-Type: application/json")
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_API_BODY_BYTES:
                return _error(413, f"the body is larger than {MAX_API_BODY_BYTES:,} bytes")
            chunks.append(chunk)
    except ClientDisconnect:  # nobody is left to answer; nothing was read, nothing is written
        return _error(400, "the client went away before the body was sent")
    try:
        # UTF-8 only (json.loads would also take UTF-16/32), and a key given twice is refused: a
        # relay that read the first "action" must not see another one answered
        body = json.loads(b"".join(chunks).decode("utf-8"), object_pairs_hook=unique_keys)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return _error(400, "the body is not JSON (UTF-8)")
    except ValueError as repeated:  # unique_keys: a key given twice
        return _error(400, str(repeated))
    if not isinstance(body, dict):
        return _error(400, "the body must be a JSON object")
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        return _error(400, f"unknown field(s) {', '.join(map(repr, unknown))[:200]}; "
                           f"known: {', '.join(sorted(_FIELDS))}")
    if body.get("action") not in ("approve", "keep"):
        return _error(400, 'action must be "approve" or "keep"')
    for field in ("option", "feedback", "edited"):
        if field in body and not isinstance(body[field], str):
            return _error(400, f"{field} must be a string")
    if body["action"] == "keep" and ("option" in body or "edited" in body):
        return _error(400, "option and edited go with approve")
    if body["action"] == "approve" and "feedback" in body:
        return _error(400, "feedback goes with keep")
    return body


def answer_route(inbox: _Inbox) -> Handler:
    """``POST /api/reviews/{key}/{rid}``: the ``Decision`` JSON (``RESULT_STATUS``), 404 for no
    such review, 409 for one that is closed already, 4xx for a bad request (``_body``)."""
    from fsm_stage.inbox.queue import answer_one

    async def run(request: Request, name: str) -> Response:
        body = await _body(request)
        if isinstance(body, JSONResponse):
            return body
        key, rid = request.path_params["key"], request.path_params["rid"]
        found = inbox.find(key, rid)
        if found is None:
            return _error(404, "no such review")
        item = found[1]
        if item is None:
            return _error(409, "this review is closed already")
        feedback = body.get("feedback")
        # blank feedback is none, as on the page; text with control characters goes to the
        # rules, which refuse it, even when it strips to nothing
        if isinstance(feedback, str) and not feedback.strip() and is_plain(feedback):
            feedback = None
        done = answer_one(inbox.store, item, body["action"], reviewer=name, by=f"inbox:{name}",
                          reviewers=inbox.team(), groups=inbox.groups(name), option=body.get("option"),
                          feedback=feedback, edited=body.get("edited"))
        status = RESULT_STATUS.get(done.result, 422)
        if status != 200 and inbox.closed_now(key, rid):
            status = 409  # answered by someone else meanwhile, or closed by its deadline just now
        return JSONResponse({"format_version": API_VERSION, **done.to_json()}, status_code=status)

    return _authenticated(inbox, run)


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (no route: 404, a method the route does not take: 405): under
    ``/api/`` the API's JSON error body, elsewhere plain text as Starlette gives it."""
    from starlette.exceptions import HTTPException
    from starlette.responses import PlainTextResponse

    assert isinstance(exc, HTTPException)
    headers = dict(exc.headers or {})
    if request.url.path.startswith("/api/"):
        response = _error(exc.status_code, str(exc.detail))
        response.headers.update(headers)
        return response
    return PlainTextResponse(str(exc.detail), status_code=exc.status_code, headers=headers)
