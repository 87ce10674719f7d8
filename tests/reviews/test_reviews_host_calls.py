"""A host tool reviewed through ``StagedSession.authorize`` (an ``ask`` rule on a tool the host
runs itself): its ``tool/call`` is logged with the review request, so the review outlives the
worker; ``authorize`` of the same call in a new process reads the logged answer, exactly once."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from tool_rig import GRAPH

from fsm_stage import ToolCall, open_session
from fsm_stage.config import load_config_text
from fsm_stage.constants import REQUEST_HEADER
from fsm_stage.errors import DriverStateError, ReviewPending, TurnSuspendedError
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.reviews import (
    ReviewChannel,
    ScriptedReviewChannel,
    SuspendingReviewChannel,
    answer_review,
    review_state,
)
from fsm_stage.runtime import user_message

CALL = ToolCall("h1", "apply_patch", '{"p": "one"}')
READ = ToolCall("h2", "read_file", '{"path": "a.md"}')  # a tool the stage allows outright


def _open(path: Path, review: ReviewChannel | None = None) -> Any:
    """A worker over the JSONL log at ``path`` (created when missing), with crash repair. The
    session id is the test's own: a live driver of this process holding another test's session
    of the same id would make crash repair leave the turn alone (``is_turn_live``)."""
    log = JsonlLog(path, header=SessionHeader(f"s-{path.parent.name}", cwd=str(path.parent)))
    return open_session(load_config_text(GRAPH), log, review=review or SuspendingReviewChannel(),
                        plan_mode=False)


def _reply(host: Any, *calls: ToolCall) -> None:
    host.agent.steer(user_message("patch it"))
    host.driver.start_turn()
    host.driver.begin_step()
    host.driver.record_reply("", list(calls or (CALL,)))


_WORKER = """
import asyncio, sys
sys.path.insert(0, {tests!r})
from test_reviews_host_calls import CALL, _open, _reply
from fsm_stage.errors import ReviewPending
host = _open(__import__("pathlib").Path({path!r}))
if {reply!r}:
    _reply(host)
try:
    asyncio.run(host.driver.authorize(CALL))
except ReviewPending as pending:
    print(pending.review_id)
else:
    print("ran")
"""


def _worker(path: Path, *, reply: bool = True) -> str:
    """A worker process over ``path``: the model calls apply_patch (``reply``) and the worker
    authorizes it; returns the review id the call waits for, or ``ran`` when authorized. The
    process then exits without recording a result, as a crashed worker would."""
    script = _WORKER.format(tests=str(Path(__file__).parent), path=str(path), reply=reply)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         check=True)
    return out.stdout.strip()


def _suspend(path: Path) -> str:
    """Worker one: the model calls apply_patch, its review suspends; the worker exits."""
    review_id = _worker(path)
    assert review_id.startswith("rv_"), review_id
    return review_id


def _types(host: Any) -> list[str]:
    return [e.type for e in host.session.events if e.type != REQUEST_HEADER]


def _of_call(host: Any, event_type: str, call_id: str = "h1") -> list[Any]:
    out = []
    for e in host.session.events:
        data = e.data if isinstance(e.data, dict) else {}
        source = (data.get("message") or {}).get("source") or {}
        if e.type == event_type and (data.get("callId") == call_id or source.get("callId") == call_id):
            out.append(e)
    return out


def test_the_call_is_logged_with_its_review_request_and_stays_suspended_after_a_restart(
        tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    rid = _suspend(path)
    host = _open(path)  # worker two: crash repair leaves the suspended turn open
    assert host.session.is_turn_open
    calls = _of_call(host, "tool/call")
    assert len(calls) == 1 and [e.type for e in host.session.events[calls[0].seq + 1:calls[0].seq + 3]] == [
        "fsm/graph", "fsm/review/request"]  # one batch; the first review records the graph
    suspended = host.driver.suspended()
    assert suspended is not None and [(c.call.id, c.review_id) for c in suspended.calls] == [("h1", rid)]
    assert [r.id for r in review_state(host.session).open] == [rid]


def test_an_approval_given_elsewhere_lets_the_new_worker_run_the_call_once(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    rid = _suspend(path)
    host = _open(path)
    answer_review(host.session, rid, "approve", by="alice")
    assert asyncio.run(host.driver.authorize(CALL)) is None
    host.driver.record_tool_result(CALL, "patched")
    assert len(_of_call(host, "tool/call")) == 1
    results = _of_call(host, "tool/result")
    assert len(results) == 1 and results[0].source_event_seqs == (_of_call(host, "tool/call")[0].seq,)
    red = review_state(host.session).redeemed[rid]
    assert red.applied is True
    assert _types(host).count("fsm/review/redeemed") == 1
    with pytest.raises(DriverStateError, match="already ran"):
        asyncio.run(host.driver.authorize(CALL))
    assert host.driver.end_step() is True


def test_a_refusal_given_elsewhere_is_the_calls_result(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    rid = _suspend(path)
    host = _open(path)
    answer_review(host.session, rid, "keep", feedback="not on main")
    refused = asyncio.run(host.driver.authorize(CALL))
    assert refused is not None and refused.text == (
        'Error: Tool "apply_patch" runs in stage "explore" only once a human approves the call, and this '
        "call was not approved (rule: ask: apply_patch: the reviewer did not approve (not on main)); "
        "nothing ran.")  # a human's no is not a pointer to another stage
    results = _of_call(host, "tool/result")
    assert len(results) == 1 and len(_of_call(host, "tool/call")) == 1
    assert len(_of_call(host, "fsm/tool/refused")) == 1  # as a refusal given in process
    assert review_state(host.session).answered[rid].outcome == "keep"
    assert all(not r.applied for r in review_state(host.session).redeemed.values())
    host.driver.end_step()


def test_an_unanswered_review_suspends_the_new_worker_again_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    rid = _suspend(path)
    host = _open(path)
    before = len(host.session)
    with pytest.raises(ReviewPending) as again:
        asyncio.run(host.driver.authorize(CALL))
    assert again.value.review_id == rid and len(host.session) == before
    with pytest.raises(ReviewPending):
        asyncio.run(host.driver.resume())
    assert len(host.session) == before


def test_resume_leaves_an_approved_host_call_to_the_host(tmp_path: Path) -> None:
    """The runtime cannot run the host's tool: ``resume`` neither redeems the approval nor
    writes a result for it, and ``authorize`` then lets the host run it."""
    path = tmp_path / "s.jsonl"
    rid = _suspend(path)
    host = _open(path)
    answer_review(host.session, rid, "approve")
    before = len(host.session)
    assert asyncio.run(host.driver.resume()) == [] and len(host.session) == before
    with pytest.raises(TurnSuspendedError, match=r"h1 has its review answered: .* authorize\(call\), run it"):
        host.driver.end_step()  # the message says what the host does next (not "awaits an answer")
    assert asyncio.run(host.driver.authorize(CALL)) is None
    assert review_state(host.session).redeemed[rid].applied is True


def test_an_approval_used_by_a_worker_that_died_before_the_result_is_outcome_unknown(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    rid = _suspend(path)
    answer_review(_open(path).session, rid, "approve")
    assert _worker(path, reply=False) == "ran"  # authorized: the tool may have run, no result
    again = _open(path)
    refused = asyncio.run(again.driver.authorize(CALL))
    assert refused is not None and refused.is_error
    result = _of_call(again, "tool/result")
    assert len(result) == 1 and result[0].data["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    assert _types(again).count("fsm/review/redeemed") == 1


def test_an_in_process_approval_writes_the_call_with_the_request_and_the_result_alone(tmp_path: Path) -> None:
    host = _open(tmp_path / "s.jsonl", ScriptedReviewChannel().approve())
    _reply(host)
    assert asyncio.run(host.driver.authorize(CALL)) is None
    host.driver.record_tool_result(CALL, "patched")
    assert _types(host)[-7:] == ["assistant/message", "tool/call", "fsm/graph", "fsm/review/request",
                                 "fsm/review/answer", "fsm/review/redeemed", "tool/result"]


def test_an_in_process_denial_logs_the_call_once(tmp_path: Path) -> None:
    host = _open(tmp_path / "s.jsonl", ScriptedReviewChannel().keep("no"))
    _reply(host)
    refused = asyncio.run(host.driver.authorize(CALL))
    assert refused is not None and refused.is_error
    assert len(_of_call(host, "tool/call")) == 1 and len(_of_call(host, "tool/result")) == 1
    assert len(_of_call(host, "fsm/tool/refused")) == 1
    host.driver.end_step()


def test_a_result_recorded_while_the_review_waits_closes_the_review(tmp_path: Path) -> None:
    """The host gives up on the call (records an error without running it): its review is
    closed with it, so the inbox does not list it and it blocks no later tool review."""
    path = tmp_path / "s.jsonl"
    rid = _suspend(path)
    host = _open(path)
    host.driver.record_tool_result(CALL, "Error: not run", is_error=True)
    assert _types(host)[-2:] == ["tool/result", "fsm/review/redeemed"]  # one batch: never half
    state = review_state(host.session)
    assert state.open == () and state.redeemed[rid].reason == "call-closed"
    assert len(_of_call(host, "tool/call")) == 1
    host.driver.end_step()


def test_a_call_id_reused_in_a_later_turn_is_reviewed_anew(tmp_path: Path) -> None:
    """``authorize`` answers None again for a call it let run until its result is recorded; a
    later turn's call with the same id (some providers number calls per reply) is a new call,
    judged by its own review."""
    host = _open(tmp_path / "s.jsonl", ScriptedReviewChannel().approve().keep("no"))
    _reply(host)
    assert asyncio.run(host.driver.authorize(CALL)) is None
    asyncio.run(host.driver.cancel())  # the host stops before running or recording it
    _reply(host)
    refused = asyncio.run(host.driver.authorize(CALL))
    assert refused is not None and refused.is_error and "(no)" in refused.text


def test_the_documented_settling_of_an_approved_host_call_runs(tmp_path: Path) -> None:
    """docs/step-driver.md's snippet for a call of the host's own tools, after its approval."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "step-driver.md").read_text(encoding="utf-8")
    snippet = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "SuspendedCall: .call" in b)
    path = tmp_path / "s.jsonl"
    rid = _suspend(path)
    host = _open(path)
    answer_review(host.session, rid, "approve")
    ran: list[str] = []

    def run_my_tool(call: ToolCall) -> str:
        ran.append(call.id)
        return "patched"

    namespace: dict[str, Any] = {}
    exec("async def settle(host, driver, run_my_tool):\n" + textwrap.indent(snippet, "    "), namespace)
    asyncio.run(namespace["settle"](host, host.driver, run_my_tool))
    assert ran == ["h1"] and host.driver.suspended() is None and host.driver.end_step() is True


def test_a_call_authorized_once_is_never_let_run_again(tmp_path: Path) -> None:
    """The host's run of an approved call was cancelled before its result (a timeout, a task
    cancel); asking again in the same process gets TOOL_OUTCOME_UNKNOWN, not a second run."""
    path = tmp_path / "s.jsonl"
    rid = _suspend(path)
    host = _open(path)
    answer_review(host.session, rid, "approve")
    assert asyncio.run(host.driver.authorize(CALL)) is None  # the run starts, then is cancelled
    again = asyncio.run(host.driver.authorize(CALL))
    assert again is not None and again.is_error
    assert _of_call(host, "tool/result")[0].data["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"


def test_an_allowed_call_is_logged_before_it_runs(tmp_path: Path) -> None:
    """A call the policy lets run outright is logged when authorized: a crash mid-run is closed
    as outcome unknown (never as not started, never run again), also beside a suspended call."""
    script = """
import asyncio, sys
sys.path.insert(0, {tests!r})
from test_reviews_host_calls import CALL, READ, _open, _reply
from fsm_stage.errors import ReviewPending
host = _open(__import__("pathlib").Path({path!r}))
_reply(host, CALL, READ)
try:
    asyncio.run(host.driver.authorize(CALL))
except ReviewPending:
    pass
assert asyncio.run(host.driver.authorize(READ)) is None  # the host starts it, then dies
"""
    script = script.format(tests=str(Path(__file__).parent), path=str(tmp_path / "s.jsonl"))
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    read = READ
    again = _open(tmp_path / "s.jsonl")  # crash repair: h2 may have run; h1 still waits
    assert [r.data["error"]["code"] for r in _of_call(again, "tool/result", "h2")] == ["TOOL_OUTCOME_UNKNOWN"]
    with pytest.raises(DriverStateError, match="already ran"):
        asyncio.run(again.driver.authorize(read))
    suspended = again.driver.suspended()
    assert suspended is not None and [c.call.id for c in suspended.calls] == ["h1"]


def test_a_suspended_call_the_policy_now_refuses_closes_its_review(tmp_path: Path) -> None:
    """Reopened under a graph that no longer allows the tool: the call's refusal is its result,
    logged with fsm/tool/refused and, in the same batch, its review closed (call-closed)."""
    path = tmp_path / "s.jsonl"
    rid = _suspend(path)
    strict = GRAPH.replace("ask: [apply_patch]", "allow: [read_file]")
    host = open_session(load_config_text(strict), JsonlLog(path), review=SuspendingReviewChannel(),
                        plan_mode=False, accept_graph_change=True)
    refused = asyncio.run(host.driver.authorize(CALL))
    assert refused is not None and "not allowed" in refused.text
    types = _types(host)
    assert types[-3:] == ["tool/result", "fsm/tool/refused", "fsm/review/redeemed"]
    state = review_state(host.session)
    assert state.open == () and state.redeemed[rid].reason == "call-closed"


def test_a_runtime_tools_suspended_call_is_not_the_hosts_to_record(tmp_path: Path) -> None:
    """goto_stage waiting for its review is settled by resume, not by record_tool_result
    (which would drop the stage review)."""
    from two_stages import two_stages

    host = open_session(load_config_text(two_stages()), JsonlLog(
        tmp_path / "s.jsonl", header=SessionHeader("s", cwd=str(tmp_path))), review=SuspendingReviewChannel())
    goto = ToolCall("g1", "goto_stage", '{"stage": "implement", "handoff": "## Next\\n- x"}')
    _reply(host, goto)
    with pytest.raises(ReviewPending):
        asyncio.run(host.driver.run_tool(goto))
    with pytest.raises(DriverStateError, match="already ran"):
        host.driver.record_tool_result(goto, "done")
    with pytest.raises(DriverStateError, match="already ran"):
        asyncio.run(host.driver.authorize(goto))


def test_a_suspended_call_the_policy_now_allows_is_let_run_once(tmp_path: Path) -> None:
    """Plan mode's ask rule suspended the call; the user turned plan mode off: the call runs by
    the policy now in force, its review is closed, and asking again is TOOL_OUTCOME_UNKNOWN."""
    graph = GRAPH.replace("    tools:\n      ask: [apply_patch]\n", "")
    assert "ask: [apply_patch]" in graph  # plan mode's rule only
    log = JsonlLog(tmp_path / "s.jsonl", header=SessionHeader("s", cwd=str(tmp_path)))
    host = open_session(load_config_text(graph), log, review=SuspendingReviewChannel())
    assert host.plan is not None
    host.plan.set(host.agent, True)
    _reply(host)
    with pytest.raises(ReviewPending):
        asyncio.run(host.driver.authorize(CALL))
    asyncio.run(host.runtime.run_command(host.agent, "/plan off"))
    assert asyncio.run(host.driver.authorize(CALL)) is None
    assert review_state(host.session).open == ()
    again = asyncio.run(host.driver.authorize(CALL))
    assert again is not None
    assert _of_call(host, "tool/result")[0].data["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"


class _SlowGate:
    """A tool gate that takes a while to allow a call (an external policy service)."""

    async def call(self, runtime: Any, agent: Any, call: Any, **kw: Any) -> None:
        return None

    async def authorize(self, runtime: Any, agent: Any, call: Any, **kw: Any) -> None:
        await asyncio.sleep(0.02)


def test_two_writers_authorizing_one_allowed_call_let_it_run_once(tmp_path: Path) -> None:
    from fsm_stage.log.events import MemoryLog

    log = MemoryLog(SessionHeader("s", cwd=str(tmp_path)))
    a = open_session(load_config_text(GRAPH), log, review=SuspendingReviewChannel(), plan_mode=False)
    _reply(a, READ)
    b = open_session(load_config_text(GRAPH), log, review=SuspendingReviewChannel(), plan_mode=False,
                     repair=False)
    for host in (a, b):
        host.runtime.add_tool_gate(_SlowGate())

    async def both() -> list[Any]:
        return await asyncio.gather(a.driver.authorize(READ), b.driver.authorize(READ),
                                    return_exceptions=True)

    verdicts = asyncio.run(both())
    assert verdicts.count(None) == 1 and len(_of_call(a, "tool/call", "h2")) == 1
    (refused,) = [v for v in verdicts if v is not None]
    assert isinstance(refused, DriverStateError) and "not run twice" in str(refused)


def test_a_runtime_tool_running_in_another_writer_is_not_the_hosts(tmp_path: Path) -> None:
    """A call run_tool logged (running elsewhere) is refused to authorize / record_tool_result."""
    from fsm_stage import ToolOutput, ToolSpec
    from fsm_stage.log.events import MemoryLog

    started = asyncio.Event()

    class Build:
        spec = ToolSpec("build", "Build.", {"type": "object"})

        async def execute(self, args: Any, agent: Any, signal: Any = None) -> ToolOutput:
            started.set()
            await asyncio.sleep(0.02)
            return ToolOutput(None, "built")

    log = MemoryLog(SessionHeader("s", cwd=str(tmp_path)))
    a = open_session(load_config_text(GRAPH), log, plan_mode=False)
    call = ToolCall("r1", "build", "{}")
    _reply(a, call)
    b = open_session(load_config_text(GRAPH), log, plan_mode=False, repair=False)
    for host in (a, b):
        host.runtime.add_tool(Build())

    async def scenario() -> None:
        running = asyncio.create_task(a.driver.run_tool(call))
        await started.wait()
        with pytest.raises(DriverStateError, match="already ran"):
            b.driver.record_tool_result(call, "host says done")
        with pytest.raises(DriverStateError, match="already ran"):
            await b.driver.authorize(call)
        await running

    asyncio.run(scenario())
    assert len(_of_call(a, "tool/result", "r1")) == 1


def test_two_writers_letting_a_suspended_call_run_by_a_relaxed_policy_run_it_once(tmp_path: Path) -> None:
    from fsm_stage.log.events import MemoryLog

    log = MemoryLog(SessionHeader("s", cwd=str(tmp_path)))
    first = open_session(load_config_text(GRAPH), log, review=SuspendingReviewChannel(), plan_mode=False)
    _reply(first)
    with pytest.raises(ReviewPending):
        asyncio.run(first.driver.authorize(CALL))
    relaxed = load_config_text(GRAPH.replace("ask: [apply_patch]", "allow: [apply_patch]"))
    workers = [open_session(relaxed, log, review=SuspendingReviewChannel(), plan_mode=False,
                            accept_graph_change=True, repair=False) for _ in range(2)]
    for host in workers:
        host.runtime.add_tool_gate(_SlowGate())

    async def both() -> list[Any]:
        return await asyncio.gather(*(w.driver.authorize(CALL) for w in workers), return_exceptions=True)

    verdicts = asyncio.run(both())
    assert verdicts.count(None) == 1
    assert any(isinstance(v, DriverStateError) and "not run twice" in str(v) for v in verdicts)
