"""``build_server``: stage graphs and plan mode as an MCP server (``mcp`` SDK, lowlevel tier).

Tools, in this fixed order whatever the stage: ``exit_plan_mode`` (only when the graph file
configures plan mode), ``get_stage``, ``goto_stage`` (only with a stage graph). Their parameter
schemas are the controllers' ``tool_spec()`` plus an optional ``session`` handle. A reviewed
call runs through the session's ``Runtime`` tools (``execute_tool``) and logs ``tool/call`` /
``tool/result`` like ``Runtime.call_tool``; an approved transition is applied at once (the
server is the step boundary: there is no later model request it could wait for). Review per
client: see ``fsm_stage.mcp.review`` and ``docs/mcp.md``. Bad input (unknown session, bad
arguments, unknown stage, a stale or replayed request state) is an MCP error, nothing written.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from fsm_stage.constants import EXIT_PLAN_MODE, GOTO_STAGE, TOOL_CALL, TOOL_RESULT
from fsm_stage.diagram import to_mermaid
from fsm_stage.errors import (
    RecordShapeError,
    ReviewDismissed,
    ReviewPayloadChangedError,
    ReviewPending,
    ReviewRefusedError,
    ReviewSuspended,
    UserError,
)
from fsm_stage.integrations._toolspecs import to_mcp
from fsm_stage.log.events import NewEvent
from fsm_stage.mcp import durable
from fsm_stage.mcp.choice import BUDGETS_OUTPUT, MODEL_OUTPUT, budgets_of, model_of
from fsm_stage.mcp.meter import CONTEXT_TOKENS, CONTEXT_TOKENS_PARAM, context_tokens_problem
from fsm_stage.mcp.review import (
    UNAVAILABLE,
    Answered,
    Elicit,
    McpReviewChannel,
    Suspend,
    review_form,
    review_message,
)
from fsm_stage.mcp.sessions import McpSession, SessionRegistry
from fsm_stage.reviews._flow import redeemed_spec
from fsm_stage.reviews._fold import CALL_CLOSED
from fsm_stage.runtime.call_record import PendingCall, run_deferred
from fsm_stage.runtime.tools import ToolCall, ToolResult, ToolSpec, execute_tool, result_data
from fsm_stage.text import lone_surrogate

__all__ = ["GET_STAGE", "SERVER_NAME", "StageServer", "build_server"]

SERVER_NAME = "fsm-stage"
GET_STAGE = "get_stage"
REVIEW_KEY = "review"
_SESSION_PARAM = {"type": "string", "description": "Session handle (optional; default: the server's "
                  "default session). The handles are the server's --log NAME=LOG names."}
_URI = "fsm-stage://session/{handle}/{what}"
_STATE_VERSION = 1
GET_STAGE_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "session": {"type": "string", "description": "The session handle."},
        "stage": {"type": "string", "description": "The current stage (with a stage graph)."},
        "pending": {"type": ["string", "null"], "description": "An approved transition not applied yet."},
        "planMode": {"type": "object", "description": "Plan mode's state (when configured)."},
        "openReviews": {"type": "array", "items": {"type": "object"},
                        "description": "Reviews waiting for a human: {id, callId, kind, target}."},
        "model": MODEL_OUTPUT,
        "budgets": BUDGETS_OUTPUT,
    },
    "required": ["session", "openReviews"],
}
"""``get_stage``'s output schema (its ``structuredContent``)."""


def package_version() -> str:
    """The installed distribution's version (``serverInfo.version``); ``0+unknown`` when the
    package runs from a tree that was never installed."""
    try:
        return importlib.metadata.version("fsm_stage")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def _invalid(message: str) -> MCPError:
    return MCPError(code=types.INVALID_PARAMS, message=message)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def argument_problem(parameters: Mapping[str, Any], args: Mapping[str, Any], *,
                     also: Sequence[str] = ()) -> str | None:
    """Check ``args`` against a flat tool schema (string properties, ``required``, no extras);
    ``also``: arguments accepted besides the schema's (already taken out of ``args``), named
    in the "expected" list of an unknown-argument message."""
    props: Mapping[str, Any] = parameters.get("properties", {})
    unknown = sorted(k for k in args if k not in props)
    if unknown:
        expected = [*props, *(a for a in also if a not in props)]
        return f"unknown argument(s) {', '.join(unknown)}; expected: {', '.join(expected)}"
    for name in parameters.get("required", ()):
        if name not in args:
            return f"missing required argument {name!r}"
    for name, value in args.items():
        if props[name].get("type") == "string" and not isinstance(value, str):
            return f"argument {name!r} must be a string, got {type(value).__name__}"
    return None


class StageServer:
    """The MCP server over a ``SessionRegistry`` (``server`` is the SDK's lowlevel ``Server``)."""

    def __init__(self, registry: SessionRegistry, *, security: RequestStateSecurity | None = None,
                 reviewer: durable.McpReviewer | None = None) -> None:
        self.registry = registry
        self.reviewer = reviewer
        self.channels: dict[str, McpReviewChannel] = {}
        for ms in registry:
            channel = McpReviewChannel()
            ms.runtime.review = channel
            for controller in (ms.stage, ms.plan):
                if controller is not None and getattr(controller, "review", channel) is None:
                    controller.review = channel  # type: ignore[misc]
            self.channels[ms.handle] = channel
        first = next(iter(registry))
        self._specs: dict[str, ToolSpec] = {}
        if first.plan is not None:
            self._specs[EXIT_PLAN_MODE] = first.plan.tool_spec()
        self._specs[GET_STAGE] = ToolSpec(
            GET_STAGE, "Read the session's current stage, plan mode, pending transition, open "
            "reviews, and the stage's model choice and budget spend. Changes nothing.",
            {"type": "object", "properties": {}, "additionalProperties": False},
            GET_STAGE_OUTPUT)
        if first.stage is not None:
            self._specs[GOTO_STAGE] = first.stage.tool_spec()
        self._used: set[str] = set()
        self.server: Server[Any] = Server(
            SERVER_NAME, version=package_version(), instructions="Stage graphs and plan mode "
            "(fsm_stage). Read get_stage and the session's instructions resource; request "
            "transitions with goto_stage.",
            on_list_tools=self._list_tools, on_call_tool=self._call_tool,
            on_list_resources=self._list_resources, on_read_resource=self._read_resource)
        policy = security if security is not None else RequestStateSecurity.ephemeral()
        self.server.middleware.append(RequestStateBoundary(policy, default_audience=SERVER_NAME))

    # --- tools ------------------------------------------------------------------------------------

    def tools(self) -> list[types.Tool]:
        """The fixed tool list (same order and bytes whatever the stage)."""
        out = []
        for name in sorted(self._specs):
            wire = to_mcp(self._specs[name])  # the in-process spec, exported like every adapter's
            wire["inputSchema"].setdefault("properties", {})["session"] = dict(_SESSION_PARAM)
            if name == GOTO_STAGE:
                wire["inputSchema"]["properties"][CONTEXT_TOKENS] = dict(CONTEXT_TOKENS_PARAM)
            out.append(types.Tool.model_validate(wire))
        return out

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self.tools())

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> Any:
        spec = self._specs.get(params.name)
        if spec is None:
            raise _invalid(f"unknown tool {params.name!r}; this server has: {', '.join(sorted(self._specs))}")
        raw = params.arguments if params.arguments is not None else {}
        if not isinstance(raw, Mapping):
            raise _invalid(f"{params.name}: arguments must be a JSON object")
        args = dict(raw)
        if not _utf8_text(args):
            raise _invalid(f"{params.name}: an argument holds a lone surrogate (\\ud800-\\udfff escape): "
                           "not UTF-8 text")
        try:
            ms = self.registry.get(args.pop("session", None))
        except UserError as err:
            raise _invalid(str(err)) from None
        reported = args.pop(CONTEXT_TOKENS, None) if params.name == GOTO_STAGE else None
        problem = argument_problem(spec.parameters, args, also=(
            "session", *((CONTEXT_TOKENS,) if params.name == GOTO_STAGE else ())))
        if problem is None and reported is not None:
            problem = context_tokens_problem(reported)
        if problem is not None:
            raise _invalid(f"{params.name}: {problem}")
        if params.name == GET_STAGE:
            return self._result(json.dumps(self.status(ms), ensure_ascii=False), False, self.status(ms))
        names = ms.stage.config.stage_names if ms.stage is not None else ()
        if params.name == GOTO_STAGE and args["stage"] not in names:
            raise _invalid(f"goto_stage: unknown stage {args['stage']!r}; the graph's stages are: "
                           f"{', '.join(names)}")
        async with ms.lock:
            with ms.meter.report(reported, args.get("handoff")):
                return await self._reviewed(ctx, ms, params, args)

    def status(self, ms: McpSession) -> dict[str, Any]:
        """``get_stage``'s value: session, stage, pending, planMode, openReviews, and the next
        request's model choice (``model``) and ``budgets`` when the graph declares them."""
        out: dict[str, Any] = {"session": ms.handle}
        if ms.stage is not None:
            out["stage"] = ms.stage.current(ms.session)
            out["pending"] = ms.stage.pending_stage(ms.session)
        if ms.plan is not None:
            out["planMode"] = ms.plan.get(ms.agent).to_json()
        out["openReviews"] = durable.open_reviews(ms)
        model = model_of(ms)
        if model is not None:
            out["model"] = model
        budgets = budgets_of(ms)
        if budgets:
            out["budgets"] = budgets
        return out

    @staticmethod
    def _result(text: str, is_error: bool, value: Any = None) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=is_error,
                                    structured_content=value if isinstance(value, dict) else None)

    # --- reviewed calls -----------------------------------------------------------------------------

    def _mode(self, ctx: Any) -> str:
        caps = ctx.session.client_capabilities
        if caps is None or caps.elicitation is None:
            return "unavailable"
        return "input_required" if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS else "elicit"

    async def _reviewed(self, ctx: Any, ms: McpSession, params: types.CallToolRequestParams,
                        args: dict[str, Any]) -> Any:
        name = params.name
        arguments = json.dumps(args, ensure_ascii=False, sort_keys=True)
        channel = self.channels[ms.handle]
        if params.request_state is not None:
            return await self._retry(ms, channel, name, arguments, params)
        mode = self._mode(ctx)
        if mode == "unavailable":
            return self._result(UNAVAILABLE, True)
        call_id = ms.open_call(name, arguments)  # a call cut short by a restart resumes here
        logged: PendingCall | None = None  # a new call is logged with its review request
        if call_id is None:
            call_id = f"call_mcp_{uuid.uuid4().hex[:12]}"
            logged = PendingCall(ms.session, NewEvent(TOOL_CALL, {"callId": call_id, "name": name,
                                                                  "arguments": arguments}))
        call = ToolCall(call_id, name, arguments)
        if mode == "input_required":
            channel.arm(Suspend())
        else:
            async def elicit(message: str, schema: dict[str, Any]) -> tuple[str, Mapping[str, Any] | None]:
                # tool/call and fsm/review/request are logged by now: a crash here leaves an open review
                try:
                    reply = await ctx.session.elicit_form(message=message, requested_schema=schema,
                                                          related_request_id=ctx.request_id)
                except MCPError as err:
                    if err.error.code != types.CONNECTION_CLOSED:
                        raise
                    with contextlib.suppress(ReviewRefusedError):  # else the channel logs it
                        durable.record_answer(ms, call_id, "cancel", None, self.reviewer)  # by "mcp"
                    raise ReviewDismissed("the MCP client disconnected during the review") from None
                held = self._record(ms, call_id, reply.action, reply.content)  # logged by "mcp"
                if held is not None:  # refused or a quorum vote: nothing more is logged now
                    notes.append(held)
                    raise ReviewSuspended(held)
                return reply.action, reply.content
            channel.arm(Elicit(elicit))
        notes: list[str] = []
        review_id: str | None = None
        try:
            run = execute_tool(ms.runtime.tools, call, ms.agent)
            result = await (run if logged is None else run_deferred(logged, run))
        except ReviewPending as pending:  # the review-core controllers: the call stays open
            review_id, result = pending.review_id, None
        finally:
            asked, suspended = channel.asked, channel.suspended
            channel.arm(None)
        if logged is not None:
            logged.ensure_written()  # a call refused before its review: logged before its result
        if mode == "elicit" and result is None:
            if notes and durable.is_open(ms, review_id):
                return self._result(notes[0], True)  # the call stays open; nothing was written
            result = await execute_tool(ms.runtime.tools, call, ms.agent)  # answered: settle it
        if suspended and asked is not None:
            state = {"v": _STATE_VERSION, "session": ms.handle, "callId": call_id, "tool": name,
                     "args": _sha(arguments), "nonce": uuid.uuid4().hex, "reviewId": review_id}
            request = types.ElicitRequest(params=types.ElicitRequestFormParams(
                message=review_message(asked), requested_schema=review_form(asked)))
            return types.InputRequiredResult(input_requests={REVIEW_KEY: request},
                                             request_state=json.dumps(state, sort_keys=True))
        assert result is not None
        return self._settle(ms, call, result)

    async def _retry(self, ms: McpSession, channel: McpReviewChannel, name: str, arguments: str,
                     params: types.CallToolRequestParams) -> Any:
        try:
            state = json.loads(params.request_state or "")
            call_id, nonce = state["callId"], state["nonce"]
        except (ValueError, KeyError, TypeError):
            raise _invalid("requestState is not one this server minted") from None
        if (state.get("v") != _STATE_VERSION or state.get("session") != ms.handle or state.get("tool") != name
                or state.get("args") != _sha(arguments)):
            raise _invalid(f"{name}: this request state belongs to another call (session, tool or "
                           "arguments differ); the review answers exactly the call it was asked for")
        if nonce in self._used or ms.call_state(call_id) != "open":
            raise _invalid(f"{name}: this review was already answered; a request state is single use. "
                           "Call the tool again to ask for a new review")
        reply = (params.input_responses or {}).get(REVIEW_KEY)
        if not isinstance(reply, types.ElicitResult):
            raise _invalid(f"{name}: the retry carries no answer to input request {REVIEW_KEY!r}")
        self._used.add(nonce)
        call = ToolCall(call_id, name, arguments)
        action, content = reply.action, reply.content
        try:
            held = self._record(ms, call_id, action, content)
        except ReviewPayloadChangedError as err:  # edited on disk since asked: close it as kept
            action, content = "decline", {"feedback": str(err)}
            held = self._record(ms, call_id, action, content)
        if held is not None and durable.is_open(ms, state.get("reviewId") or self._review_of(ms, call_id)):
            return self._result(held, True)  # refused or one vote: the call stays open, asked again
        channel.arm(Answered(action, content))
        try:
            result = await execute_tool(ms.runtime.tools, call, ms.agent)
        finally:
            channel.arm(None)
        return self._settle(ms, call, result)

    def _record(self, ms: McpSession, call_id: str, action: str,
                content: Mapping[str, Any] | None) -> str | None:
        """Log the client's answer (as the server's reviewer, when it has one): None when it was
        logged, else the one line saying why the review stays open — the rules refused it (nothing
        written; an expiry excepted) or it was one vote of a quorum."""
        try:
            done = durable.record_answer(ms, call_id, action, content, self.reviewer)
        except (ReviewRefusedError, RecordShapeError) as err:
            return (f"review refused: {err}; nothing was written and the review stays open "
                    "(call the tool again with the same arguments to be asked again)")
        if done is not None and done.answer is None:
            who = self.reviewer.name if self.reviewer is not None else "?"
            return (f"approval by {who} recorded ({len(done.votes)} of {done.needed}); the review stays "
                    "open for more approvers (call the tool again with the same arguments for the outcome)")
        return None

    @staticmethod
    def _review_of(ms: McpSession, call_id: str) -> str | None:
        return next((r["id"] for r in durable.open_reviews(ms) if r["callId"] == call_id), None)

    def _settle(self, ms: McpSession, call: ToolCall, result: ToolResult) -> types.CallToolResult:
        """Log ``tool/result`` for ``call`` and, on success, apply the approved transition now. A
        failure tells the model the call is over: a review of it still open (a second round whose
        switch changed shape since it was asked) is closed in the same write (``call-closed``),
        so no later answer applies it and it blocks no later call."""
        if call.name == GOTO_STAGE and ms.stage is not None and not result.is_error:
            # applied below, at once: there is no later step the approval could wait for
            stage = result.value["stage"]
            approved = ms.stage.catalog.text("tool_result.approved", stage=stage)
            if result.text.startswith(approved):
                result = attrs.evolve(result, message=None, text=ms.stage.catalog.text(
                    "tool_result.applied", stage=stage) + result.text[len(approved):])
        call_seq = next((ev.seq for ev in reversed(ms.session.events) if ev.type == TOOL_CALL
                         and isinstance(ev.data, Mapping) and ev.data.get("callId") == call.id), None)
        closed = [redeemed_spec(r.id, False, CALL_CLOSED) for r in durable.open_of(ms, call.id)] \
            if result.is_error else []
        ms.session.append_many([*closed, NewEvent(TOOL_RESULT, result_data(result, None, None), "append",
                                                  [call_seq] if call_seq is not None else None)])
        text = result.text
        if not result.is_error:
            ms.runtime.pre_step(ms.agent, [])  # the boundary: the approved transition is applied now
            if call.name == GOTO_STAGE and ms.stage is not None:
                text += "\n\n" + self.instructions(ms)
        return self._result(text, result.is_error, result.value)

    # --- resources ----------------------------------------------------------------------------------

    def instructions(self, ms: McpSession) -> str:
        """The current stage and its instruction (markdown); for a stage the served graph does
        not have (the log was recorded under another graph), that."""
        if ms.stage is None:
            return "This server has no stage graph."
        current = ms.stage.current(ms.session)
        stage = ms.stage.config.stage(current)
        if stage is None:
            return (f"Current stage: {current}\n\nThe served stage graph has no stage `{current}`: "
                    "this session was recorded under another graph.")
        return f"Current stage: {current}\n\n{stage.instruction}"

    def diagram(self, ms: McpSession) -> str:
        """The graph's Mermaid diagram: the current stage highlighted, plan mode's state marked
        (when configured), a pending transition drawn."""
        current = ms.stage.current(ms.session) if ms.stage is not None else None
        pending = ms.stage.pending_stage(ms.session) if ms.stage is not None else None
        active = ms.plan.get(ms.agent).active if ms.plan is not None else None
        return to_mermaid(ms.config.graph, ms.config.plan_mode, current=current, plan_active=active,
                          pending=(current, pending) if current is not None and pending else None)

    async def _list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        out = []
        for ms in self.registry:
            out.append(types.Resource(uri=_URI.format(handle=ms.handle, what="diagram"),
                                      name=f"{ms.handle}-diagram",
                                      description=f"Stage graph of session {ms.handle} (Mermaid), current "
                                      "stage highlighted", mime_type="text/vnd.mermaid"))
            out.append(types.Resource(uri=_URI.format(handle=ms.handle, what="instructions"),
                                      name=f"{ms.handle}-instructions", mime_type="text/markdown",
                                      description=f"The current stage of session {ms.handle} and its "
                                      "instruction"))
        return types.ListResourcesResult(resources=out)

    async def _read_resource(self, ctx: Any,
                             params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        prefix = "fsm-stage://session/"
        handle, _, what = uri[len(prefix):].partition("/") if uri.startswith(prefix) else ("", "", "")
        try:
            ms = self.registry.get(handle)
        except UserError as err:
            raise _invalid(f"unknown resource {uri!r}: {err}") from None
        if what == "diagram":
            return types.ReadResourceResult(contents=[types.TextResourceContents(
                uri=uri, mime_type="text/vnd.mermaid", text=self.diagram(ms))])
        if what == "instructions":
            return types.ReadResourceResult(contents=[types.TextResourceContents(
                uri=uri, mime_type="text/markdown", text=self.instructions(ms))])
        raise _invalid(f"unknown resource {uri!r}; expected .../diagram or .../instructions")


def build_server(registry: SessionRegistry, *, security: RequestStateSecurity | None = None,
                 reviewer: durable.McpReviewer | None = None) -> StageServer:
    """A ``StageServer`` over ``registry`` (``security``: the request-state keys; default
    ephemeral, so a restart refuses older states — pass persistent keys to resume after one;
    ``reviewer``: the authenticated reviewer every client answer is recorded as, so the
    reviews' rules apply; None: answers name nobody)."""
    return StageServer(registry, security=security, reviewer=reviewer)


def _utf8_text(value: Any, depth: int = 0) -> bool:
    """Whether every string (and key) in the JSON ``value`` encodes as UTF-8: a lone surrogate
    escape decodes to a ``str`` no log, reply or error message can carry."""
    if isinstance(value, str):
        return lone_surrogate(value) is None
    if depth > 64:
        return True  # the argument schema check refuses deeper values
    if isinstance(value, Mapping):
        return all(_utf8_text(k, depth + 1) and _utf8_text(v, depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return all(_utf8_text(v, depth + 1) for v in value)
    return True
