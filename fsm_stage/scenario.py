"""Scenario files: a scripted session that ``fsm-stage simulate`` runs through the reference loop.

A scenario is YAML (documented in the README, "Simulate"): the stage graph to use, the
session settings and an ordered list of steps. Example::

    graph: ../feature-work.yaml          # relative to this file
    session: {id: demo, subagent: false} # cwd: omitted = a fresh temporary directory;
                                         # "" = this file's folder
    system: You are a coding agent.      # optional host system section ("host", order 0),
                                         # or a list of {name, order, text}
    eligible: {ready: false}             # initial values of named eligibility predicates
    steps:
      - user: Add a --greeting flag to the CLI.
      - model:
          text: I will read the code first.
          calls:
            - {tool: goto_stage, args: {stage: implement}, review: approve}
      - eligible: {ready: true}
      - command: /plan Draft the change first
      - end_turn: aborted
      - expect:
          stage: implement
          plan_mode: false
          pending_stage: null             # null = nothing pending; omit a key to skip it
          handoff_exists: [implement]
          next_request:
            contains: ["Current stage: implement"]
            not_contains: ["Current stage: explore"]
            prefix: {system: kept, tools: kept, messages: kept}
            stage: implement              # the stage / plan mode the next request is sent in
            plan_mode: false

Step kinds (each step is a one-key mapping):

``user: TEXT``                 a user prompt (steered; wakes an idle agent, starting a turn)
``command: /NAME ARGS``        a slash command typed by the user (``/plan``, ``/stage implement``)
``model: TEXT | {text, calls}`` one model response; each call is ``{tool, args, review, result,
                               error, id}``; ``review`` (only on ``exit_plan_mode`` / ``goto_stage``)
                               is ``approve`` | ``keep`` | ``dismiss`` | ``abort`` |
                               ``{feedback: TEXT}``; ``result`` answers a tool the graph does not
                               provide with that text, ``error: true`` makes it a failure;
                               call ids are unique
``eligible: {NAME: BOOL}``     flip named eligibility predicates
``end_turn: completed|aborted`` end the open turn here (``aborted``: the user stops it)
``expect: {...}``              checks (see ``Expect``); a failure makes ``simulate`` exit 1

Text that cannot be encoded as UTF-8 (a lone surrogate, YAML ``"\\ud800"``) is refused anywhere in
the file: it could never be sent to a model or logged.

Errors: ``load_scenario`` raises ``ScenarioError`` (a ``ConfigError``) listing every problem as
one line ``PATH:LINE:COLUMN: KEY: what is wrong``; nothing is run for a bad file. The file goes
through the stage-graph loader's machinery (``ProblemReport``, ``positioned_problems``,
``strict_converter``), so YAML syntax errors, duplicate keys, tags, wrong types and unknown keys
are worded and positioned as in a graph file: at the wrong value, or at the key for an unknown
key or step kind; the CLI prints the lines bare, like ``validate``. Data the
simulator would silently ignore is a problem too (a ``review`` on a tool that never asks one,
``result`` on ``goto_stage``, duplicate call ids, duplicate / blank / ``plan:policy`` system
sections). Names are checked against the graph by ``fsm_stage.simulate.prepare``.

Replay: ``replay_events`` (``fsm-stage scenario LOG``) turns a recorded session into steps with
the recorded stage / plan mode of every request as ``expect: {next_request: …}`` blocks.
"""

from __future__ import annotations

import enum
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias, get_args, get_origin

import attrs
import cattrs
from ruamel.yaml import YAML

from fsm_stage.config import (
    GraphConfig,
    NativePath,
    Problem,
    ProblemReport,
    positioned_problems,
    strict_converter,
)
from fsm_stage.constants import (
    ASSISTANT_MESSAGE,
    COMMAND_RUN,
    EXIT_PLAN_MODE,
    GOTO_STAGE,
    PLAN_COMMAND,
    PLAN_MODE_EVENT,
    PLAN_POLICY_SECTION,
    PLAN_SOURCE_PLUGIN,
    REQUEST_HEADER,
    STAGE_COMMAND,
    STAGE_NAME_RE,
    STAGE_POLICY_CONTEXT,
    STAGE_SOURCE_KINDS,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)
from fsm_stage.errors import ConfigError
from fsm_stage.fileio import read_text_input
from fsm_stage.log.events import Event
from fsm_stage.log.projections import stage_from_event
from fsm_stage.prompts import LANGUAGES, Catalog, load_catalog
from fsm_stage.runtime.commands import parse_command
from fsm_stage.runtime.tools import ERROR_PREFIX
from fsm_stage.stage_switch import CATALOG_NAME as STAGE_CATALOG
from fsm_stage.stage_switch import NO_AGENT_MESSAGE

__all__ = [
    "UNSET",
    "Command",
    "EligibilityFlip",
    "EndTurn",
    "Expect",
    "ModelStep",
    "NextRequest",
    "PrefixExpect",
    "Replay",
    "Review",
    "Scenario",
    "ScenarioError",
    "SessionSettings",
    "Step",
    "SystemText",
    "ToolCall",
    "UserPrompt",
    "dump_scenario",
    "load_scenario",
    "load_scenario_text",
    "replay_events",
    "steps_from_events",
]


class ScenarioError(ConfigError):
    """A scenario file is invalid (a ``ConfigError``, so the CLI prints it like a stage-graph
    file's problems: one bare ``PATH:LINE:COLUMN: KEY: message`` line each, exit 1).

    ``details``: the positioned problems (``fsm_stage.config.Problem``, from the config
    loader's ``ProblemReport``); ``problems``: their one-line forms.
    """

    def __init__(self, details: Sequence[Problem]) -> None:
        self.details = tuple(details)
        super().__init__([str(p) for p in self.details])


class _Unset(enum.Enum):
    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Literal[_Unset.UNSET] = _Unset.UNSET
"""Marks an ``Expect`` field the scenario does not check (distinct from ``None`` = "nothing")."""

ReviewKind = Literal["approve", "keep", "feedback", "dismiss", "abort"]
_REVIEW_WORDS: tuple[str, ...] = ("approve", "keep", "dismiss", "abort")


@attrs.frozen
class Review:
    """How the scripted human answers a review (plan-review / stage-review).

    ``approve``: exactly ``Approve``; ``keep``: the keep option with no text; ``feedback``:
    custom text ``feedback`` (not consent); ``dismiss``: the user dismisses the dialog
    (``ReviewDismissed``); ``abort``: the review fails for another reason (turn aborted).
    """

    kind: ReviewKind
    feedback: str | None = None


@attrs.frozen
class ToolCall:
    """One tool call of a model step.

    ``args``: the JSON arguments. ``review``: the scripted answer when the tool asks a review
    (only ``exit_plan_mode`` / ``goto_stage`` do). ``result``: the canned text answering a tool
    that neither fsm_stage nor the graph provides (your own tools, replayed logs); ``None`` = the
    tool must exist. ``error``: a flag — the ``result`` text is returned as the tool's failure.
    ``id``: the call id (default ``call-<request>-<index>``; unique within the scenario).
    """

    tool: str
    args: Mapping[str, Any] = attrs.field(factory=dict)
    review: Review | None = None
    result: str | None = None
    error: bool = False
    id: str | None = None


@attrs.frozen
class UserPrompt:
    """``user: TEXT``: a user prompt, steered into the agent (wakes it when idle)."""

    text: str
    where: str = attrs.field(default="", eq=False)


@attrs.frozen
class Command:
    """``command: /NAME ARGS``: a slash command line as typed.

    ``name`` is the lowercase word after ``/``; ``args`` the raw rest of the line including the
    separating whitespace (dsh-log-format §5), e.g. ``" Plan a change"``.
    """

    line: str
    where: str = attrs.field(default="", eq=False)

    @property
    def name(self) -> str:
        """Command name without the slash (lowercased, as ``runtime.commands.parse_command``)."""
        parsed = parse_command(self.line)
        return parsed.name if parsed is not None else ""

    @property
    def args(self) -> str:
        """Raw input after the name, separating whitespace included (may be ``""``)."""
        parsed = parse_command(self.line)
        return parsed.raw_input if parsed is not None else ""


@attrs.frozen
class ModelStep:
    """``model:``: one model response (assistant ``text`` plus tool ``calls``)."""

    text: str = ""
    calls: tuple[ToolCall, ...] = ()
    where: str = attrs.field(default="", eq=False)


@attrs.frozen
class EligibilityFlip:
    """``eligible: {NAME: BOOL}``: set named eligibility predicates (effective at once)."""

    values: Mapping[str, bool]
    where: str = attrs.field(default="", eq=False)


@attrs.frozen
class EndTurn:
    """``end_turn: completed | aborted``: the open turn ends here.

    ``aborted``: the user stops the turn before the next model request. ``completed``: asserts
    the turn has ended on its own (a model step without tool calls) — an error otherwise.
    """

    reason: Literal["completed", "aborted"] = "aborted"
    where: str = attrs.field(default="", eq=False)


@attrs.frozen
class PrefixExpect:
    """Expected prompt-cache effect of the next request versus the previous one.

    ``system`` / ``tools``: ``kept`` (byte-identical) or ``changed``; ``messages``: ``kept``
    (the previous messages are a prefix of the new ones) or ``broken``.
    """

    system: Literal["kept", "changed"] | None = None
    tools: Literal["kept", "changed"] | None = None
    messages: Literal["kept", "broken"] | None = None


@attrs.frozen
class NextRequest:
    """Checks on the next model request: texts it must / must not contain, its prefix, and the
    ``stage`` / ``plan_mode`` it is sent in (``None``: not checked). ``fsm-stage scenario`` writes
    the recorded stage and plan mode of every request this way, so a replay under a changed graph
    fails where it diverges."""

    contains: tuple[str, ...] = ()
    not_contains: tuple[str, ...] = ()
    prefix: PrefixExpect | None = None
    stage: str | None = None
    plan_mode: bool | None = None


@attrs.frozen
class Expect:
    """``expect:``: checks at this point of the scenario; ``UNSET`` fields are not checked.

    ``stage``: the current (logged) stage. ``plan_mode``: logged plan mode. ``pending_stage``:
    the stage of the pending transition, ``None`` = none pending. ``pending_plan``: the target
    of the pending plan-mode selection (``true`` entering, ``false`` leaving, ``None`` none).
    ``handoff_exists`` / ``handoff_missing``: stages whose handoff document must / must not
    exist — documents this run wrote (leftovers of earlier runs in a fixed cwd do not count).
    ``next_request``: checked when the next request is made.
    """

    stage: str | _Unset = UNSET
    plan_mode: bool | _Unset = UNSET
    pending_stage: str | _Unset | None = UNSET
    pending_plan: bool | _Unset | None = UNSET
    handoff_exists: tuple[str, ...] = ()
    handoff_missing: tuple[str, ...] = ()
    next_request: NextRequest | None = None
    where: str = attrs.field(default="", eq=False)


Step: TypeAlias = UserPrompt | Command | ModelStep | EligibilityFlip | EndTurn | Expect


@attrs.frozen
class SessionSettings:
    """``session:``: ``id`` (default: the scenario file's stem), ``cwd`` (relative to the
    scenario file; ``None`` = a fresh temporary directory per run), ``subagent`` (header
    ``origin: subagent``, ``delegationDepth: 1``), ``parent`` (a subagent's header
    ``parentSession``; default ``<id>-parent``; only with ``subagent: true``).

    ``id`` has no length limit (a recorded log's id is replayed as it is): folders named after
    it use ``fsm_stage.handoff.session_segment``, which keeps ids up to ``MAX_SEGMENT_LENGTH``
    (128) characters as they are and shortens longer ones with a hash suffix.
    """

    id: str | None = None
    cwd: str | None = None
    subagent: bool = False
    parent: str | None = None


@attrs.frozen
class SystemText:
    """A host system-prompt section the scenario adds (the orchestrator's own prompt): ``name``,
    ``order`` (plan mode's section is order 50) and ``text``."""

    name: str
    order: int
    text: str


@attrs.frozen
class Scenario:
    """A parsed scenario. ``graph`` is resolved against the scenario file's folder."""

    path: str
    graph: Path
    session: SessionSettings
    eligible: Mapping[str, bool]
    steps: tuple[Step, ...]
    description: str = ""
    system: tuple[SystemText, ...] = ()

    @property
    def session_id(self) -> str:
        """The session id: ``session.id`` or the file stem."""
        return self.session.id if self.session.id is not None else (Path(self.path).stem or "sim")

    def resolved_cwd(self) -> Path | None:
        """``session.cwd`` resolved against the scenario folder, or None (use a temp dir)."""
        if self.session.cwd is None:
            return None
        return (Path(self.path).parent / self.session.cwd).resolve()


# --- loading ---------------------------------------------------------------------------------

_Path = NativePath


def _yaml_value(value: Any) -> str:
    """A value as YAML would show it: ``null``, ``true``, ``5``, ``'yes'``, ``{feedback: null}``."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_yaml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_yaml_value(v) for v in value) + "]"
    return str(value)


def _is_optional(t: Any) -> bool:
    args = get_args(t)
    return len(args) == 2 and type(None) in args and get_origin(t) is not Literal


def _converter() -> cattrs.Converter:
    """The config loader's ``strict_converter`` plus the scenario's own shapes: ``null`` for an
    optional field means "not given", a review outcome, and a string where a list is expected."""
    conv = strict_converter()

    def optional_factory(t: Any) -> Any:
        inner = next(a for a in get_args(t) if a is not type(None))

        def hook(value: Any, _t: Any) -> Any:
            return None if value is None else conv.structure(value, inner)

        return hook

    conv.register_structure_hook_factory(_is_optional, optional_factory)

    def review_hook(value: Any, _t: Any) -> Review:
        if isinstance(value, str) and value in _REVIEW_WORDS:
            return Review(value)  # type: ignore[arg-type]
        if isinstance(value, Mapping) and set(value) == {"feedback"}:
            text = value["feedback"]
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"{{feedback: TEXT}} needs the feedback text, got {_yaml_value(text)}")
            return Review("feedback", text)
        raise ValueError(f"unknown review outcome {_yaml_value(value)}; expected approve, keep, dismiss, "
                         "abort or {feedback: TEXT}")

    conv.register_structure_hook(Review, review_hook)

    def tuple_of_str(value: Any, _t: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            return (value,)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
        raise TypeError(f"expected a string or a list of strings, got {_yaml_value(value)}")

    conv.register_structure_hook_func(lambda t: t == tuple[str, ...], tuple_of_str)
    return conv


_CONV = _converter()


class _Loader:
    """One scenario file being parsed: the shared ``ProblemReport`` plus the call ids seen."""

    def __init__(self, report: ProblemReport) -> None:
        self.report = report
        self.call_ids: dict[str, str] = {}  # explicit call id -> where it was first used

    def add(self, npath: _Path, message: str, *, at_key: bool = False) -> None:
        self.report.error(npath, message, at_key=at_key)

    def where(self, npath: _Path) -> str:
        line, col = self.report.position(npath)
        return f"{self.report.path}:{line}:{col}"

    def count(self) -> int:
        return len(self.report.errors)

    def structure(self, value: Any, tp: Any, npath: _Path) -> Any:
        """``value`` structured as ``tp`` with ``_CONV``; None (problems reported) if it is invalid."""
        obj, _ = positioned_problems(self.report, tp, converter=_CONV, npath=npath, value=value)
        return obj


_TOP_KEYS = ("description", "graph", "session", "system", "eligible", "steps")
_STEP_KINDS = ("user", "command", "model", "eligible", "end_turn", "expect")
_EXPECT_KEYS: dict[str, Any] = {
    "stage": str,
    "plan_mode": bool,
    "pending_stage": str | None,
    "pending_plan": bool | None,
    "handoff_exists": tuple[str, ...],
    "handoff_missing": tuple[str, ...],
    "next_request": NextRequest,
}


def _flags(problems: _Loader, value: Any, path: _Path) -> dict[str, bool] | None:
    """``{NAME: BOOL}`` eligibility values; problems are positioned at the offending key."""
    if not isinstance(value, Mapping):
        problems.add(path, "expected a mapping of predicate names to true/false")
        return None
    bad = [k for k, v in value.items() if not isinstance(v, bool)]
    for k in bad:
        problems.add((*path, k), f"expected true or false, got {_yaml_value(value[k])}")
    return None if bad else dict(value)


def _check_call(problems: _Loader, call: ToolCall, path: _Path) -> None:
    """Refuse call data the simulator would silently ignore."""
    if call.review is not None and call.tool not in REVIEWED_TOOLS:
        problems.add((*path, "review"), f"{call.tool} never asks a review (only "
                     f"{' and '.join(sorted(REVIEWED_TOOLS))} do); remove `review`")
    if call.tool in REVIEWED_TOOLS and (call.result is not None or call.error):
        key = "result" if call.result is not None else "error"
        problems.add((*path, key), f"{call.tool} is run by fsm_stage; `result`/`error` only answer your "
                     "own tools")
    elif call.error and call.result is None:
        problems.add((*path, "error"), "`error: true` returns the `result` text as the tool's failure; "
                     "add `result`")
    if call.id is not None:
        first = problems.call_ids.setdefault(call.id, problems.report.display(path))
        if first != problems.report.display(path):
            problems.add((*path, "id"), f"call id {call.id!r} is already used by {first}")


def _check_system(problems: _Loader, system: Sequence[SystemText]) -> None:
    """Host sections: unique names, not plan mode's, non-blank text."""
    seen: dict[str, int] = {}
    for i, sec in enumerate(system):
        if sec.name in seen:
            problems.add(("system", i, "name"), f"section name {sec.name!r} is already used by "
                         f"system[{seen[sec.name]}]")
        elif sec.name == PLAN_POLICY_SECTION:
            problems.add(("system", i, "name"), f"{sec.name!r} is plan mode's section; pick another name")
        elif not sec.text.strip():
            problems.add(("system", i, "text"), "a system section needs non-blank text")
        seen.setdefault(sec.name, i)


def _step(problems: _Loader, plain: Any, path: _Path) -> Step | None:
    if not isinstance(plain, Mapping) or len(plain) != 1:
        problems.add(path, f"a step is a one-key mapping, one of {', '.join(_STEP_KINDS)}")
        return None
    ((kind, value),) = plain.items()
    where = problems.where(path)
    kpath = (*path, kind)
    if kind == "user":
        if not isinstance(value, str) or not value.strip():
            problems.add(kpath, "expected the non-empty prompt text")
            return None
        return UserPrompt(value, where)
    if kind == "command":
        if not isinstance(value, str) or parse_command(value) is None:
            problems.add(kpath, "expected a slash command like '/plan' or '/stage verify', got "
                         f"{_yaml_value(value)}")
            return None
        return Command(value, where)
    if kind == "model":
        if isinstance(value, str):
            return ModelStep(value, (), where)
        if value is None:
            return ModelStep("", (), where)
        if not isinstance(value, Mapping):
            problems.add(kpath, "expected the assistant text or a mapping {text, calls}")
            return None
        unknown = [k for k in value if k not in ("text", "calls")]
        for k in unknown:
            problems.add((*kpath, k), "unknown key (expected text, calls)", at_key=True)
        text = value.get("text", "")
        if not isinstance(text, str):
            problems.add((*kpath, "text"), "expected a string")
            text = ""
        calls = problems.structure(value.get("calls", []), tuple[ToolCall, ...], (*kpath, "calls"))
        if unknown or calls is None:
            return None
        before = problems.count()
        for j, call in enumerate(calls):
            _check_call(problems, call, (*kpath, "calls", j))
        return ModelStep(text, calls, where) if problems.count() == before else None
    if kind == "eligible":
        values = _flags(problems, value, kpath)
        return None if values is None else EligibilityFlip(values, where)
    if kind == "end_turn":
        if value not in ("completed", "aborted"):
            problems.add(kpath, f"expected completed or aborted, got {_yaml_value(value)}")
            return None
        return EndTurn(value, where)
    if kind == "expect":
        if not isinstance(value, Mapping) or not value:
            problems.add(kpath, f"expected a mapping with some of {', '.join(_EXPECT_KEYS)}")
            return None
        fields: dict[str, Any] = {}
        ok = True
        for k, v in value.items():
            if k not in _EXPECT_KEYS:
                problems.add((*kpath, k), f"unknown key (expected {', '.join(_EXPECT_KEYS)})", at_key=True)
                ok = False
                continue
            if k in ("pending_stage", "pending_plan") and v is None:
                fields[k] = None
                continue
            before = problems.count()
            got = problems.structure(v, _EXPECT_KEYS[k], (*kpath, k))
            if problems.count() != before:
                ok = False
            if k in ("stage", "pending_stage") and isinstance(got, str) and not STAGE_NAME_RE.fullmatch(got):
                problems.add((*kpath, k), f"{got!r} is not a stage name ([a-z][a-z0-9_-]*)")
                ok = False
            bad = got.stage if isinstance(got, NextRequest) else None
            if bad is not None and not STAGE_NAME_RE.fullmatch(bad):
                problems.add((*kpath, k, "stage"), f"{bad!r} is not a stage name ([a-z][a-z0-9_-]*)")
                ok = False
            fields[k] = got
        return Expect(**fields, where=where) if ok else None
    problems.add(kpath, f"unknown step kind; expected one of {', '.join(_STEP_KINDS)}", at_key=True)
    return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_encodable(problems: _Loader, value: Any, path: _Path) -> None:
    """Refuse strings holding a lone surrogate (YAML ``"\\ud800"``): such text cannot be encoded
    as UTF-8, so it could never be sent to a model, logged or printed.
    Keys are positioned at the key, values at the value."""
    def problem(text: str) -> str:
        found = _SURROGATE.search(text)
        assert found is not None
        return (f"U+{ord(found.group()):04X} (a lone surrogate) at character {found.start()} cannot be "
                "encoded as UTF-8, so it can never be sent to a model or logged; remove it")

    if isinstance(value, str):
        if _SURROGATE.search(value):
            problems.add(path, problem(value))
    elif isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(k, str) and _SURROGATE.search(k):
                loc = problems.report.loc((*path, k))  # the key's display shows it: escape it
                shown = loc.display.encode("utf-8", "backslashreplace").decode("utf-8")
                problems.report.error_at(loc.key, shown, problem(k))
            _check_encodable(problems, v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_encodable(problems, v, (*path, i))


def load_scenario_text(text: str, path: str = "<string>") -> Scenario:
    """Parse scenario YAML ``text`` (``path`` names the file in errors and anchors ``graph``/``cwd``).

    Returns a ``Scenario``; raises ``ScenarioError`` with every positioned problem. Graph
    existence is checked here (the graph itself is validated by ``load_config`` when run).
    """
    report = ProblemReport.from_yaml(text, path)
    if report.problems:  # a YAML syntax error or a tag: nothing else is checked
        raise ScenarioError(report.problems)
    plain = report.data
    problems = _Loader(report)
    if not isinstance(plain, dict):
        problems.add((), "a scenario is a mapping with keys graph, session, eligible, steps")
        raise ScenarioError(report.problems)
    _check_encodable(problems, plain, ())
    if report.problems:  # nothing else is checked: every message would have to quote such text
        raise ScenarioError(report.problems)
    for k in plain:
        if k not in _TOP_KEYS:
            problems.add((k,), f"unknown key (expected {', '.join(_TOP_KEYS)})", at_key=True)
    graph = plain.get("graph")
    graph_path = Path()
    if not isinstance(graph, str) or not graph.strip():
        problems.add(("graph",) if "graph" in plain else (),
                     "missing or empty `graph`: the stage-graph file, relative to the scenario")
    else:
        graph_path = Path(os.path.normpath(Path(path).parent / graph))
        if path != "<string>" and graph_path.is_dir():
            problems.add(("graph",), f"{str(graph_path)!r} is a folder; expected a stage-graph file")
        elif path != "<string>" and not graph_path.is_file():
            problems.add(("graph",), f"graph file {str(graph_path)!r} does not exist")
    session = problems.structure(plain.get("session", {}), SessionSettings, ("session",))
    if session is not None and session.id is not None and not session.id.strip():
        problems.add(("session", "id"), "must be a non-empty string")
    if session is not None and session.parent is not None:
        if not session.subagent:
            problems.add(("session", "parent"),
                         "only a subagent session (subagent: true) has a parent session")
        elif not session.parent.strip():
            problems.add(("session", "parent"), "must be a non-empty string")
    if session is not None and session.cwd is not None and "\0" in session.cwd:
        problems.add(("session", "cwd"), "a folder name cannot contain a NUL byte")
    eligible = _flags(problems, plain.get("eligible", {}), ("eligible",))
    system_raw = plain.get("system", [])
    if isinstance(system_raw, str):
        system_raw = [{"name": "host", "order": 0, "text": system_raw}]
    system = problems.structure(system_raw, tuple[SystemText, ...], ("system",))
    if system is not None:
        _check_system(problems, system)
    description = plain.get("description", "")
    if not isinstance(description, str):
        problems.add(("description",), "expected a string")
    raw_steps, steps = plain.get("steps"), list[Step]()
    if not isinstance(raw_steps, list) or not raw_steps:
        problems.add(("steps",) if "steps" in plain else (), "missing or empty `steps` list")
    else:
        for i, s in enumerate(raw_steps):
            st = _step(problems, s, ("steps", i))
            if st is not None:
                steps.append(st)
    if report.problems:
        raise ScenarioError(report.problems)
    assert session is not None and eligible is not None
    return Scenario(path=path, graph=graph_path, session=session, eligible=eligible,
                    steps=tuple(steps), description=description if isinstance(description, str) else "",
                    system=system or ())


def load_scenario(path: str | Path) -> Scenario:
    """Read and parse the scenario file at ``path`` (see ``load_scenario_text``).

    Raises ``InputFileError`` (a ``UserError``, one line) when the file cannot be read (missing, a
    folder, binary, not UTF-8) and ``ScenarioError`` when it is invalid.
    """
    p = Path(path)
    text = read_text_input(p, what="scenario")
    return load_scenario_text(text, str(p))


# --- writing (used by ``fsm-stage scenario LOG``) ----------------------------------------------


def _review_plain(review: Review) -> Any:
    return {"feedback": review.feedback} if review.kind == "feedback" else review.kind


def step_to_plain(step: Step) -> dict[str, Any]:
    """One step as the plain mapping the YAML format uses (inverse of the loader)."""
    if isinstance(step, UserPrompt):
        return {"user": step.text}
    if isinstance(step, Command):
        return {"command": step.line}
    if isinstance(step, ModelStep):
        if not step.calls:
            return {"model": step.text}
        calls = []
        for c in step.calls:
            d: dict[str, Any] = {"tool": c.tool, "args": dict(c.args)}
            if c.id is not None:
                d["id"] = c.id
            if c.review is not None:
                d["review"] = _review_plain(c.review)
            if c.result is not None:
                d["result"] = c.result
            if c.error:
                d["error"] = True
            calls.append(d)
        body: dict[str, Any] = {"text": step.text} if step.text else {}
        body["calls"] = calls
        return {"model": body}
    if isinstance(step, EligibilityFlip):
        return {"eligible": dict(step.values)}
    if isinstance(step, EndTurn):
        return {"end_turn": step.reason}
    out: dict[str, Any] = {}
    for f in attrs.fields(Expect):
        v = getattr(step, f.name)
        if f.name == "where" or v is UNSET or v == () or (f.name == "next_request" and v is None):
            continue
        out[f.name] = v if v is None else _prune(_CONV.unstructure(v))
    return {"expect": out}


def _prune(value: Any) -> Any:
    """Drop ``None`` and empty values from nested mappings (defaults the loader fills back in)."""
    if isinstance(value, dict):
        return {k: _prune(v) for k, v in value.items() if v not in (None, (), [], {}, "")}
    if isinstance(value, tuple):
        return list(value)
    return value


def _literal_safe(text: str) -> bool:
    """True when a YAML literal block reproduces ``text`` exactly (otherwise it is quoted)."""
    return (
        not text.startswith((" ", "\n"))
        and all(c == "\n" or c.isprintable() for c in text)
        and all(line == line.rstrip() for line in text.split("\n"))
        and not text.endswith("\n\n")
    )


def _flow(step: dict[str, Any]) -> Any:
    """``{kind: {...}}`` with the body on one line (``- expect: {next_request: {stage: x}}``) when
    it holds no multi-line text."""
    from ruamel.yaml.comments import CommentedMap

    def conv(value: Any) -> Any:
        if isinstance(value, dict):
            out = CommentedMap((k, conv(v)) for k, v in value.items())
            out.fa.set_flow_style()
            return out
        return value

    if "\\n" in json.dumps(step):  # an escaped newline: keep block style for the literal
        return step
    return {k: conv(v) for k, v in step.items()}


def dump_scenario(graph: str, session: SessionSettings, steps: Sequence[Step], *,
                  description: str = "", eligible: Mapping[str, bool] | None = None,
                  system: Sequence[SystemText] = ()) -> str:
    """Render a scenario as YAML text (block style, literal blocks for multi-line strings)."""
    from io import StringIO

    from ruamel.yaml.scalarstring import DoubleQuotedScalarString, LiteralScalarString

    def lit(v: Any) -> Any:
        if isinstance(v, str):
            if "\n" in v and _literal_safe(v):
                return LiteralScalarString(v)
            if "\n" in v or not v.isprintable():  # escapes keep NEL, LS, PS, controls exact
                return DoubleQuotedScalarString(v)
            return v
        if isinstance(v, dict):
            return {lit(k): lit(x) for k, x in v.items()}
        if isinstance(v, list):
            return [lit(x) for x in v]
        return v

    doc: dict[str, Any] = {}
    if description:
        doc["description"] = description
    doc["graph"] = graph
    sess = {k: v for k, v in _CONV.unstructure(session).items() if v not in (None, False)}
    if sess:
        doc["session"] = sess
    if system:
        doc["system"] = [lit({"name": t.name, "order": t.order, "text": t.text}) for t in system]
    if eligible:
        doc["eligible"] = dict(eligible)
    doc["steps"] = [_flow(lit(step_to_plain(s))) if isinstance(s, EligibilityFlip | Expect)
                    else lit(step_to_plain(s)) for s in steps]
    y = YAML()
    y.representer.add_representer(
        type(None), lambda r, _d: r.represent_scalar("tag:yaml.org,2002:null", "null"))
    y.default_flow_style = False
    y.width = 100
    y.indent(mapping=2, sequence=4, offset=2)
    buf = StringIO()
    y.dump(doc, buf)
    return buf.getvalue()


# --- replay: a recorded session log -> scenario steps (``fsm-stage scenario LOG``) -----------------

REVIEWED_TOOLS: frozenset[str] = frozenset({EXIT_PLAN_MODE, GOTO_STAGE})
"""Tools whose recorded outcome is a review answer (the tool itself is provided by fsm_stage)."""

_DISMISS_HINT = re.compile(r"dismiss|closed the [a-z ]*review", re.IGNORECASE)


def _blocks_of(data: Any) -> list[Any]:
    if not isinstance(data, Mapping):
        return []
    msg = data.get("message")
    content = msg.get("content") if isinstance(msg, Mapping) else data.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def _text_of(blocks: Sequence[Any]) -> str:
    return "".join(b["text"] for b in blocks
                   if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str))


def _tool_outcome(data: Any) -> tuple[str | None, str, bool]:
    """(callId, text, isError) of a ``tool/result`` (current and legacy shapes)."""
    if not isinstance(data, Mapping):
        return None, "", False
    if "callId" in data:  # legacy {callId, content, isError}
        content = data.get("content")
        text = content if isinstance(content, str) else _text_of(content if isinstance(content, list) else [])
        return str(data["callId"]), text, bool(data.get("isError"))
    for block in _blocks_of(data):
        if isinstance(block, Mapping) and block.get("type") == "tool-result":
            inner = block.get("content")
            text = inner if isinstance(inner, str) else _text_of(inner if isinstance(inner, list) else [])
            return str(block.get("toolCallId")), text, bool(block.get("isError"))
    msg = data.get("message")
    src = msg.get("source") if isinstance(msg, Mapping) else None
    call_id = src.get("callId") if isinstance(src, Mapping) else None
    return (str(call_id) if call_id is not None else None), "", False


def _parse_args(raw: Any) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, str):
        try:
            value = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            return {"_raw": raw}
        return value if isinstance(value, dict) else {"_raw": raw}
    return {}


def _review_from_result(text: str, is_error: bool) -> Review:
    """The review outcome a recorded result implies: success = approve; a failure mentioning a
    dismissal = dismiss; any other failure = keep (the recorded text is kept as a comment)."""
    if not is_error:
        return Review("approve")
    return Review("dismiss") if _DISMISS_HINT.search(text) else Review("keep")


WAKE_PLACEHOLDER = "(the recorded turn started without a user prompt)"
"""Prompt text a replay uses for a turn something other than the user started, when the log
holds no message that could stand for it."""


def _is_wake_message(data: Mapping[str, Any]) -> bool:
    """A user-role message from another source that may have started a turn (a goal, a subagent
    report, a hook): not a runtime-context snapshot, not a stage or plan-mode record."""
    src = data.get("source")
    if not isinstance(src, Mapping):
        return False
    kind = src.get("kind")
    return kind not in ("user", *STAGE_SOURCE_KINDS) and src.get("form") != "snapshot" and not (
        kind == "plugin" and src.get("plugin") == PLAN_SOURCE_PLUGIN)


PLAN_CATALOG = "plan_mode"
"""The plan-mode controller's wording catalog (``templates/<language>/plan_mode.yaml``)."""


_BEFORE_REVIEW_KEYS: tuple[str, ...] = (
    "errors.invalid_arguments", "errors.already_current", "errors.no_user_questions",
    "errors.missing_token_meter", "errors.requires_handoff", "errors.no_fs",
    "errors.handoff_write_failed")
"""Stage-switch refusals of a ``goto_stage`` call made before any review is asked (besides the
graph's own refusals, ``not_a_target`` / ``guard``): a replay gives such a call no ``review``.
(``already_current`` can also follow an approval when the stage moved meanwhile; a replay then
reaches the target first and is refused the same way.)"""


_PLAN_BEFORE_REVIEW_KEYS: tuple[str, ...] = (
    "errors.not_in_plan", "errors.bad_plan", "errors.no_channel", "errors.no_agent")
"""Plan-mode refusals of an ``exit_plan_mode`` call made before any review is asked: a replay
gives such a call no ``review``."""


class _Wording:
    """Recognises the controllers' recorded tool-result texts (in every shipped language) to
    recover what a log does not keep structurally: review comments and guard refusals."""

    def __init__(self) -> None:
        self.patterns: dict[str, list[re.Pattern[str]]] = {}
        for language in LANGUAGES:
            plan = load_catalog(PLAN_CATALOG, language)
            stage = load_catalog(STAGE_CATALOG, language)
            for kind, catalog, key in (("plan_feedback", plan, "errors.keep_planning_feedback"),
                                       ("stage_feedback", stage, "errors.keep_stage_feedback"),
                                       ("guard", stage, "errors.guard_blocked"),
                                       ("not_a_target", stage, "errors.not_a_target"),
                                       ("not_a_target", stage, "errors.not_configured"),
                                       *(("before_review", stage, key) for key in _BEFORE_REVIEW_KEYS),
                                       *(("plan_before_review", plan, key)
                                         for key in _PLAN_BEFORE_REVIEW_KEYS)):
                pattern = _catalog_pattern(catalog, key)
                if pattern is not None:
                    self.patterns.setdefault(kind, []).append(pattern)

    def match(self, kind: str, text: str) -> dict[str, str] | None:
        """The template variables of a ``kind`` text (``Error:`` prefix ignored), or None."""
        body = text.removeprefix(ERROR_PREFIX)
        for pattern in self.patterns.get(kind, ()):
            m = pattern.fullmatch(body)
            if m is not None:
                return m.groupdict()
        return None


def _catalog_pattern(catalog: Catalog, key: str) -> re.Pattern[str] | None:
    """A regex matching ``catalog.text(key, …)`` for any variable values (one group each)."""
    if not catalog.has(key):
        return None
    names = sorted(catalog.variables(key))
    rendered = catalog.text(key, **{n: f"\0{n}\0" for n in names})
    regex, seen = "", set[str]()
    for i, part in enumerate(re.split(r"\0(\w+)\0", rendered)):
        if i % 2 == 0:
            regex += re.escape(part)
        elif part in seen:
            regex += f"(?P={part})"
        else:
            seen.add(part)
            regex += f"(?P<{part}>.*?)"
    return re.compile(regex, re.DOTALL)


class _Replay:
    """State of ``steps_from_events`` while it walks a log."""

    def __init__(self, graph: GraphConfig | None = None, wording: _Wording | None = None) -> None:
        self.graph, self.wording = graph, wording
        self.stages_recorded = False   # the log holds stage records (set by ``replay_events``)
        self.stage: str | None = None  # the recorded stage (host fold) so far
        self.plan = False              # the recorded plan mode so far
        self.guidance = False          # the last snapshot carried the stage guidance
        self.state_at: dict[int, tuple[str | None, bool]] = {}  # model step index -> request state
        self.need: dict[int, dict[str, bool]] = {}  # model step index -> predicates it needs
        self.system_texts: list[str] = []  # system prompts of requests sent out of plan mode
        self.refused: set[str] = set()  # ids of goto_stage calls the graph refused (no review)
        self.steps: list[Step] = []
        self.calls_by_id: dict[str, tuple[int, int]] = {}  # callId -> (step index, call index)
        self.steered: set[str] = set()
        self.prompted = False          # a prompt is waiting for the next model step
        self.wake_text: str | None = None
        self.in_turn = False
        self.turn_models = 0
        self.last_had_calls = False

    def command(self, data: Mapping[str, Any]) -> None:
        args = data.get("args")
        raw = args if isinstance(args, str) else ""
        self.steps.append(Command(f"/{data.get('name', '')}{raw}"))
        words = raw.split()
        name = data.get("name")
        # the commands fsm_stage provides steer their trailing text as the next prompt
        if name == PLAN_COMMAND:
            self.steered = {raw.strip()} - {"", "off"}
        elif name == STAGE_COMMAND:
            self.steered = {" ".join(words[1:])} - {""}
        else:
            self.steered = set()
        if self.steered:
            self.prompted = True

    def user_message(self, data: Mapping[str, Any]) -> None:
        src = data.get("source")
        stage = stage_from_event({"type": USER_MESSAGE, "data": data})
        if stage is not None:
            self.stage = stage
        sections = src.get("sections") if isinstance(src, Mapping) else None
        if isinstance(src, Mapping) and src.get("form") == "snapshot" and isinstance(sections, list):
            self.guidance = any(isinstance(sec, Mapping) and sec.get("name") == STAGE_POLICY_CONTEXT
                                for sec in sections)
        text = _text_of(_blocks_of(data))
        if not (isinstance(src, Mapping) and src.get("kind") == "user"):
            if _is_wake_message(data) and text.strip() and self.wake_text is None:
                self.wake_text = text
            return
        if text.strip() in self.steered:
            self.steered = set()
            return
        self.steered = set()
        if text.strip():
            self.steps.append(UserPrompt(text))
            self.prompted = True

    def model(self, data: Mapping[str, Any]) -> None:
        needs_prompt = (not self.in_turn or self.turn_models == 0 or not self.last_had_calls)
        if needs_prompt and not self.prompted:
            # something other than the user woke the agent (a goal, a report, a continuation)
            self.steps.append(UserPrompt(self.wake_text or WAKE_PLACEHOLDER))
        blocks = _blocks_of(data)
        calls = [ToolCall(str(b.get("name")), _parse_args(b.get("arguments", b.get("input"))),
                          id=str(b.get("id")) if b.get("id") is not None else None)
                 for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool-call"]
        for j, c in enumerate(calls):
            if c.id is not None:
                self.calls_by_id[c.id] = (len(self.steps), j)
        stage = self.stage
        if stage is None and self.graph is not None and self.stages_recorded:
            # a subagent is never told its first stage: it is the graph's initial one
            stage = self.graph.initial or self.graph.stages[0].name
        self.state_at[len(self.steps)] = (stage, self.plan)
        self.need[len(self.steps)] = {GUIDANCE_PREDICATE: self.guidance}
        self.steps.append(ModelStep(_text_of(blocks), tuple(calls)))
        self.prompted, self.wake_text = False, None
        self.turn_models += 1
        self.last_had_calls = bool(calls)

    def tool_result(self, data: Mapping[str, Any]) -> None:
        call_id, text, is_error = _tool_outcome(data)
        if call_id is None or call_id not in self.calls_by_id:
            return
        i, j = self.calls_by_id.pop(call_id)
        step = self.steps[i]
        assert isinstance(step, ModelStep)
        call = step.calls[j]
        if call.tool in REVIEWED_TOOLS:
            call = attrs.evolve(call, review=self._review(i, call, text, is_error))
            if call.review is None:
                self.refused.add(call_id)
        else:
            call = attrs.evolve(call, result=text, error=is_error)
        self.steps[i] = attrs.evolve(step, calls=(*step.calls[:j], call, *step.calls[j + 1:]))

    def _review(self, i: int, call: ToolCall, text: str, is_error: bool) -> Review | None:
        """The review answer a recorded outcome implies (None: the call was refused, nobody was
        asked); also notes the guard values a ``goto_stage`` outcome reveals."""
        wording = self.wording
        if wording is None:
            return _review_from_result(text, is_error)
        if call.tool == GOTO_STAGE and is_error:
            guard = wording.match("guard", text)
            if guard is not None:
                for name in (g.strip() for g in guard.get("guards", "").split(",")):
                    if name:
                        self.need.setdefault(i, {})[name] = False
                return None
            if wording.match("not_a_target", text) is not None:
                return None
            if (wording.match("before_review", text) is not None
                    or text.removeprefix(ERROR_PREFIX) == NO_AGENT_MESSAGE):
                return None  # refused before anyone was asked
        if call.tool == EXIT_PLAN_MODE and is_error and wording.match("plan_before_review", text) is not None:
            return None  # refused before anyone was asked
        if call.tool == GOTO_STAGE:  # it got past the guards: they held
            self._guards_held(i, call)
        if is_error:
            for kind in ("plan_feedback", "stage_feedback"):
                found = wording.match(kind, text)
                if found is not None and found.get("feedback", "").strip():
                    return Review("feedback", found["feedback"])
        return _review_from_result(text, is_error)

    def _guards_held(self, i: int, call: ToolCall) -> None:
        target = call.args.get("stage")
        current = self.state_at.get(i, (None, False))[0]
        if self.graph is None or current is None or not isinstance(target, str):
            return
        for edge in self.graph.edges_from(current):
            if edge.target == target:
                for name in edge.guards:
                    self.need.setdefault(i, {})[name] = True

    def request_header(self, data: Mapping[str, Any]) -> None:
        header = data.get("header")
        system = header.get("system") if isinstance(header, Mapping) else None
        if isinstance(system, str) and not self.plan:
            self.system_texts.append(system)

    def turn_start(self) -> None:
        self.in_turn, self.turn_models, self.last_had_calls = True, 0, False

    def turn_end(self) -> None:
        """Close the turn so the replay closes it at the same place."""
        if self.turn_models == 0 and self.prompted:
            self.steps.append(ModelStep(""))  # the recorded turn ended before any answer
            self.prompted = False
        elif self.last_had_calls:
            self.steps.append(EndTurn("aborted"))  # it ended without a final answer
        self.in_turn, self.turn_models, self.last_had_calls = False, 0, False
        self.wake_text = None


def steps_from_events(events: Sequence[Event]) -> list[Step]:
    """Turn a recorded session's events into scenario steps (``fsm-stage scenario LOG``).

    Kept: ``command/run`` (as typed: ``/name`` + recorded args), user-typed ``user/message``s
    (not the text a command steered, not plugin/stage notices), each ``assistant/message``
    (text blocks and tool calls) with its calls' recorded outcomes — a review answer for
    ``exit_plan_mode`` / ``goto_stage``, the canned ``result``/``error`` for any other tool.
    Turn structure is kept so the replay runs: a turn something else started (a goal, a
    subagent report) gets a ``user`` step with that message's text; a turn that ended before
    any answer gets an empty model step; one that ended after tool calls without a final
    answer gets ``end_turn: aborted``. Everything controllers write (``plan/mode``, stage
    records, snapshots) is left out: the simulator's controllers produce it again under the
    graph being tested.
    """
    return _walk(events, _Replay()).steps


def _walk(events: Sequence[Event], replay: _Replay) -> _Replay:
    """Feed a log's events to ``replay``; returns it with ``steps`` complete."""
    for ev in events:
        data = ev.data if isinstance(ev.data, Mapping) else {}
        if ev.type == COMMAND_RUN:
            replay.command(data)
        elif ev.type == USER_MESSAGE:
            replay.user_message(data)
        elif ev.type == ASSISTANT_MESSAGE:
            replay.model(data)
        elif ev.type == TOOL_RESULT:
            replay.tool_result(data)
        elif ev.type == TURN_START:
            replay.turn_start()
        elif ev.type == TURN_END:
            replay.turn_end()
        elif ev.type == PLAN_MODE_EVENT:
            replay.plan = data.get("active") is True
        elif ev.type == REQUEST_HEADER:
            replay.request_header(data)
    if replay.in_turn or replay.prompted:
        replay.turn_end()
    steps = replay.steps
    # a call whose result was never recorded: answer it with an empty canned failure
    def answered(c: ToolCall) -> bool:
        return c.review is not None or c.result is not None or c.id in replay.refused

    for i, step in enumerate(steps):
        if isinstance(step, ModelStep) and not all(answered(c) for c in step.calls):
            steps[i] = attrs.evolve(step, calls=tuple(
                c if answered(c)
                else (attrs.evolve(c, review=Review("dismiss")) if c.tool in REVIEWED_TOOLS
                      else attrs.evolve(c, result="", error=True))
                for c in step.calls))
    return replay


@attrs.frozen
class Replay:
    """A recorded session turned into a scenario (``replay_events``): the ``steps`` (with the
    inferred eligibility flips and one ``expect: {next_request: {stage, plan_mode}}`` before each
    model step), the host ``system`` text, and ``warnings`` about what could not be recovered."""

    steps: tuple[Step, ...]
    system: tuple[SystemText, ...] = ()
    warnings: tuple[str, ...] = ()


GUIDANCE_PREDICATE = "guidance"
"""Scenario name of the unnamed eligibility predicate (the stage guidance context)."""


def _scrub(value: Any, count: list[int]) -> Any:
    """``value`` with every lone surrogate in its strings (a JSON log may escape one) replaced by
    U+FFFD; ``count[0]`` counts the strings changed. Walks strings, mappings, lists, tuples and
    attrs instances (the scenario's steps)."""
    if isinstance(value, str):
        fixed = _SURROGATE.sub("\ufffd", value)
        count[0] += fixed != value
        return fixed
    if isinstance(value, Mapping):
        return {_scrub(k, count): _scrub(v, count) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_scrub(v, count) for v in value)
    if attrs.has(type(value)):
        changes = {f.name: _scrub(getattr(value, f.name), count) for f in attrs.fields(type(value))
                   if f.init}
        return attrs.evolve(value, **changes)
    return value


def replay_events(events: Sequence[Event], graph: GraphConfig | None = None) -> Replay:
    """``steps_from_events`` plus what a faithful replay needs (``fsm-stage scenario``):

    * before each model step, ``expect: {next_request: {stage, plan_mode}}`` with the stage and
      plan mode the recorded request was sent in (``stage`` only for a log with stage records;
      before the first one, the graph's initial stage — a subagent is never told it), so a
      replay under a changed graph fails where it diverges;
    * eligibility flips inferred from the log: ``guidance`` from the runtime-context snapshots
      (the ``stage:policy`` entry), and for ``goto_stage`` the guards of the recorded edge in
      ``graph`` (true when the call got past them, false for those a refusal names);
    * review comments recovered from the recorded failure text (``{feedback: TEXT}``), and a
      ``goto_stage`` refused before any review (no edge, guard, bad arguments, missing handoff
      document, handoff write failure…: ``_BEFORE_REVIEW_KEYS``) and an ``exit_plan_mode``
      refused before its review (not in plan mode, bad plan, no review channel:
      ``_PLAN_BEFORE_REVIEW_KEYS``) get no ``review`` (nobody was asked);
    * the host system prompt: the system text of the first request sent outside plan mode, as one
      ``host`` section (a warning when there is none or it changed during the session).
    * a lone surrogate in any recorded text (JSON can escape one; it cannot be encoded as UTF-8,
      so the scenario loader refuses it) is replaced with U+FFFD, with a warning.
    """
    start = _Replay(graph, _Wording())
    start.stages_recorded = any(stage_from_event(ev) is not None for ev in events)
    replay = _walk(events, start)
    warnings: list[str] = []
    flags: dict[str, bool] = {}
    steps: list[Step] = []
    for i, step in enumerate(replay.steps):
        if i in replay.state_at:
            changes = {k: v for k, v in replay.need.get(i, {}).items() if flags.get(k, False) != v}
            if changes:
                steps.append(EligibilityFlip(changes))
                flags.update(changes)
            stage, plan = replay.state_at[i]
            steps.append(Expect(next_request=NextRequest(stage=stage, plan_mode=plan)))
        steps.append(step)
    system: tuple[SystemText, ...] = ()
    texts = replay.system_texts
    if texts and texts[0].strip():
        system = (SystemText("host", 0, texts[0]),)
        if any(t != texts[0] for t in texts):
            warnings.append("the host system prompt changed during the session; the replay uses the "
                            "first one")
    elif not texts and any(ev.type == REQUEST_HEADER for ev in events):
        warnings.append("every request was sent in plan mode: the host system prompt is not recovered")
    scrubbed = [0]
    steps, system = _scrub(steps, scrubbed), _scrub(system, scrubbed)
    if scrubbed[0]:
        warnings.append(f"{scrubbed[0]} text(s) held a lone surrogate (not encodable as UTF-8); replaced "
                        "with U+FFFD")
    return Replay(tuple(steps), system, tuple(warnings))
