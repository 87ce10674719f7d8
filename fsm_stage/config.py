"""Stage-graph configuration: frozen attrs classes (the data model every layer reads).

The YAML loader (``load_config``), the validation rules and the JSON Schema export live in
this module too; they are built around these classes (issue: stage graphs).

Shapes
------
``ConfigFile``      what one YAML file declares: an optional ``GraphConfig`` (the stage
                    switch) and an optional ``PlanModeConfig``.
``GraphConfig``     name, stages (non-empty, ordered), guidance ``section`` template,
                    ``initial`` (None = first stage), ``handoff_dir``, ``min_handoff_tokens``
                    (None = every model transition is full), ``language`` (en | zh).
``StageConfig``     name (``[a-z][a-z0-9_-]*``), instruction, ``targets`` (None = every other
                    stage, the seed's behaviour; otherwise the allowed edges).
``EdgeConfig``      one allowed transition: ``target`` stage name and the names of the
                    eligibility predicates (``guards``) that must hold to take it.
``PlanModeConfig``  ``section``: the plan-mode policy text (plan-mode spec §1.8, B1–B4).
"""

from __future__ import annotations

from typing import Literal

import attrs

Language = Literal["en", "zh"]


@attrs.frozen
class EdgeConfig:
    """An allowed model transition ``<stage> -> target``; ``guards`` name eligibility predicates."""

    target: str
    guards: tuple[str, ...] = ()


@attrs.frozen
class StageConfig:
    """One stage of a graph (stage-switch spec §1.2)."""

    name: str
    instruction: str
    targets: tuple[EdgeConfig, ...] | None = None


@attrs.frozen
class PlanModeConfig:
    """Plan-mode settings: the policy ``section`` shown while plan mode is active (B1–B4)."""

    section: str


@attrs.frozen
class GraphConfig:
    """A validated stage graph (stage-switch spec §1.2 plus fsm_stage's edges)."""

    name: str
    stages: tuple[StageConfig, ...]
    section: str
    initial: str | None = None
    handoff_dir: str = "handoff"
    min_handoff_tokens: float | None = None
    language: Language = "en"

    @property
    def stage_names(self) -> tuple[str, ...]:
        """Configured stage names in configured order."""
        return tuple(s.name for s in self.stages)

    @property
    def initial_stage(self) -> str:
        """``initial`` when set, otherwise the first stage's name (S-spec §1.2 default)."""
        return self.initial if self.initial is not None else self.stages[0].name

    def stage(self, name: str) -> StageConfig | None:
        """The stage called ``name``, or None when it is not configured."""
        for s in self.stages:
            if s.name == name:
                return s
        return None

    def edges_from(self, name: str) -> tuple[EdgeConfig, ...]:
        """Allowed model transitions out of ``name`` in configured order.

        ``targets: None`` means every other configured stage with no guards. An unknown
        ``name`` (e.g. a stage removed from the graph after a log recorded it) may go anywhere,
        so a session is never stranded.
        """
        st = self.stage(name)
        if st is None or st.targets is None:
            return tuple(EdgeConfig(n) for n in self.stage_names if n != name)
        return st.targets


@attrs.frozen
class ConfigFile:
    """Everything one YAML file declares. At least one of ``graph`` / ``plan_mode`` is set."""

    path: str
    graph: GraphConfig | None = None
    plan_mode: PlanModeConfig | None = None
    warnings: tuple[str, ...] = ()
