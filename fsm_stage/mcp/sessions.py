"""The MCP server's sessions: one handle per session log, fixed when the server starts.

``SessionRegistry(config, logs, cwd=...)`` opens every log the server was given
(``--log LOG`` is the ``default`` session; ``--log NAME=LOG`` adds session ``NAME``). A tool
call names its session with the optional ``session`` argument; a client can never open a log
by path, so a handle is only ever a key of this table (unknown handles are refused). Each
``McpSession`` holds the ``open_session`` host over its log (the stage switch and plan mode
when the graph file configures them; no stage guidance, and every edge guard without an
``--eligibility`` predicate closed); calls to one session are serialised with an ``asyncio.Lock``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from fsm_stage.config import ConfigFile
from fsm_stage.constants import TOOL_CALL, TOOL_RESULT
from fsm_stage.driver import SessionHost, guard_names
from fsm_stage.errors import UserError as UserError
from fsm_stage.handoff import LocalHandoffStore
from fsm_stage.log.events import EventLog, SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.log.memory import MemoryLog
from fsm_stage.mcp.meter import ClientTokenMeter
from fsm_stage.runtime.messages import new_id
from fsm_stage.stage_switch.eligibility import Predicate

__all__ = ["DEFAULT_SESSION", "HANDLE_RE", "McpSession", "SessionRegistry", "UserError",
           "parse_log_option"]

DEFAULT_SESSION = "default"
HANDLE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def parse_log_option(values: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``--log`` values → ``{handle: location}``: ``LOG`` is ``default``, ``NAME=LOG`` is ``NAME``.

    Raises ``UserError`` for a bad handle, a handle given twice, a URL (only JSONL files are
    served) or no log at all.
    """
    out: dict[str, str] = {}
    for raw in values:
        name, sep, location = raw.partition("=")
        if not sep or "/" in name or "\\" in name:
            name, location = DEFAULT_SESSION, raw
        if not HANDLE_RE.match(name):
            raise UserError(f"--log {raw}: session handle {name!r} must match {HANDLE_RE.pattern}")
        if not location:
            raise UserError(f"--log {raw}: no log location after '='")
        if "://" in location:  # it would be taken for a relative path and made as folders
            raise UserError(f"--log {raw}: the MCP server serves JSONL session logs (a file path or "
                            "memory:), not a URL")
        if name in out:
            raise UserError(f"--log: session {name!r} is given twice")
        out[name] = location
    if not out:
        raise UserError("--log: give at least one session log")
    return out


class McpSession:
    """One session served over MCP (see the module docstring)."""

    def __init__(self, handle: str, log: EventLog, config: ConfigFile, cwd: Path, *,
                 guards: Mapping[str, Predicate] | None = None, accept_graph_change: bool = False) -> None:
        self.handle = handle
        self.log = log
        self.config = config
        self.cwd = cwd
        graph = config.graph
        self.meter = ClientTokenMeter()
        # A guard with no --eligibility predicate is closed, explicitly.
        given = dict.fromkeys(guard_names(graph), False) | dict(guards or {}) if graph is not None else None
        self.host = SessionHost.compose(config, log, handoffs=LocalHandoffStore(cwd), token_meter=self.meter,
                                        guidance=False, eligibility=given, repair=False,
                                        accept_graph_change=accept_graph_change, refuse_changed_graph=False)
        self.session, self.runtime, self.agent = self.host.session, self.host.runtime, self.host.agent
        self.stage, self.plan = self.host.stage, self.host.plan
        self.lock = asyncio.Lock()

    def open_call(self, name: str, arguments: str) -> str | None:
        """The id of a logged ``tool/call`` of ``name`` with exactly these ``arguments`` that has
        no ``tool/result`` yet (a call cut short by a server restart mid-review), else None."""
        settled: set[str] = set()
        for ev in reversed(self.session.events):
            data = ev.data if isinstance(ev.data, Mapping) else {}
            if ev.type == TOOL_RESULT:
                source = (data.get("message") or {}).get("source") or {}
                if isinstance(source, Mapping) and isinstance(source.get("callId"), str):
                    settled.add(source["callId"])
            elif ev.type == TOOL_CALL:
                cid = data.get("callId")
                if (isinstance(cid, str) and cid not in settled and data.get("name") == name
                        and data.get("arguments") == arguments):
                    return cid
        return None

    def call_state(self, call_id: str) -> str:
        """``"open"`` (logged, no result), ``"settled"`` (has a ``tool/result``) or ``"absent"``."""
        seen = False
        for ev in self.session.events:
            data = ev.data if isinstance(ev.data, Mapping) else {}
            if ev.type == TOOL_CALL and data.get("callId") == call_id:
                seen = True
            elif ev.type == TOOL_RESULT:
                source = (data.get("message") or {}).get("source") or {}
                if isinstance(source, Mapping) and source.get("callId") == call_id:
                    return "settled"
        return "open" if seen else "absent"

    def close(self) -> None:
        """Close the log (releases a JSONL writer lock)."""
        self.host.close()


def _open(location: str, cwd: Path) -> EventLog:
    if location == "memory:":
        return MemoryLog(header=SessionHeader(id=new_id(), cwd=str(cwd)))
    path = Path(location)
    if path.is_dir():
        raise UserError(f"--log {location}: is a directory, expected a session log file")
    if path.exists():
        return JsonlLog(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return JsonlLog(path, header=SessionHeader(id=new_id(), cwd=str(cwd)))


class SessionRegistry:
    """Every session of one server, by handle; ``get(None)`` is the ``default`` session (the
    first one when no ``default`` was given). ``accept_graph_change``: a log recorded under
    another stage graph goes on under this one (its first stage write records the new graph)
    instead of refusing every transition with ``GraphChangedError``."""

    def __init__(self, config: ConfigFile, logs: Mapping[str, str], *, cwd: Path,
                 guards: Mapping[str, Predicate] | None = None, accept_graph_change: bool = False) -> None:
        self.config = config
        self.cwd = cwd.resolve()
        self._sessions: dict[str, McpSession] = {}
        try:
            for handle, location in logs.items():
                self._sessions[handle] = McpSession(handle, _open(location, self.cwd), config, self.cwd,
                                                    guards=guards, accept_graph_change=accept_graph_change)
        except BaseException:
            self.close()
            raise
        self.default = DEFAULT_SESSION if DEFAULT_SESSION in self._sessions else next(iter(self._sessions))

    @property
    def handles(self) -> tuple[str, ...]:
        """Every handle, in the order given."""
        return tuple(self._sessions)

    def get(self, handle: object) -> McpSession:
        """The session named ``handle`` (None: the default); raises ``UserError``."""
        if handle is None:
            return self._sessions[self.default]
        if not isinstance(handle, str) or handle not in self._sessions:
            known = ", ".join(self._sessions)
            raise UserError(f"unknown session {handle!r}; this server serves: {known}")
        return self._sessions[handle]

    def __iter__(self) -> Iterator[McpSession]:
        return iter(self._sessions.values())

    def close(self) -> None:
        """Close every log."""
        for s in self._sessions.values():
            s.close()
