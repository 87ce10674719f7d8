"""HTTP POSTs to endpoints a user configured (OTLP collectors, review webhooks):
``no_redirect_opener()`` is a urllib opener that follows no redirect."""

from __future__ import annotations

import urllib.request
from typing import Any

__all__ = ["no_redirect_opener"]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuses every redirect: urllib would follow a 30x as a GET without the body (the data is
    lost while the caller sees success) and carry the request's headers (``Authorization``, a
    signature) to whatever host it names."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> None:
        return None


def no_redirect_opener() -> urllib.request.OpenerDirector:
    """A urllib opener whose ``open`` raises ``HTTPError`` for a 30x answer instead of following it."""
    return urllib.request.build_opener(_NoRedirect)
