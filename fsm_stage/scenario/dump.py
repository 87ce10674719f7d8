"""The scenario writer: steps back to scenario YAML (``fsm-stage scenario LOG``).

``dump_scenario(graph, session, steps, …)`` renders block-style YAML that ``load_scenario``
reads back to the same steps: literal blocks for multi-line text, double quotes where a
character would not survive a plain or literal scalar, flow style for ``eligible`` / ``expect``
steps. ``step_to_plain`` is the inverse of the loader for one step.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from ruamel.yaml import YAML

from fsm_stage.scenario.load import _CONV
from fsm_stage.scenario.model import (
    UNSET,
    AnswerReview,
    Command,
    EligibilityFlip,
    EndTurn,
    Expect,
    ModelStep,
    Resume,
    Review,
    SessionSettings,
    Step,
    SystemText,
    UserPrompt,
)

# --- writing (used by ``fsm-stage scenario LOG``) ----------------------------------------------


def _review_plain(review: Review) -> Any:
    return {"feedback": review.feedback} if review.kind == "feedback" else review.kind


def step_to_plain(step: Step) -> dict[str, Any]:
    """One step as the plain mapping the YAML format uses (inverse of the loader)."""
    if isinstance(step, UserPrompt):
        return {"user": step.text}
    if isinstance(step, Command):
        return {"command": step.line}
    if isinstance(step, ModelStep):
        if not step.calls:
            return {"model": {"text": step.text, "usage": dict(step.usage)} if step.usage else step.text}
        calls = []
        for c in step.calls:
            d: dict[str, Any] = {"tool": c.tool, "args": dict(c.args)}
            if c.id is not None:
                d["id"] = c.id
            if c.review is not None:
                d["review"] = _review_plain(c.review)
            if c.result is not None:
                d["result"] = c.result
            if c.error:
                d["error"] = True
            calls.append(d)
        body: dict[str, Any] = {"text": step.text} if step.text else {}
        body["calls"] = calls
        if step.usage:
            body["usage"] = dict(step.usage)
        return {"model": body}
    if isinstance(step, EligibilityFlip):
        return {"eligible": dict(step.values)}
    if isinstance(step, EndTurn):
        return {"end_turn": step.reason}
    if isinstance(step, AnswerReview):
        answer = {"call": step.call, "outcome": step.outcome, "option": step.option,
                  "feedback": step.feedback, "reviewer": step.reviewer, "edited": step.edited}
        return {"answer": {k: v for k, v in answer.items() if v is not None}}
    if isinstance(step, Resume):
        return {"resume": True}
    out: dict[str, Any] = {}
    for f in attrs.fields(Expect):
        v = getattr(step, f.name)
        if f.name == "where" or v is UNSET or v == () or (f.name == "next_request" and v is None):
            continue
        out[f.name] = v if v is None else _prune(_CONV.unstructure(v))
    return {"expect": out}


def _prune(value: Any) -> Any:
    """Drop ``None`` and empty values from nested mappings (defaults the loader fills back in)."""
    if isinstance(value, dict):
        return {k: _prune(v) for k, v in value.items() if v not in (None, (), [], {}, "")}
    if isinstance(value, tuple):
        return list(value)
    return value


def _literal_safe(text: str) -> bool:
    """True when a YAML literal block reproduces ``text`` exactly (otherwise it is quoted)."""
    return (
        not text.startswith((" ", "\n"))
        and all(c == "\n" or c.isprintable() for c in text)
        and all(line == line.rstrip() for line in text.split("\n"))
        and not text.endswith("\n\n")
    )


def _flow(step: dict[str, Any]) -> Any:
    """``{kind: {...}}`` with the body on one line (``- expect: {next_request: {stage: x}}``) when
    it holds no multi-line text."""
    from ruamel.yaml.comments import CommentedMap

    def conv(value: Any) -> Any:
        if isinstance(value, dict):
            out = CommentedMap((k, conv(v)) for k, v in value.items())
            out.fa.set_flow_style()
            return out
        return value

    if "\\n" in json.dumps(step):  # an escaped newline: keep block style for the literal
        return step
    return {k: conv(v) for k, v in step.items()}


def dump_scenario(graph: str, session: SessionSettings, steps: Sequence[Step], *,
                  description: str = "", eligible: Mapping[str, bool] | None = None,
                  system: Sequence[SystemText] = ()) -> str:
    """Render a scenario as YAML text (block style, literal blocks for multi-line strings)."""
    from io import StringIO

    from ruamel.yaml.scalarstring import DoubleQuotedScalarString, LiteralScalarString

    def lit(v: Any) -> Any:
        if isinstance(v, str):
            if "\n" in v and _literal_safe(v):
                return LiteralScalarString(v)
            if "\n" in v or not v.isprintable():  # escapes keep NEL, LS, PS, controls exact
                return DoubleQuotedScalarString(v)
            return v
        if isinstance(v, dict):
            return {lit(k): lit(x) for k, x in v.items()}
        if isinstance(v, list):
            return [lit(x) for x in v]
        return v

    doc: dict[str, Any] = {}
    if description:
        doc["description"] = description
    doc["graph"] = graph
    sess = {k: v for k, v in _CONV.unstructure(session).items() if v not in (None, False)}
    if sess:
        doc["session"] = sess
    if system:
        doc["system"] = [lit({"name": t.name, "order": t.order, "text": t.text}) for t in system]
    if eligible:
        doc["eligible"] = dict(eligible)
    doc["steps"] = [_flow(lit(step_to_plain(s))) if isinstance(s, EligibilityFlip | Expect | AnswerReview)
                    else lit(step_to_plain(s)) for s in steps]
    y = YAML()
    y.representer.add_representer(
        type(None), lambda r, _d: r.represent_scalar("tag:yaml.org,2002:null", "null"))
    y.default_flow_style = False
    y.width = 100
    y.indent(mapping=2, sequence=4, offset=2)
    buf = StringIO()
    y.dump(doc, buf)
    return buf.getvalue()
