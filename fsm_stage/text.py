"""Showing user-provided strings in terminal messages without their control characters.

``visible(text)`` keeps printable text as it is and writes every control or unpaired-surrogate
code point as a Python-style escape, so a key or name carrying ESC, BEL or NUL can never move
the cursor, ring the bell or truncate a line when an error message is printed. Durations and
deadlines as people read them: ``coarse_duration``, ``deadline_text``.
"""

from __future__ import annotations

import unicodedata

__all__ = ["coarse_duration", "deadline_text", "hide_url_password", "is_plain", "lone_surrogate",
           "review_route", "visible"]

_SHOWN_AS_IS = frozenset({" "})


def lone_surrogate(text: str) -> int | None:
    """The index of the first lone surrogate in ``text`` (a ``\\ud800``–``\\udfff`` escape that
    decoded to a ``str`` no UTF-8 log, reply or message can carry), or None for UTF-8 text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return err.start
    return None


def _escape(ch: str) -> str:
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def visible(text: str, *, keep: str = "") -> str:
    """``text`` with control characters shown as escapes: ``"a\\x1bb"`` → ``'a\\\\x1bb'``.

    Escaped: Unicode categories Cc (C0/C1 controls, DEL; tab and newline included, so the
    result is one line), Cs (lone surrogates, which cannot be encoded to UTF-8), Cf
    bidirectional overrides and other format characters, Zl/Zp separators. A backslash is
    left alone (the result is for reading, not for parsing back). ``keep``: characters kept as
    they are (``"\\n\\t"`` for a multi-line text such as a plan). Returns a new ``str``.
    """
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch in _SHOWN_AS_IS or ch in keep or ch.isprintable() or unicodedata.category(ch) in ("Zs",):
            out.append(ch)
        else:
            out.append(_escape(ch))
    return "".join(out)


def is_plain(text: str) -> bool:
    """True when ``text`` holds no control character or escape sequence besides newlines, tabs
    and CRs (nothing ``visible`` would escape): the rule for text a reviewer sends (feedback,
    an edited document)."""
    return visible(text, keep="\n\t\r") == text


def coarse_duration(seconds: int) -> str:
    """``seconds`` (>= 0; a negative count reads as 0) in its two largest units, the second
    left out when zero: ``42s``, ``5m30s``, ``1h59m``, ``2d``, ``2d3h`` (rounded down), for
    tables read at a glance."""
    seconds = max(0, seconds)
    units = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
    for i, (unit, size) in enumerate(units[:-1]):
        if seconds >= size:
            rest_unit, rest_size = units[i + 1]
            rest = seconds % size // rest_size
            return f"{seconds // size}{unit}" + (f"{rest}{rest_unit}" if rest else "")
    return f"{seconds}s"


def review_route(kind: str, source: str, target: str, *, arrow: str = "→") -> str:
    """What a review decides about, for a listing: ``explore → implement`` (``arrow`` between);
    a budget review, which moves nowhere by itself (its options say where it may go), ``build
    (its budget ran out)``. Not escaped: callers show it through ``visible`` or their
    template's escaping."""
    if kind == "budget" and not target:
        return f"{source} (its budget ran out)"
    return f"{source} {arrow} {target}"


def deadline_text(deadline_ms: int | None, now_ms: int) -> str:
    """A review's deadline relative to ``now_ms`` (epoch ms): ``in 1h59m``, ``overdue 5m``
    (``coarse_duration``), ``in <1s`` / ``overdue <1s`` within a second of it (at the deadline
    itself: overdue), ``-`` for none."""
    if deadline_ms is None:
        return "-"
    left = deadline_ms - now_ms
    if left > 0:
        return f"in {coarse_duration(left // 1000)}" if left >= 1000 else "in <1s"
    return f"overdue {coarse_duration(-left // 1000)}" if -left >= 1000 else "overdue <1s"


def hide_url_password(url: str) -> str:
    """``url`` with the password of its ``user:password@`` shown as ``***`` (for messages; a URL
    without one unchanged). Raises ``ValueError`` for a URL ``urllib`` cannot parse."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
