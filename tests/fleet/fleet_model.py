"""A deterministic model for the fleet tests, a pure function of the request, so a crashed
and resumed run ends as the uninterrupted one: ``task: N`` → ``goto_stage build`` (reviewed)
→ ``apply {task}`` (a host tool that records its idempotency key in ``$FLEET_EFFECTS``) →
``goto_stage done`` (reviewed) → "finished N". After an outcome-unknown result it calls again."""

from __future__ import annotations

import json
import os
import random
import re
from typing import Any

from fsm_stage import ModelReply
from fsm_stage.fleet import FencedLog, host_tool

_CRASH = float(os.environ.get("FLEET_CRASH", "0") or 0)
"""Chaos (worker processes of the chaos test): the probability of dying (``os._exit``) right
after an append, inside a model call, or after a host tool's effect before its result."""


def _maybe_crash() -> None:
    if _CRASH and random.random() < _CRASH:
        os._exit(137)


if _CRASH:
    _real_append_many = FencedLog.append_many

    def _crashing_append_many(self: FencedLog, *args: Any, **kwargs: Any) -> Any:
        out = _real_append_many(self, *args, **kwargs)
        _maybe_crash()  # between two appends
        return out

    FencedLog.append_many = _crashing_append_many  # type: ignore[method-assign]


def _text(message: Any) -> str:
    out = []
    for block in message.get("content") or ():
        if block.get("type") == "text":
            out.append(block.get("text", ""))
        elif block.get("type") == "tool-result":
            out.extend(b.get("text", "") for b in block.get("content") or () if b.get("type") == "text")
    return "\n".join(out)


class FleetModel:
    provider = "test"
    name = "fleet-model"

    async def complete(self, request: Any, *, signal: Any) -> ModelReply:
        _maybe_crash()
        msgs = request.messages
        stages = re.findall(r"Current stage: (\w+)", request.system + "".join(_text(m) for m in msgs))
        current = stages[-1] if stages else "plan"
        task = "?"
        for m in msgs:
            found = re.search(r"task: (\S+)", _text(m)) if m.get("role") == "user" else None
            if found:
                task = found.group(1)
        cid = f"c{len(msgs)}"
        last = msgs[-1] if msgs else {}
        last_text = _text(last)
        is_result = (last.get("source") or {}).get("kind") == "tool"
        if current == "plan":
            return ModelReply.call("goto_stage", {"stage": "build"}, id=cid)
        if current == "build":
            if is_result and "applied" in last_text:
                return ModelReply.call("goto_stage", {"stage": "done"}, id=cid)
            return ModelReply.call("apply", {"task": task}, id=cid)
        return ModelReply.say(f"finished {task}")


def model() -> FleetModel:
    return FleetModel()


@host_tool(parameters={"type": "object", "properties": {"task": {"type": "string"}}})
def apply(args: Any, key: str) -> str:
    """Apply the task (records its idempotency key, once per key)."""
    path = os.environ.get("FLEET_EFFECTS")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"key": key, "task": args.get("task")}) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
    _maybe_crash()  # the effect happened, its result is not logged yet
    return f"applied {args.get('task')}"


def tools() -> list[Any]:
    return [apply]


class HandoffModel(FleetModel):
    """The fleet model with a full switch: ``task: N`` → ``goto_stage build`` with a handoff
    document (reviewed) → in ``build``, a reply quoting the handoff document it was told to read
    (the file at the path in the stage notice), so a test sees which version the session used."""

    name = "fleet-handoff-model"

    async def complete(self, request: Any, *, signal: Any) -> ModelReply:
        texts = "\n".join([request.system, *(_text(m) for m in request.messages)])
        stages = re.findall(r"Current stage: (\w+)", texts)
        if (stages[-1] if stages else "plan") == "plan":
            task = re.findall(r"task: (\S+)", texts)
            return ModelReply.call("goto_stage", {"stage": "build", "handoff": (
                f"# Handoff\n\nTask {task[0] if task else '?'}: the parser is explored.\n")},
                id=f"c{len(request.messages)}")
        paths = re.findall(r"Read the handoff document at (\S+\.md)", texts)
        with open(paths[-1], encoding="utf-8") as fh:
            return ModelReply.say("building from the handoff:\n" + fh.read())


def handoff_model() -> HandoffModel:
    return HandoffModel()
