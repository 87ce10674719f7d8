"""pydantic-ai adapter: ``StageCapability``, an agent capability (``pip install 'fsm_stage[pydantic-ai]'``).

Add ``StageCapability(host)`` to ``Agent(..., capabilities=[...], output_type=[str,
DeferredToolRequests])``. Each model request is one ``StagedSession`` step: the request sent
is fsm_stage's (instructions = the system sections, messages = the log's surface), the reply
is recorded; ``goto_stage`` / ``exit_plan_mode`` come as a toolset with their JSON schemas;
every host tool runs through ``_run_host_tool`` (``tool/call`` + ``tool/result``). A suspended
review is a deferred tool approval (``ApprovalRequired``: the run ends with
``DeferredToolRequests``); ``cap.results(requests, approve=...)`` records the answer
(``answer_review``) and returns the ``DeferredToolResults`` that resume the run.
``cap.message_history()`` rebuilds the run's history from the log (a restarted process).
Per-stage models: ``StageCapability(host, models={"openai:o3": o3, "fast": "openai:gpt-5-mini"})``
sends each request to its stage's model (``before_model_request`` sets the request's ``model``)
with the choice's ``model_settings`` and ``reasoning_effort`` (as ``thinking``) merged over the
run's settings; a stage whose model is not in ``models`` keeps the agent's model and settings,
with one warning (docs/stage-models.md, "Hosts").
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from pydantic_ai import DeferredToolRequests, DeferredToolResults, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ApprovalRequired
from pydantic_ai.messages import (
    InstructionPart,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestContext, infer_model
from pydantic_ai.settings import ModelSettings, merge_model_settings
from pydantic_ai.tools import Tool, ToolDefinition
from pydantic_ai.toolsets import FunctionToolset

from fsm_stage.driver._step import StepRequest
from fsm_stage.errors import ReviewPending, UserError
from fsm_stage.integrations._host import FSM_TOOLS, StageHost
from fsm_stage.integrations._models import ModelPicker, answered_by, pydantic_ai_settings
from fsm_stage.integrations.convert import to_openai_chat, usage_from_totals
from fsm_stage.reviews._team import Reviewers as TeamReviewers
from fsm_stage.runtime.tools import ToolCall, ToolSpec

__all__ = ["StageCapability", "StageHost", "to_pydantic_ai_messages"]


FROM_LOG = {"fsm_stage": "log"}
"""``ModelRequest.metadata`` of the requests rebuilt from the log: a run resuming from one
(no new prompt) logs none of its user parts again."""


def to_pydantic_ai_messages(step: StepRequest) -> list[ModelMessage]:
    """fsm_stage's model-visible messages as pydantic-ai ``ModelMessage``s (system text apart)."""
    out: list[ModelMessage] = []
    request: list[ModelRequestPart] = []
    names: dict[str, str] = {}
    for m in to_openai_chat(step.request)["messages"]:
        role = m["role"]
        if role in ("system", "developer"):
            continue
        if role == "assistant":
            if request:
                out.append(ModelRequest(parts=request, metadata=dict(FROM_LOG)))
                request = []
            parts: list[ModelResponsePart] = [TextPart(m["content"])] if m.get("content") else []
            for tc in m.get("tool_calls") or ():
                names[tc["id"]] = tc["function"]["name"]
                parts.append(ToolCallPart(tc["function"]["name"], tc["function"]["arguments"], tc["id"]))
            out.append(ModelResponse(parts=parts))
        elif role == "tool":
            request.append(ToolReturnPart(names.get(m["tool_call_id"], ""), m["content"], m["tool_call_id"]))
        else:
            content = m["content"]
            text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
            request.append(UserPromptPart(text))
    if request:
        out.append(ModelRequest(parts=request, metadata=dict(FROM_LOG)))
    return out


def _prompt_text(prompt: Any) -> str | None:
    """The run's own user prompt as text (``agent.run(prompt)``); None when the run has none.
    Raises ``ValueError`` for non-text content (images, files), which fsm_stage cannot log."""
    if prompt is None or isinstance(prompt, str):
        return prompt or None
    parts = list(prompt)
    if not all(isinstance(p, str) for p in parts):
        raise ValueError("StageCapability: the prompt must be text; images and files are not supported")
    return "".join(parts) or None


def _returned(messages: Sequence[ModelMessage], call_id: str) -> str | None:
    """What pydantic-ai returned for ``call_id`` (a ``ToolDenied`` message), if anything."""
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolReturnPart) and part.tool_call_id == call_id:
                return part.model_response_str()
    return None


def _calls(response: ModelResponse) -> list[ToolCall]:
    return [ToolCall(p.tool_call_id, p.tool_name, p.args_as_json_str())
            for p in response.parts if isinstance(p, ToolCallPart)]


def _usage(response: ModelResponse) -> dict[str, int] | None:
    """The response's ``RequestUsage`` as the logged usage (stage budgets count it)."""
    u = response.usage
    return usage_from_totals(u.input_tokens, u.output_tokens, cache_read=u.cache_read_tokens,
                             cache_write=u.cache_write_tokens,
                             reasoning=getattr(u, "output_reasoning_tokens", 0))


async def _run_host_tool(host: StageHost, call: ToolCall, execute: Callable[[], Awaitable[Any]]) -> Any:
    """The one place a host tool runs (``StageHost.run_host_tool``: policy, execute, record)."""
    return await host.run_host_tool(call, execute)


@dataclasses.dataclass(init=False)
class StageCapability(AbstractCapability[Any]):
    """fsm_stage for a pydantic-ai agent over ``host`` (a ``StageHost``; see the module docstring).

    ``models`` maps provider-qualified names or graph aliases to pydantic-ai models (a
    ``Model`` or a model name such as ``"openai:gpt-5-mini"``, resolved with ``infer_model``
    at its first request). Raises ``TypeError`` for a non-mapping ``models``."""

    host: StageHost

    def __init__(self, host: StageHost, *, models: Mapping[str, Model | str] | None = None) -> None:
        self.host = host
        self._models: ModelPicker[Model | str] = ModelPicker(models, "StageCapability", (Model, str))
        self._answered: dict[str, object] | None = None  # the picked model's source, per request
        self._step: StepRequest | None = None
        self._prompted: tuple[str | None, ...] = ()  # the run whose prompt was logged
        tools = [Tool.from_schema(self._fsm_tool(spec.name), spec.name, spec.description,
                                  dict(spec.parameters), takes_ctx=True, sequential=True)
                 for spec in host.runtime.tool_specs]
        self._toolset: FunctionToolset[Any] = FunctionToolset(tools)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Not spec-serialisable (holds a live session)."""
        return None

    def get_toolset(self) -> FunctionToolset[Any]:
        """``goto_stage`` / ``exit_plan_mode`` with their JSON schemas."""
        return self._toolset

    def _fsm_tool(self, name: str) -> Callable[..., Awaitable[str]]:
        async def run(ctx: RunContext[Any], **args: Any) -> str:
            call = ToolCall(ctx.tool_call_id or "", name, json.dumps(args, ensure_ascii=False))
            self._approved_directly(ctx, call.id)
            try:
                return await self.host.run_fsm_tool(self._logged(call))
            except ReviewPending as pending:
                raise ApprovalRequired({"review_id": pending.review_id, "kind": pending.kind}) from None
        run.__name__ = name
        return run

    def _logged(self, call: ToolCall) -> ToolCall:
        """The reply's recorded call with ``call``'s id (its arguments text as logged)."""
        return self.host.logged_call(call.id) or call

    async def wrap_model_request(self, ctx: RunContext[Any], *, request_context: ModelRequestContext,
                                 handler: Callable[[ModelRequestContext], Awaitable[ModelResponse]],
                                 ) -> ModelResponse:
        """One fsm_stage step: send its instructions and messages, record the reply. The run's
        prompt (``ctx.prompt``) is logged once, at the run's first request; a history older
        than the log (a retry with the same ``DeferredToolResults``, a stale snapshot) gets
        the open step's waiting calls replayed, so the run ends asking for them again."""
        replay = await self.host.before_request(lambda call_id: _returned(request_context.messages, call_id),
                                                by="pydantic-ai")
        if replay:
            return ModelResponse(parts=[ToolCallPart(c.name, c.arguments, c.id) for c in replay])
        sent = request_context.messages[-1] if request_context.messages else None
        from_log = isinstance(sent, ModelRequest) and (sent.metadata or {}).get("fsm_stage") == "log"
        prompt = None if from_log or ctx.run_id in self._prompted else _prompt_text(ctx.prompt)
        self._prompted = (ctx.run_id,)
        params = request_context.model_request_parameters
        self._step = self.host.step(prompt, [ToolSpec(t.name, t.description or "", t.parameters_json_schema)
                                             for t in (*params.function_tools, *params.output_tools)])
        response = await handler(request_context)
        text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
        self.host.reply(text, _calls(response), usage=_usage(response), source=self._answered)
        return response

    async def before_model_request(self, ctx: RunContext[Any],
                                   request_context: ModelRequestContext) -> ModelRequestContext:
        """Send the step's instructions (fsm_stage's system sections) and messages (the log's)
        to the stage's model with its settings (``models``; see the class docstring)."""
        step = self._step
        if step is None:
            return request_context
        own = list(request_context.model_request_parameters.instruction_parts or [])  # the agent's own
        params = dataclasses.replace(request_context.model_request_parameters, instruction_parts=[
            *own, *([InstructionPart(step.system)] if step.system else [])])
        out = dataclasses.replace(request_context, messages=to_pydantic_ai_messages(step),
                                  model_request_parameters=params)
        return self._choose_model(out, step)

    def _choose_model(self, request_context: ModelRequestContext, step: StepRequest) -> ModelRequestContext:
        """``request_context`` sent to ``step.model``'s model with its settings (unchanged when the
        framework's own model stands in for a model ``models`` lacks)."""
        choice, own = step.model, request_context.model
        picked, applies = self._models.select(choice, own, own.model_id)
        self._answered = None
        if not applies or choice.is_default:
            return request_context
        settings = merge_model_settings(request_context.model_settings,
                                        ModelSettings(**pydantic_ai_settings(choice)))  # type: ignore[typeddict-item]
        if picked is own:
            return dataclasses.replace(request_context, model_settings=settings)
        key = picked if isinstance(picked, str) else None
        model = infer_model(picked) if isinstance(picked, str) else picked
        if key is not None:  # resolve a name once
            self._models.models = {k: (model if v == key else v) for k, v in self._models.models.items()}
        self._answered = answered_by(choice)
        return dataclasses.replace(request_context, model=model, model_settings=settings, model_id=key)

    async def wrap_tool_execute(self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition,
                                args: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """Host tools go through ``_run_host_tool``; fsm_stage's own run in their tool function.
        A host tool whose ``ask`` review waits is a deferred approval (``ApprovalRequired``);
        approved through ``DeferredToolResults`` directly, the approval is recorded."""
        if call.tool_name in FSM_TOOLS:
            return await handler(args)
        logged = self._logged(ToolCall(call.tool_call_id, call.tool_name, call.args_as_json_str()))
        self._approved_directly(ctx, logged.id)
        try:
            return await _run_host_tool(self.host, logged, lambda: handler(args))
        except ReviewPending as pending:
            raise ApprovalRequired({"review_id": pending.review_id, "kind": pending.kind}) from None

    def _approved_directly(self, ctx: RunContext[Any], call_id: str) -> None:
        """``DeferredToolResults(approvals={id: True})`` given to pydantic-ai directly: record it."""
        review_id = self.host.open_review(call_id)
        if review_id is not None and ctx.tool_call_approved:
            self.host.answer(review_id, True, by="pydantic-ai")

    # --- reviews ---------------------------------------------------------------------------------

    def results(self, requests: DeferredToolRequests, approve: bool = True, *,
                feedback: str | None = None, option: str | None = None, reviewer: str | None = None,
                reviewers: TeamReviewers | None = None) -> DeferredToolResults:
        """Answer every review ``requests`` asks for (``StageHost.answer``: as ``reviewer`` when
        given, so reviews whose rules name approvers can be answered) and return the
        ``DeferredToolResults`` to pass to the next ``agent.run(...)``: each call is resumed and
        reads its logged answer (approved: applied at the next step; kept: the tool says so; past
        its deadline: closed by the deadline's answer). Raises ``ReviewRefusedError`` when a
        review's rules refuse the answer, ``UserError`` for ``requests`` that are no
        ``DeferredToolRequests`` (``pending()`` returns None when nothing waits)."""
        if not isinstance(requests, DeferredToolRequests):
            raise UserError("results: requests must be the run's DeferredToolRequests (pending() returns "
                            f"None when no review waits), got {type(requests).__name__}")
        for part in requests.approvals:
            review_id = self.host.open_review(part.tool_call_id)
            if review_id is not None:
                self.host.answer(review_id, approve, feedback=feedback, option=option, reviewer=reviewer,
                                 reviewers=reviewers)
        return DeferredToolResults(approvals={p.tool_call_id: True for p in requests.approvals})

    def pending(self) -> DeferredToolRequests | None:
        """The deferred approvals folded from the log (after a restart), None when none wait."""
        calls = self.host.pending_reviews()
        if not calls:
            return None
        from fsm_stage.reviews import review_state

        records = review_state(self.host.session).records
        return DeferredToolRequests(
            approvals=[ToolCallPart(c.name, _args(c.arguments), c.id) for c, _r, _a in calls],
            metadata={c.id: {"review_id": r, "kind": records[r].kind if r in records else None}
                      for c, r, _a in calls})

    def message_history(self) -> list[ModelMessage]:
        """The run's history rebuilt from the log: pass it with ``results(...)`` after a restart."""
        messages = [m for m in self.host.session.messages() if isinstance(m, dict)]
        step = StepRequest(0, 0, "", (), (), tuple(messages))
        return to_pydantic_ai_messages(step)


def _args(arguments: str) -> dict[str, Any] | str:
    """A logged call's arguments as the model's part had them: the JSON object, or the text as
    logged when it is not one."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    return value if isinstance(value, dict) else arguments
