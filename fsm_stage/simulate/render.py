"""The human view of a simulation (``fsm-stage simulate`` without ``--json``).

``render_request(record)`` gives one request's lines, ``render_human(result)`` the whole run:
notes interleaved with requests, a summary line and the failed expectations.
"""

from __future__ import annotations

from fsm_stage.simulate.report import RequestRecord
from fsm_stage.simulate.result import SimulationResult

# --- the human view -----------------------------------------------------------------------------------

_WIDTH = 120
_PAD = " " * 13


def _one_line(text: str, width: int) -> str:
    flat = " ⏎ ".join(part.strip() for part in text.strip().splitlines() if part.strip())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _indent(text: str, pad: str) -> str:
    return "\n".join(pad + line for line in text.splitlines()) if text else pad + "(empty)"


def _part(name: str, state: str | None, why: str | None) -> str:
    return f"{name} kept" if state == "kept" else f"{name} CHANGED" + (f" ({why})" if why else "")


def _model_line(model: dict[str, object]) -> str:
    """``openai:o3 (thinker) · effort high · settings {"temperature": 0.2}``."""
    import json

    parts = [str(model.get("model", "default"))
             + (f" ({model['alias']})" if model.get("alias") else "")]
    if model.get("reasoningEffort"):
        parts.append(f"effort {model['reasoningEffort']}")
    if model.get("settings"):
        parts.append("settings " + json.dumps(model["settings"], ensure_ascii=False, sort_keys=True))
    return " · ".join(parts)


def render_request(record: RequestRecord, *, full: bool = False) -> list[str]:
    """The human view of one request, as explained line by line in the README:

    a heading (request number, turn/step, stage, plan mode, estimated tokens); ``system``: one
    line per section (order, name, tokens); ``context``: runtime-context entries; ``tools``;
    ``model``: the stage's (or plan mode's) model choice when the graph declares one;
    ``messages``: how many are kept from the previous request and one line per new message
    (role, source, tokens, text); ``prefix``: tokens reused from the previous request and
    whether the system prompt, the tool catalog and the message history were kept, and a
    model switch (which reuses no cached prefix).
    ``full=True`` prints every text in full under its line.
    """
    out = [f"━━ request {record.index} · turn {record.turn} step {record.step} · stage "
           f"{record.stage if record.stage is not None else '-'} · plan mode "
           f"{'on' if record.plan_mode else 'off'} · ~{record.tokens} tokens"]
    head = "   system    "
    if not record.sections:
        out.append(head + "(empty)")
    for s in record.sections:
        out.append(f"{head}[{s.order:>3}] {s.name:<20} {s.tokens:>5} tok")
        head = _PAD
        if full:
            out.append(_indent(s.text, _PAD + "      "))
    head = "   context   "
    for c in record.context:
        out.append(f"{head}[{c.order:>3}] {c.name:<20} {c.tokens:>5} tok  {_one_line(c.text, 60)}")
        head = _PAD
        if full:
            out.append(_indent(c.text, _PAD + "      "))
    out.append(f"   tools     {', '.join(record.tool_names) or '(none)'} ({record.tool_tokens} tok)")
    if record.policy is not None:
        out.append(f"   policy    {record.policy}")
    if record.model is not None:
        out.append(f"   model     {_model_line(record.model)}")
    p = record.prefix
    kept = 0 if p.first else min(p.messages_kept, len(record.messages))
    new = record.messages[kept:]
    if p.first:
        shown = f"{len(new)} new"
    elif p.messages == "kept":
        shown = f"{kept} kept from request {record.index - 1}, {len(new)} new"
    else:
        shown = f"history replaced: {kept} kept, {len(new)} new"
    out.append(f"   messages  {len(record.messages)} ({record.message_tokens} tok): {shown}")
    for m in new:
        label = f"+ {m.role:<9} {m.source:<25} {m.tokens:>5} tok  "
        # a runtime-context snapshot: show its entries, not its fixed intro paragraph
        text = m.text.split("\n\n", 1)[-1] if m.source.endswith(" snapshot") else m.text
        out.append(_PAD + label + _one_line(text, max(30, _WIDTH - len(_PAD) - len(label))))
        if full:
            out.append(_indent(m.text, _PAD + "    "))
    if p.first:
        out.append("   prefix    first request: nothing cached yet")
    else:
        msgs = "messages kept" if p.messages == "kept" else "messages BROKEN"
        switch = f" · MODEL SWITCHED ({p.model_change}): no cached prefix" if p.model == "switched" else ""
        out.append(f"   prefix    reused {p.reused_tokens} of {p.total_tokens} tok ({p.percent:g}%) · "
                   f"{_part('system', p.system, p.system_change)} · {_part('tools', p.tools, p.tools_change)}"
                   f" · {msgs}{switch}")
    return out


def render_human(result: SimulationResult, *, full: bool = False) -> str:
    """The whole human view: notes (what the scenario did) interleaved with each request, then
    a summary line and, when expectations failed, one line per failure."""
    header = result.log.header
    kind = " (subagent)" if header.is_subagent else ""
    lines: list[str] = [f"scenario {result.scenario} · graph {result.graph} · session {header.id}{kind}"]
    notes = list(result.notes)
    k = 0

    def flush(upto: int) -> None:
        nonlocal k
        while k < len(notes) and notes[k].after <= upto:
            n = notes[k]
            k += 1
            if n.kind == "expect" and n.text.startswith("ok"):
                lines.append(f"   ✓ expect {n.text[3:]}")
            elif n.kind == "expect":
                lines.append(f"   ✗ expect {n.text}")
            elif n.kind == "warning":
                lines.append(f"   ! warning: {n.text}")
            elif n.kind == "user":
                lines.append(f"   » user: {_one_line(n.text, _WIDTH - 11)}")
            else:
                lines.append(f"   » {_one_line(n.text, _WIDTH - 5)}")

    for record in result.records:
        flush(record.index - 1)
        lines.extend(render_request(record, full=full))
    flush(len(result.records))
    total = sum(r.tokens for r in result.records)
    reused = sum(r.prefix.reused_tokens for r in result.records)
    turns = len({r.turn for r in result.records})
    lines.append("")
    share = 100.0 * reused / total if total else 0.0
    n = len(result.records)
    lines.append(f"{n} request{'s' if n != 1 else ''} in {turns} turn{'s' if turns != 1 else ''} · "
                 f"~{total} tokens sent · {reused} "
                 f"reused from the previous request ({share:.0f}%) · expectations: "
                 f"{result.checks - len(result.failures)} of {result.checks} passed"
                 + (f" · {len(result.warnings)} warning{'s' if len(result.warnings) != 1 else ''}"
                    if result.warnings else ""))
    spend = result.stage_spend()
    if any(v["model"] != "default" for v in spend):
        lines.append("per stage: " + " → ".join(
            f"{v['stage'] or '-'}{' (plan mode)' if v['plan_mode'] else ''} on {v['model']}: "
            f"{v['requests']} request{'s' if v['requests'] != 1 else ''}, ~{v['tokens']} tok"
            for v in spend))
    if result.failures:
        lines.append(f"FAILED {len(result.failures)} expectation(s):")
        lines.extend(f"  {f.line()}" for f in result.failures)
    return "\n".join(lines)
