"""The inbox's route handlers (built by ``_app.create_app`` over its ``_Inbox`` state)."""

from __future__ import annotations

import types
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response

from fsm_stage.inbox import _render
from fsm_stage.inbox._auth import login_stamp
from fsm_stage.inbox._editor import not_editable
from fsm_stage.inbox._security import csrf_ok
from fsm_stage.inbox.queue import deadline_text
from fsm_stage.text import is_plain, visible

if TYPE_CHECKING:
    from fsm_stage.inbox._app import _Inbox

Page = Callable[[Request, str], Awaitable[Response]]
#: Most reviews one bulk form answers (the rest of a larger selection is ignored).
MAX_BULK = 500
#: Events shown in a review page's timeline.
TIMELINE = 30

#: The status of the review page shown again after an answer that was not logged: a refusal by
#: the review's rules 403, anything else (feedback refused, a store error) 422; 409 when the
#: review is closed by then (a racing answer, or its deadline as this answer arrived).
ANSWER_FAILED_STATUS = {"refused": 403}


def flash(request: Request, *messages: tuple[str, str]) -> None:
    """Queue ``(kind, text)`` messages for the next page the session sees (at most 50 kept)."""
    old = request.session.get("flash")
    request.session["flash"] = [*(old if isinstance(old, list) else []), *[list(m) for m in messages]][-50:]


def login(inbox: _Inbox) -> Callable[[Request], Awaitable[Response]]:
    async def run(request: Request) -> Response:
        if inbox.trusted_header is not None:
            return RedirectResponse("/", status_code=303)
        error = None
        if request.method == "POST":
            form = await request.form()
            if not csrf_ok(request.session, form.get("csrf")):
                return PlainTextResponse("403: missing or wrong CSRF token", status_code=403)
            name, token = form.get("name"), form.get("token")
            name = name if isinstance(name, str) and len(name) <= 128 else ""
            token = token if isinstance(token, str) and len(token) <= 1024 else ""
            who, wait = inbox.authenticate(request, name, token)
            if wait is not None:
                page = inbox.page(request, "login.html", {
                    "error": f"too many failed logins from this address: try again in {wait} s"}, status=429)
                page.headers["Retry-After"] = str(wait)
                return page
            if who is not None:
                request.session.clear()
                request.session["reviewer"] = who.name
                request.session["stamp"] = login_stamp(who)
                return RedirectResponse("/", status_code=303)
            error = "unknown name or wrong token"
        return inbox.page(request, "login.html", {"error": error}, status=401 if error else 200)

    return run


async def logout(request: Request, name: str) -> Response:
    request.session.clear()
    return RedirectResponse("/login", status_code=303)


def queue(inbox: _Inbox) -> Page:
    async def run(request: Request, name: str) -> Response:
        items = inbox.store.open_reviews()
        kinds = sorted({i.record.kind for i in items})
        stages = sorted({s for i in items for s in (i.record.from_, i.record.target)})
        kind, stage = request.query_params.get("kind", ""), request.query_params.get("stage", "")
        sort = request.query_params.get("sort", "age")
        if kind:
            items = [i for i in items if i.record.kind == kind]
        if stage:
            items = [i for i in items if stage in (i.record.from_, i.record.target)]
        keys: dict[str, Callable[[Any], Any]] = {
            "age": lambda i: i.asked_ms, "session": lambda i: (i.key, i.record.seq),
            "kind": lambda i: (i.record.kind, i.asked_ms),
            "deadline": lambda i: (i.deadline_ms is None, i.deadline_ms or 0)}
        items.sort(key=keys.get(sort, keys["age"]))
        now = _render_now()
        rows = [types.SimpleNamespace(item=i, age=_render.age(i.asked_ms, now),
                                      deadline=deadline_text(i.deadline_ms, now),
                                      refusal=inbox.refusal(i, name)) for i in items]
        return inbox.page(request, "queue.html", {"rows": rows, "kinds": kinds, "stages": stages,
                                                  "kind": kind,
                                                  "stage": stage, "sort": sort,
                                                  "unreadable": inbox.store.unreadable(),
                                                  "damaged": inbox.store.damaged(),
                                                  "version": inbox.store.version()})

    return run


def _render_now() -> int:
    from fsm_stage.inbox._app import _now_ms

    return _now_ms()


def version(inbox: _Inbox) -> Page:
    async def run(request: Request, name: str) -> Response:
        return JSONResponse({"version": inbox.store.version()})

    return run


def bulk(inbox: _Inbox) -> Page:
    async def run(request: Request, name: str) -> Response:
        form = await request.form()
        action = form.get("action")
        if action not in ("approve", "keep"):
            return PlainTextResponse("400: action must be approve or keep", status_code=400)
        chosen = [v for v in form.getlist("selected") if isinstance(v, str)][:MAX_BULK]
        results = []
        for value in chosen:
            key, _, rid = value.partition("/")
            found = inbox.find(key, rid)
            if found is None or found[1] is None:
                results.append(("error", f"{_render.one_line(value)}: not an open review"))
                continue
            results.append(inbox.answer_one(name, found[1], str(action), None, None))
        flash(request, *results) if results else flash(request, ("error", "no review selected"))
        return RedirectResponse("/", status_code=303)

    return run



def review(inbox: _Inbox) -> Page:
    async def run(request: Request, name: str, view: Any, item: Any) -> Response:
        rid = request.path_params["rid"]
        typed, status = "", 200  # a refused keep's feedback, shown again: the reviewer loses nothing
        if request.method == "POST":
            form = await request.form()
            action = form.get("action")
            if item is None:
                flash(request, ("error", "this review is closed already"))
                feedback = form.get("feedback") if action == "keep" else None
                if isinstance(feedback, str) and feedback.strip():  # shown again to copy, not sent
                    typed, status = visible(feedback.replace("\r\n", "\n"), keep="\n\t"), 409
            elif action == "approve":
                option = form.get("option")
                chosen = option if isinstance(option, str) else None
                done = inbox.answer_one(name, item, "approve", chosen, None)
                flash(request, done)
                if done[0] != "ok":  # refused, or not logged: the page again, with why
                    status = ANSWER_FAILED_STATUS.get(done[0], 422)
            elif action == "keep":
                feedback = form.get("feedback")
                # a browser sends a textarea's line ends as CRLF: stored as LF, as an edited document;
                # blank feedback is none, but text the rules refuse (too long, control characters
                # even when it strips to nothing) goes to them and comes back refused, never cut
                raw = feedback.replace("\r\n", "\n") if isinstance(feedback, str) else ""
                text = raw if raw.strip() or not is_plain(raw) else None
                done = inbox.answer_one(name, item, "keep", None, text)
                flash(request, done)
                if done[0] != "ok":  # the page again, with why and the typed feedback
                    status = ANSWER_FAILED_STATUS.get(done[0], 422)
                    typed = visible(text, keep="\n\t") if text is not None else ""
            else:
                return PlainTextResponse("400: action must be approve or keep", status_code=400)
            if status == 200:
                return RedirectResponse(request.url.path, status_code=303)
            found = inbox.find(request.path_params["key"], rid)  # as it is now (an expiry may
            if found is not None:                                # have closed it meanwhile)
                view, item = found
            if item is None:
                status = 409  # closed meanwhile: a racing answer won, or its deadline closed it
        record = view.state.records[rid]
        refusal = inbox.refusal(item, name) if item is not None else None
        document, doc_error = review_document(view, record)
        answer = view.state.answered.get(rid)
        dot = _dot(inbox, view, record)
        timeline = [types.SimpleNamespace(seq=e.seq, type=e.type, time=e.time, text=_render.event_summary(e))
                    for e in view.events[-TIMELINE:]]
        return inbox.page(request, "review.html", {
            "view": view, "record": record, "item": item, "answer": answer,
            "document": document, "doc_error": doc_error,
            "arguments": _render.call_values(view.events, record, document_shown=document is not None),
            "tool_arguments": _render.tool_arguments(view.events, record),
            "edit_refusal": not_editable(record, document, doc_error),
            "kept": _render.kept_diff_lines(view.state, record),
            "edits": _render.edits_diff_lines(record, document, answer),
            "approve_options": record.options[:-1] if len(record.options) > 1 else record.options,
            "feedback": typed,
            "deadline": deadline_text(item.deadline_ms, _render_now()) if item is not None else None,
            "refusal": refusal,
            "approve_refusal": (inbox.approve_refusal(item, name, view)
                                if item is not None and refusal is None else None),
            "dot": dot, "svg": dot is not None and _render.graph_svg(dot) is not None, "timeline": timeline,
            "other_graph": inbox.other_graph(view) if record.kind == "stage" else None},
            status)

    return inbox.on_review(run)


def review_document(view: Any, record: Any) -> tuple[str | None, str | None]:
    """``(document, None)``: the plan (from its logged ``exit_plan_mode`` call) or the handoff
    document (the request's file inside the session cwd, else the stored copy) of ``record``;
    ``(None, why)`` when it cannot be read; ``(None, None)`` when the review has none."""
    if record.kind == "plan":
        args = _render.call_arguments(view.events, record.call_id)
        plan = args.get("plan") if args is not None else None
        if isinstance(plan, str):
            return plan, None
        return None, "the plan's exit_plan_mode call is not in the log"
    if record.handoff_path is None:
        return None, None
    from fsm_stage.reviews._answer import reviewed_document

    try:
        holder = cast(Any, types.SimpleNamespace(header=view.header))  # the reader needs the header only
        return reviewed_document(holder, record), None
    except (OSError, UnicodeDecodeError) as err:
        return None, f"the handoff document cannot be read: {err}"


def _dot(inbox: _Inbox, view: Any, record: Any) -> str | None:
    """The review's stage graph in DOT, None without ``--graph``, for another kind of review,
    or when the session runs another graph than ``--graph`` (``_Inbox.other_graph``)."""
    if inbox.graph is None or record.kind != "stage" or inbox.other_graph(view) is not None:
        return None
    from fsm_stage.diagram import to_dot
    from fsm_stage.errors import FsmStageError

    # the move is marked by the review's state: in review while open, pending once approved
    # and not yet applied, nothing once applied or refused
    state, edge = view.state, (record.from_, record.target)
    reviewing = edge if any(r.id == record.id for r in state.open) else None
    pending = edge if any(r.id == record.id for r in state.approved) else None
    try:
        return to_dot(inbox.graph, current=view.stage or record.from_, pending=pending, reviewing=reviewing)
    except FsmStageError:
        return None


def graph(inbox: _Inbox) -> Page:
    async def run(request: Request, name: str) -> Response:
        found = inbox.find(request.path_params["key"], request.path_params["rid"])
        dot = _dot(inbox, found[0], found[0].state.records[request.path_params["rid"]]) if found else None
        svg = _render.graph_svg(dot) if dot is not None else None
        if svg is None:
            return PlainTextResponse("404: no graph", status_code=404)
        return Response(svg, media_type="image/svg+xml")

    return run


def not_found(inbox: _Inbox, key: str, message: str) -> Response:
    """The answer for a session log ``key`` the store did not give: 422 with why, when the file
    is there but cannot be read (corrupt, empty, too large), else 404 ``message``."""
    why = inbox.store.why_unreadable(key)
    if why is not None:
        text = (f"422: the session log {_render.one_line(key, 200)} cannot be read: "
                f"{_render.one_line(why, 400)}")
        return PlainTextResponse(text, status_code=422)
    return PlainTextResponse(message, status_code=404)


def session(inbox: _Inbox) -> Page:
    async def run(request: Request, name: str) -> Response:
        view = inbox.store.load(request.path_params["key"])
        if view is None:
            return not_found(inbox, request.path_params["key"], "404: no such session log")
        reviews = [types.SimpleNamespace(record=r, answer=view.state.answered.get(r.id),
                                         redeemed=view.state.redeemed.get(r.id),
                                         asked=view.events[r.seq].time if r.seq < len(view.events) else None)
                   for r in view.state.records.values()]
        return inbox.page(request, "session.html", {"view": view, "history": view.stage_history(),
                                                    "reviews": reviews})

    return run
