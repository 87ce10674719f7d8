"""The inbox ASGI app: ``create_app(location, ...)`` (Starlette, server-rendered jinja2 pages).

Pages: ``/`` the queue of every open review (filters ``kind``, ``stage``; ``sort``; bulk
approve / keep), ``/review/{log}/{id}`` one review (its document rendered inert, the stage
graph, the session's recent timeline, the answer options), ``/session/{log}`` the audit trail.
``/api/version`` is what ``static/inbox.js`` polls to reload the queue when reviews arrive or
close. Every answer goes through ``SessionStore.answer`` (``vote_review`` as the logged-in
reviewer) with ``by: "inbox:<reviewer>"``, one review at a time, so the review's logged rules
(approvers, quorum, not_requester, deadline) decide.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from fsm_stage.config import GraphConfig
from fsm_stage.constants import APPROVE_KEEP_CONVERSATION_LABEL
from fsm_stage.errors import DatabaseError, UserError
from fsm_stage.inbox import _render
from fsm_stage.inbox._auth import Reviewers, load_reviewers
from fsm_stage.inbox._security import SECURITY_HEADERS, csrf_ok, csrf_token
from fsm_stage.inbox._store import OnAnswer, OpenReview, SessionStore, SessionView
from fsm_stage.inbox._throttle import LoginThrottle
from fsm_stage.inbox.queue import answer_item
from fsm_stage.reviews._fold import MAX_REVIEW_DOCUMENT_BYTES
from fsm_stage.reviews._team import Reviewer
from fsm_stage.reviews._team import Reviewers as TeamReviewers

__all__ = ["create_app"]

HERE = Path(__file__).resolve().parent

#: Largest form field accepted (bytes as sent, URL-encoded): room for an edited document of
#: ``MAX_REVIEW_DOCUMENT_BYTES`` (the library refuses a larger one in one line); a larger
#: field is refused with 400 before anything is read from the store.
MAX_FORM_FIELD_BYTES = 3 * MAX_REVIEW_DOCUMENT_BYTES + 65536


def _now_ms() -> int:
    return int(time.time() * 1000)


#: ``handler(request, reviewer, view, item)`` of a review's page (``_Inbox.on_review``).
ReviewHandler = Callable[[Request, str, SessionView, "OpenReview | None"], Awaitable[Response]]


class _Inbox:
    """The state behind the routes: the store, who may log in, the graph, the templates."""

    def __init__(self, store: SessionStore, reviewers: Reviewers | None, trusted_header: str | None,
                 graph: GraphConfig | None, throttle: LoginThrottle | None = None) -> None:
        self.store = store
        self.reviewers = reviewers
        self.throttle = throttle if throttle is not None else LoginThrottle()
        self.trusted_header = trusted_header.lower() if trusted_header else None
        self.graph = graph
        self._graph_fingerprint: str | None = None  # "sha256:<hex>" as logged in fsm/graph, made once
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        env = self.templates.env
        env.autoescape = True
        env.filters["line"] = _render.one_line
        env.filters["route"] = _render.route
        env.filters["markdown"] = _render.markdown_html
        env.filters["when"] = _render.when
        env.globals["keep_label"] = APPROVE_KEEP_CONVERSATION_LABEL

    def other_graph(self, view: Any) -> str | None:
        """Why the ``--graph`` graph is not the one ``view``'s session runs (one line), None when
        it is, or when the session has recorded none (a log before its first stage review)."""
        recorded = view.state.graph
        if self.graph is None or recorded is None:
            return None
        if self._graph_fingerprint is None:
            from fsm_stage.graph import fingerprint

            self._graph_fingerprint = "sha256:" + fingerprint(self.graph)
        if recorded.fingerprint == self._graph_fingerprint:
            return None
        return (f"this session runs another stage graph ({_render.one_line(recorded.name, 60)!r}, "
                f"{_render.one_line(recorded.fingerprint, 30)}) than the inbox's --graph "
                f"({_render.one_line(self.graph.name, 60)!r}): not drawn")

    # -- who is asking ------------------------------------------------------------------------
    def reviewer(self, request: Request) -> str | None:
        if self.trusted_header is not None:
            given = request.headers.getlist(self.trusted_header)
            if len(given) != 1:  # none, or a proxy that appended to the client's own header
                return None
            name = given[0].strip()
            return name if 0 < len(name) <= 128 and name.isprintable() else None
        if self.reviewers is None:
            return None
        return self.reviewers.logged_in(request.session.get("reviewer"), request.session.get("stamp"))

    def authenticate(self, request: Request, name: str, token: str) -> tuple[Reviewer | None, int | None]:
        """``(reviewer, None)`` when ``token`` is ``name``'s; ``(None, None)`` for a wrong one
        (counted by ``throttle``); ``(None, seconds)`` while this client's failed attempts are
        over a limit (``_throttle``), without checking the token."""
        client = request.client.host if request.client is not None else "-"
        wait = self.throttle.retry_after(client, name)
        if wait is not None:
            return None, wait
        who = self.reviewers.authenticate(name, token) if self.reviewers is not None else None
        if who is None:
            self.throttle.failed(client, name)
        return who, None

    def groups(self, name: str) -> tuple[str, ...]:
        return self.reviewers.groups_of(name) if self.reviewers is not None else ()

    def refusal(self, item: OpenReview, name: str) -> str | None:
        """Why the review's logged rules refuse ``name``'s answer (None: allowed); a name that
        is no reviewer name (a proxy's ``Alice Smith``) may answer nothing."""
        from fsm_stage.inbox._auth import refusal
        from fsm_stage.reviews._team import REVIEWER_NAME_RE

        if not REVIEWER_NAME_RE.fullmatch(name):
            return f"{name[:70]!r} is not a reviewer name ({REVIEWER_NAME_RE.pattern}): it may answer nothing"
        return refusal(item.rules, name, self.groups(name))

    def closed_now(self, key: str, review_id: str) -> bool:
        """Whether review ``review_id`` of session ``key`` exists and is closed, read again now."""
        found = self.find(key, review_id)
        return found is not None and found[1] is None

    def approve_refusal(self, item: OpenReview, name: str, view: SessionView | None = None) -> str | None:
        """Why ``name``'s approval of ``item`` would be refused beyond ``refusal``, or None: a
        stage review's handoff document changed since it was asked (the file here, or the copy
        the request stored when the file is not here), or the logged rules (``not_requester``:
        the session's requester, or none recorded). The session is read from ``view``, else
        loaded only when needed. The page shows it and disables Approve; the answer itself is
        decided again."""
        from fsm_stage.reviews._team import REVIEWER_NAME_RE, requester_of
        from fsm_stage.reviews._team import refusal as team_refusal

        if item.record.kind == "stage":
            view = view if view is not None else self._view_of(item)
            if view is not None and _payload_changed(view, item.record):
                return ("the handoff document changed since the review was asked (or cannot be "
                        "read here), so it cannot be approved; keep it with feedback")
        rules = item.rules
        if not isinstance(rules, Mapping) or not rules.get("notRequester") \
                or not REVIEWER_NAME_RE.fullmatch(name):
            return None
        view = view if view is not None else self._view_of(item)
        if view is None:
            return None
        return team_refusal(rules, name, requester=requester_of(view), reviewers=self.team(),
                            outcome="approve")

    def _view_of(self, item: OpenReview) -> SessionView | None:
        found = self.find(item.key, item.record.id)
        return found[0] if found is not None else None

    def page(self, request: Request, name: str, context: dict[str, Any], status: int = 200) -> Response:
        flash = request.session.pop("flash", [])
        base = {"reviewer": self.reviewer(request), "csrf": csrf_token(request.session),
                "flash": flash if isinstance(flash, list) else [], "login": self.trusted_header is None}
        return self.templates.TemplateResponse(request, name, {**base, **context}, status_code=status)

    # -- answers -----------------------------------------------------------------------------
    def answer_one(self, reviewer: str, item: OpenReview, outcome: str, option: str | None,
                   feedback: str | None, edited: str | None = None) -> tuple[str, str]:
        """Answer one review as ``reviewer`` through ``vote_review`` (the review's logged rules:
        approvers, quorum, not_requester, deadline; ``edited``: approve with edits); returns
        ``(kind, one-line message)`` with kind ok/refused/error."""
        return answer_item(self.store, item, outcome, reviewer=reviewer, by=f"inbox:{reviewer}",
                           groups=self.groups(reviewer), reviewers=self.team(), option=option,
                           feedback=feedback, edited=edited)

    def team(self) -> TeamReviewers | None:
        """The reviewers file as the review rules read it (``@group`` approvers)."""
        return TeamReviewers(self.reviewers.by_name) if self.reviewers is not None else None

    def on_review(self, handler: ReviewHandler) -> Callable[[Request, str], Awaitable[Response]]:
        """A route handler for ``/review/{key}/{rid}…`` URLs: 404 when no such review, else
        ``handler(request, reviewer, view, open review or None when it is closed)``."""

        async def run(request: Request, name: str) -> Response:
            found = self.find(request.path_params["key"], request.path_params["rid"])
            if found is None:
                from fsm_stage.inbox._pages import not_found

                return not_found(self, request.path_params["key"], "404: no such review")
            return await handler(request, name, *found)

        return run

    def find(self, key: str, review_id: str) -> tuple[SessionView, OpenReview | None] | None:
        view = self.store.load(key)
        if view is None or review_id not in view.state.records:
            return None
        item = next((r for r in view.open() if r.record.id == review_id), None)
        return view, item


Handler = Callable[[Request], Awaitable[Response]]


def _guarded(inbox: _Inbox, handler: Callable[[Request, str], Awaitable[Response]]) -> Handler:
    """``handler`` behind authentication (GET: redirect to /login; other methods: 403) and,
    for a POST, the CSRF check (403 without the session's token)."""

    async def run(request: Request) -> Response:
        name = inbox.reviewer(request)
        if request.method == "POST":
            try:
                form = await request.form(max_part_size=MAX_FORM_FIELD_BYTES)
            except ClientDisconnect:  # nobody is left to answer; nothing was written
                return PlainTextResponse("400: the client went away before the form was sent",
                                         status_code=400)
            if not csrf_ok(request.session, form.get("csrf")):
                return PlainTextResponse("403: missing or wrong CSRF token", status_code=403)
            if name is None:
                return PlainTextResponse("403: not logged in", status_code=403)
        elif name is None:
            if inbox.trusted_header is not None:
                return PlainTextResponse("401: the authenticating proxy sent no reviewer", status_code=401)
            return RedirectResponse("/login", status_code=303)
        try:
            return await handler(request, name)
        except DatabaseError as err:  # a PostgreSQL store down or refusing: one line, no traceback
            return PlainTextResponse(f"503: the session store cannot be read: {err}"[:500], status_code=503)

    return run


def _payload_changed(view: SessionView, record: Any) -> bool:
    """Whether a stage review's handoff document now hashes to another digest than the one
    asked about, as an approval would find it (``current_payload_sha256(stored=True)``: only
    the session header is read)."""
    from fsm_stage.reviews._answer import current_payload_sha256

    holder = cast(Any, SimpleNamespace(header=view.header))
    now = current_payload_sha256(holder, record, stored=True)
    return now is not None and now != record.payload_sha256


def create_app(location: str | os.PathLike[str], *, reviewers_file: str | os.PathLike[str] | None = None,
               reviewers: Reviewers | None = None, secret_key: str | None = None,
               trusted_header: str | None = None, graph: GraphConfig | None = None,
               https_only: bool = False, on_answer: OnAnswer | None = None,
               throttle: LoginThrottle | None = None) -> Starlette:
    """The inbox ASGI app over the sessions at ``location`` (a JSONL folder or a
    ``postgresql://`` database URL).

    Authentication is required: ``reviewers_file`` (or a loaded ``reviewers``) lets reviewers
    log in with a token checked against its sha256; ``trusted_header`` (e.g.
    ``"X-Forwarded-User"``) takes the reviewer's name from an authenticating reverse proxy
    instead. ``secret_key`` signs the session cookie (default: random per start, so a restart
    logs everyone out); ``https_only`` marks the cookie Secure. ``graph`` draws the stage graph
    on review pages. ``on_answer(session_id, review_id)`` runs after each logged answer (the
    fleet's wake-up: ``fsm_stage.fleet.wake.fleet_waker``; its ``connect()``, when it has one, runs
    at once on a background thread). ``throttle`` limits failed logins and wrong bearer tokens
    (default ``LoginThrottle()``: 5 a minute per client and name, 20 per client; past them,
    429 with ``Retry-After``). Raises ``UserError`` (one line) for
    a missing folder, a bad location, a bad reviewers file or no authentication configured.
    """
    if reviewers is None and reviewers_file is not None:
        reviewers = load_reviewers(Path(reviewers_file))
    if reviewers is None and not trusted_header:
        raise UserError("inbox: authentication required: give a reviewers file or a trusted proxy header")
    inbox = _Inbox(SessionStore(location, on_answer=on_answer), reviewers, trusted_header, graph, throttle)
    warm = getattr(on_answer, "connect", None)
    if callable(warm):  # a fleet's wake-up hook: connect now, not at the first answer
        threading.Thread(target=warm, name="fsm-inbox-wake-connect", daemon=True).start()
    from fsm_stage.inbox import _api, _pages
    from fsm_stage.inbox._editor import edit

    routes = [
        Route("/login", _pages.login(inbox), methods=["GET", "POST"]),
        Route("/logout", _guarded(inbox, _pages.logout), methods=["POST"]),
        Route("/", _guarded(inbox, _pages.queue(inbox)), methods=["GET"]),
        Route("/bulk", _guarded(inbox, _pages.bulk(inbox)), methods=["POST"]),
        Route("/api/version", _guarded(inbox, _pages.version(inbox)), methods=["GET"]),
        Route("/api/reviews", _api.reviews_route(inbox), methods=["GET"]),
        Route("/api/reviews/{key}/{rid}", _api.answer_route(inbox), methods=["POST"]),
        Route("/api/reviews/{key}/{rid}", _api.review_route(inbox), methods=["GET"]),
        Route("/review/{key}/{rid}", _guarded(inbox, _pages.review(inbox)), methods=["GET", "POST"]),
        Route("/review/{key}/{rid}/edit", _guarded(inbox, edit(inbox)), methods=["GET", "POST"]),
        Route("/graph/{key}/{rid}.svg", _guarded(inbox, _pages.graph(inbox)), methods=["GET"]),
        Route("/session/{key}", _guarded(inbox, _pages.session(inbox)), methods=["GET"]),
        Mount("/static", app=StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    middleware = [
        Middleware(cast(Any, _SecurityHeaders)),
        Middleware(SessionMiddleware, secret_key=secret_key or secrets.token_urlsafe(32),
                   session_cookie="fsm_inbox", same_site="strict", https_only=https_only, max_age=12 * 3600),
    ]
    return Starlette(routes=routes, middleware=middleware,
                     exception_handlers={HTTPException: _api.http_error})


class _SecurityHeaders:
    """ASGI middleware adding ``SECURITY_HEADERS`` to every HTTP response."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", [])
                           if k.decode("latin-1").lower() not in {h.lower() for h in SECURITY_HEADERS}]
                headers += [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, sending)
