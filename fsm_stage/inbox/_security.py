"""The inbox's HTTP security: response headers (a strict Content-Security-Policy), the CSRF
token of a browser session, and loopback hosts.

Every response carries ``CSP`` (no inline script or style, nothing from another origin, no
framing, forms post to this origin only), ``nosniff``, ``no-referrer`` and ``DENY`` framing.
A session's CSRF token is 32 random bytes kept in the signed session cookie; a POST whose
``csrf`` field does not equal it (constant-time) is refused with 403.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import MutableMapping
from typing import Any

__all__ = ["CSP", "SECURITY_HEADERS", "csrf_ok", "csrf_token", "is_loopback"]

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
"""The Content-Security-Policy of every inbox response."""

SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


def csrf_token(session: MutableMapping[str, Any]) -> str:
    """The CSRF token of a browser ``session`` (created on first use)."""
    token = session.get("csrf")
    if not isinstance(token, str) or len(token) < 32:
        token = secrets.token_urlsafe(32)
        session["csrf"] = token
    return token


def csrf_ok(session: MutableMapping[str, Any], given: object) -> bool:
    """Whether ``given`` (a form field) is the session's CSRF token (False when either is missing)."""
    token = session.get("csrf")
    return isinstance(token, str) and isinstance(given, str) and bool(given) \
        and hmac.compare_digest(token.encode(), given.encode())


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or address) binds to the loopback interface only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
