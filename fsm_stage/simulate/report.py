"""Request views and the prefix / prompt-cache report (pure functions).

``section_views``, ``tool_views`` and ``message_view`` price and render what a request carries;
``RequestRecord`` is one request; ``prefix_report(prev, sections, tools, messages)`` compares it
with the previous one. Block model: a request is the ordered cacheable blocks (each system
section, each tool spec in catalog order, each message); the reused prefix is the token sum of
the leading blocks identical to the previous request's. ``system`` is ``kept`` when every
section (name, order, text) is unchanged, ``tools`` when the catalog serialises identically,
``messages`` when the previous messages are a prefix of this request's (else ``broken``).
Tokens come from ``fsm_stage.tokens.HeuristicTokenMeter``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from fsm_stage.constants import USER_MESSAGE
from fsm_stage.log.events import Event
from fsm_stage.runtime.messages import message_text, source_of
from fsm_stage.simulate.history import MessageHistory
from fsm_stage.tokens import HeuristicTokenMeter

Kept = Literal["kept", "changed"]


@attrs.frozen
class SectionView:
    """A rendered system section or runtime-context entry: name, order, text, tokens."""

    name: str
    order: int
    text: str
    tokens: int


@attrs.frozen
class ToolView:
    """One tool of the catalog: name, its serialised spec (``text``) and its tokens."""

    name: str
    text: str
    tokens: int


@attrs.frozen
class MessageView:
    """One model-visible message: ``role``, ``source`` label (``user``, ``model``,
    ``tool <callId>``, ``plugin:plan-mode notice``, ``stage-switch notice``…), its
    readable ``text``, tokens, and ``key`` (role + content JSON, what the provider caches)."""

    role: str
    source: str
    text: str
    tokens: int
    key: str = attrs.field(repr=False)


@attrs.frozen
class PrefixReport:
    """Prompt-cache effect of a request relative to the previous one.

    ``first``: there is no previous request (nothing reusable). ``reused_tokens``: tokens of
    the longest identical leading block run; ``percent``: ``reused_tokens`` over this request's
    tokens (0–100). ``system`` / ``tools``: ``kept`` or ``changed`` (None when first), with a
    one-line ``system_change`` / ``tools_change`` naming the first difference. ``messages``:
    ``kept`` when the previous messages are a prefix of this request's, else ``broken``;
    ``messages_kept``: how many leading messages are unchanged. ``head_percent``: percent of
    the previous request's system+tools tokens this request reuses.
    """

    first: bool
    reused_tokens: int
    total_tokens: int
    percent: float
    system: Kept | None = None
    system_change: str | None = None
    tools: Kept | None = None
    tools_change: str | None = None
    messages: Literal["kept", "broken"] | None = None
    messages_kept: int = 0
    head_percent: float = 0.0


@attrs.frozen
class RequestRecord:
    """Everything one model request carried (see the module docstring), JSON via ``to_json``.

    ``index`` counts requests from 1; ``turn``/``step`` are the loop's numbers; ``stage`` is the
    logged stage when the request was sent (None without a stage graph); ``plan_mode`` the
    logged plan mode; ``tokens`` the estimated total (system + tools + messages); ``seq`` the
    log seq of the request's ``step/start`` (to find it in the ``--log`` output); ``policy`` the
    tool policy in effect (``fsm_stage.policy.PolicyState.describe``; None: none). ``messages``
    is a tuple or, in a run's records, a ``MessageHistory`` (a prefix view of the history the
    records share; equal to the tuple of the same views).
    """

    index: int
    turn: int
    step: int
    stage: str | None
    plan_mode: bool
    sections: tuple[SectionView, ...]
    context: tuple[SectionView, ...]
    messages: Sequence[MessageView]
    tools: tuple[ToolView, ...]
    prefix: PrefixReport
    seq: int | None = None
    policy: str | None = None

    @property
    def system_tokens(self) -> int:
        """Tokens of the system prompt (sum over sections)."""
        return sum(s.tokens for s in self.sections)

    @property
    def tool_tokens(self) -> int:
        """Tokens of the tool catalog."""
        return sum(t.tokens for t in self.tools)

    @property
    def message_tokens(self) -> int:
        """Tokens of the messages."""
        return _history_tokens(self.messages)

    @property
    def tokens(self) -> int:
        """Estimated request tokens: system + tools + messages."""
        return self.system_tokens + self.tool_tokens + self.message_tokens

    @property
    def tool_names(self) -> tuple[str, ...]:
        """Tool names in catalog order."""
        return tuple(t.name for t in self.tools)

    @property
    def text(self) -> str:
        """Every model-visible text of the request (system, tools, messages), for ``contains``."""
        parts = [s.text for s in self.sections]
        parts += [t.text for t in self.tools]
        parts += [m.text for m in self.messages]
        return "\n".join(parts)

    def to_json(self) -> dict[str, Any]:
        """One JSON record (``simulate --json``): plain dicts, lists, strings and numbers."""
        return {
            "request": self.index,
            "turn": self.turn,
            "step": self.step,
            "seq": self.seq,
            "stage": self.stage,
            "plan_mode": self.plan_mode,
            "system": [{"name": s.name, "order": s.order, "tokens": s.tokens, "text": s.text}
                       for s in self.sections],
            "context": [{"name": c.name, "order": c.order, "tokens": c.tokens, "text": c.text}
                        for c in self.context],
            "messages": [{"role": m.role, "source": m.source, "tokens": m.tokens, "text": m.text}
                         for m in self.messages],
            "tools": [t.name for t in self.tools],
            "tokens": {"system": self.system_tokens, "tools": self.tool_tokens,
                       "messages": self.message_tokens, "total": self.tokens},
            "prefix": attrs.asdict(self.prefix),
            **({"policy": self.policy} if self.policy is not None else {}),
        }


# --- building views -----------------------------------------------------------------------------

_METER = HeuristicTokenMeter()


def section_views(items: Sequence[Any], meter: HeuristicTokenMeter = _METER) -> tuple[SectionView, ...]:
    """Views of rendered sections/context entries (anything with ``name``, ``order``, ``text``)."""
    return tuple(SectionView(s.name, s.order, s.text, meter.count_text(s.text)) for s in items)


def tool_views(specs: Sequence[Any], meter: HeuristicTokenMeter = _METER) -> tuple[ToolView, ...]:
    """Views of tool specs (``ToolSpec``): the DSH ``request/header`` entry, compact JSON."""
    out = []
    for spec in specs:
        text = json.dumps(spec.to_json(), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        out.append(ToolView(spec.name, text, meter.count_text(text)))
    return tuple(out)


def _source_label(message: Mapping[str, Any]) -> str:
    src = source_of(message)
    kind = src.get("kind")
    if kind == "plugin":
        form = src.get("form")
        return f"plugin:{src.get('plugin')}" + (f" {form}" if form else "")
    if kind == "tool":
        return "tool"
    if kind is None:
        return "model" if message.get("role") == "assistant" else "user"
    form = src.get("form")
    return str(kind) + (f" {form}" if form and kind != "user" else "")


def _readable_text(message: Mapping[str, Any]) -> str:
    """Text blocks, tool calls as ``→ name(args)`` and tool results with an error marker."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "tool-call":
            args = block.get("arguments", block.get("input", ""))
            args_text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            parts.append(f"→ {block.get('name')}({args_text})")
        elif kind == "tool-result":
            inner = message_text({"content": block.get("content")})
            parts.append(("[error] " if block.get("isError") else "") + inner)
        elif kind == "image":
            parts.append("[image]")
    return "\n".join(p for p in parts if p)


def message_view(message: Mapping[str, Any], meter: HeuristicTokenMeter = _METER) -> MessageView:
    """The view of one surface message (DSH shape: ``{role, content, source, id}``)."""
    role = str(message.get("role", "user"))
    content = message.get("content")
    tokens = meter.count_nodes([Event(USER_MESSAGE, 0, 0, {"content": content})])
    key = json.dumps([role, content], ensure_ascii=False, sort_keys=True)
    return MessageView(role, _source_label(message), _readable_text(message), tokens, key)


# --- the prefix / cache report (pure) -------------------------------------------------------------


def _first_section_change(prev: Sequence[SectionView], cur: Sequence[SectionView]) -> str | None:
    """One line naming the first section (in order) that differs, or None when identical."""
    p = {(s.name, s.order): s.text for s in prev}
    c = {(s.name, s.order): s.text for s in cur}
    for name, order in sorted(set(p) | set(c), key=lambda k: (k[1], k[0])):
        if (name, order) not in p:
            return f"{name} (order {order}) added"
        if (name, order) not in c:
            return f"{name} (order {order}) removed"
        if p[(name, order)] != c[(name, order)]:
            return f"{name} (order {order}) changed"
    return None


def _first_tool_change(prev: Sequence[ToolView], cur: Sequence[ToolView]) -> str | None:
    pn, cn = [t.name for t in prev], [t.name for t in cur]
    if pn != cn:
        added = [n for n in cn if n not in pn]
        removed = [n for n in pn if n not in cn]
        bits = ([f"added {', '.join(added)}"] if added else []) + (
            [f"removed {', '.join(removed)}"] if removed else [])
        return "; ".join(bits) or "reordered"
    for a, b in zip(prev, cur, strict=True):
        if a.text != b.text:
            return f"{a.name} changed"
    return None


def _head_blocks(sections: Sequence[SectionView], tools: Sequence[ToolView]) -> list[tuple[str, int]]:
    """The system-section and tool blocks of a request (its messages follow them)."""
    out: list[tuple[str, int]] = [(f"s\0{s.name}\0{s.order}\0{s.text}", s.tokens) for s in sections]
    out += [(f"t\0{t.text}", t.tokens) for t in tools]
    return out


def _history_tokens(messages: Sequence[MessageView]) -> int:
    """Token sum of ``messages`` (O(1) for a ``MessageHistory``)."""
    return messages.tokens if isinstance(messages, MessageHistory) else sum(m.tokens for m in messages)


def _messages_kept(prev: Sequence[MessageView], cur: Sequence[MessageView]) -> tuple[int, int]:
    """``(kept, tokens)``: how many leading messages ``cur`` shares with ``prev`` (same ``key``)
    and the tokens of those in ``prev``. O(1) when both view one ``SharedHistory``."""
    if isinstance(prev, MessageHistory):
        shared = prev.common_prefix(cur)
        if shared is not None:
            return shared, prev.shared.cumulative[shared]
    kept = tokens = 0
    for a_msg, b_msg in zip(prev, cur, strict=False):
        if a_msg.key != b_msg.key:
            break
        kept += 1
        tokens += a_msg.tokens
    return kept, tokens


def prefix_report(
    prev: RequestRecord | None,
    sections: Sequence[SectionView],
    tools: Sequence[ToolView],
    messages: Sequence[MessageView],
) -> PrefixReport:
    """Compare a request (its section, tool and message views) with the previous ``RequestRecord``.

    Pure. Returns a ``PrefixReport`` (see its docstring and the module docstring for the
    block model). ``prev=None`` gives ``first=True`` with nothing reused. Cost: O(sections +
    tools) plus O(messages) unless both message lists view one ``SharedHistory`` (then O(1)).
    """
    cur_head = _head_blocks(sections, tools)
    total = sum(t for _, t in cur_head) + _history_tokens(messages)
    if prev is None:
        return PrefixReport(first=True, reused_tokens=0, total_tokens=total, percent=0.0)
    prev_head = _head_blocks(prev.sections, prev.tools)
    reused = 0
    head_kept = True
    for (a, ta), (b, _tb) in zip(prev_head, cur_head, strict=False):
        if a != b:
            head_kept = False
            break
        reused += ta
    kept, kept_tokens = _messages_kept(prev.messages, messages)
    # a message block never equals a section or tool block: messages count only after a full head
    if head_kept and len(prev_head) == len(cur_head):
        reused += kept_tokens
    system_change = _first_section_change(prev.sections, sections)
    tools_change = _first_tool_change(prev.tools, tools)
    head_prev = prev.system_tokens + prev.tool_tokens
    head_reused = min(reused, head_prev)
    return PrefixReport(
        first=False,
        reused_tokens=reused,
        total_tokens=total,
        percent=round(100.0 * reused / total, 1) if total else 100.0,
        system="kept" if system_change is None else "changed",
        system_change=system_change,
        tools="kept" if tools_change is None else "changed",
        tools_change=tools_change,
        messages="kept" if kept == len(prev.messages) else "broken",
        messages_kept=kept,
        head_percent=round(100.0 * head_reused / head_prev, 1) if head_prev else 100.0,
    )
