"""Review notifications: webhooks told when a review is requested, answered or expires.

``Notifier(secret)`` posts a JSON body to each URL of a review's ``notify`` rule from a
background thread, so a session never waits for a webhook: ``X-Fsm-Stage-Signature:
sha256=<hex HMAC of the body with the shared secret>`` signs it, a failed post is retried with
exponential backoff and then logged (``fsm_stage.reviews.notify``, WARNING). The body carries a
Slack-compatible ``text`` with a link to the review's inbox page when ``inbox_url`` is set.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import queue
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fsm_stage._http import no_redirect_opener

_log = logging.getLogger("fsm_stage.reviews.notify")
SIGNATURE_HEADER = "X-Fsm-Stage-Signature"
#: What a notification announces.
EVENTS = ("review.requested", "review.answered", "review.expired")


def signature(body: bytes, secret: bytes) -> str:
    """``sha256=<hex>``: the HMAC-SHA256 of ``body`` under ``secret`` (what receivers verify)."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def payload(event: str, session: str, review: Mapping[str, Any], *, inbox_url: str | None = None,
            answer: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON body: ``{"event", "session", "review": {id, kind, from, target}, "answer"?,
    "url"?, "text"}`` (``text`` is a one-line Slack-compatible summary)."""
    rid = str(review.get("id"))
    url = f"{inbox_url.rstrip('/')}/reviews/{session}/{rid}" if inbox_url else None
    what = {"review.requested": "asks for a review", "review.answered": "review answered",
            "review.expired": "review expired"}[event]
    source, target = review.get("from"), review.get("target")
    move = f"{source} → {target}" if target else str(source)
    text = f"fsm_stage session {session}: {what} ({review.get('kind')} {move})"
    if answer is not None:
        text += f": {answer.get('outcome')}" + (f" by {answer['reviewer']}" if answer.get("reviewer") else "")
    if url:
        text += f" <{url}|open>"
    shown = {k: review.get(k) for k in ("id", "kind", "from", "target")}
    body: dict[str, Any] = {"event": event, "session": session, "review": shown, "text": text}
    if answer is not None:
        body["answer"] = dict(answer)
    if url:
        body["url"] = url
    return body


class Notifier:
    """Posts notifications from one daemon thread. ``secret`` signs each body (None: unsigned);
    ``retries`` further attempts after a failure, ``backoff`` seconds before the first retry
    (doubled each time), ``timeout`` seconds per post. ``close()`` waits for the queue."""

    def __init__(self, secret: bytes | None = None, *, retries: int = 3, backoff: float = 0.5,
                 timeout: float = 5.0) -> None:
        self.secret, self.retries, self.backoff, self.timeout = secret, retries, backoff, timeout
        self._queue: queue.Queue[tuple[str, bytes] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="fsm-stage-notify", daemon=True)
        self._thread.start()
        self.delivered = 0
        self.failed = 0

    def send(self, urls: Sequence[str], body: Mapping[str, Any]) -> None:
        """Queue ``body`` for each URL (returns at once)."""
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        for url in urls:
            self._queue.put((url, data))

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is queued (waiting up to ``timeout`` s), then stop the thread."""
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            self._deliver(*item)

    def _deliver(self, url: str, data: bytes) -> None:
        headers = {"Content-Type": "application/json", "User-Agent": "fsm-stage"}
        if self.secret is not None:
            headers[SIGNATURE_HEADER] = signature(data, self.secret)
        delay = self.backoff
        for attempt in range(self.retries + 1):
            try:
                request = urllib.request.Request(url, data=data, headers=headers, method="POST")
                with no_redirect_opener().open(request, timeout=self.timeout) as response:
                    if 200 <= response.status < 300:
                        self.delivered += 1
                        return
                    why = f"HTTP {response.status}"
            except Exception as err:  # any failure is retried, then logged: never raised
                why = str(err).splitlines()[0] if str(err) else type(err).__name__
            if attempt < self.retries:
                time.sleep(delay)
                delay *= 2
        self.failed += 1
        _log.warning("review notification to %s failed after %d attempt(s): %s", url, self.retries + 1, why)


def notify_webhooks(secret: bytes | None = None, *, inbox_url: str | None = None,
                    notifier: Notifier | None = None) -> Callable[[], None]:
    """Post a review's notifications from this process from now on: when a ``fsm/review/request``
    whose rules name ``notify`` URLs is appended to any ``Session``, and when its answer is
    (``review.answered``, or ``review.expired`` for a ``by: "deadline"`` answer). ``secret``
    signs the bodies; ``inbox_url`` adds the link to the review's inbox page. Returns
    ``stop()``: it stops listening and delivers what is queued (waiting up to 10 s)."""
    from fsm_stage.constants import REVIEW_ANSWER, REVIEW_REQUEST
    from fsm_stage.observe import add_listener
    from fsm_stage.reviews._team import EXPIRED_BY

    sender = notifier if notifier is not None else Notifier(secret)

    def listener(session: Any, events: Sequence[Any]) -> None:
        for ev in events:
            data = ev.data if isinstance(ev.data, Mapping) else {}
            if ev.type == REVIEW_REQUEST:
                urls = _urls(data)
                if urls:
                    sender.send(urls, payload("review.requested", session.id, data, inbox_url=inbox_url))
            elif ev.type == REVIEW_ANSWER:
                request = _request_of(session, data.get("id"))
                urls = _urls(request) if request is not None else []
                if request is None or not urls:
                    continue
                names = data.get("reviewers")
                answer = {"outcome": data.get("outcome"), "by": data.get("by"),
                          "reviewer": ", ".join(names) if isinstance(names, list) and names else None}
                event = "review.expired" if data.get("by") == EXPIRED_BY else "review.answered"
                sender.send(urls, payload(event, session.id, request, inbox_url=inbox_url, answer=answer))

    remove = add_listener(listener)

    def stop() -> None:
        remove()
        sender.close(10.0)

    return stop


def _urls(request: Mapping[str, Any]) -> list[str]:
    rules = request.get("rules")
    urls = rules.get("notify") if isinstance(rules, Mapping) else None
    return [u for u in urls if isinstance(u, str)] if isinstance(urls, list) else []


def _request_of(session: Any, review_id: object) -> Mapping[str, Any] | None:
    """What a notification says of review ``review_id`` (``{id, kind, from, target, rules}``),
    read from the session's review fold, or None when it has no such request."""
    from fsm_stage.reviews._fold import REVIEW_FOLD

    record = session.read(REVIEW_FOLD).records.get(review_id) if isinstance(review_id, str) else None
    if record is None:
        return None
    return {"id": record.id, "kind": record.kind, "from": record.from_, "target": record.target,
            "rules": record.rules}
