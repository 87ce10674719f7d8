"""Model-written text made inert for the inbox pages, and the stage graph as SVG.

``markdown_html(text)`` renders Markdown with raw HTML disabled (markdown-it-py: ``<script>``
becomes text, ``javascript:`` links are not links) between two passes of ``text.visible``, which
turns every control, bidi and format character into a visible escape (newlines and tabs kept):
before, for the characters as written, and after, for those Markdown decoded from character
references such as ``&#x202E;``. A document that would not show every line as Markdown (a link
reference definition, an HTML comment…: ``reviews._visible_md``) is shown as plain text instead.
``one_line(text, limit)`` is the same for a table cell; ``tool_arguments`` gives a tool review's
exact argument text, whole, for its page. ``graph_svg`` draws ``diagram.to_dot`` with Graphviz
when ``dot`` is installed (None otherwise: the page shows the DOT text).
"""

from __future__ import annotations

import datetime as _dt
import json
import shutil
from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup, escape

from fsm_stage.constants import TOOL_CALL
from fsm_stage.log.events import Event
from fsm_stage.reviews._visible_md import hidden_lines, markdown_parser, plain_text_notice, too_long_notice
from fsm_stage.text import coarse_duration, review_route, visible

__all__ = ["age", "call_arguments", "call_values", "diff_lines", "edits_diff_lines", "event_summary",
           "exact_tool_arguments", "graph_svg", "kept_diff_lines", "markdown_html", "one_line", "route",
           "tool_arguments", "when"]

#: Longest document rendered (characters); the rest is cut with a visible note.
MAX_DOCUMENT_CHARS = 512 * 1024


def markdown_html(text: str) -> Markup:
    """``text`` (Markdown, model-written) as inert HTML: no raw HTML, control, bidi and format
    characters as escapes however they were spelled (character references included). A text
    that would not show every line as Markdown (``reviews._visible_md.hidden_lines``: a link
    reference definition, an HTML comment…) or that is longer than ``MARKDOWN_MAX_CHARS`` is shown
    as plain text instead, exactly as written (escaped, control characters as escapes), after a
    one-line notice saying why. A link shows its address after its text."""
    cut = text[:MAX_DOCUMENT_CHARS]
    shown = visible(cut, keep="\n\t")
    more = f"(cut: the document has {len(text)} characters)" if len(text) > MAX_DOCUMENT_CHARS else ""
    markdown = markdown_parser("inbox")  # commonmark, raw HTML off
    notice = too_long_notice(len(shown))
    if notice is None:
        tokens = markdown.parse(shown)
        hidden = hidden_lines(shown, inbox=tokens)
        notice = plain_text_notice(hidden) if hidden else None
    if notice is not None:
        html = (f'<p class="flash error" role="alert">{escape(notice)}</p>\n'
                f'<pre class="plain">{escape(shown)}</pre>\n')
        html += f"<p><em>{escape(more)}</em></p>\n" if more else ""
        return Markup(visible(html, keep="\n\t"))
    _show_link_targets(tokens)
    rendered = markdown.renderer.render(tokens, markdown.options, {})
    if more:
        rendered += f"<p><em>{escape(more)}</em></p>\n"
    return Markup(visible(rendered, keep="\n\t"))


def _show_link_targets(tokens: Any) -> None:
    """Put each link's address after its text, as the terminal review shows it (``text (url)``):
    a browser shows an address only on hover, so a reviewer would approve a step pointing
    anywhere under harmless link text. A link whose text is its address is left as it is."""
    from markdown_it.token import Token

    for tok in tokens:
        if tok.type != "inline" or not tok.children:
            continue
        out: list[Any] = []
        href: str | None = None
        text: list[str] = []
        for child in tok.children:
            out.append(child)
            if child.type == "link_open":
                href, text = str(child.attrGet("href") or ""), []
            elif child.type == "link_close" and href is not None:
                label = "".join(text)
                if href not in (label, "mailto:" + label):
                    out.append(Token("text", "", 0, content=f" ({href})"))
                href = None
            elif href is not None and child.type in ("text", "code_inline"):
                text.append(child.content)
        tok.children = out


def route(record: Any) -> str:
    """What ``record`` (a ``ReviewRecord``) decides about, on one line (``text.review_route``;
    autoescaped by the template)."""
    return review_route(one_line(record.kind, 20), one_line(record.from_, 40), one_line(record.target, 40))


def one_line(text: object, limit: int = 160) -> str:
    """``text`` on one line with control characters as escapes, cut to ``limit`` characters
    (autoescaped by the template)."""
    shown = visible(str(text))
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def when(ms: int | None) -> str:
    """Epoch ms as ``YYYY-MM-DD HH:MM:SS`` UTC ("" for None; ``N ms`` for a time no calendar
    date holds, as a forged log may carry)."""
    if ms is None:
        return ""
    try:
        return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms"


def age(ms: int, now_ms: int) -> str:
    """How long ago ``ms`` was, coarsely (``42s``, ``5m30s``, ``1h59m``, ``2d``: ``coarse_duration``)."""
    return coarse_duration((now_ms - ms) // 1000)


def call_arguments(events: Sequence[Event], call_id: str) -> Mapping[str, Any] | None:
    """The decoded arguments of the logged ``tool/call`` ``call_id`` (None: absent or not JSON)."""
    raw = _logged_arguments(events, call_id)
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return None
    return args if isinstance(args, Mapping) else None


def _logged_arguments(events: Sequence[Event], call_id: str) -> object:
    """The ``arguments`` of the last logged ``tool/call`` ``call_id`` as logged (None: absent)."""
    for ev in reversed(events):
        if ev.type == TOOL_CALL and isinstance(ev.data, Mapping) and ev.data.get("callId") == call_id:
            return ev.data.get("arguments")
    return None


def _arguments_text(events: Sequence[Event], call_id: str) -> str | None:
    """``_logged_arguments`` as text: the logged string, or JSON of a value a writer logged
    decoded (None: the call is not in the log)."""
    raw = _logged_arguments(events, call_id)
    if raw is None or isinstance(raw, str):
        return raw
    return json.dumps(raw, ensure_ascii=False)


def tool_arguments(events: Sequence[Event], record: Any) -> Mapping[str, Any] | None:
    """A tool review's arguments for its page (None for another kind): ``text``, the exact
    argument text the approval binds (the logged call's; the request's stored copy when the call
    is not in the log), whole up to ``MAX_REVIEW_DOCUMENT_BYTES`` (a review request's limit;
    beyond it the start, and ``note`` says so); ``decoded``, each top-level value of a JSON
    object whole (a string as its text, newlines kept; else JSON), for reading (empty when the
    text is cut, not a JSON object, or repeats a key); ``note``, one line or None. Every text
    through ``text.visible`` (newlines and tabs kept)."""
    if record.kind != "tool":
        return None
    from fsm_stage.reviews._fold import MAX_REVIEW_DOCUMENT_BYTES

    text, note = exact_tool_arguments(events, record)
    if text is None:
        return {"text": None, "decoded": [], "note": note}
    size, cap = len(text.encode("utf-8", "surrogatepass")), MAX_REVIEW_DOCUMENT_BYTES
    if size > cap:
        note = (f"The arguments are {size:,} bytes, more than the {cap:,} bytes a review request "
                f"stores: only their first {cap:,} characters are shown here. Read the whole call "
                "in the session log before approving.")
        return {"text": visible(text[:cap], keep="\n\t"), "decoded": [], "note": note}
    return {"text": visible(text, keep="\n\t"), "decoded": _argument_values(text), "note": note}


#: the call argument a plan or stage review's page shows as its document
DOCUMENT_ARGUMENT = {"plan": "plan", "stage": "handoff"}


def call_values(events: Sequence[Event], record: Any, *, document_shown: bool) -> list[tuple[str, str]]:
    """``(key, value text)`` of the logged call of a plan or stage review, each value whole
    (``_argument_values``), without the argument the page shows as its document (the plan; the
    handoff when the handoff document is shown); [] for a tool review, whose page shows
    ``tool_arguments``, or when the call is not in the log or not a JSON object."""
    text = _arguments_text(events, record.call_id) if record.kind != "tool" else None
    if text is None:
        return []
    hidden = DOCUMENT_ARGUMENT.get(record.kind) if document_shown or record.kind == "plan" else None
    return [(k, v) for k, v in _argument_values(text) if k != hidden]


def exact_tool_arguments(events: Sequence[Event], record: Any) -> tuple[str | None, str | None]:
    """``(text, note)``: the exact argument text a tool review's approval binds (the logged
    call's; the request's stored copy when the call is not in the log, ``note`` saying so), or
    ``(None, why)`` when neither is there."""
    from fsm_stage.reviews._fold import tool_payload_sha256

    text = _arguments_text(events, record.call_id)
    if text is not None:
        return text, None
    stored = record.document
    if stored is None or tool_payload_sha256(record.target, stored) != record.payload_sha256:
        return None, "The call is not in the log: its arguments cannot be shown."
    return stored, "The call is not in the log: these are the arguments the review request stored."


def _argument_values(text: str) -> list[tuple[str, str]]:
    """``(key, value text)`` of each top-level value of ``text`` (a JSON object whose objects
    repeat no key), a string value as itself, any other as indented JSON; [] otherwise."""
    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        if len({k for k, _ in pairs}) != len(pairs):
            raise ValueError("a repeated key")
        return dict(pairs)

    try:
        args = json.loads(text, object_pairs_hook=unique)
        values = ({k: v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, indent=2)
                   for k, v in args.items()} if isinstance(args, dict) else {})
    except (ValueError, RecursionError):
        return []
    return [(visible(k), visible(v, keep="\n\t")) for k, v in values.items()]


def event_summary(ev: Event) -> str:
    """One line saying what ``ev`` holds (its data as compact JSON, cut), for the timeline."""
    data = ev.data
    if isinstance(data, Mapping):
        message = data.get("message")
        if isinstance(message, Mapping):
            data = {k: message.get(k) for k in ("role", "content", "toolName", "text") if k in message}
    try:
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    except ValueError:
        text = repr(data)
    return one_line(text, 200)


def graph_svg(dot_text: str) -> bytes | None:
    """SVG bytes of ``dot_text`` from Graphviz ``dot``, or None when it is not installed or fails."""
    if shutil.which("dot") is None:
        return None
    from fsm_stage.diagram import render
    from fsm_stage.errors import UserError

    try:
        return render(dot_text, "svg")
    except UserError:  # graphviz missing or dot failed
        return None


def diff_lines(diff: str) -> list[tuple[str, str]]:
    """A unified diff as ``(kind, line)`` pairs for the page: kind ``add`` / ``del`` / ``hunk``
    / ``same``; each line through ``text.visible`` (control characters as escapes)."""
    out = []
    for line in diff.split("\n"):
        kind = ("hunk" if line.startswith(("@@", "+++", "---")) else "add" if line.startswith("+")
                else "del" if line.startswith("-") else "same")
        out.append((kind, visible(line, keep="\t")))
    return out


def kept_diff_lines(state: Any, record: Any) -> Mapping[str, Any] | None:
    """``{review, lines}``: the changes from the version the reviewer kept in an earlier review
    of the same subject (``reviews._edits.kept_diff``) to ``record``'s document, or None."""
    from fsm_stage.reviews._edits import kept_diff

    kept = kept_diff(state, record)
    if kept is None:
        return None
    return {"review": kept["review"], "lines": diff_lines(kept["diff"]) if kept["diff"] else []}


def edits_diff_lines(record: Any, document: str | None, answer: Any) -> list[tuple[str, str]] | None:
    """The reviewer's edits of an answer approved with edits (the reviewed document → the
    edited one) as ``diff_lines``; None for any other answer or when the reviewed text is gone."""
    if answer is None or answer.edited is None:
        return None
    reviewed = record.document if record.document is not None else document
    if reviewed is None:
        return None
    from fsm_stage.reviews._edits import revision_diff

    diff = revision_diff(reviewed, answer.edited, old_name=f"reviewed ({record.id})", new_name="edited")
    return diff_lines(diff) if diff else None
