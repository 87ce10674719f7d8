"""Tool seam (docs/contracts.md S7; docs/architecture.md).

Shapes
------
``ToolSpec(name, description, parameters, output=None)``: ``parameters`` / ``output`` are JSON
Schema objects (plain dicts). Export: ``to_openai()`` →
``{"type": "function", "function": {"name", "description", "parameters"}}``;
``to_anthropic()`` → ``{"name", "description", "input_schema"}``; ``to_json()`` → the DSH
``request/header`` tool entry ``{"name", "description", "parameters", "output"?}``.

``Tool`` protocol: ``spec`` and ``async execute(args, agent, signal) -> ToolOutput``; a tool
fails by raising ``ToolFailure(message)``. ``dispatch_tool`` runs one call and, given a session,
logs ``tool/call`` then ``tool/result`` DSH-style: a failure becomes an error result whose text is
``"Error: " + message`` (the harness envelope, docs/contracts.md).
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import attrs

from fsm_stage.constants import TOOL_CALL, TOOL_RESULT
from fsm_stage.errors import ReviewPending
from fsm_stage.errors import ToolFailure as ToolFailure
from fsm_stage.log.events import NewEvent
from fsm_stage.runtime import wording
from fsm_stage.runtime.abort import AbortSignal
from fsm_stage.runtime.call_record import PendingCall, run_deferred, write_with
from fsm_stage.runtime.messages import IdFactory, Message, new_id, text_block

if TYPE_CHECKING:
    from fsm_stage.runtime.agent import Agent
    from fsm_stage.runtime.session import Session

log = logging.getLogger(__name__)

ERROR_PREFIX = "Error: "
class _Absent:
    """The ``meta`` of a result that sets none (distinct from ``None``, a JSON value)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<no meta>"

    def __reduce__(self) -> str:
        return "_ABSENT"  # copies and pickles stay the one sentinel


_ABSENT: Any = _Absent()

_CURRENT_CALL: contextvars.ContextVar[ToolCall | None] = contextvars.ContextVar(
    "fsm_stage_current_tool_call", default=None)


def current_tool_call() -> ToolCall | None:
    """The ``ToolCall`` being executed by ``execute_tool`` in this task, or None outside a call.

    A tool reads it to learn the model's call id (e.g. to bind a durable review to the call).
    """
    return _CURRENT_CALL.get()


def current_call_id() -> str:
    """The id of the ``ToolCall`` being executed in this task (``current_tool_call``), or a fresh
    ``call_<20 hex digits>`` outside a call (a review then binds to an id of its own)."""
    call = _CURRENT_CALL.get()
    return call.id if call is not None else "call_" + os.urandom(10).hex()


def _frozen_copy(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return json.loads(json.dumps(value))  # type: ignore[no-any-return]


@attrs.frozen
class ToolSpec:
    """Name, model-facing description, parameter JSON Schema, optional output JSON Schema."""

    name: str
    description: str
    parameters: Mapping[str, Any] = attrs.field(converter=_frozen_copy)
    output: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The tool's entry in a ``request/header``: name, description, parameters, output."""
        out: dict[str, Any] = {"name": self.name, "description": self.description,
                               "parameters": json.loads(json.dumps(self.parameters))}
        if self.output is not None:
            out["output"] = json.loads(json.dumps(self.output))
        return out

    def to_openai(
        self, *, strict: bool = False, api: Literal["chat", "responses"] = "chat"
    ) -> dict[str, Any]:
        """OpenAI function tool: Chat ``{"type": "function", "function": {...}}`` or the flat
        Responses form; ``strict`` gives strict mode (see ``fsm_stage.integrations._toolspecs``)."""
        from fsm_stage.integrations._toolspecs import to_openai
        return to_openai(self, strict=strict, api=api)

    def to_anthropic(self) -> dict[str, Any]:
        """Anthropic tool shape ``{"name", "description", "input_schema"}``."""
        from fsm_stage.integrations._toolspecs import to_anthropic
        return to_anthropic(self)

    def to_mcp(self) -> dict[str, Any]:
        """MCP ``Tool`` shape ``{"name", "description", "inputSchema", "outputSchema"?}``."""
        from fsm_stage.integrations._toolspecs import to_mcp
        return to_mcp(self)

    def to_gemini(self) -> dict[str, Any]:
        """google-genai ``FunctionDeclaration`` shape (``parameters_json_schema`` …)."""
        from fsm_stage.integrations._toolspecs import to_gemini
        return to_gemini(self)


@attrs.frozen
class ToolOutput:
    """A successful tool result: the structured ``value`` and the model-visible ``text``.

    ``meta`` (optional) is written as ``tool/result.data.meta`` (e.g. the stage switch's
    ``presentationMeta``); leave it unset to write no ``meta`` key.
    """

    value: Any
    text: str
    meta: Any = _ABSENT

    @property
    def has_meta(self) -> bool:
        """True when ``meta`` was given (even None, which is written as JSON null)."""
        return self.meta is not _ABSENT


@runtime_checkable
class Tool(Protocol):
    """A tool: ``spec`` plus ``execute``; raise ``ToolFailure`` to fail the call.

    Optional attribute ``logs_call_with_review = True``: the tool's first write to the session
    is always a review request through ``fsm_stage.reviews`` (``goto_stage``,
    ``exit_plan_mode``), so ``dispatch_tool`` writes its ``tool/call`` in that batch instead of
    before the tool runs."""

    @property
    def spec(self) -> ToolSpec: ...

    async def execute(
        self, args: Mapping[str, Any], agent: Agent | None, signal: AbortSignal | None = None
    ) -> ToolOutput: ...


@attrs.frozen
class ToolCall:
    """One call requested by the model. ``arguments`` is the raw JSON text (DSH logs it so)."""

    id: str
    name: str
    arguments: str = "{}"

    @classmethod
    def of(cls, name: str, args: Mapping[str, Any] | None = None, *, id: str | None = None) -> ToolCall:
        """Build a call from a dict of arguments (serialised as compact JSON). ``TypeError``
        when ``name`` is not a non-empty str, ``args`` not a mapping (or None) or ``id`` not
        a str (or None)."""
        if not isinstance(name, str) or not name:
            got = "''" if isinstance(name, str) else type(name).__name__
            raise TypeError("ToolCall.of(name, args): name must be the tool's name as a non-empty str, "
                            f"got {got}")
        if args is not None and not isinstance(args, Mapping):
            raise TypeError("ToolCall.of(name, args): args must be a dict of arguments (or None), "
                            f"got {type(args).__name__}")
        if id is not None and not isinstance(id, str):
            raise TypeError(f"ToolCall.of(..., id=): id must be a str or None, got {type(id).__name__}")
        return cls(id if id is not None else f"call_{new_id()[:8]}", name,
                   json.dumps(dict(args or {}), ensure_ascii=False))


@attrs.frozen
class ToolResult:
    """The settled call: ``text`` (with ``Error: `` on failures), ``is_error``, ``value``."""

    call: ToolCall
    text: str
    is_error: bool
    value: Any = None
    meta: Any = _ABSENT
    message: Message | None = None


def tool_result_message(
    call: ToolCall, text: str, is_error: bool, *, id_factory: IdFactory = new_id
) -> Message:
    """The DSH ``tool/result`` message: ``{source: {kind: tool, callId}, content: [{type:
    tool-result, toolCallId, content: [text block], isError}], role: user, id}``."""
    return {
        "source": {"kind": "tool", "callId": call.id},
        "content": [{"type": "tool-result", "toolCallId": call.id,
                     "content": [text_block(text)], "isError": is_error}],
        "role": "user",
        "id": id_factory(),
    }


async def execute_tool(
    tools: Mapping[str, Tool], call: ToolCall, agent: Agent | None, signal: AbortSignal | None = None
) -> ToolResult:
    """Run ``call`` against ``tools`` without logging. Unknown tools, non-object JSON arguments
    and ``ToolFailure`` become error results; other exceptions also become error results with
    their message (a tool bug never crashes the loop) and are logged with a traceback.
    ``ReviewPending`` propagates: the call waits for a human answer. While the tool runs,
    ``current_tool_call()`` returns ``call``."""
    tool = tools.get(call.name)
    if tool is None:
        return ToolResult(call, ERROR_PREFIX + wording.text("tools.unknown", name=call.name), True)
    try:
        args = json.loads(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError as exc:
        return ToolResult(call, ERROR_PREFIX + wording.text("tools.bad_json", error=exc.msg), True)
    except RecursionError:  # arguments nested deeper than the JSON parser goes
        text = wording.text("tools.bad_json", error="nested too deeply")
        return ToolResult(call, ERROR_PREFIX + text, True)
    if not isinstance(args, dict):
        return ToolResult(call, ERROR_PREFIX + wording.text("tools.not_object"), True)
    token = _CURRENT_CALL.set(call)
    try:
        out = await tool.execute(args, agent, signal)
    except ReviewPending:
        raise  # the call stays open until its review is answered (no tool/result)
    except ToolFailure as exc:
        return ToolResult(call, ERROR_PREFIX + exc.message, True)
    except Exception as exc:
        log.exception("tool %s raised", call.name)
        return ToolResult(call, ERROR_PREFIX + (str(exc) or type(exc).__name__), True)
    finally:
        _CURRENT_CALL.reset(token)
    return ToolResult(call, out.text, False, out.value, out.meta)


async def dispatch_tool(
    tools: Mapping[str, Tool],
    call: ToolCall,
    agent: Agent | None,
    *,
    session: Session | None = None,
    turn: int | None = None,
    step: int | None = None,
    signal: AbortSignal | None = None,
    id_factory: IdFactory = new_id,
) -> ToolResult:
    """Execute ``call`` and, when ``session`` is given, log it DSH-style.

    ``tool/call {turn, step, callId, name, arguments}`` is appended before the tool runs;
    ``tool/result {turn, step, message[, meta]}`` after, with ``surfaceOp: append`` and
    ``sourceEventSeqs: [<tool/call seq>]``. ``meta`` is written only for successes that set it.
    A tool whose ``logs_call_with_review`` is True (``goto_stage``, ``exit_plan_mode``), logged on
    its agent's own session, gets its ``tool/call`` written in one batch with its review request
    (``fsm_stage.runtime.call_record``), or with its result when it opened none.
    """
    if (session is not None and agent is not None and agent.session is session
            and getattr(tools.get(call.name), "logs_call_with_review", False) is True):
        return await _dispatch_reviewed(tools, call, agent, session, turn, step, signal, id_factory)
    call_seq: int | None = None
    if session is not None:
        call_seq = session.append(TOOL_CALL, call_data(call, turn, step)).seq
    result = _with_message(await execute_tool(tools, call, agent, signal), id_factory)
    if session is not None:
        session.append(TOOL_RESULT, result_data(result, turn, step), surface_op="append",
                       source_event_seqs=[call_seq] if call_seq is not None else None)
    return result


async def _dispatch_reviewed(tools: Mapping[str, Tool], call: ToolCall, agent: Agent | None, session: Session,
                             turn: int | None, step: int | None, signal: AbortSignal | None,
                             id_factory: IdFactory) -> ToolResult:
    """``dispatch_tool`` for a tool that logs its call with its review request."""
    pending = PendingCall(session, NewEvent(TOOL_CALL, call_data(call, turn, step)))
    result = _with_message(await run_deferred(pending, execute_tool(tools, call, agent, signal)), id_factory)
    write_with(pending, NewEvent(TOOL_RESULT, result_data(result, turn, step), "append"))
    return result


def _with_message(result: ToolResult, id_factory: IdFactory) -> ToolResult:
    """``result`` with its DSH ``tool-result`` message built (``id_factory`` names it)."""
    message = tool_result_message(result.call, result.text, result.is_error, id_factory=id_factory)
    return ToolResult(result.call, result.text, result.is_error, result.value, result.meta, message)


def call_data(call: ToolCall, turn: int | None, step: int | None) -> dict[str, Any]:
    """The ``tool/call`` event data: ``{turn, step, callId, name, arguments}`` (unknown
    position parts omitted)."""
    data = step_position(turn, step)
    data.update(callId=call.id, name=call.name, arguments=call.arguments)
    return data


def result_data(result: ToolResult, turn: int | None, step: int | None) -> dict[str, Any]:
    """The ``tool/result`` event data for a settled ``result`` (its ``message`` is built when
    unset): ``{turn, step, message[, meta]}``; ``meta`` only for successes that set it."""
    message = result.message if result.message is not None else tool_result_message(
        result.call, result.text, result.is_error)
    rdata = step_position(turn, step)
    rdata["message"] = message
    if not result.is_error and result.meta is not _ABSENT:
        rdata["meta"] = result.meta
    return rdata


def step_position(turn: int | None, step: int | None) -> dict[str, Any]:
    """The ``{turn, step}`` head of DSH step-scoped event data, omitting unknown parts.

    Shared by the tool events and the crash-repair closers so they are shaped alike.
    """
    out: dict[str, Any] = {}
    if turn is not None:
        out["turn"] = turn
    if step is not None:
        out["step"] = step
    return out


TOOL_CODE_DISPATCH = "tool/code-dispatch"


async def dispatch_nested(
    tools: Mapping[str, Tool],
    call: ToolCall,
    agent: Agent | None,
    *,
    parent_call_id: str,
    root_call_id: str | None = None,
    session: Session | None = None,
    signal: AbortSignal | None = None,
) -> ToolResult:
    """Run a tool called programmatically from inside another tool (a code runner) and log it.

    The nested call is not a model tool call, so it is logged as one ``tool/code-dispatch``
    event (DSH Code Mode shape): ``{name, arguments, content: [text block], isError,
    parentCallId, rootCallId, subCallId}`` — no surface op (B77).
    """
    result = await execute_tool(tools, call, agent, signal)
    if session is not None:
        session.append(TOOL_CODE_DISPATCH, {
            "name": call.name, "arguments": call.arguments, "content": [text_block(result.text)],
            "isError": result.is_error, "parentCallId": parent_call_id,
            "rootCallId": root_call_id if root_call_id is not None else parent_call_id,
            "subCallId": call.id,
        })
    return result
