"""The scenario loader: YAML text to a ``Scenario``, every problem positioned.

``load_scenario(path)`` / ``load_scenario_text(text, path)`` raise ``ConfigError`` listing
every problem as one line ``PATH:LINE:COLUMN: KEY: what is wrong``; nothing runs for a bad file.
Top keys: ``description``, ``graph`` (relative to the file), ``session`` (``id``, ``cwd``:
omitted = a fresh temporary folder, ``""`` = the file's folder, ``subagent``, ``parent``),
``system`` (text or a list of ``{name, order, text}``), ``eligible`` and ``steps``, each a
one-key mapping: ``user``, ``command``, ``model`` (``TEXT`` or ``{text, calls}``), ``eligible``,
``end_turn`` (``completed`` | ``aborted`` | ``blocked``), ``answer`` (``{call, outcome, option,
feedback, reviewer, edited}``), ``resume`` (``true``), ``expect``. The graph loader's machinery words and
positions YAML errors, duplicate keys, tags, wrong types and unknown keys; data the simulator
would ignore is refused too (a ``review`` on a tool that asks none, ``result`` on
``goto_stage``, duplicate call ids, duplicate / blank / ``plan:policy`` system sections), as is
text not encodable as UTF-8. Names are checked against the graph by ``fsm_stage.simulate.prepare``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, cast, get_args, get_origin

import cattrs

from fsm_stage.config import (
    NativePath,
    ProblemReport,
    positioned_problems,
    strict_converter,
)
from fsm_stage.constants import (
    PLAN_POLICY_SECTION,
    STAGE_NAME_RE,
)
from fsm_stage.errors import ConfigError
from fsm_stage.fileio import read_text_input
from fsm_stage.runtime.commands import parse_command
from fsm_stage.scenario.model import (
    _REVIEW_WORDS,
    REVIEWED_TOOLS,
    USAGE_KEYS,
    AnswerOutcome,
    AnswerReview,
    Command,
    EligibilityFlip,
    EndTurn,
    Expect,
    ModelStep,
    NextRequest,
    Resume,
    Review,
    Scenario,
    SessionSettings,
    Step,
    SystemText,
    ToolCall,
    UserPrompt,
)

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
                         "abort, suspend or {feedback: TEXT}")

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


_TOP_KEYS = ("description", "graph", "session", "system", "eligible", "reviewers", "steps")
_STEP_KINDS = ("user", "command", "model", "eligible", "end_turn", "answer", "resume", "expect")
_ANSWER_KEYS = ("call", "outcome", "option", "feedback", "reviewer", "edited")
_ANSWER_OUTCOMES = ("approve", "keep", "dismiss", "expire")
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


def _usage(problems: _Loader, value: object, kpath: _Path) -> Mapping[str, int] | None:
    """A model step's ``usage``: a mapping of ``USAGE_KEYS`` to whole numbers from 0 to 10^15
    (problems reported; None when absent)."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or not value:
        problems.add(kpath, f"expected a mapping of token counts ({', '.join(USAGE_KEYS)})")
        return None
    out: dict[str, int] = {}
    for key, n in value.items():
        if key not in USAGE_KEYS:
            problems.add((*kpath, key), f"unknown key (expected {', '.join(USAGE_KEYS)})", at_key=True)
        elif isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 10**15:
            problems.add((*kpath, key), "expected a whole number of tokens from 0 to 10^15, got "
                         f"{_yaml_value(n)}")
        else:
            out[key] = n
    return out


def _check_call(problems: _Loader, call: ToolCall, path: _Path) -> None:
    """Refuse call data the simulator would silently ignore."""
    kind = call.review.kind if call.review is not None else None
    answered = call.result is not None or call.error
    key = "result" if call.result is not None else "error"
    if call.tool in REVIEWED_TOOLS and answered:
        problems.add((*path, key), f"{call.tool} is run by fsm_stage; `result`/`error` only answer your "
                     "own tools")
    elif kind not in (None, "approve", "suspend") and answered:
        problems.add((*path, key), f"a call its reviewer does not approve ({kind}) never runs; "
                     f"remove `{key}`")
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
            problems.add(kpath, "expected the assistant text or a mapping {text, calls, usage}")
            return None
        unknown = [k for k in value if k not in ("text", "calls", "usage")]
        for k in unknown:
            problems.add((*kpath, k), "unknown key (expected text, calls, usage)", at_key=True)
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
        usage = _usage(problems, value.get("usage"), (*kpath, "usage"))
        return ModelStep(text, calls, where, usage) if problems.count() == before else None
    if kind == "answer":
        return _answer(problems, value, kpath, where)
    if kind == "resume":
        if value is not True:
            problems.add(kpath, f"expected true (resume the suspended turn), got {_yaml_value(value)}")
            return None
        return Resume(where)
    if kind == "eligible":
        values = _flags(problems, value, kpath)
        return None if values is None else EligibilityFlip(values, where)
    if kind == "end_turn":
        if value not in ("completed", "aborted", "blocked"):
            problems.add(kpath, f"expected completed, aborted or blocked, got {_yaml_value(value)}")
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


def _answer(problems: _Loader, value: Any, kpath: _Path, where: str) -> AnswerReview | None:
    """``answer: {call, outcome, option, feedback, reviewer, edited}``: every problem positioned
    at its key."""
    if not isinstance(value, Mapping):
        problems.add(kpath, "expected a mapping {call: ID | last, outcome: approve | keep | dismiss "
                     "| expire, option, feedback, reviewer, edited}")
        return None
    before = problems.count()
    for k in value:
        if k not in _ANSWER_KEYS:
            problems.add((*kpath, k), f"unknown key (expected {', '.join(_ANSWER_KEYS)})", at_key=True)
    outcome = value.get("outcome")
    if "outcome" not in value:
        problems.add(kpath, "missing `outcome`: approve, keep, dismiss or expire")
    elif outcome not in _ANSWER_OUTCOMES:
        problems.add((*kpath, "outcome"),
                     f"expected approve, keep, dismiss or expire, got {_yaml_value(outcome)}")
    texts: dict[str, str | None] = {}
    for k in ("call", "option", "feedback", "reviewer", "edited"):
        v = value.get(k)
        if k in value and (not isinstance(v, str) or not v.strip()):
            problems.add((*kpath, k), f"expected a non-empty string, got {_yaml_value(v)}")
        texts[k] = v if isinstance(v, str) else None
    if "option" in value and outcome in ("keep", "dismiss"):
        problems.add((*kpath, "option"), "`option` picks an approve option; only with `outcome: approve`")
    if "feedback" in value and outcome in ("approve", "dismiss"):
        problems.add((*kpath, "feedback"), "`feedback` is the reviewer's comments; only with `outcome: keep`")
    if "edited" in value and outcome in ("keep", "dismiss"):
        problems.add((*kpath, "edited"), "`edited` approves the reviewer's version of the document; "
                     "only with `outcome: approve`")
    if outcome == "expire":
        for k in ("option", "feedback", "reviewer", "edited"):
            if k in value:
                problems.add((*kpath, k), "nobody answers a review its deadline closes; "
                             "`outcome: expire` takes only `call`")
    if problems.count() != before:
        return None
    return AnswerReview(cast(AnswerOutcome, outcome), texts["call"] or "last", texts["option"],
                        texts["feedback"], where, texts["reviewer"], texts["edited"])


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

    Returns a ``Scenario``; raises ``ConfigError`` with every positioned problem. Graph
    existence is checked here (the graph itself is validated by ``load_config`` when run).
    """
    report = ProblemReport.from_yaml(text, path)
    if report.problems:  # a YAML syntax error or a tag: nothing else is checked
        raise ConfigError(report.problems)
    plain = report.data
    problems = _Loader(report)
    if not isinstance(plain, dict):
        problems.add((), "a scenario is a mapping with keys graph, session, eligible, steps")
        raise ConfigError(report.problems)
    _check_encodable(problems, plain, ())
    if report.problems:  # nothing else is checked: every message would have to quote such text
        raise ConfigError(report.problems)
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
    reviewers = _file(problems, plain, "reviewers", path, "a reviewers file (reviewers: {name: {groups}})")
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
        raise ConfigError(report.problems)
    assert session is not None and eligible is not None
    return Scenario(path=path, graph=graph_path, session=session, eligible=eligible,
                    steps=tuple(steps), description=description if isinstance(description, str) else "",
                    system=system or (), reviewers=reviewers)


def _file(problems: _Loader, plain: dict[str, Any], key: str, path: str, what: str) -> Path | None:
    """The optional file ``plain[key]`` resolved against the scenario's folder (checked to be a
    file unless the scenario has no file: ``path == "<string>"``), None when absent."""
    if key not in plain:
        return None
    value = plain[key]
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        problems.add((key,), f"expected {what}, as a path relative to the scenario")
        return None
    resolved = Path(os.path.normpath(Path(path).parent / value))
    if path != "<string>" and not resolved.is_file():
        problems.add((key,), f"{str(resolved)!r} is not a file; expected {what}")
    return resolved


def load_scenario(path: str | Path) -> Scenario:
    """Read and parse the scenario file at ``path`` (see ``load_scenario_text``).

    Raises ``InputFileError`` (a ``UserError``, one line) when the file cannot be read (missing, a
    folder, binary, not UTF-8) and ``ConfigError`` when it is invalid.
    """
    p = Path(path)
    text = read_text_input(p, what="scenario")
    return load_scenario_text(text, str(p))
