"""LangGraph + fsm_stage, offline (a fake chat model plays the LLM; no API key).

Plan mode → exit_plan_mode (approved) → goto_stage implement, a *full* switch (the first call
is refused with the handoff template; the model calls again with a handoff document) whose
review waits while the process restarts → edit_file → goto_stage verify (full, approved) →
done, on a JsonlLog. The model decides only from the messages it is sent
(``scripted_llm.next_move``). Reviews are ``interrupt()`` / ``Command(resume=...)``.

The checkpointer is durable (``SqliteSaver``, a file beside the log; the sync ``invoke`` path):
the restarted process resumes the interrupted thread from it with ``Command(resume=True)``.
If the review was answered elsewhere meanwhile (the CLI, another worker), ``waiting()`` says
so and the graph continues from the log instead. Run:
``python examples/langgraph_feature_work.py [LOG]``; it re-executes itself with ``--resume LOG``.
"""

import os
import subprocess
import sys
import tempfile
import uuid
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command
from scripted_llm import FINAL, example_graph, next_move

from fsm_stage.integrations.langgraph import StageHost, stage_graph, waiting
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog


def texts_of(messages: list[BaseMessage]) -> list[tuple[str, str]]:
    """What the model was sent, as ``(kind, text)`` pairs (see ``scripted_llm.next_move``)."""
    kinds = {HumanMessage: "user", AIMessage: "assistant"}
    called = {c["id"]: c["name"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    return [(f"tool:{called.get(m.tool_call_id)}" if isinstance(m, ToolMessage)
             else kinds.get(type(m), "other"), m.text) for m in messages if not isinstance(m, SystemMessage)]


class ScriptedChatModel(FakeMessagesListChatModel):
    """LangChain's fake chat model, answering with ``next_move`` from the messages alone."""

    responses: list[BaseMessage] = []  # noqa: RUF012 - a pydantic field

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        system = "\n".join(m.text for m in messages if isinstance(m, SystemMessage))
        move = next_move(system, texts_of(messages))
        reply = AIMessage(FINAL) if move is None else AIMessage(
            "", tool_calls=[{"name": move[0], "args": move[1], "id": f"call_{uuid.uuid4().hex[:12]}"}])
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def edit_file(path: str, text: str) -> str:
    """Write ``text`` to ``path`` (pretend)."""
    return f"wrote {len(text)} characters to {path}"


def main(log_path: str, resume: bool) -> None:
    header = SessionHeader("feature", cwd=os.path.dirname(log_path))
    checkpoints = log_path + ".sqlite"  # LangGraph's durable checkpointer, beside the log
    with JsonlLog(log_path, header=header) as log, SqliteSaver.from_conn_string(checkpoints) as saver:
        host = StageHost.open(log, graph=example_graph(), guards={"tests_written": True})
        graph = stage_graph(host, ScriptedChatModel(), [edit_file], checkpointer=saver)
        thread = {"configurable": {"thread_id": host.session.id}}
        if not resume:
            assert host.plan is not None
            host.plan.set(host.agent, True)  # start in plan mode
            out = graph.invoke({"session": host.session.id, "prompt": "Add a --greeting flag."}, thread)
        elif os.environ.get("FSM_EXAMPLE_KILL") == "after-approval":
            for _call, review_id, _answered in host.pending_reviews():  # a reviewer elsewhere
                host.answer(review_id, True)
            os._exit(3)  # the kill test: die between the approval and the next step
        else:  # a new process: the durable checkpoint still holds the interrupt
            pending = waiting(host, graph.get_state(thread).interrupts)
            out = graph.invoke(Command(resume=True) if pending else {"session": host.session.id}, thread)
        while pending := waiting(host, out):
            if not resume and pending[0].value["tool"] == "goto_stage":
                print("review pending: restarting the process")
                break
            out = graph.invoke(Command(resume=True), thread)  # a human approves
        print("stage:", host.current_stage())
    if not resume:
        sys.stdout.flush()  # our lines before the restarted process's (stdout may be a pipe)
        sys.exit(subprocess.run([sys.executable, __file__, "--resume", log_path]).returncode)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--resume"]
    main(args[0] if args else os.path.join(tempfile.mkdtemp(), "session.jsonl"), "--resume" in sys.argv)
