"""The step driver's request header: logged once per change (decided on a digest, not a kept
copy), and identical tool lists / system texts are one shared object across sessions."""

from __future__ import annotations

import json

from runtime_helpers import Echo, new_agent

from fsm_stage.driver import StagedSession
from fsm_stage.runtime.assembly import SystemSection
from fsm_stage.runtime.runtime import Runtime


def _headers(driver: StagedSession) -> list[dict]:  # type: ignore[type-arg]
    return [e.data for e in driver.session.events if e.type == "request/header"]


def test_identical_headers_are_shared_and_a_change_is_logged_once() -> None:
    text = {"system": "You are staged."}
    rt = Runtime()
    rt.add_tool(Echo())
    rt.add_section(SystemSection("intro", 10, lambda a: text["system"]))
    a = StagedSession(rt, new_agent("h-a"), config={"provider": "p", "model": "m"})
    b = StagedSession(rt, new_agent("h-b"), config={"provider": "p", "model": "m"})
    for d in (a, b):
        d.start_turn()
        d.begin_step()
    (ha,), (hb,) = _headers(a), _headers(b)
    assert ha == hb and ha["reason"] == "initial"
    assert ha["header"]["tools"] is hb["header"]["tools"] and ha["header"]["system"] is hb["header"]["system"]
    assert [t["name"] for t in ha["header"]["tools"]] == ["echo"]
    a.record_reply("x")
    a.end_step()
    assert a.begin_step() is not None and len(_headers(a)) == 1  # unchanged: not logged again
    a.record_reply("y")
    a.end_step()
    text["system"] = "Now in another stage."
    request = a.begin_step()
    assert request is not None and request.header_reason == "change"
    assert [h["reason"] for h in _headers(a)] == ["initial", "change"]
    assert _headers(a)[1]["header"]["system"] == "Now in another stage."
    # the logged data is plain JSON, equal to a round trip of what was sent
    assert json.loads(json.dumps(_headers(a)[1])) == _headers(a)[1]


def test_a_second_driver_on_the_session_makes_the_first_log_its_header_again() -> None:
    """Two drivers on one session, with different headers, take turns: each request's header is
    the log's last one (a driver kept only its own last digest and skipped its unchanged header
    after the other had logged another: the log then said the model saw the other's)."""
    rt = Runtime()
    rt.add_tool(Echo())
    agent = new_agent("two-drivers")
    a = StagedSession(rt, agent, config={"provider": "p", "model": "m1"})
    b = StagedSession(rt, agent, config={"provider": "p", "model": "m2"})
    for d in (a, b, a, a):
        d.start_turn()
        assert d.begin_step() is not None
        d.record_reply("ok")
        d.end_step()
        d.end_turn()
    logged = [(h["reason"], h["header"]["config"]["model"]) for h in _headers(a)]
    assert logged == [("initial", "m1"), ("resume", "m2"), ("change", "m1")]


def test_drivers_with_one_header_taking_turns_log_it_once() -> None:
    """Another driver's header equal to this one's is the log's last header: not logged again."""
    rt = Runtime()
    rt.add_tool(Echo())
    agent = new_agent("same-header")
    models = ("m1", "m1", "m2", "m1")
    drivers = [StagedSession(rt, agent, config={"provider": "p", "model": m}) for m in models]
    for d in (*drivers, drivers[0], drivers[1]):
        d.start_turn()
        assert d.begin_step() is not None
        d.record_reply("ok")
        d.end_step()
        d.end_turn()
    logged = [(h["reason"], h["header"]["config"]["model"]) for h in _headers(drivers[0])]
    # d0 initial m1; d1 resumes (a new driver always says so); d2 m2; d3 m1 resumes; d0 and d1:
    # the log's last header is d3's m1, equal to theirs
    assert logged == [("initial", "m1"), ("resume", "m1"), ("resume", "m2"), ("resume", "m1")]


def test_host_tools_are_logged_after_the_runtimes_and_a_change_is_a_new_header() -> None:
    """``begin_step(host_tools=)``: the log's header lists every tool the model saw, the host's
    after the runtime's (one named like a runtime tool stays the runtime's), the request keeps
    the runtime's; an unchanged list logs nothing, another list a ``change``; a non-ToolSpec is
    a one-line ``RecordShapeError`` and opens no step."""
    import pytest

    from fsm_stage.errors import RecordShapeError
    from fsm_stage.runtime.tools import ToolSpec

    rt = Runtime()
    rt.add_tool(Echo())
    d = StagedSession(rt, new_agent("h-host"), config={"provider": "p", "model": "m"})
    d.start_turn()
    shell = ToolSpec("shell", "Run a command.", {"type": "object", "properties": {"cmd": {"type": "string"}}})
    shadow = ToolSpec("echo", "not the runtime's", {"type": "object"})
    request = d.begin_step(host_tools=[shell, shadow])
    assert request is not None and [t.name for t in request.tools] == ["echo"]
    (first,) = _headers(d)
    assert [t["name"] for t in first["header"]["tools"]] == ["echo", "shell"]
    assert first["header"]["tools"][1] == shell.to_json()
    d.record_reply("x")
    d.end_step()
    assert d.begin_step(host_tools=[shell]) is not None and len(_headers(d)) == 1  # unchanged
    d.record_reply("y")
    d.end_step()
    with pytest.raises(RecordShapeError, match="host_tools must be ToolSpecs"):
        d.begin_step(host_tools=[{"name": "shell"}])  # type: ignore[list-item]
    assert d.view() is not None and d.view().open_step is None  # type: ignore[union-attr]
    assert d.begin_step() is not None
    assert [h["reason"] for h in _headers(d)] == ["initial", "change"]
    assert [t["name"] for t in _headers(d)[1]["header"]["tools"]] == ["echo"]
