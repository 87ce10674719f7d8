"""LangGraph + fsm_stage, offline (a fake chat model plays the LLM; no API key).

Plan mode → exit_plan_mode (approved) → goto_stage implement (its review waits while the
process restarts) → edit_file → goto_stage verify (approved) → done, on a JsonlLog. Reviews
are ``interrupt()`` / ``Command(resume=...)``; the graph state is only a session handle, the
checkpointer holds no conversation: after the restart a new graph continues from the log. Run:
``python examples/langgraph_feature_work.py [LOG]``; it re-executes itself with ``--resume LOG``.
"""

import asyncio
import os
import subprocess
import sys
import tempfile
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from fsm_stage.integrations.langgraph import StageHost, stage_graph
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog


def next_move(host: StageHost) -> tuple[str, dict[str, str]] | None:
    """The scripted LLM: what a model would do in each stage (None: the final answer)."""
    if host.plan is not None and host.plan.get(host.agent).active:
        return "exit_plan_mode", {"plan": "# Plan\n1. add --greeting\n2. test it"}
    edited = any(e.type == "tool/call" and e.data["name"] == "edit_file" for e in host.session.events)
    return {"explore": ("goto_stage", {"stage": "implement"}),
            "implement": ("goto_stage", {"stage": "verify"}) if edited
            else ("edit_file", {"path": "cli.py", "text": "--greeting"})}.get(host.current_stage() or "")


class ScriptedChatModel(FakeMessagesListChatModel):
    """LangChain's fake chat model, answering with ``next_move``."""

    host: Any = None
    responses: list[BaseMessage] = []  # noqa: RUF012 - a pydantic field

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        move, n = next_move(self.host), len(self.host.session.events)
        reply = AIMessage("Verified: the tests pass.") if move is None else AIMessage(
            "", tool_calls=[{"name": move[0], "args": move[1], "id": f"call_{n}"}])
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def edit_file(path: str, text: str) -> str:
    """Write ``text`` to ``path`` (pretend)."""
    return f"wrote {len(text)} characters to {path}"


async def main(log_path: str, resume: bool) -> None:
    with JsonlLog(log_path, header=SessionHeader("feature", cwd=os.path.dirname(log_path))) as log:
        host = StageHost.open(log, guards={"tests_written": True})
        graph = stage_graph(host, ScriptedChatModel(host=host), [edit_file], checkpointer=InMemorySaver())
        thread = {"configurable": {"thread_id": host.session.id}}
        if not resume:
            assert host.plan is not None
            host.plan.set(host.agent, True)  # start in plan mode
            start = {"session": host.session.id, "prompt": "Add a --greeting flag."}
            out = await graph.ainvoke(start, thread)
        else:  # a new process: answer what the log says waits, then continue from the log
            for _call, review_id, _answered in host.pending_reviews():
                host.answer(review_id, True)
            if os.environ.get("FSM_EXAMPLE_KILL") == "after-approval":
                os._exit(3)  # the kill test: die between the approval and the next step
            out = await graph.ainvoke({"session": host.session.id}, thread)
        while "__interrupt__" in out:
            if not resume and out["__interrupt__"][0].value["tool"] == "goto_stage":
                print("review pending: restarting the process")
                break
            out = await graph.ainvoke(Command(resume=True), thread)  # a human approves
        print("stage:", host.current_stage())
    if not resume:
        sys.exit(subprocess.run([sys.executable, __file__, "--resume", log_path]).returncode)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--resume"]
    asyncio.run(main(args[0] if args else os.path.join(tempfile.mkdtemp(), "session.jsonl"),
                     "--resume" in sys.argv))
