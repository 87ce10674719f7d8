"""The review inbox: a web page for reviewers (extra ``fsm_stage[inbox]``: Starlette, jinja2,
markdown-it-py, itsdangerous, python-multipart, uvicorn). ``create_app(location, ...)`` is the
ASGI app ``fsm-stage inbox serve`` runs; docs/inbox.md describes the pages and the security model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fsm_stage._lazy import lazy_exports

if TYPE_CHECKING:
    from fsm_stage.inbox._app import create_app
    from fsm_stage.inbox._auth import load_reviewers, token_sha256

_EXPORTS: dict[str, str] = {"create_app": "_app", "load_reviewers": "_auth", "token_sha256": "_auth"}

__all__ = ["create_app", "load_reviewers", "token_sha256"]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
