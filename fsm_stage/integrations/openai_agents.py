"""OpenAI Agents SDK adapter (``pip install 'fsm_stage[openai-agents]'``).

``StagedModel(inner, host)`` wraps any ``agents.Model``: each ``get_response`` is one
``StagedSession`` step (instructions = fsm_stage's system sections, input = the log's surface
as Responses items; the reply is recorded). ``stage_tools(host)`` are ``goto_stage`` /
``exit_plan_mode`` as ``FunctionTool``s whose ``needs_approval`` runs the call and says True
when its review suspended: the run stops with a ``RunState`` interruption. ``approve(state,
item)`` / ``reject(state, item, feedback)`` record the answer (``answer_review``) and mark the
item; ``Runner.run(agent, state)`` resumes. A rejection the host made on ``RunState`` directly
is recorded as keep at the next model request. ``host_tools(host, tools)`` routes each host
tool execution through ``_run_host_tool``. After a restart, answer with ``host.answer`` and run
again: the model input comes from the log, not from a saved ``RunState``.
Per-stage models: ``StagedModel(inner, host, models={"openai:o3": o3, "fast": mini})`` sends
each request to its stage's ``agents.Model`` with the choice's ``model_settings`` and
``reasoning_effort`` (``reasoning=Reasoning(effort=…)``) resolved over the run's
``ModelSettings``; a stage whose model is not in ``models`` is answered by ``inner`` with the
run's settings, with one warning (docs/stage-models.md, "Hosts").
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

from agents import (
    FunctionTool,
    Model,
    ModelResponse,
    ModelSettings,
    RunContextWrapper,
    RunState,
    ToolApprovalItem,
    Usage,
)
from agents.tool_context import ToolContext
from agents.tracing import custom_span
from openai.types.responses import ResponseFunctionToolCall

from fsm_stage.errors import ReviewPending
from fsm_stage.integrations._host import StageHost
from fsm_stage.integrations._models import ModelPicker, agents_settings, answered_by
from fsm_stage.integrations.convert import to_openai_responses, usage_from_totals
from fsm_stage.reviews._team import Reviewers as TeamReviewers
from fsm_stage.runtime.tools import ToolCall, ToolSpec

__all__ = ["StageHost", "StagedModel", "approve", "host_tools", "reject", "stage_tools"]


def _attr(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)


def _user_text(input: str | list[Any]) -> str | None:
    """The run's new prompt: the input's last item when it is a user message (a run resumed
    from a ``RunState`` ends with tool items, so nothing is logged twice); None or empty: none."""
    if isinstance(input, str):
        return input or None
    last = input[-1] if input else None
    if last is None or _attr(last, "role") != "user":
        return None
    content = _attr(last, "content")
    if isinstance(content, str):
        return content or None
    return "".join(str(_attr(p, "text") or "") for p in content or ()) or None


def _output_of(input: str | list[Any], call_id: str) -> str | None:
    for item in input if isinstance(input, list) else ():
        if _attr(item, "type") == "function_call_output" and _attr(item, "call_id") == call_id:
            output = _attr(item, "output")
            return output if isinstance(output, str) else None
    return None


def _offered(tools: Sequence[Any], handoffs: Sequence[Any]) -> list[ToolSpec]:
    """The SDK's tools and handoffs offered to the model, as ``ToolSpec``s for the step's
    ``request/header`` (a hosted tool, which has no schema here, with empty parameters)."""
    out = [ToolSpec(t.name, getattr(t, "description", "") or "", getattr(t, "params_json_schema", None) or {})
           for t in tools if isinstance(getattr(t, "name", None), str)]
    out += [ToolSpec(h.tool_name, h.tool_description or "", h.input_json_schema or {}) for h in handoffs]
    return out


def _usage(response: ModelResponse) -> dict[str, int] | None:
    """The response's ``Usage`` as the logged usage (stage budgets count it)."""
    u = response.usage
    ins = getattr(u, "input_tokens_details", None)
    reasoning = _attr(getattr(u, "output_tokens_details", None), "reasoning_tokens")
    return usage_from_totals(getattr(u, "input_tokens", 0), getattr(u, "output_tokens", 0),
                             cache_read=_attr(ins, "cached_tokens"),
                             cache_write=_attr(ins, "cache_write_tokens"), reasoning=reasoning)


def _reply(response: ModelResponse) -> tuple[str, list[ToolCall]]:
    text, calls = "", []
    for item in response.output:
        kind = _attr(item, "type")
        if kind == "function_call":
            arguments = _attr(item, "arguments") or "{}"
            calls.append(ToolCall(_attr(item, "call_id"), _attr(item, "name"), arguments))
        elif kind == "message":
            text += "".join(str(_attr(p, "text") or "") for p in _attr(item, "content") or ())
    return text, calls


class StagedModel(Model):
    """``inner`` behind fsm_stage's step driver (see the module docstring). ``models`` maps
    provider-qualified names or graph aliases to ``agents.Model``s: each request goes to its
    stage's (``inner`` otherwise). Raises ``TypeError`` for a non-mapping ``models``."""

    def __init__(self, inner: Model, host: StageHost, *, models: Mapping[str, Model] | None = None) -> None:
        self.inner = inner
        self.host = host
        self.models: ModelPicker[Model] = ModelPicker(models, "StagedModel", Model)

    async def get_response(self, system_instructions: str | None, input: str | list[Any],
                           model_settings: Any, tools: list[Any], output_schema: Any, handoffs: list[Any],
                           tracing: Any, *, previous_response_id: str | None, conversation_id: str | None,
                           prompt: Any) -> ModelResponse:
        """One fsm_stage step around the inner model's response."""
        replay = await self.host.before_request(lambda call_id: _output_of(input, call_id),
                                                by="openai-agents")
        if replay:  # the RunState is older than the log: ask for the waiting approval again
            output = [ResponseFunctionToolCall(type="function_call", call_id=c.id, name=c.name,
                                               arguments=c.arguments) for c in replay]
            return ModelResponse(output=list(output), usage=Usage(), response_id=None)
        step = self.host.step(_user_text(input), _offered(tools, handoffs))
        system = "\n\n".join(s for s in (system_instructions, step.system) if s)  # the Agent's own first
        name = getattr(self.inner, "model", None)
        model, applies = self.models.select(step.model, self.inner, name if isinstance(name, str) else None)
        if applies and not step.model.is_default:
            model_settings = (model_settings if isinstance(model_settings, ModelSettings) else ModelSettings()
                              ).resolve(agents_settings(step.model))
        with custom_span("fsm_stage.step", data=self.host.request_tags()):  # the stage in the SDK's trace
            response = await model.get_response(
                system or None, to_openai_responses(step.request)["input"], model_settings, tools,
                output_schema, handoffs, tracing, previous_response_id=None, conversation_id=None,
                prompt=prompt)
        text, calls = _reply(response)
        self.host.reply(text, calls, usage=_usage(response),
                        source=answered_by(step.model) if model is not self.inner else None)
        return response

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        """Streaming is not supported by the adapter (use ``Runner.run``)."""
        raise NotImplementedError("StagedModel does not stream; use Runner.run")


def stage_tools(host: StageHost) -> list[FunctionTool]:
    """``goto_stage`` / ``exit_plan_mode`` as ``FunctionTool``s with review approvals. A call
    the SDK runs again (a retry from the same ``RunState``, an older saved state) returns its
    recorded result; an approval made on ``RunState`` without ``approve`` is recorded
    (``by="openai-agents"``)."""
    done: dict[str, str] = {}

    def approval(name: str) -> Callable[[RunContextWrapper[Any], dict[str, Any], str], Awaitable[bool]]:
        async def needs_approval(_ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
            try:
                done[call_id] = await host.run_fsm_tool(host.required_call(call_id, name, json.dumps(params)))
            except ReviewPending:
                return True
            return False
        return needs_approval

    async def invoke(ctx: ToolContext[Any], _args: str) -> str:
        call_id = ctx.tool_call_id
        if call_id in done:
            return done.pop(call_id)
        review_id = host.open_review(call_id)
        if review_id is not None:  # approved on RunState without approve(): record it
            host.answer(review_id, True, by="openai-agents")
        return await host.run_fsm_tool(host.required_call(call_id, ctx.tool_name, ctx.tool_arguments))

    return [FunctionTool(name=spec.name, description=spec.description,
                         params_json_schema=dict(spec.parameters), on_invoke_tool=invoke,
                         strict_json_schema=False, needs_approval=approval(spec.name))
            for spec in host.runtime.tool_specs]


async def _run_host_tool(host: StageHost, call: ToolCall, execute: Callable[[], Awaitable[Any]], *,
                         authorized: bool = False) -> Any:
    """The one place a host tool runs (``StageHost.run_host_tool``: policy, execute, record;
    ``authorized``: ``needs_approval`` asked the policy already)."""
    return await host.run_host_tool(call, execute, authorized=authorized)


def host_tools(host: StageHost, tools: Sequence[FunctionTool]) -> list[FunctionTool]:
    """Copies of the host's ``tools`` whose executions go through ``_run_host_tool``. A call an
    ``ask`` rule reviews needs approval (an interruption, answered with ``approve`` / ``reject``);
    otherwise the tool's own ``needs_approval`` decides."""
    out = []
    authorized: set[str] = set()  # calls (_call_key) needs_approval let run, until their invoke
    for tool in tools:
        def invoke(ctx: ToolContext[Any], args: str, _tool: FunctionTool = tool) -> Awaitable[Any]:
            call = host.required_call(ctx.tool_call_id, ctx.tool_name, args)
            review_id = host.open_review(call.id)
            if review_id is not None:  # approved on RunState without approve(): record it
                host.answer(review_id, True, by="openai-agents")
            key = _call_key(host, call.id)
            let_run = key in authorized
            authorized.discard(key)
            return _run_host_tool(host, call, lambda: _tool.on_invoke_tool(ctx, args), authorized=let_run)
        out.append(FunctionTool(name=tool.name, description=tool.description,
                                params_json_schema=tool.params_json_schema, on_invoke_tool=invoke,
                                strict_json_schema=tool.strict_json_schema,
                                needs_approval=_policy_approval(host, tool, authorized)))
    return out


def _policy_approval(host: StageHost, tool: FunctionTool, authorized: set[str],
                     ) -> Callable[[RunContextWrapper[Any], dict[str, Any], str], Awaitable[bool]]:
    """``needs_approval`` of a host tool copy. A call the policy lets run outright but the tool's
    own ``needs_approval`` asks about waits for the SDK's approval first (the policy is applied
    when it runs: nothing is logged before the human decides). Otherwise the policy first: True
    while its review of the call waits (that human approval covers the tool's own), False for a
    refusal (the copy returns the logged refusal), else the tool's own answer; a call the policy
    let run is in ``authorized`` for its ``invoke`` (by step and id: asked once per call)."""
    async def needs_approval(ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
        own = tool.needs_approval
        own_asks = bool(await own(ctx, params, call_id) if callable(own) else own)
        call = host.required_call(call_id, tool.name, json.dumps(params))
        key = _call_key(host, call_id)
        if own_asks and host.policy_verdict(call) in (None, "allow"):
            return True
        if host.settled_result(call_id) is None and key not in authorized:
            try:
                if await host.refusal(call):
                    return False
            except ReviewPending:
                return True
            authorized.add(key)
        return own_asks
    return needs_approval


def _call_key(host: StageHost, call_id: str) -> str:
    """``call_id`` within the open step (a provider may number calls per reply)."""
    view = host.driver.view()
    return repr((view.open_step if view is not None else None, call_id))


def _review_of(host: StageHost, item: ToolApprovalItem) -> str | None:
    call_id = _attr(item.raw_item, "call_id")
    return host.open_review(call_id) if isinstance(call_id, str) else None


def approve(host: StageHost, state: RunState[Any], item: ToolApprovalItem, *, option: str | None = None,
            reviewer: str | None = None, reviewers: TeamReviewers | None = None) -> None:
    """Approve an interruption: ``StageHost.answer`` (approve; as ``reviewer`` when given) for
    its review, then ``state.approve``. Raises ``ReviewRefusedError`` when the review's rules
    refuse it (``state`` unchanged)."""
    review_id = _review_of(host, item)
    if review_id is not None:
        host.answer(review_id, True, option=option, reviewer=reviewer, reviewers=reviewers)
    state.approve(item)


def reject(host: StageHost, state: RunState[Any], item: ToolApprovalItem,
           feedback: str | None = None, *, reviewer: str | None = None,
           reviewers: TeamReviewers | None = None) -> None:
    """Reject an interruption: ``StageHost.answer`` (keep, with ``feedback``; as ``reviewer``
    when given), then ``state.reject``."""
    review_id = _review_of(host, item)
    if review_id is not None:
        host.answer(review_id, False, feedback=feedback, reviewer=reviewer, reviewers=reviewers)
    state.reject(item, rejection_message=feedback)
