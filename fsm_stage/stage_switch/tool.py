"""The ``goto_stage`` tool: its schema, argument check, result text and UI cards (docs/contracts.md).

``GOTO_STAGE_PARAMETERS`` is the single source of the parameter schema; ``goto_stage_tool_spec``
publishes it and ``goto_stage_argument_problem`` checks a call against it before the spec's
chain runs (``fsm_stage.stage_switch.goto``). ``GotoStageTool`` is the runtime ``Tool`` bound
to a ``StageController``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from fsm_stage.config import describe_value
from fsm_stage.constants import GOTO_STAGE
from fsm_stage.prompts import Catalog
from fsm_stage.runtime.abort import AbortSignal
from fsm_stage.runtime.tools import ToolOutput, ToolSpec

if TYPE_CHECKING:
    from fsm_stage.runtime.agent import Agent
    from fsm_stage.stage_switch.controller import StageController

__all__ = [
    "GOTO_STAGE_PARAMETERS",
    "GotoStageTool",
    "goto_stage_argument_problem",
    "goto_stage_tool_spec",
    "present_call",
    "present_result",
    "presentation_meta",
    "render_result",
]


def presentation_meta(value: Mapping[str, Any]) -> dict[str, bool] | None:
    """The durable marker of a successful call: ``{"fullTransition": True}`` when the value
    holds ``handoffPath``, else ``None`` (JSON null) (S67)."""
    return {"fullTransition": True} if "handoffPath" in value else None


GOTO_STAGE_PARAMETERS: Final = (("stage", True), ("handoff", False))
"""``goto_stage``'s parameters in schema order, each ``(name, required)``; all are strings. The
published JSON Schema (``StageController.tool_spec``) and ``goto_stage_argument_problem`` are
both built from this (S39)."""


def goto_stage_argument_problem(args: object, catalog: Catalog) -> str | None:
    """Check ``goto_stage`` arguments against the tool's own parameter schema.

    Returns None when ``args`` is valid (a JSON object with a string ``stage``, an optional
    string ``handoff`` — ``null`` counts as absent, as OpenAI strict mode sends it — and no
    other key), else the model-facing ``errors.invalid_arguments``
    text naming the first problem, in this order: not an object
    (``errors.arguments.not_object``), unknown keys (``errors.arguments.unknown``, sorted), a
    missing required key (``errors.arguments.missing``), a value of the wrong JSON type
    (``errors.arguments.wrong_type``). Accepts exactly what the JSON Schema accepts.
    """
    allowed = [name for name, _required in GOTO_STAGE_PARAMETERS]
    problem: str | None = None
    if not isinstance(args, Mapping):
        problem = catalog.text("errors.arguments.not_object", actual=describe_value(args, json_names=True))
    else:
        unknown = sorted(str(k) for k in args if k not in allowed)
        if unknown:
            problem = catalog.text("errors.arguments.unknown", names=", ".join(f'"{k}"' for k in unknown),
                                   allowed=", ".join(f'"{k}"' for k in allowed))
        else:
            for name, required in GOTO_STAGE_PARAMETERS:
                if name not in args:
                    if required:
                        problem = catalog.text("errors.arguments.missing", name=name)
                        break
                elif args[name] is None and not required:
                    continue  # OpenAI strict mode sends null for an optional argument: absent
                elif not isinstance(args[name], str):
                    problem = catalog.text("errors.arguments.wrong_type", name=name, expected="string",
                                           actual=describe_value(args[name], json_names=True))
                    break
    return None if problem is None else catalog.text("errors.invalid_arguments", problem=problem)



def goto_stage_tool_spec(catalog: Catalog, stages: Sequence[str] = ()) -> ToolSpec:
    """The ``goto_stage`` schema: ``stage`` (required), ``handoff`` (optional), in that
    order; output ``{approved: true, stage, handoffPath?}`` (S39). Given ``stages``,
    ``stage`` carries ``enum: [sorted stage names]`` (fixed per graph: cache-safe)."""
    text = catalog.text
    spec = ToolSpec(
        name=GOTO_STAGE,
        description=text("goto_tool.description"),
        parameters={
            "type": "object",
            "properties": {
                name: {"type": "string", "description": text(f"goto_tool.{name}_param")}
                for name, _required in GOTO_STAGE_PARAMETERS
            },
            "required": [name for name, required in GOTO_STAGE_PARAMETERS if required],
            "additionalProperties": False,
        },
        output={
            "type": "object",
            "properties": {
                "approved": {"const": True},
                "stage": {"type": "string"},
                "handoffPath": {"type": "string"},
            },
            "required": ["approved", "stage"],
            "additionalProperties": False,
        },
    )
    if not stages:
        return spec
    from fsm_stage.integrations._toolspecs import with_stage_enum
    return with_stage_enum(spec, stages)


def render_result(catalog: Catalog, value: Mapping[str, Any], *, dropped_handoff: bool = False,
                  unused_handoff_path: str | None = None) -> str:
    """Success text: ``tool_result.approved`` then ``tool_result.handoff_path`` for a full
    transition (S42); for a light transition that was given a non-blank handoff,
    ``tool_result.handoff_dropped`` tells the model the document was not saved (S66), or, when
    it was saved for the review and the reviewer kept the conversation (``unused_handoff_path``),
    ``tool_result.handoff_unused`` names where it is and that it is not used."""
    text = catalog.text("tool_result.approved", stage=value["stage"])
    if "handoffPath" in value:
        text += catalog.text("tool_result.handoff_path", path=value["handoffPath"])
    elif unused_handoff_path is not None:
        text += catalog.text("tool_result.handoff_unused", path=unused_handoff_path)
    elif dropped_handoff:
        text += catalog.text("tool_result.handoff_dropped")
    return text


def present_call(catalog: Catalog, args: Mapping[str, Any]) -> dict[str, Any]:
    """Call card: generic, titled by the target; body = the ``handoff`` argument when present
    (even empty), else ``present.light_call_content`` (S40)."""
    if not isinstance(args, Mapping):
        args = {}
    stage = str(args.get("stage", ""))
    handoff = args.get("handoff")
    text = handoff if isinstance(handoff, str) else catalog.text("present.light_call_content", stage=stage)
    title = catalog.text("present.call_title", stage=stage)
    content = [{"type": "text", "text": text}]
    return {"card": "generic", "title": title, "kind": "other", "content": content}


def present_result(catalog: Catalog, args: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
    """Result card: generic, ``present.result_title``, the result's content unchanged (S41)."""
    return {"card": "generic", "title": catalog.text("present.result_title"),
            "content": result.get("content")}


class GotoStageTool:
    """The ``goto_stage`` tool (``fsm_stage.runtime.tools.Tool``) bound to a controller."""

    logs_call_with_review = True
    """Its first write is the review request: ``dispatch_tool`` logs the call in that batch."""

    def __init__(self, controller: StageController) -> None:
        self._controller = controller
        self.spec = controller.tool_spec()

    async def execute(self, args: Mapping[str, Any], agent: Agent | None,
                      signal: AbortSignal | None = None) -> ToolOutput:
        """Run ``StageController.goto_stage``; failures raise ``ToolFailure``."""
        return await self._controller.goto_stage(args, agent, signal)

    def present_call(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The UI card of a call (S40)."""
        return self._controller.present_call(args)

    def present_result(self, args: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
        """The UI card of a result (S41)."""
        return self._controller.present_result(args, result)
