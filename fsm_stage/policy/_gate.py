"""The tool-policy gate: decide, before a tool runs, whether the current stage allows it.

``ToolPolicy`` compiles one ``ToolPolicyConfig`` (with the graph's ``tool_groups``) and
``decide(name, args)`` returns a ``Decision`` (``allow`` / ``ask`` / ``deny`` and the rule).
``authorize(runtime, agent, call)`` combines the current stage's policy (the ``stage`` service's
``current(session)``) with plan mode's while plan mode is effective (the ``plan_mode``
service): a call must pass both; fsm_stage's own tools always pass. It is read at dispatch with
the call's complete arguments. ``refusal_text`` words a denial for the model (stage, rule, the
stages that allow the tool); ``policy_summary`` is the "Tools in this stage" notice line.
Wording: ``templates/<lang>/tool_policy.yaml``.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import json
import operator
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import attrs

from fsm_stage.config import GraphConfig, PlanModeConfig
from fsm_stage.config.policy import (
    DEFAULT_PATH_ARGS,
    GROUP_PREFIX,
    OWN_TOOLS,
    ToolPolicyConfig,
    ToolRuleConfig,
)
from fsm_stage.constants import TOOL_CALL, TOOL_RESULT
from fsm_stage.log.events import NewEvent
from fsm_stage.policy._paths import PathGlob, Workspace, call_paths, workspace
from fsm_stage.prompts import load_catalog
from fsm_stage.runtime.agent import Agent
from fsm_stage.runtime.session import Session
from fsm_stage.runtime.tools import (
    ERROR_PREFIX,
    ToolCall,
    ToolResult,
    result_data,
    step_position,
    tool_result_message,
)

CATALOG = "tool_policy"
_NO_CWD = Workspace(None, None, "unknown")
_UNREADABLE = object()  # arguments that are not JSON: path rules cannot classify them
Verdict = Literal["allow", "ask", "deny"]


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's pairs as a dict (``json.loads(..., object_pairs_hook=unique_keys)``); a
    plain ``ValueError`` naming the key when one repeats (which value a reader takes is then its
    parser's choice)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _value in pairs:
            if key in seen:
                raise ValueError(f"the key {key[:60]!r} is given twice")
            seen.add(key)
    return out
TOOL_REFUSED = "fsm/tool/refused"
"""Ignorable event logged with a refused call's error ``tool/result``:
``{callId, name, stage, rule, planMode}``."""


@attrs.frozen
class Decision:
    """A policy's answer for one call: ``verdict``, the ``rule`` that decided (wording for the
    model and the log), and ``scope`` (``"stage"`` or ``"plan mode"``); ``unapproved``: a
    ``deny`` of a call an ``ask`` rule admits once a human approves it (the review refused it,
    or could not be asked): the model is told so, not that the tool is barred here;
    ``declined``: ``(outcome, feedback)`` of the review a human answered without approving
    (``keep`` / ``dismiss``) for this very call, which is refused whatever the policy in force
    says."""

    verdict: Verdict
    rule: str
    scope: str = "stage"
    unapproved: bool = False
    declined: tuple[str, str | None] | None = None


def _describe(rule: ToolRuleConfig) -> str:
    return rule.tool if rule.paths is None else f"{rule.tool} on {', '.join(rule.paths)}"


class ToolPolicy:
    """One compiled policy: ``decide(name, args, workspace)``; ``names(catalog)`` lists what
    ``allow`` and ``ask`` admit of a catalog (for the notice and ``state``)."""

    def __init__(self, config: ToolPolicyConfig, groups: Mapping[str, Sequence[str]] | None = None) -> None:
        self.config = config
        self.groups = dict(groups or {})
        self._globs = {
            g: PathGlob(g) for rule in (*(config.allow or ()), *config.ask) for g in (rule.paths or ())
        }

    @property
    def reads_paths(self) -> bool:
        """Whether some rule limits paths (only then does a decision need the session cwd)."""
        return bool(self._globs)

    def _patterns(self, rule: ToolRuleConfig) -> tuple[str, ...]:
        if rule.tool.startswith(GROUP_PREFIX):
            return tuple(self.groups.get(rule.tool[1:], ()))  # an unknown group admits nothing
        return (rule.tool,)

    def _matches_name(self, rule: ToolRuleConfig, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, p) for p in self._patterns(rule))

    def _hits(self, rule: ToolRuleConfig, args: object, ws: Workspace, *, strict: bool) -> tuple[bool, str]:
        """Whether a name-matching ``rule`` applies to the call, and why (or why not).

        ``strict`` (an ``ask`` rule): one matching path is enough, a path naming a folder that
        could hold a match counts, anything unclassifiable applies the rule. Otherwise (an
        ``allow`` rule): every path, in each of its forms, must match, and nothing may be
        unclassifiable."""
        if rule.paths is None:
            return True, ""
        found = call_paths(args, rule.path_args or DEFAULT_PATH_ARGS, ws)
        globs = [self._globs[g] for g in rule.paths]
        fold = ws.case == "fold" or (strict and ws.case == "unknown")
        if strict:
            if found.problems:
                return True, found.problems[0]
            for forms in found.forms:
                for form in forms:
                    if any(g.match(form, fold=fold, folder=True) for g in globs):
                        return True, f"path {json.dumps(form or '.')}"
            return False, ""
        if found.problems:
            return False, found.problems[0]
        for forms in found.forms:
            for form in forms:
                if not any(g.match(form, fold=fold, folder=False) for g in globs):
                    return False, f"path {json.dumps(form or '.')} matches none of {', '.join(rule.paths)}"
        return True, ""

    def decide(self, name: str, args: object, workspace: Workspace | None = None) -> Decision:
        """The verdict on one call (``args``: its decoded arguments, anything JSON gives): a
        matching ``ask`` rule first (ask beats allow), then a matching ``allow`` rule, then the
        default (deny; allow when ``allow`` is omitted). Paths are read against ``workspace``
        (default: no session cwd) as ``_hits`` says."""
        ws = workspace if workspace is not None else _NO_CWD
        why: list[str] = []
        for rule in self.config.ask:
            if self._matches_name(rule, name):
                hit, reason = self._hits(rule, args, ws, strict=True)
                if hit:
                    return Decision("ask", f"ask: {_describe(rule)}" + (f" ({reason})" if reason else ""))
        for rule in self.config.allow or ():
            if self._matches_name(rule, name):
                hit, reason = self._hits(rule, args, ws, strict=False)
                if hit:
                    return Decision("allow", f"allow: {_describe(rule)}")
                why.append(reason)
        if self.config.allow is None:
            return Decision("allow", "no allow list: every tool runs")
        return Decision("deny", "; ".join(why) if why else "not in the allow list")

    def names(self, catalog: Sequence[str] | None = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """``(allowed, ask)`` entries as written (groups expanded; with ``catalog``: the catalog
        tools they admit by name, path rules marked ``name (paths)``)."""

        def listed(rules: Sequence[ToolRuleConfig]) -> tuple[str, ...]:
            out: list[str] = []
            for rule in rules:
                suffix = "" if rule.paths is None else f" (only {', '.join(rule.paths)})"
                pats = self._patterns(rule)
                hits = (
                    [t for t in catalog if any(fnmatch.fnmatchcase(t, p) for p in pats)] if catalog else pats
                )
                out.extend(f"{h}{suffix}" for h in hits if f"{h}{suffix}" not in out)
            return tuple(out)

        return listed(self.config.allow or ()), listed(self.config.ask)


@functools.lru_cache(maxsize=256)
def compile_policy(
    config: ToolPolicyConfig, groups: tuple[tuple[str, tuple[str, ...]], ...] = ()
) -> ToolPolicy:
    """The (cached) ``ToolPolicy`` of ``config`` under ``groups`` (``(name, members)`` pairs)."""
    return ToolPolicy(config, dict(groups))


def _groups(graph: GraphConfig | None) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if graph is None or not graph.tool_groups:
        return ()
    return tuple((k, tuple(v)) for k, v in graph.tool_groups.items())


#: The policy of a stage the graph does not have, where some stage restricts tools: none runs.
_UNKNOWN_STAGE = ToolPolicyConfig(allow=())


def stage_policy(graph: GraphConfig, stage: str) -> ToolPolicy | None:
    """The compiled policy of ``stage`` (None: no ``tools`` key, everything runs). A stage the
    graph does not have (it changed under a session) cannot be classified: where any stage of
    the graph has ``tools`` it gets the strictest policy, every tool denied (fsm_stage's own
    still run)."""
    configured = graph.stage(stage)
    if configured is None:
        if graph.restricts_tools:
            return compile_policy(_UNKNOWN_STAGE, _groups(graph))
        return None
    if configured.tools is None:
        return None
    return compile_policy(configured.tools, _groups(graph))


def plan_policy(plan: PlanModeConfig | None, graph: GraphConfig | None) -> ToolPolicy | None:
    """The compiled plan-mode policy (None: plan mode restricts no tool)."""
    if plan is None or plan.tools is None:
        return None
    return compile_policy(plan.tools, _groups(graph))


@runtime_checkable
class StagePolicySource(Protocol):
    """What the policy reads of the stage switch: its graph and the current stage."""

    config: GraphConfig

    def current(self, session: Session) -> str: ...


@runtime_checkable
class PlanPolicySource(Protocol):
    """What the policy reads of plan mode: its config and whether it is in effect."""

    config: PlanModeConfig

    def effective(self, agent: Agent) -> bool: ...


@runtime_checkable
class PolicySourceGate(Protocol):
    """A tool gate that carries one controller's part of the policy (``policy._ask.PolicyGate``):
    the stage switch and plan mode each register one with their runtime."""

    policy_source: StagePolicySource | PlanPolicySource


class _Gated(Protocol):
    @property
    def tool_gates(self) -> Sequence[object]: ...


@attrs.frozen
class PolicyState:
    """The policy in effect for an agent: ``stage`` (name or None), ``plan_mode`` (effective),
    the compiled ``stage_policy`` / ``plan_policy`` (None: unrestricted), the ``graph`` and the
    session ``cwd`` path rules read paths against (None: the header has none)."""

    stage: str | None
    plan_mode: bool
    stage_policy: ToolPolicy | None
    plan_policy: ToolPolicy | None
    graph: GraphConfig | None
    cwd: str | None = None

    @property
    def restricted(self) -> bool:
        """True when some policy applies."""
        return self.stage_policy is not None or self.plan_policy is not None

    def decide(self, call: ToolCall) -> Decision:
        """Both policies' verdict on ``call`` (deny beats ask beats allow); own tools always run.
        Arguments that are not JSON (or not an object), or name a key twice (which value a tool
        reads is then its parser's choice), are unclassifiable for path rules."""
        if call.name in OWN_TOOLS or not self.restricted:
            return Decision("allow", "unrestricted")
        try:
            args: object = (json.loads(call.arguments, object_pairs_hook=unique_keys)
                            if call.arguments.strip() else {})
        except (ValueError, RecursionError):  # not JSON, or a key given twice
            args = _UNREADABLE
        # the cwd is resolved (file system calls) only for a policy whose rules limit paths
        policies = (self.stage_policy, self.plan_policy if self.plan_mode else None)
        ws = workspace(self.cwd) if any(p is not None and p.reads_paths for p in policies) else _NO_CWD
        found = []
        if self.stage_policy is not None:
            found.append(self.stage_policy.decide(call.name, args, ws))
        if self.plan_policy is not None and self.plan_mode:
            found.append(attrs.evolve(self.plan_policy.decide(call.name, args, ws), scope="plan mode"))
        for verdict in ("deny", "ask"):
            for d in found:
                if d.verdict == verdict:
                    return d
        return found[0] if found else Decision("allow", "unrestricted")

    def describe(self, catalog: Sequence[str] | None = None) -> str:
        """One line for the simulator and ``state``: ``stage explore: read_file, grep · plan
        mode: read_file`` (``every tool`` / ``ask …`` parts as they apply)."""
        parts = []
        for label, policy, on in (
            (f"stage {self.stage}", self.stage_policy, True),
            ("plan mode", self.plan_policy, self.plan_mode),
        ):
            if policy is None or not on:
                continue
            allowed, ask = policy.names(catalog)
            text = "every tool" if policy.config.allow is None else (", ".join(allowed) or "none")
            parts.append(f"{label}: {text}" + (f"; ask {', '.join(ask)}" if ask else ""))
        return " · ".join(parts) if parts else "every tool"

    def allowed_in(self, call: ToolCall) -> tuple[str, ...]:
        """Stages whose own policy would run ``call`` outright (plan mode aside)."""
        if self.graph is None:
            return ()
        out = []
        for s in self.graph.stages:
            state = attrs.evolve(
                self, stage=s.name, plan_mode=False, stage_policy=stage_policy(self.graph, s.name)
            )
            if state.decide(call).verdict == "allow":
                out.append(s.name)
        return tuple(out)


_Sources = tuple["StagePolicySource | None", "PlanPolicySource | None"]

_SOURCES: weakref.WeakKeyDictionary[Any, tuple[Sequence[object], _Sources]] = weakref.WeakKeyDictionary()
"""Per runtime: its gates when ``policy_sources`` last looked and what it found (the protocol
``isinstance`` checks are the costly part of authorising a call); the gates are held, so the
identity comparison cannot be fooled by a reused id."""


def policy_sources(runtime: _Gated) -> tuple[StagePolicySource | None, PlanPolicySource | None]:
    """The stage switch's and plan mode's policy sources among ``runtime``'s tool gates (the
    first of each kind; None when that controller is not attached). Found again whenever the
    runtime's gates change."""
    gates = runtime.tool_gates
    try:
        known = _SOURCES.get(runtime)
    except TypeError:  # a runtime that takes no weak reference is looked at every time
        known = None
    if known is not None and len(known[0]) == len(gates) and all(map(operator.is_, known[0], gates)):
        return known[1]
    stage_src: StagePolicySource | None = None
    plan_src: PlanPolicySource | None = None
    for g in gates:
        src = g.policy_source if isinstance(g, PolicySourceGate) else None
        if stage_src is None and isinstance(src, StagePolicySource):
            stage_src = src
        elif plan_src is None and isinstance(src, PlanPolicySource):
            plan_src = src
    with contextlib.suppress(TypeError):
        _SOURCES[runtime] = (gates, (stage_src, plan_src))
    return stage_src, plan_src


def policy_state(runtime: _Gated, agent: Agent | None) -> PolicyState | None:
    """The policy in effect for ``agent`` on ``runtime`` (None: no agent, or no policy
    anywhere), from the policy sources its controllers registered (``policy_sources``)."""
    if agent is None:
        return None
    stage_src, plan_src = policy_sources(runtime)
    graph = stage_src.config if stage_src is not None and isinstance(stage_src.config, GraphConfig) else None
    stage = sp = pp = None
    if plan_src is not None and isinstance(plan_src.config, PlanModeConfig):
        pp = plan_policy(plan_src.config, graph)
    # a graph where no stage has ``tools`` gives every stage, known or not, no policy: the
    # current stage is read only when some policy may apply
    if stage_src is not None and graph is not None and (graph.restricts_tools or pp is not None):
        stage = stage_src.current(agent.session)
        sp = stage_policy(graph, stage)
    if sp is None and pp is None:
        return None
    active = bool(plan_src.effective(agent)) if plan_src is not None and pp is not None else False
    header = getattr(agent.session, "header", None)
    cwd = getattr(header, "cwd", None)
    return PolicyState(stage, active, sp, pp, graph, cwd if isinstance(cwd, str) else None)


def unrestricted_state(runtime: _Gated) -> PolicyState:
    """The policy state where no policy applies (its refusals are worded in the graph's
    language): for a refusal that does not come from a rule."""
    stage_src, _plan_src = policy_sources(runtime)
    graph = stage_src.config if stage_src is not None and isinstance(stage_src.config, GraphConfig) else None
    return PolicyState(None, False, None, None, graph)


def authorize(
    runtime: _Gated, agent: Agent | None, call: ToolCall
) -> tuple[Decision, PolicyState] | None:
    """The policy decision for ``call`` (None when no policy applies: run it)."""
    state = policy_state(runtime, agent)
    if state is None:
        return None
    return state.decide(call), state


def _text(key: str, language: str, **variables: Any) -> str:
    return load_catalog(CATALOG, language).text(key, **variables)


def refusal_text(decision: Decision, state: PolicyState, call: ToolCall) -> str:
    """The model-facing refusal (without the ``Error: `` prefix): a call the policy bars here
    is told where it is allowed; a call that needed a human's approval is told it did not get it."""
    language = state.graph.language if state.graph is not None else "en"
    if decision.declined is not None:
        outcome, feedback = decision.declined
        note = _text("refusal.feedback", language, feedback=feedback) if feedback else ""
        key = "refusal.dismissed" if outcome == "dismiss" else "refusal.declined"
        return _text(key, language, tool=call.name, feedback=note)
    where = (
        _text("refusal.plan_mode", language, stage=state.stage or "")
        if decision.scope == "plan mode"
        else _text("refusal.stage", language, stage=state.stage or "")
    )
    if decision.unapproved or decision.verdict == "ask":
        return _text("refusal.not_approved", language, tool=call.name, where=where, rule=decision.rule)
    stages = state.allowed_in(call)
    return _text(
        "refusal.denied", language, tool=call.name, where=where, rule=decision.rule, stages=", ".join(stages)
    ) + ("" if stages else _text("refusal.nowhere", language))


def policy_summary(graph: GraphConfig, stage: str, catalog: Sequence[str] | None = None) -> str | None:
    """ "Tools in this stage: …" for the stage notice (None when the stage has no policy)."""
    policy = stage_policy(graph, stage)
    if policy is None:
        return None
    allowed, ask = policy.names(catalog)
    language = graph.language
    if policy.config.allow is None:
        if not ask:
            return None  # `tools: {}` restricts nothing
        text = _text("notice.all_but_ask", language, ask=", ".join(ask))
    else:
        text = _text("notice.allowed", language, tools=", ".join(allowed) or _text("notice.none", language))
        if ask:
            text += _text("notice.ask", language, ask=", ".join(ask))
    return text


def refuse(
    session: Any,
    call: ToolCall,
    decision: Decision,
    state: PolicyState,
    *,
    turn: int | None = None,
    step: int | None = None,
    log_call: bool = True,
    call_seq: int | None = None,
    closing: Sequence[NewEvent] = (),
    audit: Any = None,
) -> ToolResult:
    """The refused call's error ``ToolResult``; with a ``session``, logs in one batch
    ``tool/call`` (when ``log_call``; else ``call_seq`` is the logged one), the error
    ``tool/result``, ``fsm/tool/refused`` and ``closing`` (the redemptions that close the
    call's live reviews). Without a ``session``, ``audit`` (a session whose caller writes the
    result itself: the step driver resuming a call) gets the ``fsm/tool/refused`` alone."""
    text = ERROR_PREFIX + refusal_text(decision, state, call)
    message = tool_result_message(call, text, True)
    result = ToolResult(call, text, True, message=message)
    refused = NewEvent(TOOL_REFUSED, {"callId": call.id, "name": call.name, "stage": state.stage,
                                      "rule": decision.rule, "planMode": decision.scope == "plan mode"},
                       ignorable=True)
    if session is None and audit is not None:
        audit.append_many([refused])
    if session is not None:
        where = step_position(turn, step)
        batch: list[NewEvent] = []
        if log_call:
            call_seq = len(session)
            batch.append(
                NewEvent(
                    TOOL_CALL, {**where, "callId": call.id, "name": call.name, "arguments": call.arguments}
                )
            )
        batch.append(
            NewEvent(
                TOOL_RESULT,
                result_data(result, turn, step),
                "append",
                [call_seq] if call_seq is not None else None,
            )
        )
        batch.append(refused)
        session.append_many([*batch, *closing])
    return result
