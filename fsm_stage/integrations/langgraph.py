"""LangGraph adapter (``pip install 'fsm_stage[langgraph]'``): ``stage_graph(host, model, tools)``.

A two-node graph (``model`` ↔ ``tools``) whose state is only ``{"session": id, "prompt":
text}``: the conversation lives in the fsm_stage log, not in the checkpointer. The ``model``
node is one ``StagedSession`` step (a ``SystemMessage`` with fsm_stage's system sections, the
log's surface as LangChain messages, ``bind_tools`` with fsm_stage's and the host's tools). The
``tools`` node runs the open step's unsettled calls through a ``ToolNode`` (the host's tools)
whose ``awrap_tool_call`` routes each host execution through ``_run_host_tool`` and runs
``goto_stage`` / ``exit_plan_mode`` itself: a suspended review is an ``interrupt({review_id,
call_id, kind, tool, arguments})``; ``Command(resume=True | False | {"approve", "feedback",
"option"})`` records the answer (``answer_review``) and the call resumes. After a restart, a new
graph picks up from the log (answer first with ``host.answer``; the graph starts at ``tools``
when the open step has unsettled calls).
Per-stage models: ``stage_graph(host, model, tools, models={"openai:o3": o3, "fast": mini})``
— the ``model`` node picks the stage's chat model for each request (by provider-qualified
name, then graph alias) and binds the choice's ``model_settings`` and ``reasoning_effort``
(``langchain_kwargs``) to it; a stage whose model is not in ``models`` is answered by ``model``
with its own settings, with one warning (docs/stage-models.md, "Hosts").
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage, convert_to_messages
from langchain_core.runnables import Runnable, RunnableLambda
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command, Interrupt, interrupt

from fsm_stage.driver._step import StepRequest
from fsm_stage.errors import ReviewPending
from fsm_stage.integrations._host import FSM_TOOLS, StageHost
from fsm_stage.integrations._models import ModelPicker, answered_by, langchain_kwargs
from fsm_stage.integrations.convert import to_openai_chat, usage_from_totals
from fsm_stage.integrations.toolspecs import to_openai
from fsm_stage.runtime.tools import ToolCall, ToolSpec

__all__ = ["StageHost", "StageState", "stage_graph", "stage_tool_node", "to_langchain_messages", "waiting"]


class StageState(TypedDict, total=False):
    """The graph state: a session handle only (``session`` id) and the turn's ``prompt``."""

    session: str
    prompt: str | None


def to_langchain_messages(step: StepRequest, system_prompt: str | None = None) -> list[BaseMessage]:
    """fsm_stage's request as LangChain messages: one ``SystemMessage`` first (``system_prompt``,
    the host's own, in front of fsm_stage's system sections), then the log's surface."""
    messages = to_openai_chat(step.request)["messages"]
    if system_prompt:
        own = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
        rest = messages[1:] if own else messages
        messages = [{"role": "system", "content": "\n\n".join(s for s in (system_prompt, own) if s)}, *rest]
    return list(convert_to_messages(messages))


def _usage(reply: AIMessage) -> dict[str, int] | None:
    """The reply's ``usage_metadata`` as the logged usage (stage budgets count it)."""
    meta: Mapping[str, Any] = reply.usage_metadata or {}
    ins: Mapping[str, Any] = meta.get("input_token_details") or {}
    outs: Mapping[str, Any] = meta.get("output_token_details") or {}
    return usage_from_totals(meta.get("input_tokens"), meta.get("output_tokens"),
                             cache_read=ins.get("cache_read"), cache_write=ins.get("cache_creation"),
                             reasoning=outs.get("reasoning"))


def waiting(host: StageHost, out: Mapping[str, Any] | Sequence[Interrupt]) -> list[Interrupt]:
    """The interrupts of ``out`` (an ``invoke`` result or its ``"__interrupt__"`` list) whose
    review still waits in the log: ask a human only for these. A review answered elsewhere
    meanwhile (the CLI, another process) is not asked again: when none waits, invoke the graph
    with ``{"session": id}`` (not a ``Command``) and the call settles from the logged answer."""
    items = out.get("__interrupt__", ()) if isinstance(out, Mapping) else out
    open_ids = {rid for _c, rid, answered in host.pending_reviews() if not answered}
    return [i for i in items if isinstance(i.value, Mapping) and i.value.get("review_id") in open_ids]


def _answer(host: StageHost, review_id: str, value: Any) -> None:
    if isinstance(value, dict):
        reviewer = value.get("reviewer")
        host.answer(review_id, bool(value.get("approve")), feedback=value.get("feedback"),
                    option=value.get("option"), reviewer=reviewer if isinstance(reviewer, str) else None)
    else:
        host.answer(review_id, value is True or value == "Approve")


_ASKED: contextvars.ContextVar[list[bool] | None] = contextvars.ContextVar("fsm_stage_lg_asked", default=None)
"""Set by the ``tools`` node around each call: marked when the call's review was settled here
(its ``interrupt`` resumed, or its answer found in the log)."""


_BATCH: contextvars.ContextVar[bool] = contextvars.ContextVar("fsm_stage_lg_batch", default=False)
"""Set while the ``tools`` node runs calls concurrently: a review found there is not asked (the
call is left unsettled for the node's one-at-a-time pass)."""


def _ask(host: StageHost, call: ToolCall, review_id: str, kind: str) -> None:
    """``interrupt`` for the review ``review_id`` of ``call`` unless it is answered in the log
    already; the value it resumes with is recorded as the answer. LangGraph hands resume values
    to a node's interrupts by their order within the node's task, so the ``tools`` node ends its
    task after any call that reached this point (``_ASKED``): each task asks one review, and a
    resume value meant for a review answered elsewhere meanwhile dies with the task instead of
    answering the next call's."""
    if not any(rid == review_id and answered for _c, rid, answered in host.pending_reviews()):
        value = interrupt({"review_id": review_id, "call_id": call.id, "tool": call.name,
                           "kind": kind, "arguments": json.loads(call.arguments)})
        _answer(host, review_id, value)
    asked = _ASKED.get()
    if asked is not None:
        asked.append(True)


async def _run_fsm(host: StageHost, call: ToolCall) -> str:
    review_id = host.open_review(call.id)
    if review_id is None:
        try:
            return await host.run_fsm_tool(call)
        except ReviewPending as pending:
            review_id = pending.review_id
    _ask(host, call, review_id, "plan" if call.name == "exit_plan_mode" else "stage")
    return await host.resume_call(call.id)


async def _run_host_tool(host: StageHost, call: ToolCall,
                         execute: Callable[[], Awaitable[ToolMessage | Command[Any]]],
                         ) -> ToolMessage | Command[Any]:
    """The one place a host tool runs: the stage's tool policy first (a refused call never runs;
    the model gets the refusal), then execute and record ``tool/call`` + ``tool/result`` (an
    exception is recorded as an error result and re-raised). An ``ask`` rule's review that waits
    is an ``interrupt`` (kind ``tool``), as fsm_stage's own reviews are. A settled call (a re-run)
    returns its recorded result."""
    settled = host.settled_result(call.id)
    if settled is not None:
        return ToolMessage(content=settled, tool_call_id=call.id, name=call.name)
    try:
        refusal = await host.refusal(call)
    except ReviewPending as pending:
        if _BATCH.get():  # a review among concurrent calls: asked in the one-at-a-time pass
            return ToolMessage(content="", tool_call_id=call.id, name=call.name)
        _ask(host, call, pending.review_id, "tool")
        refusal = await host.refusal(call)  # the logged answer decides
    if refusal is not None:
        return ToolMessage(content=refusal, tool_call_id=call.id, name=call.name, status="error")
    try:
        out = await execute()
    except Exception as exc:
        host.record_host_result(call, f"Error: {exc}", is_error=True)
        raise
    if isinstance(out, ToolMessage):
        host.record_host_result(call, out.text, is_error=out.status == "error")
    else:
        host.record_host_result(call, str(out))
    return out


def stage_tool_node(host: StageHost, tools: Sequence[BaseTool]) -> ToolNode:
    """A ``ToolNode`` over the host's ``tools`` that also runs fsm_stage's tools (see above)."""
    async def wrap(request: ToolCallRequest,
                   execute: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]) -> Any:
        call = host.required_call(request.tool_call["id"] or "")
        if call.name in FSM_TOOLS:
            return ToolMessage(await _run_fsm(host, call), tool_call_id=call.id, name=call.name)
        return await _run_host_tool(host, call, lambda: execute(request))
    return ToolNode(list(tools), awrap_tool_call=wrap, handle_tool_errors=True)


def _sync(run: Callable[[StageState], Coroutine[Any, Any, StageState]]) -> Callable[[StageState], StageState]:
    """A node's sync path (``graph.invoke`` / ``stream``, e.g. with ``SqliteSaver``): the async
    node on a private event loop. Raises ``RuntimeError`` inside a running loop (use ``ainvoke``)."""
    def node(state: StageState) -> StageState:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(run(state))
        raise RuntimeError("stage_graph: graph.invoke was called inside a running event loop; "
                           "use await graph.ainvoke(...)")
    return node


def _model_name(model: BaseChatModel) -> str | None:
    """The chat model's own model name (``ChatOpenAI.model_name``, ``ChatAnthropic.model``), if any."""
    for attr in ("model_name", "model"):
        value = getattr(model, attr, None)
        if isinstance(value, str):
            return value
    return None


def stage_graph(host: StageHost, model: BaseChatModel, tools: Sequence[BaseTool] = (), *,
                checkpointer: Any = None, system_prompt: str | None = None,
                models: Mapping[str, BaseChatModel] | None = None) -> Any:
    """The compiled ``model`` ↔ ``tools`` graph over ``host`` (see the module docstring).
    Invoke it with ``{"session": host.session.id, "prompt": "..."}`` and a thread config, with
    ``ainvoke`` or (a sync checkpointer such as ``SqliteSaver``) ``invoke``. ``system_prompt``
    (the host's own instructions) goes in front of fsm_stage's system text in every request.
    ``models`` maps provider-qualified names or graph aliases to chat models: each request goes
    to its stage's (``model`` otherwise). Raises ``TypeError`` for a non-mapping ``models``."""
    own = [convert_to_openai_tool(t) for t in tools]
    specs = [*[to_openai(s) for s in host.runtime.tool_specs], *own]
    host_specs = [ToolSpec(f["function"]["name"], f["function"].get("description") or "",
                           f["function"].get("parameters") or {}) for f in own]  # logged in each header
    picker: ModelPicker[BaseChatModel] = ModelPicker(models, "stage_graph", BaseChatModel)
    bound: dict[int, Runnable[Any, Any]] = {id(m): m.bind_tools(specs)
                                            for m in (model, *picker.models.values())}
    default_name = _model_name(model)
    node = stage_tool_node(host, tools)

    async def call_model(state: StageState) -> StageState:
        step = host.step(state.get("prompt"), host_specs)
        chat, applies = picker.select(step.model, model, default_name)
        runnable = bound[id(chat)]
        settings = langchain_kwargs(step.model) if applies else {}
        if settings:
            runnable = runnable.bind(**settings)
        # the stage rides on the chat model run's metadata (LangSmith, LangChain OpenTelemetry bridges)
        reply = await runnable.ainvoke(to_langchain_messages(step, system_prompt),
                                       config={"metadata": host.request_tags()})
        assert isinstance(reply, AIMessage)
        calls = [ToolCall(c["id"] or "", c["name"], json.dumps(c["args"], ensure_ascii=False))
                 for c in reply.tool_calls]
        host.reply(reply.text, calls, usage=_usage(reply),
                   source=answered_by(step.model) if chat is not model else None)
        return {"prompt": None}

    more = [False]  # the tools node ended its task early: the next super-step runs the rest

    def request(c: ToolCall) -> dict[str, Any]:
        return {"type": "tool_call", "name": c.name, "id": c.id, "args": json.loads(c.arguments)}

    async def run_tools(state: StageState) -> StageState:
        more[0] = False
        waiting = {call.id for call, _r, _a in host.pending_reviews()}
        free = [c for c in host.driver.unsettled() if c.name not in FSM_TOOLS and c.id not in waiting
                and host.policy_verdict(c) != "ask"]
        if len(free) > 1:  # no review asks about these: concurrently, as a ToolNode runs a reply
            batch = _BATCH.set(True)
            try:
                await node.ainvoke([request(c) for c in free])
            finally:
                _BATCH.reset(batch)
        for c in host.driver.unsettled():  # one at a time: a task's interrupts keep their order
            reviewed = any(call.id == c.id for call, _r, _a in host.pending_reviews())
            asked: list[bool] = []
            token = _ASKED.set(asked)
            try:
                await node.ainvoke([request(c)])
            finally:
                _ASKED.reset(token)
            if asked or reviewed:  # (a review asked in an earlier run of this task)
                more[0] = True
                break
        return {}

    def route(_state: StageState) -> str:
        view = host.driver.view()
        if view is None:
            return "model" if _state.get("prompt") else END
        return "tools" if host.driver.unsettled() else "model"

    def after_tools(_state: StageState) -> str:
        return "tools" if more[0] and host.driver.unsettled() else "model"

    graph = StateGraph(StageState)
    graph.add_node("model", RunnableLambda(_sync(call_model), afunc=call_model, name="model"))
    graph.add_node("tools", RunnableLambda(_sync(run_tools), afunc=run_tools, name="tools"))
    graph.add_conditional_edges(START, route, ["model", "tools", END])
    graph.add_conditional_edges("model", route, ["model", "tools", END])
    graph.add_conditional_edges("tools", after_tools, ["model", "tools"])
    return graph.compile(checkpointer=checkpointer)
