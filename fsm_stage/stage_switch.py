"""The stage switch: a session moves through the stages of a compiled stage graph.

Port of DeepSeek Harness's ``dsh-stage-switch`` (stage-switch spec S1…S116) onto fsm_stage's
compiled graphs (``fsm_stage.graph``) and runtime seams (``fsm_stage.runtime``).

How it works
------------
* **State is a fold of the log.** Every stage entry appends one ``user/message`` whose
  source is the record ``{kind: "stage-switch", form: "notice", summary: "Current stage: X"
  | "Stage switched to X"}`` (spec §1.3). The current stage is the last record
  (``fsm_stage.log.projections.StageProjection``, read in O(new events)), or the graph's
  ``initial`` stage before the first record (§1.4, §1.5).
* **Initial stage prompt.** The first accepted pre-step of a top-level session appends
  ``Current stage: <initial>\\n<instruction>`` to the end of the step's batch (§1.14).
  Subagent sessions (``origin == "subagent"`` or ``delegation_depth > 0``) skip it.
* **Cache-safe.** The stage is never in the system prompt; ``goto_stage`` is registered in
  every stage; the deployer's guidance (``section``) is a runtime-context entry
  ``stage:policy`` (order 116) rendered with ``<< stage_current >>`` and
  ``<< stage_targets >>`` while an eligibility predicate holds; the runtime re-appends the
  context snapshot only when its text changes (§1.8).
* **goto_stage** (§1.15). The model names a target. The call is refused — with the reason and
  the allowed targets — unless the target is configured, differs from the current stage, is
  an *edge of the graph* out of the current stage, and the edge's named guards hold. Then a
  review channel must exist; the shape is decided (**full** when no ``min_handoff_tokens`` is
  configured or the token meter prices the surface at or above it, **light** below it); a full
  transition needs a non-blank ``handoff`` markdown document, written to
  ``<cwd>/<handoff_dir>/<session>/<stage>.md`` *before* the review so the reviewer reads it;
  the human reviews (only a lone exact ``Approve`` with no free text approves); on approval
  the transition becomes **pending**.
* **Boundary flush** (§1.13). At the next accepted pre-step, the pending transition is applied
  durably first: the record is appended inside the compiled machine's ``before`` callback
  (``CompiledGraph.fire(..., commit=...)`` for model edges, ``CompiledGraph.jump`` for user
  jumps). A full transition appends the handoff notice as a surface **replace** of everything
  but a protected system head, so the model sees only the notice (the log keeps everything);
  a light one appends the new stage prompt. If the append fails the stage does not change, the
  error is logged and the pending transition stays for the next accepted pre-step. The
  pending/flush machinery is the runtime's shared ``PendingStore`` (also used by plan mode).
* **/stage** (§1.16). Bare: shows the current stage and the stages. ``/stage <name>``: a user
  jump to any configured stage (no edges, no guards, no review, always light): committed at
  once when the session is idle, queued for the next accepted pre-step during a turn. Text
  after the name is steered into the new stage as a user message.
* **Narration** (§1.6). A user jump's stage prompt is prefixed with "The user switched this
  session to stage X." only when the model was last told (at the last ``request/header``) a
  different stage. Model transitions are never narrated: their tool result already tells.

Eligibility and guards
----------------------
``register_eligibility(fn)`` (an ``(agent) -> bool``) gates the guidance: ``stage:policy``
shows while *any* unnamed predicate is true (S31–S33). ``register_eligibility(fn,
name="tests_green")`` registers a *named* guard that graph edges reference
(``targets: [{to: verify, guards: [tests_green]}]``); an edge is open only when every guard it
names is registered and returns exactly ``True``. Named guards do not gate the guidance.
Both return a disposer. A predicate that raises counts as false (fail closed) and is logged.
``<< stage_targets >>`` lists the currently open edges out of the current stage, in configured
order (for the seed graph, every other stage).

Spec decisions (Appendix B and related open points)
----------------------------------------------------
1. **Idle-commit ordering** (B1): an idle ``set``/``/stage`` discards a pending transition only
   *after* its append succeeded; a failed append leaves both the stage and the pending
   transition as they were.
2. **``None`` config values** (B2): YAML ``null`` for an optional key is a configuration error
   (as JS ``null`` is in the seed), never a silent default: the loader reports it positioned.
3. **A queued ``/stage`` overwrites an approved full ``goto_stage``** (B3, S93a): kept, as in the
   seed. The user's later choice wins; the handoff file stays on disk and nothing is archived.
4. **``set()`` to an unconfigured stage** (B4): allowed (programmatic API, S89); the stage prompt
   then has no instruction. ``/stage`` validates names.
5. **Dismissal vs abort** (B5): only ``ReviewDismissed`` from the review channel means "the
   user closed the dialog to talk"; cancellation (``asyncio.CancelledError``) propagates and
   any other exception fails the call with its own message.
6. **Guards after the review**: edges and guards are checked before the review (so nobody is
   asked about a forbidden move) and again when the review returns (the world may have
   changed while the human read; a stage moved by another writer meanwhile fails the call
   with ``errors.stage_changed``). Once approved, the transition is applied as approved at the
   next accepted pre-step: the tool never claims a switch that does not happen. The flush
   still asks the machine honestly: the edge fires with the live eligibility and the approval;
   when the edge or a guard no longer holds (a guard closed after the review, or another
   writer moved the stage), the machine refuses and the approved switch is applied as an
   **explicit** ``CompiledGraph.jump``, with a warning naming why (review M3).
7. **A current stage that is no longer in the graph** (a log from an older graph): the model may
   move to any configured stage (the session is never stranded); the flush commits it as a
   jump, since the machine has no state to fire from.
8. **No embedded catalog copy**: wording lives only in ``templates/<lang>/stage_switch.yaml``
   (a missing English file is a clear installation error, not a silent fallback); zh overrides
   the review dialog only. ``apply_language_overlay`` is the file-level alternative.
9. **Arguments are checked against the tool's own schema first.** The seed's harness
   (``dsh-tools`` ``defineTool``) validates a call's input against the parameter schema before
   ``execute`` runs, so the spec's chain (§1.15 steps 1–9) only ever sees well-formed input.
   fsm_stage has no such host layer, so ``goto_stage`` does it itself, before step 1:
   ``goto_stage_argument_problem`` (a JSON object; ``stage`` a string, required; ``handoff`` a
   string, optional; no other key) fails with ``errors.invalid_arguments`` naming the problem —
   never ``Stage "None" is not configured``. Valid input then meets the spec's chain unchanged
   (an agent-less call with valid input still gets the S43 message).
10. **Handoff write failures** (§1.15 step 7, "passed through unchanged"): a ``HandoffPathError``
    and any exception without an OS error code (a store's own message: ``OSError("disk full")``
    stays ``Error: disk full``, S49) pass through; an ``OSError`` *with* an OS error code
    (``ENAMETOOLONG``, ``EACCES``, ``ENOSPC``…) becomes ``errors.handoff_write_failed`` naming the
    document's path and the OS's reason, because Python's ``[Errno 36] …: 'beta.md'`` names
    neither the path nor what to do. Session ids longer than a file name allows get a bounded
    segment with a hash suffix (``fsm_stage.handoff.session_segment``).
11. **No targets out of the current stage.** ``<< stage_targets >>`` keeps the spec's value
    (``""``, §1.8). But a section that merely lists it would read "call goto_stage with one of: ."
    So when no target is open *and* the section uses the variable only as a bare
    ``<< stage_targets >>`` (``section_lists_targets_plainly``), ``stage:policy`` shows a catalog
    line instead: ``notice.policy_terminal`` (no edge leaves the stage: "do not call
    goto_stage") or ``notice.policy_blocked`` (edges exist but each waits for a guard; names the
    guards). A section that branches on the variable (``<% if stage_targets %>…``) or defaults
    it (``<< stage_targets or "…" >>``) owns the empty case and is rendered as written; so is a
    section that never mentions it (S32).
12. **One ``errors.requires_handoff`` text** serves both reasons a transition is full (no
    ``min_handoff_tokens``; or the surface reached it): S47 and S65 pin the same key, so the text
    says what happens ("this transition archives the conversation"), not that the conversation
    is large.
13. **A handoff given on a light transition** is still not written or shown (S66), and the tool
    result now says so (``tool_result.handoff_dropped`` after ``tool_result.approved``); the
    value keeps the spec's keys.
14. **Wiring and reading like plan mode.** ``controller.attach(runtime)`` and
    ``runtime.attach(controller)`` are the same call for both controllers; attaching an attached
    controller again raises ``RuntimeError``. ``get(agent) -> StageStatus(current, pending)``
    mirrors ``PlanModeController.get(agent)``; ``current(session)`` / ``pending_stage(session)``
    are its parts for hosts that hold a session rather than an agent.
"""

from __future__ import annotations

import asyncio
import functools
import io
import logging
import os
import posixpath
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import attrs
from ruamel.yaml import YAML

from fsm_stage.config import GraphConfig, describe_value
from fsm_stage.constants import (
    CURRENT_STAGE_PREFIX,
    GOTO_STAGE,
    STAGE_COMMAND,
    STAGE_NAME_RE,
    STAGE_POLICY_CONTEXT,
    STAGE_POLICY_ORDER,
    STAGE_REVIEW_ID,
    STAGE_SWITCHED_PREFIX,
)
from fsm_stage.graph import CompiledGraph, Refusal, StageCursor, compile_graph, goto
from fsm_stage.handoff import (
    HandoffPathError,
    HandoffStore,
    SandboxPolicyProvider,
    atomic_write_text,
    handoff_relative_path,
)
from fsm_stage.log.events import Replace, SurfaceOp
from fsm_stage.log.projections import StageProjection, StageState
from fsm_stage.log.surface import shadow_range
from fsm_stage.prompts import (
    Catalog,
    deep_merge,
    load_catalog,
    render,
    section_lists_targets_plainly,
)
from fsm_stage.runtime.abort import AbortSignal
from fsm_stage.runtime.assembly import ContextEntry
from fsm_stage.runtime.commands import CommandReply, CommandSpec, Disposer
from fsm_stage.runtime.messages import IdFactory, Message, new_id, stage_notice, user_message
from fsm_stage.runtime.pending import PendingStore, Selection, session_lock
from fsm_stage.runtime.review import Answer, Option, Question, ReviewChannel, ReviewDismissed, evaluate
from fsm_stage.runtime.runtime import ControllerClosedError
from fsm_stage.runtime.tools import ToolFailure, ToolOutput, ToolSpec
from fsm_stage.tokens import TokenMeter

if TYPE_CHECKING:
    from fsm_stage.runtime.agent import Agent
    from fsm_stage.runtime.runtime import Runtime
    from fsm_stage.runtime.session import Session

__all__ = [
    "CATALOG_NAME",
    "COMMAND_HINT",
    "FLUSH_FAILURE_MESSAGE",
    "NO_AGENT_MESSAGE",
    "PREDICATE_TYPE_MESSAGE",
    "PROJECTION_UNAVAILABLE_MESSAGE",
    "RELOADED_MESSAGE",
    "Consent",
    "Decline",
    "GotoStageTool",
    "PendingTransition",
    "ProjectionUnavailableError",
    "SetOutcome",
    "StageCommand",
    "StageController",
    "StageStatus",
    "apply_language_overlay",
    "build_review_question",
    "evaluate_review",
    "goto_stage_argument_problem",
    "presentation_meta",
    "section_lists_targets_plainly",
    "should_narrate",
    "stage_body",
]

CATALOG_NAME: Final = "stage_switch"
"""Name of the wording catalog (``templates/<lang>/stage_switch.yaml``)."""

NO_AGENT_MESSAGE: Final = "goto_stage needs a calling agent: there is no session to switch."
"""Fixed failure of an agent-less ``goto_stage`` call (S43)."""

RELOADED_MESSAGE: Final = (
    "The stage-switch service was reloaded while the transition was under review; "
    "present the transition once more."
)
"""Fixed failure when the controller closed while a review was open (S60)."""

PROJECTION_UNAVAILABLE_MESSAGE: Final = "the stage projection is not registered (stage switch closed)"
"""Message of ``ProjectionUnavailableError`` (S97)."""

PREDICATE_TYPE_MESSAGE: Final = "eligibility predicate must be a function (a callable taking the agent)"
"""Message of the ``TypeError`` for a non-callable predicate (S37e)."""

FLUSH_FAILURE_MESSAGE: Final = "stage switch: applying the pending transition to {stage} failed: {error}"
"""Error-level log line of a failed boundary flush (S80)."""

COMMAND_HINT: Final = "[stage|message]"
"""Input hint of ``/stage`` (spec §3.1 item 10)."""

SetOutcome = Literal["noop", "queued", "committed"]
"""What ``StageController.set`` did: the stage switch's subset of
``fsm_stage.runtime.pending.Outcome`` (plan mode adds ``"cancelled"``: its toggle can revert a
pending selection to the logged state, while a stage jump always names a stage)."""
Predicate = Callable[["Agent"], bool]

_log = logging.getLogger(__name__)
_WHAT = "stage switch"
_WS = re.compile(r"\s+")


def check_stage_name(stage: object) -> str:
    """Return ``stage`` when it is a ``str`` fully matching ``constants.STAGE_NAME_RE``
    (``[a-z][a-z0-9_-]*``); raises ``TypeError`` for a non-str and ``ValueError`` (one line
    naming the grammar) otherwise. Whether the stage is configured is not checked (S89)."""
    if not isinstance(stage, str):
        raise TypeError(f"a stage name must be a str, got {type(stage).__name__} {stage!r}")
    if STAGE_NAME_RE.fullmatch(stage) is None:
        raise ValueError(f"{stage!r} is not a valid stage name: stage names match "
                         f"{STAGE_NAME_RE.pattern} (lowercase letter first)")
    return stage


class ProjectionUnavailableError(ControllerClosedError):
    """The stage projection is not available (the controller was closed): reads fail loudly
    rather than falling back to the initial stage (S97). A ``ControllerClosedError``, the error
    plan mode's reads raise after ``close()`` too."""

    def __init__(self, message: str = PROJECTION_UNAVAILABLE_MESSAGE) -> None:
        Exception.__init__(self, message)


# --------------------------------------------------------------------------- pure helpers


def stage_body(config: GraphConfig, stage: str) -> str:
    """``Current stage: <stage>`` plus ``\\n<instruction>`` when ``stage`` is configured (§1.3, S89)."""
    body = f"{CURRENT_STAGE_PREFIX}{stage}"
    configured = config.stage(stage)
    return f"{body}\n{configured.instruction}" if configured is not None else body


def should_narrate(stage_at_last_header: str | None, initial: str, target: str) -> bool:
    """Whether a user jump to ``target`` is narrated (§1.6, S92).

    The model was last told ``stage_at_last_header`` (``initial`` when no header was logged or
    the header came before any record); narrate only when that differs from ``target``.
    """
    told = stage_at_last_header if stage_at_last_header is not None else initial
    return told != target


def presentation_meta(value: Mapping[str, Any]) -> dict[str, bool] | None:
    """The durable marker of a successful call: ``{"fullTransition": True}`` when the value
    holds ``handoffPath``, else ``None`` (JSON null) (§1.15, S67)."""
    return {"fullTransition": True} if "handoffPath" in value else None


GOTO_STAGE_PARAMETERS: Final = (("stage", True), ("handoff", False))
"""``goto_stage``'s parameters in schema order, each ``(name, required)``; all are strings. The
published JSON Schema (``StageController.tool_spec``) and ``goto_stage_argument_problem`` are
both built from this (§1.15, S39)."""


def goto_stage_argument_problem(args: object, catalog: Catalog) -> str | None:
    """Check ``goto_stage`` arguments against the tool's own parameter schema.

    Returns None when ``args`` is valid (a JSON object with a string ``stage``, an optional
    string ``handoff`` and no other key), else the model-facing ``errors.invalid_arguments``
    text naming the first problem, in this order: not an object
    (``errors.arguments.not_object``), unknown keys (``errors.arguments.unknown``, sorted), a
    missing required key (``errors.arguments.missing``), a value of the wrong JSON type
    (``errors.arguments.wrong_type``). Accepts exactly what the JSON Schema accepts.
    """
    allowed = [name for name, _required in GOTO_STAGE_PARAMETERS]
    problem: str | None = None
    if not isinstance(args, Mapping):
        problem = catalog.text("errors.arguments.not_object", actual=describe_value(args, json_names=True))
    else:
        unknown = sorted(str(k) for k in args if k not in allowed)
        if unknown:
            problem = catalog.text("errors.arguments.unknown", names=", ".join(f'"{k}"' for k in unknown),
                                   allowed=", ".join(f'"{k}"' for k in allowed))
        else:
            for name, required in GOTO_STAGE_PARAMETERS:
                if name not in args:
                    if required:
                        problem = catalog.text("errors.arguments.missing", name=name)
                        break
                elif not isinstance(args[name], str):
                    problem = catalog.text("errors.arguments.wrong_type", name=name, expected="string",
                                           actual=describe_value(args[name], json_names=True))
                    break
    return None if problem is None else catalog.text("errors.invalid_arguments", problem=problem)


@functools.lru_cache(maxsize=256)
def build_review_question(catalog: Catalog, stage: str, handoff: str | None) -> Question:
    """The single ``stage-review`` question (§1.12, S52, S53, S61, S64).

    Full shape (``handoff`` given): ``full_question`` with ``detail=handoff``; light shape
    (``handoff is None``): ``light_question`` with no detail. Options: approve, then keep.
    No presentation intent.
    """
    full = handoff is not None
    return Question(
        id=STAGE_REVIEW_ID,
        header=catalog.text("review.header"),
        question=catalog.text("review.full_question" if full else "review.light_question", stage=stage),
        options=(
            Option(
                catalog.text("review.approve_label"),
                catalog.text(f"review.{'full' if full else 'light'}_approve_description"),
            ),
            Option(catalog.text("review.keep_stage_label"), catalog.text("review.keep_stage_description")),
        ),
        detail=handoff,
    )


@attrs.frozen
class Consent:
    """The reviewer approved the transition."""


@attrs.frozen
class Decline:
    """The reviewer kept the stage; ``message`` is the tool failure text (with the feedback)."""

    feedback: str
    message: str


def evaluate_review(answers: Sequence[Answer], catalog: Catalog) -> Consent | Decline:
    """Apply the consent rule (§1.12, S55, S58).

    Consent only for exactly one ``stage-review`` answer whose ``selected`` is exactly the
    active language's approve label and which has no ``custom`` text (even ``""`` counts as
    text). Otherwise a ``Decline``: feedback ``custom`` (or ``""``); an exactly empty feedback
    gives ``errors.keep_stage``, any other (even whitespace) ``errors.keep_stage_feedback``.
    """
    decision = evaluate(answers, STAGE_REVIEW_ID, catalog.text("review.approve_label"))
    if decision.approved:
        return Consent()
    feedback = decision.feedback or ""
    if feedback == "":
        return Decline("", catalog.text("errors.keep_stage"))
    return Decline(feedback, catalog.text("errors.keep_stage_feedback", feedback=feedback))


def apply_language_overlay(
    root: str | Path, language: str = "zh", name: str = CATALOG_NAME
) -> dict[str, Any] | None:
    """File-level alternative to ``language: zh`` (spec §1.17 ``apply-zh``; S108–S113).

    Deep-merges ``<root>/<language>/<name>.yaml`` over ``<root>/en/<name>.yaml`` and writes the
    result back to the English file atomically (temporary file + rename, so hard links to the
    old file keep the old content). The English file keeps its key order, comments and block
    scalars (ruamel round-trip); only the overlaid values change. Returns the merged mapping
    (plain dicts), or ``None`` without writing when either file is missing. Idempotent.
    """
    base = Path(root) / "en" / f"{name}.yaml"
    overlay_path = Path(root) / language / f"{name}.yaml"
    if not base.is_file() or not overlay_path.is_file():
        return None
    base_text = base.read_text(encoding="utf-8")
    overlay = YAML(typ="safe", pure=True).load(overlay_path.read_text(encoding="utf-8")) or {}
    merged: dict[str, Any] = deep_merge(YAML(typ="safe", pure=True).load(base_text) or {}, overlay)
    round_trip = YAML()
    round_trip.preserve_quotes = True
    round_trip.width = 4096
    round_trip.indent(mapping=2, sequence=4, offset=2)
    document = round_trip.load(base_text)
    _merge_into(document, overlay)
    buf = io.StringIO()
    round_trip.dump(document, buf)
    atomic_write_text(base, buf.getvalue())
    return merged


def _merge_into(target: Any, overlay: Any) -> None:
    """Deep-merge ``overlay`` into the round-trip mapping ``target`` in place (same rule as
    ``deep_merge``: mappings merge key by key, anything else replaces)."""
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(target.get(key), Mapping):
            _merge_into(target[key], value)
        else:
            target[key] = value


# --------------------------------------------------------------------------- pending transition


@attrs.frozen
class PendingTransition:
    """Payload of a pending stage selection (§1.9).

    ``kind``: ``"model"`` (an approved ``goto_stage``; applied through the machine's edge) or
    ``"user"`` (``/stage`` / ``set``; applied as a jump). ``handoff_path``: absolute path of the
    handoff document for a full transition, None for a light one. ``from_stage``: the stage the
    transition was approved from.
    """

    kind: Literal["model", "user"]
    from_stage: str
    handoff_path: str | None = None


@attrs.frozen
class StageStatus:
    """``StageController.get`` result, the counterpart of plan mode's ``PlanStatus``:
    ``current`` is the logged stage (``initial`` before the first record) and ``pending`` the
    target of the pending transition, or None."""

    current: str
    pending: str | None = None

    def to_json(self) -> dict[str, str]:
        """``{"current": …}`` plus ``"pending"`` only when a transition is pending."""
        out = {"current": self.current}
        if self.pending is not None:
            out["pending"] = self.pending
        return out


# --------------------------------------------------------------------------- tool and command


class GotoStageTool:
    """The ``goto_stage`` tool (``fsm_stage.runtime.tools.Tool``) bound to a controller."""

    def __init__(self, controller: StageController) -> None:
        self._controller = controller
        self.spec = controller.tool_spec()

    async def execute(self, args: Mapping[str, Any], agent: Agent | None,
                      signal: AbortSignal | None = None) -> ToolOutput:
        """Run ``StageController.goto_stage``; failures raise ``ToolFailure``."""
        return await self._controller.goto_stage(args, agent, signal)

    def present_call(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The UI card of a call (S40)."""
        return self._controller.present_call(args)

    def present_result(self, args: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
        """The UI card of a result (S41)."""
        return self._controller.present_result(args, result)


class StageCommand:
    """The ``/stage`` command (``fsm_stage.runtime.commands.Command``) bound to a controller."""

    def __init__(self, controller: StageController) -> None:
        self._controller = controller
        description = controller.catalog.text("command.description")
        self.spec = CommandSpec(STAGE_COMMAND, description, hint=COMMAND_HINT)

    def handle(self, agent: Agent, raw_input: str, images: Sequence[Any]) -> CommandReply:
        """Run ``StageController.handle_stage_command``."""
        return self._controller.handle_stage_command(agent, raw_input)


# --------------------------------------------------------------------------- controller


class StageController:
    """The stage switch over one compiled stage graph (see the module docstring).

    Construction (plain injection; every seam is optional except the graph):

    * ``graph``: a ``GraphConfig`` (compiled with ``compile_graph``, cached) or a ``CompiledGraph``;
    * ``review``: the ``ReviewChannel`` (default: the runtime's, at ``attach``);
    * ``handoffs``: a ``HandoffStore`` (e.g. ``LocalHandoffStore()``); without one a full
      transition fails with ``errors.no_fs``;
    * ``token_meter``: required only when ``min_handoff_tokens`` is configured;
    * ``sandbox``: optional ``SandboxPolicyProvider`` resolved once per handoff write;
    * ``catalog`` / ``override_dir``: wording (default: ``stage_switch`` in the graph's language,
      resolved once here);
    * ``logger``: where a failed flush is logged at error level; ``id_factory``: message ids.

    Use ``attach(runtime)`` (or, equivalently, ``runtime.attach(controller)``) to contribute
    ``stage:policy``, ``goto_stage``, ``/stage`` (when the runtime has commands), the pre-step
    participant and the ``stage`` service; ``close()`` removes them all. Read the state with
    ``get(agent)`` (``StageStatus(current, pending)``) or ``current(session)`` /
    ``pending_stage(session)``. The methods can also be called directly by a host with its own
    wiring.
    """

    def __init__(
        self,
        graph: GraphConfig | CompiledGraph,
        *,
        review: ReviewChannel | None = None,
        handoffs: HandoffStore | None = None,
        token_meter: TokenMeter | None = None,
        sandbox: SandboxPolicyProvider | None = None,
        catalog: Catalog | None = None,
        override_dir: str | Path | None = None,
        logger: logging.Logger | None = None,
        id_factory: IdFactory = new_id,
    ) -> None:
        if not isinstance(graph, GraphConfig | CompiledGraph):
            raise TypeError("StageController needs a stage graph (a GraphConfig or CompiledGraph, "
                            f"e.g. load_config(path).graph), got {type(graph).__name__}")
        compiled = graph if isinstance(graph, CompiledGraph) else compile_graph(graph)
        if compiled.config is None:
            raise TypeError("StageController needs a stage graph, not the plan-mode machine")
        self.graph: CompiledGraph = compiled
        self.config: GraphConfig = compiled.config
        self.catalog: Catalog = (
            catalog if catalog is not None
            else load_catalog(CATALOG_NAME, self.config.language, override_dir)
        )
        self.review = review
        self.handoffs = handoffs
        self.token_meter = token_meter
        self.sandbox = sandbox
        self.logger = logger if logger is not None else _log
        self.id_factory = id_factory
        self.pending: PendingStore[str] = PendingStore(logger=self.logger, level=logging.ERROR)
        self.projection = StageProjection()
        self._predicates: dict[Predicate, None] = {}
        self._guards: dict[str, Predicate] = {}
        self._disposers: list[Disposer] = []
        self._runtime: Runtime | None = None
        self.closed = False

    # --- composition -------------------------------------------------------------------------

    def attach(self, runtime: Runtime) -> None:
        """Register ``stage:policy`` (order 116), ``goto_stage``, ``/stage`` (when the runtime has
        a command registry), the pre-step participant and the ``stage`` service (S94).

        All or nothing: a clash (``ValueError``, e.g. a second stage switch on one runtime)
        leaves nothing registered. Raises ``RuntimeError`` when the controller is closed or
        already attached (as ``PlanModeController.attach`` does)."""
        if self.closed:
            raise ControllerClosedError(_WHAT)
        if self._runtime is not None:
            raise RuntimeError("this StageController is already attached to a runtime")
        self._runtime = runtime
        if self.review is None:
            self.review = runtime.review
        try:
            self._disposers.append(runtime.add_context(
                ContextEntry(STAGE_POLICY_CONTEXT, STAGE_POLICY_ORDER, self.policy_text)))
            self._disposers.append(runtime.add_tool(GotoStageTool(self)))
            if runtime.commands is not None:
                self._disposers.append(runtime.add_command(StageCommand(self)))
            self._disposers.append(runtime.add_pre_step(self.on_pre_step))
            self._disposers.append(runtime.add_service("stage", self))
            if self.config.min_handoff_tokens is not None and self.token_meter is None:
                # Construction and attach never fail for this (spec); say it once, now, instead
                # of only failing every threshold-deciding goto_stage later.
                self.logger.warning(
                    "stage graph %r sets min_handoff_tokens=%s but this StageController has no "
                    "token_meter: every goto_stage will fail with errors.missing_token_meter; "
                    "pass token_meter= (e.g. fsm_stage.tokens.HeuristicTokenMeter()) before attach",
                    self.config.name, self.config.min_handoff_tokens)
        except Exception:
            # All or nothing: a clash (e.g. a second stage switch on one runtime) leaves no trace.
            disposers, self._disposers = self._disposers, []
            for dispose in reversed(disposers):
                dispose()
            self._runtime = None
            raise

    def close(self) -> None:
        """Unregister everything, forget predicates and pending transitions, and mark the
        controller closed: open reviews then fail with ``RELOADED_MESSAGE`` and projection
        reads raise ``ProjectionUnavailableError`` (§1.18, S38, S60, S96). Idempotent."""
        self.closed = True
        disposers, self._disposers = self._disposers, []
        for dispose in reversed(disposers):
            dispose()
        self._predicates.clear()
        self._guards.clear()
        self.pending.clear_all()
        self._runtime = None

    dispose = close

    # --- reads --------------------------------------------------------------------------------

    def session_lock(self, session: Session) -> threading.RLock:
        """The per-session lock held around fold → fire → append (DESIGN.md §5 concurrency), so
        a host driving one session from several threads never interleaves two stage writes.
        It is ``fsm_stage.runtime.pending.session_lock(session.id)``: keyed by the session id
        like the pending selections, so every ``Session`` wrapper of one log and plan mode
        share it."""
        return session_lock(session.id)

    def _state(self, session: Session) -> StageState:
        if self.closed:
            raise ProjectionUnavailableError(PROJECTION_UNAVAILABLE_MESSAGE)
        return session.read(self.projection)

    def projection_state(self, session: Session) -> StageState | None:
        """The stage projection's state for ``session`` (None once closed, S96)."""
        return None if self.closed else session.read(self.projection)

    def current(self, session: Session) -> str:
        """The current stage: the last logged record, else ``initial`` (§1.5). Raises
        ``ProjectionUnavailableError`` after ``close()`` (S97)."""
        stage: str | None = self._state(session).stage
        return stage if stage is not None else self.graph.initial

    def pending_stage(self, session: Session) -> str | None:
        """The stage of the pending transition of ``session``, if any."""
        selection = self.pending.get(session)
        return selection.target if selection is not None else None

    def get(self, agent: Agent) -> StageStatus:
        """``StageStatus(current, pending)`` for ``agent``'s session — the same reading style as
        ``PlanModeController.get(agent)``; ``current(session)`` and ``pending_stage(session)``
        are the two parts. Raises ``ProjectionUnavailableError`` after ``close()``."""
        session = agent.session
        return StageStatus(self.current(session), self.pending_stage(session))

    def pending_transition(self, session: Session) -> PendingTransition | None:
        """The pending transition's payload for ``session``, if any."""
        selection = self.pending.get(session)
        return selection.payload if selection is not None else None

    def sorted_stages(self) -> str:
        """Configured names sorted alphabetically, ``", "``-joined (diagnostics, §1.8)."""
        return ", ".join(sorted(self.config.stage_names))

    # --- eligibility --------------------------------------------------------------------------

    def register_eligibility(self, predicate: Predicate, *, name: str | None = None) -> Disposer:
        """Register a synchronous ``(agent) -> bool`` predicate; returns its disposer (§1.7).

        Unnamed: gates the ``stage:policy`` guidance (any true → shown; S31–S33, S37f: the same
        callable is stored once). Named: a guard graph edges reference by ``name``; a name holds
        one predicate (another callable under a taken name raises ``ValueError``). Raises
        ``TypeError`` for a non-callable (S37e).
        """
        if not callable(predicate):
            raise TypeError(PREDICATE_TYPE_MESSAGE)
        if name is None:
            self._predicates[predicate] = None

            def dispose() -> None:
                self._predicates.pop(predicate, None)

            return dispose
        existing = self._guards.get(name)
        if existing is not None and existing is not predicate:
            raise ValueError(f"eligibility guard {name!r} is already registered")
        self._guards[name] = predicate

        def dispose_named() -> None:
            if self._guards.get(name) is predicate:
                del self._guards[name]

        return dispose_named

    def _holds(self, predicate: Predicate, agent: Agent, what: str) -> bool:
        try:
            return predicate(agent) is True
        except Exception:
            self.logger.exception("stage switch: eligibility %s raised; treating it as false", what)
            return False

    def is_eligible(self, agent: Agent) -> bool:
        """True when any unnamed predicate returns true (registration order, stops at the
        first true); False with none (§1.7)."""
        return any(self._holds(p, agent, "predicate") for p in list(self._predicates))

    def guards_hold(self, agent: Agent | None, names: Sequence[str]) -> bool:
        """True when every named guard is registered and returns exactly True for ``agent``."""
        if agent is None:
            return not names
        for name in names:
            predicate = self._guards.get(name)
            if predicate is None or not self._holds(predicate, agent, f"guard {name!r}"):
                return False
        return True

    def _eligible_fn(self, agent: Agent | None) -> Callable[[tuple[str, ...]], bool]:
        return lambda names: self.guards_hold(agent, names)

    def targets(self, agent: Agent | None, session: Session | None = None) -> tuple[str, ...]:
        """Stages the model may move to right now: edges out of the current stage whose guards
        hold, in configured order (for a current stage no longer in the graph: every configured
        stage except it, S37d)."""
        sess = session if session is not None else (agent.session if agent is not None else None)
        if sess is None:
            return ()
        current = self.current(sess)
        if not self.graph.has_state(current):
            return tuple(n for n in self.config.stage_names if n != current)
        return tuple(e.target for e in self.graph.edges_from(current) if self.guards_hold(agent, e.guards))

    # --- policy context -----------------------------------------------------------------------

    def variables(self, agent: Agent | None) -> dict[str, str] | None:
        """``{stage_current, stage_targets}`` for ``agent``; None without an agent (S36, S37a)."""
        if agent is None:
            return None
        session = agent.session
        return {
            "stage_current": self.current(session),
            "stage_targets": ", ".join(self.targets(agent, session)),
        }

    def policy_text(self, agent: Agent | None) -> str:
        """Text of ``stage:policy``: ``""`` without an agent or while no unnamed predicate holds;
        otherwise ``section`` rendered with the variables (§1.8, S31–S34)."""
        if agent is None or self.closed or not self.is_eligible(agent):
            return ""
        variables = self.variables(agent)
        assert variables is not None
        if not variables["stage_targets"] and section_lists_targets_plainly(self.config.section):
            return self._no_targets_text(agent)
        return render(self.config.section, **variables)

    def _no_targets_text(self, agent: Agent) -> str:
        """``notice.policy_blocked`` (edges out of the current stage exist, every one waits for a
        guard; names the closed guards in configured order) or ``notice.policy_terminal`` (no edge)."""
        current = self.current(agent.session)
        closed: dict[str, None] = {}
        for edge in self.graph.edges_from(current) if self.graph.has_state(current) else ():
            for name in edge.guards:
                if not self.guards_hold(agent, (name,)):
                    closed[name] = None
        if closed:
            return self.catalog.text("notice.policy_blocked", stage=current, guards=", ".join(closed))
        return self.catalog.text("notice.policy_terminal", stage=current)

    # --- messages -----------------------------------------------------------------------------

    def stage_prompt(self, stage: str, *, narrate: bool) -> Message:
        """The stage-prompt record message (``Current stage: <stage>`` summary), with the
        user-switch prefix when ``narrate`` (§1.3, §1.6)."""
        text = stage_body(self.config, stage)
        if narrate:
            text = self.catalog.text("notice.user_switch_prefix", stage=stage) + text
        return stage_notice(text, summary=f"{CURRENT_STAGE_PREFIX}{stage}", id_factory=self.id_factory)

    def handoff_notice(self, stage: str, path: str) -> Message:
        """The handoff notice record (``Stage switched to <stage>`` summary): the archive wording,
        a blank line, then the stage body; never narrated (§1.3, S77)."""
        text = self.catalog.text("notice.handoff_replaced", stage=stage, path=path) + "\n\n" + stage_body(
            self.config, stage)
        return stage_notice(text, summary=f"{STAGE_SWITCHED_PREFIX}{stage}", id_factory=self.id_factory)

    # --- user jumps -----------------------------------------------------------------------------

    def _narrate_now(self, session: Session, target: str) -> bool:
        return should_narrate(self._state(session).stage_at_last_header, self.graph.initial, target)

    def _jump(self, session: Session, target: str, message: Message) -> None:
        """Durable-first user jump: append ``message`` (inside the machine's commit for a
        configured target), then the state follows from the log."""
        current = self.current(session)

        def commit() -> None:
            session.append_message(message)

        if self.graph.has_state(target):
            self.graph.jump(StageCursor(current), target, commit=commit)
        else:
            commit()

    def set(self, agent: Agent, stage: str) -> SetOutcome:
        """Switch ``agent``'s session to ``stage`` as the user (no validation; §1.16, S88, S89).

        ``stage == current`` → ``"noop"`` (a pending transition is neither consulted nor
        cancelled, S93b). During an open turn → pending (narrated at flush time), ``"queued"``.
        Otherwise the stage prompt (narrated per §1.6) is appended now and any pending
        transition is discarded after the append succeeded (Appendix B1) → ``"committed"``.
        A failed append raises and changes nothing. Raises ``ControllerClosedError`` (a
        ``RuntimeError``) after ``close()``, as ``PlanModeController.set`` does. The name is not
        checked against the graph (S89), but it must be a ``str`` (``TypeError``) that
        ``constants.STAGE_NAME_RE`` fully matches (``ValueError``): any other name could never
        be read back as a stage record, so it would be written while the fold stays put.
        """
        check_stage_name(stage)
        if self.closed:
            raise ControllerClosedError(_WHAT)
        session = agent.session
        with self.session_lock(session):
            current = self.current(session)
            if stage == current:
                return "noop"
            if session.is_turn_open:
                self.pending.put(session, Selection(stage, True, PendingTransition("user", current)))
                return "queued"
            narrate = self._narrate_now(session, stage)
            self._jump(session, stage, self.stage_prompt(stage, narrate=narrate))
            self.pending.clear(session)
            return "committed"

    def handle_stage_command(self, agent: Agent, raw_input: str) -> CommandReply:
        """``/stage [stage [message]]`` (§1.16, S82–S91, S93d)."""
        text = raw_input.strip()
        session = agent.session
        if not text:
            return CommandReply.success(self.catalog.text(
                "command.current", stage=self.current(session), stages=self.sorted_stages()))
        target, *rest = _WS.split(text)
        if self.config.stage(target) is None:
            return CommandReply.error(self.catalog.text("command.unknown", target=target,
                                                        stages=self.sorted_stages()))
        trailing = " ".join(rest).strip()
        outcome = self.set(agent, target)
        if trailing:
            agent.steer(user_message(trailing, id_factory=self.id_factory))
        key = {"noop": "command.already_current", "committed": "command.switched", "queued": "command.queued"}
        return CommandReply.success(self.catalog.text(key[outcome], target=target))

    # --- goto_stage -----------------------------------------------------------------------------

    def tool_spec(self) -> ToolSpec:
        """The ``goto_stage`` schema: ``stage`` (required), ``handoff`` (optional), in that
        order; output ``{approved: true, stage, handoffPath?}`` (§1.15, S39)."""
        text = self.catalog.text
        return ToolSpec(
            name=GOTO_STAGE,
            description=text("goto_tool.description"),
            parameters={
                "type": "object",
                "properties": {
                    name: {"type": "string", "description": text(f"goto_tool.{name}_param")}
                    for name, _required in GOTO_STAGE_PARAMETERS
                },
                "required": [name for name, required in GOTO_STAGE_PARAMETERS if required],
                "additionalProperties": False,
            },
            output={
                "type": "object",
                "properties": {
                    "approved": {"const": True},
                    "stage": {"type": "string"},
                    "handoffPath": {"type": "string"},
                },
                "required": ["approved", "stage"],
                "additionalProperties": False,
            },
        )

    def render_result(self, value: Mapping[str, Any], *, dropped_handoff: bool = False) -> str:
        """Success text: ``tool_result.approved`` then ``tool_result.handoff_path`` for a full
        transition (S42); for a light transition that was given a non-blank handoff,
        ``tool_result.handoff_dropped`` tells the model the document was not saved (S66)."""
        text = self.catalog.text("tool_result.approved", stage=value["stage"])
        if "handoffPath" in value:
            text += self.catalog.text("tool_result.handoff_path", path=value["handoffPath"])
        elif dropped_handoff:
            text += self.catalog.text("tool_result.handoff_dropped")
        return text

    def present_call(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Call card: generic, titled by the target; body = the ``handoff`` argument when present
        (even empty), else ``present.light_call_content`` (S40)."""
        if not isinstance(args, Mapping):
            args = {}
        stage = str(args.get("stage", ""))
        handoff = args.get("handoff")
        if isinstance(handoff, str):
            text = handoff
        else:
            text = self.catalog.text("present.light_call_content", stage=stage)
        title = self.catalog.text("present.call_title", stage=stage)
        content = [{"type": "text", "text": text}]
        return {"card": "generic", "title": title, "kind": "other", "content": content}

    def present_result(self, args: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
        """Result card: generic, ``present.result_title``, the result's content unchanged (S41)."""
        return {"card": "generic", "title": self.catalog.text("present.result_title"),
                "content": result.get("content")}

    def _refusal_text(self, agent: Agent, session: Session, target: str) -> str | None:
        """The model-facing reason ``current -> target`` is refused, or None when allowed."""
        current = self.current(session)
        if not self.graph.has_state(current):
            return None  # decision 7: a stage no longer in the graph may go to any configured stage
        refusal = self.graph.explain_refusal(StageCursor(current), target, self._eligible_fn(agent))
        if refusal is None:
            return None
        allowed = ", ".join(self.targets(agent, session)) or self.catalog.text("errors.no_targets")
        if refusal.kind == "guard":
            return self.catalog.text("errors.guard_blocked", stage=target, guards=", ".join(refusal.failing),
                                     count=len(refusal.failing), targets=allowed)
        return self.catalog.text("errors.not_a_target", stage=target, current=current, targets=allowed)

    def requires_handoff(self, session: Session) -> bool:
        """Full (True) or light (False), decided now (§1.10, S63, S64, S68). Raises
        ``ToolFailure(errors.missing_token_meter)`` when a threshold is set without a meter."""
        threshold = self.config.min_handoff_tokens
        if threshold is None:
            return True
        if self.token_meter is None:
            raise ToolFailure(self.catalog.text("errors.missing_token_meter"))
        return self.token_meter.surface_tokens(session) >= threshold

    async def goto_stage(self, args: Mapping[str, Any], agent: Agent | None,
                         signal: AbortSignal | None = None) -> ToolOutput:
        """Execute ``goto_stage`` (validation chain §1.15 plus graph edges; S43–S68).

        ``args`` are first checked against the tool's parameter schema
        (``goto_stage_argument_problem``, decision 9), then the spec's chain runs.

        Returns ``ToolOutput(value, text, meta)`` on approval (the transition is then pending);
        raises ``ToolFailure`` with the model-facing reason otherwise. No failure writes a log
        event or sets a pending transition. ``asyncio.CancelledError`` propagates.
        """
        problem = goto_stage_argument_problem(args, self.catalog)
        if problem is not None:
            raise ToolFailure(problem)
        if agent is None:
            raise ToolFailure(NO_AGENT_MESSAGE)
        session = agent.session
        target: str = args["stage"]
        if self.config.stage(target) is None:
            raise ToolFailure(
                self.catalog.text("errors.not_configured", stage=target, stages=self.sorted_stages()))
        from_stage = self.current(session)
        if target == from_stage:
            raise ToolFailure(self.catalog.text("errors.already_current", stage=target))
        refusal = self._refusal_text(agent, session, target)
        if refusal is not None:
            raise ToolFailure(refusal)
        review = self.review
        if review is None:
            raise ToolFailure(self.catalog.text("errors.no_user_questions"))
        full = self.requires_handoff(session)
        handoff: str | None = args.get("handoff")
        handoff_path: str | None = None
        handoff_text: str | None = None
        if full:
            if handoff is None or not handoff.strip():
                raise ToolFailure(self.catalog.text("errors.requires_handoff"))
            handoff_path = await self._write_handoff(session, target, handoff)
            handoff_text = handoff
        question = build_review_question(self.catalog, target, handoff_text)
        try:
            answers = await review.ask([question], agent, signal=signal)
        except ReviewDismissed:
            raise ToolFailure(self.catalog.text("errors.dismissed")) from None
        except Exception as exc:
            raise ToolFailure(str(exc) or type(exc).__name__) from exc
        if self.closed:
            raise ToolFailure(RELOADED_MESSAGE)
        verdict = evaluate_review(answers, self.catalog)
        if isinstance(verdict, Decline):
            raise ToolFailure(verdict.message)
        with self.session_lock(session):
            # Decision 6: the world may have moved while the human read.
            now = self.current(session)
            if now != from_stage:
                if now == target:
                    raise ToolFailure(self.catalog.text("errors.already_current", stage=target))
                raise ToolFailure(self.catalog.text("errors.stage_changed", stage=target, current=now))
            refusal = self._refusal_text(agent, session, target)
            if refusal is not None:
                raise ToolFailure(refusal)
            transition = PendingTransition("model", from_stage, handoff_path)
            self.pending.put(session, Selection(target, False, transition))
        value: dict[str, Any] = {"approved": True, "stage": target}
        if handoff_path is not None:
            value["handoffPath"] = handoff_path
        dropped = not full and handoff is not None and bool(handoff.strip())
        return ToolOutput(value, self.render_result(value, dropped_handoff=dropped), presentation_meta(value))

    async def _write_handoff(self, session: Session, target: str, handoff: str) -> str:
        """Write the handoff document (§1.15 step 7); returns its absolute path.

        Fails with ``errors.no_fs`` without a store. A ``HandoffPathError`` (a path the store
        refuses) and any exception without an OS error code (a store's own message, e.g.
        ``OSError("disk full")``, S49) pass through unchanged; an ``OSError`` carrying an OS
        error code (``ENAMETOOLONG``, ``EACCES``, ``ENOSPC``…) becomes
        ``errors.handoff_write_failed`` naming the document's path and the OS's reason instead
        of Python's ``[Errno N] …`` text.
        """
        if self.handoffs is None:
            raise ToolFailure(self.catalog.text("errors.no_fs"))
        cwd = session.header.cwd
        try:
            policy = self.sandbox.resolve(session) if self.sandbox is not None else None
            relative = handoff_relative_path(self.config.handoff_dir, session.id, target)
            if not getattr(self.handoffs, "blocking", True):  # e.g. MemoryHandoffStore: no I/O
                return self.handoffs.write(relative, handoff, cwd=cwd, policy=policy)
            # fsync can take a while: keep the event loop responsive (the review waits for it).
            return await asyncio.to_thread(self.handoffs.write, relative, handoff, cwd=cwd, policy=policy)
        except HandoffPathError as exc:
            raise ToolFailure(str(exc)) from exc
        except OSError as exc:
            if exc.errno is None:
                raise ToolFailure(str(exc) or type(exc).__name__) from exc
            shown = posixpath.join(cwd, str(relative)) if cwd is not None else str(relative)
            reason = exc.strerror or os.strerror(exc.errno)
            raise ToolFailure(self.catalog.text(
                "errors.handoff_write_failed", stage=target, path=shown, reason=reason)) from exc
        except Exception as exc:
            raise ToolFailure(str(exc) or type(exc).__name__) from exc

    # --- boundary -----------------------------------------------------------------------------

    def on_pre_step(self, agent: Agent, messages: list[Message], aborted: bool) -> list[Message]:
        """Accepted pre-step (§1.13, §1.14): flush a pending transition, else inject the initial
        stage prompt once for a top-level session. An aborted step changes nothing (S30a)."""
        if aborted or self.closed:
            return list(messages)
        session = agent.session
        with self.session_lock(session):
            selection = self.pending.get(session)
            if selection is not None:
                target = selection.target
                return self.pending.flush(
                    agent, messages, aborted=aborted, apply=self._apply,
                    failure=lambda error: FLUSH_FAILURE_MESSAGE.format(stage=target, error=error))
            state = self._state(session)
            if state.has_stage_prompt or session.header.is_subagent:
                return list(messages)
            return [*messages, self.stage_prompt(self.current(session), narrate=False)]

    def _apply(self, agent: Agent, selection: Selection[str]) -> list[Message]:
        """Durably apply ``selection`` (called by ``PendingStore.flush``); raises on failure."""
        session = agent.session
        target = selection.target
        payload: PendingTransition = selection.payload
        if payload.kind == "user":
            narrate = selection.narrate and self._narrate_now(session, target)
            self._jump(session, target, self.stage_prompt(target, narrate=narrate))
            return []
        if payload.handoff_path is None:
            message = self.stage_prompt(target, narrate=False)
            op: SurfaceOp = "append"
            sources: list[int] | None = None
        else:
            message = self.handoff_notice(target, payload.handoff_path)
            nodes = list(session.surface())
            head_is_system = session.head_is_system
            shadowed = shadow_range(nodes, head_is_system)
            if shadowed:
                op, sources = Replace(shadowed[0], shadowed[-1]), shadowed
            else:
                op, sources = "append", None

        def commit() -> None:
            session.append_message(message, surface_op=op, source_event_seqs=sources)

        current = self.current(session)
        cursor = StageCursor(current)
        if not self.graph.has_state(current):
            self.graph.jump(cursor, target, commit=commit)  # decision 7
            return []
        # The machine is asked honestly: its edge fires with the live eligibility and the approval.
        eligible = self._eligible_fn(agent)
        # ``fire`` returns False with nothing committed when the edge or a guard refuses.
        if self.graph.fire(cursor, goto(target), approval=target, eligible=eligible, commit=commit):
            return []
        # Decision 6: the approval is binding. The edge or a guard no longer holds (another writer
        # moved the stage, or a guard closed since the review); the human approved this exact
        # switch and the tool result told the model so: apply it as an explicit, logged jump.
        refusal = self.graph.explain_refusal(cursor, target, eligible)
        self.logger.warning("stage switch: %s -> %s was approved but %s; applying the approval as a jump "
                            "(decision 6)", current, target, _refusal_reason(refusal))
        self.graph.jump(cursor, target, commit=commit)
        return []


def _refusal_reason(refusal: Refusal | None) -> str:
    """Why the machine refused an approved flush, for the decision-6 warning."""
    if refusal is None:
        return "the machine refused it"
    if refusal.kind == "not_an_edge":
        return "it is not an edge of the logged stage any more"
    if refusal.kind == "guard":
        return f"guard(s) {', '.join(refusal.failing)} no longer hold"
    return str(refusal)
