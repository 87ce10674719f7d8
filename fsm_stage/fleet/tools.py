"""Host tools in a fleet: at-least-once, and honest about it.

A ``HostTool`` runs through the runtime's tool dispatch, which logs ``tool/call`` (the dispatch
record) before the function runs and ``tool/result`` after. A worker that dies in between
leaves the call dispatched without result, and crash repair closes it as
``TOOL_OUTCOME_UNKNOWN`` ("the outcome is unknown"), never as "did not run". Each call offers
the function an idempotency key, ``idempotency_key(session id, call id)``, stable across
retries of that call, so a side effect (an e-mail, a payment) can be deduplicated downstream.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from fsm_stage.errors import ToolFailure
from fsm_stage.runtime import AbortSignal, ToolOutput, ToolSpec, current_tool_call

__all__ = ["HostFn", "HostTool", "host_tool", "idempotency_key"]

HostFn = Callable[[Mapping[str, Any], str], "Awaitable[Any] | Any"]
"""A host tool function: ``fn(args, key)`` → the result (its ``str`` is what the model reads);
raise ``ToolFailure(message)`` to fail the call."""


def idempotency_key(session_id: str, call_id: str) -> str:
    """The idempotency key of one tool call: ``"<session id>/<call id>"``."""
    return f"{session_id}/{call_id}"


class HostTool:
    """A ``Tool`` running ``fn(args, key)`` (``HostFn``); ``parameters`` is the JSON Schema of
    the arguments (default: any object)."""

    def __init__(self, name: str, fn: HostFn, *, description: str = "",
                 parameters: Mapping[str, Any] | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError("HostTool(name, fn): name must be a non-empty str")
        if not callable(fn):
            raise TypeError(f"HostTool({name!r}, fn): fn must be callable")
        self.fn = fn
        self._spec = ToolSpec(name, description or name,
                              dict(parameters) if parameters is not None else {"type": "object"})

    @property
    def spec(self) -> ToolSpec:
        """The tool's spec."""
        return self._spec

    async def execute(self, args: Mapping[str, Any], agent: Any,
                      signal: AbortSignal | None = None) -> ToolOutput:
        """Run the function with the call's idempotency key."""
        call = current_tool_call()
        if call is None or agent is None:
            raise ToolFailure(f"{self._spec.name}: a host tool runs only inside a logged tool call")
        key = idempotency_key(agent.session.id, call.id)
        value = self.fn(args, key)
        if inspect.isawaitable(value):
            value = await value
        return ToolOutput(value, value if isinstance(value, str) else str(value))


def host_tool(name: str | None = None, *, description: str = "",
              parameters: Mapping[str, Any] | None = None) -> Callable[[HostFn], HostTool]:
    """Decorator: ``@host_tool()`` turns ``fn(args, key)`` into a ``HostTool`` named
    ``name`` (default: the function's name)."""

    def wrap(fn: HostFn) -> HostTool:
        return HostTool(name or str(getattr(fn, "__name__", "tool")), fn, description=description or
                        (inspect.getdoc(fn) or ""), parameters=parameters)

    return wrap
