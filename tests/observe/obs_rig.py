"""Shared pieces of the observability tests (a plain module, also run as a script).

``exporter()`` installs one SDK ``TracerProvider`` with an in-memory exporter for the whole
test process (OpenTelemetry allows one global provider) and returns the exporter, cleared.
``run_pydantic(host)`` drives the adapters' scripted agent over pydantic-ai's ``FunctionModel``
until it answers, approving every review. As a script, ``python obs_rig.py start|resume LOG
CWD`` runs the first half (until the first review suspends the run) or the rest of that session
over a JSONL log, each in its own process.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve()
HERE = SCRIPT.parent
sys.path.insert(0, str(HERE.parent / "integrations"))

from adapter_rig import edit_file_result, next_move  # noqa: E402

_EXPORTER: list[Any] = []


def exporter() -> Any:
    """The process-wide in-memory span exporter (installed on first use), cleared."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    if not _EXPORTER:
        exp = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exp))
        trace.set_tracer_provider(provider)
        _EXPORTER.append(exp)
    exp = _EXPORTER[0]
    exp.clear()
    return exp


def build(host: Any, *, instrument: bool = False) -> tuple[Any, Any]:
    """A pydantic-ai agent with ``StageCapability(host)`` whose model follows ``next_move``;
    ``instrument``: pydantic-ai's own OpenTelemetry instrumentation (``InstrumentationSettings``)."""
    from pydantic_ai import Agent, DeferredToolRequests
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from fsm_stage.integrations.pydantic_ai import StageCapability

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        move = next_move(host)
        if move is None:
            return ModelResponse(parts=[TextPart("Verified.")])
        call_id = f"call_{len(host.session.events)}"
        return ModelResponse(parts=[ToolCallPart(move[0], json.dumps(move[1]), call_id)])

    capability = StageCapability(host)
    agent: Any = Agent(FunctionModel(model), capabilities=[capability],
                       output_type=[str, DeferredToolRequests])
    if instrument:
        from pydantic_ai.models.instrumented import InstrumentationSettings

        agent.instrument = InstrumentationSettings()

    @agent.tool_plain
    def edit_file(path: str, text: str) -> str:
        """Write a file."""
        return edit_file_result(path, text)

    return agent, capability


def run_pydantic(host: Any, *, instrument: bool = False) -> str:
    """Run the scripted agent to its answer, approving each review (``cap.results``)."""
    from pydantic_ai import DeferredToolRequests

    agent, cap = build(host, instrument=instrument)
    out = agent.run_sync("Add a --greeting flag.").output
    while isinstance(out, DeferredToolRequests):
        out = agent.run_sync(message_history=cap.message_history(),
                             deferred_tool_results=cap.results(out)).output
    assert isinstance(out, str)
    return out


def open_host(log: Path, cwd: Path) -> Any:
    """A ``StageHost`` over the JSONL ``log`` (created in plan mode when new)."""
    from fsm_stage.integrations._host import StageHost
    from fsm_stage.log.events import SessionHeader
    from fsm_stage.log.jsonl import JsonlLog

    new = not log.exists()
    host = StageHost.open(JsonlLog(log, header=SessionHeader("obs-session", cwd=str(cwd))),
                          guards={"tests_written": True})
    if new:
        assert host.plan is not None
        host.plan.set(host.agent, True)
    return host


def main(mode: str, log: Path, cwd: Path) -> None:
    from pydantic_ai import DeferredToolRequests, DeferredToolResults

    host = open_host(log, cwd)
    agent, cap = build(host)
    if mode == "start":  # run until the first review suspends; the process then exits
        out = agent.run_sync("Add a --greeting flag.").output
        assert isinstance(out, DeferredToolRequests)
        print(json.dumps({"suspended": [p.tool_call_id for p in out.approvals]}))
        return
    pending = cap.pending()  # answered meanwhile by another process (fsm-stage review --approve)
    assert pending is not None
    out = agent.run_sync(message_history=cap.message_history(),
                         deferred_tool_results=DeferredToolResults(approvals={p.tool_call_id: True
                                                                              for p in pending.approvals}))
    out = out.output
    while isinstance(out, DeferredToolRequests):
        out = agent.run_sync(message_history=cap.message_history(),
                             deferred_tool_results=cap.results(out)).output
    print(json.dumps({"output": out, "stage": host.current_stage()}))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
