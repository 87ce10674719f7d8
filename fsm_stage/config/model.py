"""The stage-graph data model: frozen attrs classes with their field rules, and ``normalised``.

``GraphConfig`` (stages, guidance ``section``, ``initial``, handoff settings, language),
``StageConfig``, ``EdgeConfig`` (an allowed transition and its guards), ``PlanModeConfig``
and ``ConfigFile`` (what one YAML file declares). Each field carries a ``FieldRule``
(attrs metadata ``"rule"``) that the loader's checks and the JSON Schema both read.
``normalised`` gives the plain dict the compiled graph's fingerprint hashes.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from fsm_stage._yaml import Problem
from fsm_stage.config.fields import FieldRule as FieldRule
from fsm_stage.config.fields import rule_metadata
from fsm_stage.config.models import BudgetConfig, OnBudget, ReasoningEffort, model_fields, normalised_choice
from fsm_stage.config.policy import ToolPolicyConfig, ToolRuleConfig, normalised_policy
from fsm_stage.config.review_rules import ReviewRulesConfig
from fsm_stage.constants import STAGE_NAME_RE

Language = Literal["en", "zh"]

#: Stage name grammar (docs/contracts.md), matched with ``re.fullmatch``.
STAGE_NAME_PATTERN: str = STAGE_NAME_RE.pattern
#: Guard (eligibility predicate) name grammar, matched with ``re.fullmatch``.
GUARD_NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_.-]*"
#: Longest stage or guard name (characters). A stage name becomes the handoff file name
#: ``<stage>.md`` (file systems refuse names over 255 bytes); guard names share the limit so
#: messages and diagrams stay readable.
MAX_NAME_LENGTH = 64
#: Variables a graph ``section`` template may use (docs/contracts.md).
TEMPLATE_VARIABLES = frozenset({"stage_current", "stage_targets"})


def _rule(doc: str, expected: str, **kw: Any) -> dict[str, FieldRule]:
    return rule_metadata(doc, expected, **kw)


def _policy_rule(where: str) -> dict[str, FieldRule]:
    return _rule(f"Tool policy {where}: `allow` / `ask` lists of tool rules (omit: every tool runs).",
                 "a mapping {allow, ask}")


def _frozen_groups(value: Any) -> Any:
    """``tool_groups`` with its lists as tuples (other shapes are left for the rules to report)."""
    if isinstance(value, dict):
        return {k: tuple(v) if isinstance(v, list) else v for k, v in value.items()}
    return value


def _tool_groups_rule() -> dict[str, FieldRule]:
    return _rule("Named lists of tool names or globs, referenced as `@name` in `tools` policies.",
                 "a mapping {group name: [tool names or globs]}")


def field_rule(field: attrs.Attribute[Any]) -> FieldRule:
    """The ``FieldRule`` of an attrs field of a config class (KeyError if it has none)."""
    rule: FieldRule = field.metadata["rule"]
    return rule


def yaml_key(field: attrs.Attribute[Any]) -> str:
    """The native YAML key of ``field`` (``EdgeConfig.target`` is written ``to``); the
    attribute name for fields without a ``FieldRule`` (classes of other files)."""
    rule: FieldRule | None = field.metadata.get("rule")
    return (rule.yaml_key if rule is not None else None) or field.name


#: Handoff folders that could leave the session directory (docs/architecture.md).
_HANDOFF_DIR_FORBIDDEN: tuple[tuple[str, str], ...] = (
    (r"^(?:[/\\~]|[A-Za-z]:)", "is an absolute path; expected a folder relative to the session directory"),
    (r"(?:^|[/\\])\.\.(?:[/\\]|(?![\s\S]))", "leaves the session directory; `..` components are not allowed"),
    (r"\x00", "contains a NUL character; expected a plain relative folder path"),
    # what ``handoff._normalised_dir`` refuses at run time: a path that normalises to "."
    (r"^(?:\.[/\\]*)+$", "names the session directory itself; expected a folder inside it"),
)



def _review_rule(where: str) -> dict[str, FieldRule]:
    return _rule(f"Review rules {where}: approvers, quorum, not_requester, deadline, on_deadline, notify.",
                 "a mapping {approvers, quorum, not_requester, deadline, on_deadline, notify}")


@attrs.frozen
class EdgeConfig:
    """An allowed model transition ``<stage> -> target``; ``guards`` name eligibility predicates.

    YAML: a stage name string, or a mapping ``{to: <stage>, guards: [<predicate names>]}``.
    """

    target: str = attrs.field(
        metadata=_rule(
            "The stage this transition leads to.",
            "a configured stage name",
            pattern=STAGE_NAME_PATTERN,
            max_length=MAX_NAME_LENGTH,
            yaml_key="to",
        )
    )
    guards: tuple[str, ...] = attrs.field(
        default=(),
        metadata=_rule(
            "Names of eligibility predicates that must all hold for the model to take this edge.",
            "a list of predicate names",
            item_pattern=GUARD_NAME_PATTERN,
            item_max_length=MAX_NAME_LENGTH,
        ),
    )
    review: ReviewRulesConfig | None = attrs.field(default=None, metadata=_review_rule("of this transition"))


_STAGE_MODEL = model_fields()
_PLAN_MODEL = model_fields()


@attrs.frozen
class StageConfig:
    """One stage of a graph (docs/contracts.md)."""

    name: str = attrs.field(
        metadata=_rule(
            "Stage name; also the handoff file name, so it is restricted to a safe grammar.",
            f"a stage name matching {STAGE_NAME_PATTERN}, at most {MAX_NAME_LENGTH} characters",
            pattern=STAGE_NAME_PATTERN,
            max_length=MAX_NAME_LENGTH,
            plugin_key="name",
        )
    )
    instruction: str = attrs.field(
        metadata=_rule(
            "Shown to the model on entering the stage, after `Current stage: <name>`.",
            "a non-empty string `instruction`",
            non_blank=True,
            plugin_key="instruction",
        )
    )
    targets: tuple[EdgeConfig, ...] | None = attrs.field(
        default=None,
        metadata=_rule(
            "Stages the model may switch to from here (omit: every other stage; []: none).",
            "a list of stage names or {to, guards} mappings",
        ),
    )
    description: str | None = attrs.field(
        default=None,
        metadata=_rule("Documentation only (diagrams, README); never shown to the model.", "a string"),
    )
    tools: ToolPolicyConfig | None = attrs.field(default=None, metadata=_policy_rule("in this stage"))
    model: str | None = _STAGE_MODEL["model"]
    reasoning_effort: ReasoningEffort | None = _STAGE_MODEL["reasoning_effort"]
    model_settings: Mapping[str, Any] | None = _STAGE_MODEL["model_settings"]
    budget: BudgetConfig | None = _STAGE_MODEL["budget"]
    on_budget: OnBudget = _STAGE_MODEL["on_budget"]


@attrs.frozen
class PlanModeConfig:
    """Plan-mode settings: the policy ``section`` shown while plan mode is active (B1–B5)."""

    section: str = attrs.field(
        metadata=_rule(
            "Plan-mode policy text, shown verbatim at system-prompt order 50 while plan mode is active.",
            "a non-empty string `section`",
            non_blank=True,
            plugin_key="section",
        )
    )
    tools: ToolPolicyConfig | None = attrs.field(
        default=None, metadata=_policy_rule("while plan mode is on (combined with the stage's)"))
    review: ReviewRulesConfig | None = attrs.field(default=None, metadata=_review_rule(
        "of the plan-mode exit (replaces the graph's `review`)"))
    model: str | None = _PLAN_MODEL["model"]
    reasoning_effort: ReasoningEffort | None = _PLAN_MODEL["reasoning_effort"]
    model_settings: Mapping[str, Any] | None = _PLAN_MODEL["model_settings"]
    budget: BudgetConfig | None = _PLAN_MODEL["budget"]
    on_budget: OnBudget = _PLAN_MODEL["on_budget"]


@attrs.frozen
class GraphConfig:
    """A validated stage graph (docs/contracts.md plus fsm_stage's edges)."""

    name: str = attrs.field(
        metadata=_rule(
            "Graph name (diagram title, logs); the plugin form uses the file name.",
            "a non-empty string",
            non_blank=True,
        )
    )
    stages: tuple[StageConfig, ...] = attrs.field(
        metadata=_rule(
            "The stages, in order; the first is the default initial stage.",
            "a non-empty `stages` list of {name, instruction} mappings",
            min_items=1,
            plugin_key="stages",
        )
    )
    section: str = attrs.field(
        metadata=_rule(
            "Guidance template shown while an eligibility predicate holds; "
            "may use << stage_current >> and << stage_targets >>.",
            "a non-empty string `section`",
            non_blank=True,
            plugin_key="section",
        )
    )
    initial: str | None = attrs.field(
        default=None,
        metadata=_rule(
            "Stage a new session starts in (default: the first stage).",
            "a configured stage name",
            pattern=STAGE_NAME_PATTERN,
            max_length=MAX_NAME_LENGTH,
            plugin_key="initial",
        ),
    )
    handoff_dir: str = attrs.field(
        default="handoff",
        metadata=_rule(
            "Folder for handoff documents, relative to the session's working directory.",
            "a relative folder path inside the session directory",
            non_blank=True,
            forbid=_HANDOFF_DIR_FORBIDDEN,
            plugin_key="handoffDir",
        ),
    )
    min_handoff_tokens: float | None = attrs.field(
        default=None,
        metadata=_rule(
            "Surface size (tokens) from which a model transition is full (handoff + archive); "
            "omit to make every model transition full.",
            "a non-negative finite number",
            minimum=0,
            plugin_key="minHandoffTokens",
        ),
    )
    language: Language = attrs.field(
        default="en",
        metadata=_rule('Review dialog language: "en" or "zh".', '"en" or "zh"', plugin_key="language"),
    )
    description: str | None = attrs.field(
        default=None,
        metadata=_rule("Documentation only (diagrams, README); never shown to the model.", "a string"),
    )
    tool_groups: Mapping[str, tuple[str, ...]] | None = attrs.field(
        default=None, hash=False, converter=_frozen_groups, metadata=_tool_groups_rule())
    review: ReviewRulesConfig | None = attrs.field(default=None, metadata=_review_rule(
        "of every review of the graph, unless an edge or plan mode gives its own"))
    models: Mapping[str, str] | None = attrs.field(default=None, hash=False, metadata=_rule(
        "Model aliases: `{alias: provider:name}`, usable as a stage's or plan mode's `model`.",
        "a mapping {alias: provider-qualified model name}"))

    @functools.cached_property
    def stage_names(self) -> tuple[str, ...]:
        """Configured stage names in configured order (built once per instance; not a field)."""
        return tuple(s.name for s in self.stages)

    @property
    def initial_stage(self) -> str:
        """``initial`` when set, otherwise the first stage's name (docs/contracts.md)."""
        return self.initial if self.initial is not None else self.stages[0].name

    @functools.cached_property
    def _stage_index(self) -> dict[str, StageConfig]:
        """name -> stage (the first of that name), built once per instance; not a field, so
        equality, hashing, ``attrs.evolve`` and pickling ignore it."""
        index: dict[str, StageConfig] = {}
        for s in self.stages:
            index.setdefault(s.name, s)
        return index

    def stage(self, name: str) -> StageConfig | None:
        """The stage called ``name``, or None when it is not configured (O(1))."""
        return self._stage_index.get(name)

    @functools.cached_property
    def restricts_tools(self) -> bool:
        """Whether any stage has a ``tools`` policy (computed once per instance; not a field)."""
        return any(s.tools is not None for s in self.stages)

    def edges_from(self, name: str) -> tuple[EdgeConfig, ...]:
        """Allowed model transitions out of ``name`` in configured order.

        ``targets: None`` means every other configured stage with no guards. An unknown
        ``name`` (e.g. a stage removed from the graph after a log recorded it) may go anywhere,
        so a session is never stranded.
        """
        st = self.stage(name)
        if st is None or st.targets is None:
            return tuple(e for e in self._edges_to_every_stage if e.target != name)
        return st.targets

    @functools.cached_property
    def _edges_to_every_stage(self) -> tuple[EdgeConfig, ...]:
        """One unguarded ``EdgeConfig`` per configured stage, built once per instance (like
        ``_stage_index``: not a field, so equality, hashing, evolve and pickling ignore it);
        ``edges_from`` filters the source out instead of rebuilding every edge per call."""
        return tuple(EdgeConfig(n) for n in self.stage_names)


#: stages merge in with ``<<: *anchor`` (the Compose-file convention).
EXTENSION_PREFIX = "x-"
#: Key of the plan-mode mapping at the top level of the native form.
PLAN_MODE_KEY = "plan_mode"


@attrs.frozen
class ConfigFile:
    """Everything one YAML file declares. At least one of ``graph`` / ``plan_mode`` is set.

    ``warnings`` are one-line positioned messages (same format as errors) that do not make
    the file invalid (unreachable stages).
    """

    path: str
    graph: GraphConfig | None = None
    plan_mode: PlanModeConfig | None = None
    warnings: tuple[str, ...] = ()
    warning_details: tuple[Problem, ...] = attrs.field(default=(), eq=False, repr=False)


for _cls in (EdgeConfig, StageConfig, PlanModeConfig, GraphConfig, ConfigFile):
    attrs.resolve_types(_cls)

#: Classes a bare YAML string may stand for, and the field the string fills
#: (``targets: [verify]`` means ``targets: [{to: verify}]``).
SCALAR_SHORTHAND: dict[type, str] = {EdgeConfig: "target", ToolRuleConfig: "tool"}
#: The config classes the loader structures (the JSON Schema's ``$defs``).
CONFIG_CLASSES: tuple[type, ...] = (GraphConfig, StageConfig, EdgeConfig, PlanModeConfig,
                                     ToolPolicyConfig, ToolRuleConfig, BudgetConfig, ReviewRulesConfig)


# ---------------------------------------------------------------------------------------------
# Positions
# ---------------------------------------------------------------------------------------------

def normalised(config: ConfigFile | GraphConfig | PlanModeConfig) -> dict[str, Any]:
    """A plain, JSON-able dict of what ``config`` means (input of the graph fingerprint).

    Defaults are resolved (``initial`` → the initial stage; ``targets: None`` → the explicit
    list of every other stage) and documentation-only fields (``description``) are left out,
    so two files that behave the same normalise the same. Edges are ``{"to", "guards"}``.
    A ``ConfigFile`` gives ``{"graph": …|None, "plan_mode": …|None}``.
    """
    if isinstance(config, ConfigFile):
        return {
            "graph": normalised(config.graph) if config.graph is not None else None,
            "plan_mode": normalised(config.plan_mode) if config.plan_mode is not None else None,
        }
    if isinstance(config, PlanModeConfig):
        return {"section": config.section, **_policy_part(config.tools), **normalised_choice(config),
                **_review_part(config.review)}
    return normalised_graph_part(
        config,
        [normalised_stage_part(s, s.targets if s.targets is not None else config.edges_from(s.name))
         for s in config.stages],
    )


def normalised_graph_part(config: GraphConfig, stages: object) -> dict[str, Any]:
    """``normalised(config)`` with ``stages`` as its ``"stages"`` value (the fingerprint writes
    the stage list itself, so it passes a placeholder)."""
    return {
        "name": config.name,
        "initial": config.initial_stage,
        "section": config.section,
        "handoff_dir": config.handoff_dir,
        "min_handoff_tokens": config.min_handoff_tokens,
        "language": config.language,
        "stages": stages,
        **({"tool_groups": {k: list(v) for k, v in config.tool_groups.items()}}
           if config.tool_groups else {}),
        **({"models": dict(config.models)} if config.models else {}),
        **_review_part(config.review),
    }


def normalised_stage_part(stage: StageConfig, edges: tuple[EdgeConfig, ...]) -> dict[str, Any]:
    """One stage of ``normalised``: ``name``, ``instruction``, ``targets`` (one
    ``normalised_edge`` per edge of ``edges``) and ``normalised_stage_extras``."""
    return {"name": stage.name, "instruction": stage.instruction,
            "targets": [normalised_edge(e) for e in edges], **normalised_stage_extras(stage)}


def normalised_edge(edge: EdgeConfig) -> dict[str, Any]:
    """One edge of ``normalised``: ``{"to", "guards"}``, plus ``review`` when set."""
    part: dict[str, Any] = {"to": edge.target, "guards": list(edge.guards)}
    if edge.review is not None:
        part.update(_review_part(edge.review))
    return part


def normalised_stage_extras(stage: StageConfig) -> dict[str, Any]:
    """What ``normalised`` writes for a stage besides its name, instruction and targets: its
    tool policy and model keys when set, ``{}`` for a stage that sets neither."""
    part: dict[str, Any] = {}
    if stage.tools is not None:
        part["tools"] = normalised_policy(stage.tools)
    if (stage.model is not None or stage.reasoning_effort is not None or stage.model_settings is not None
            or stage.budget is not None):
        part.update(normalised_choice(stage))
    return part


def _review_part(rules: ReviewRulesConfig | None) -> dict[str, Any]:
    """``{"review": …}`` for set rules, nothing otherwise (older fingerprints stay as they were)."""
    if rules is None:
        return {}
    return {"review": {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.asdict(rules).items()}}


def _policy_part(policy: ToolPolicyConfig | None) -> dict[str, Any]:
    """``{"tools": …}`` for a set policy, nothing otherwise (fingerprints of graphs without
    policies stay what they were)."""
    return {} if policy is None else {"tools": normalised_policy(policy)}
