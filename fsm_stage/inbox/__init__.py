"""The review inbox: a web page for reviewers (extra ``fsm_stage[inbox]``: Starlette, jinja2,
markdown-it-py, itsdangerous, python-multipart, uvicorn, limits). ``create_app(location, ...)``
is the ASGI app ``fsm-stage inbox serve`` runs (``LoginThrottle``: its limits on failed logins);
docs/inbox.md describes the pages and the security model. ``open_reviews(location, ...)`` /
``approve_all(location, ...)`` (``fsm_stage.inbox.queue``) are the same queue without the web
extra: every open review across the sessions of a store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fsm_stage._lazy import lazy_exports

if TYPE_CHECKING:
    from fsm_stage.inbox._app import create_app
    from fsm_stage.inbox._auth import load_reviewers, token_sha256
    from fsm_stage.inbox._throttle import LoginThrottle
    from fsm_stage.inbox.queue import approve_all, open_reviews

_EXPORTS: dict[str, str] = {"create_app": "_app", "load_reviewers": "_auth", "token_sha256": "_auth",
                            "LoginThrottle": "_throttle", "open_reviews": "queue", "approve_all": "queue"}

__all__ = ["LoginThrottle", "approve_all", "create_app", "load_reviewers", "open_reviews", "token_sha256"]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
