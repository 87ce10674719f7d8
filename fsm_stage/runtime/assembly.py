"""Request assembly (docs/contracts.md step 3;; docs/architecture.md).

``SystemSection(name, order, text)``: ``text(agent | None) -> str``; the system prompt is the
non-empty section texts sorted by ``(order, registration)`` joined by a blank line (empty
sections are dropped by the renderer, as in dsh-system-prompt).

``ContextEntry(name, order, text)``: runtime-context text that travels as a *snapshot message*
(``user/message`` with source ``{kind: plugin, plugin: fsm_stage, form: snapshot, sections:
[{name, text}…]}``), re-appended only when the rendered entries differ from the last snapshot
in the log (the stage switch's ``stage:policy`` at order 116 uses this).

``Assembly(system, tools, sections, context)``: what the next request will carry besides
history. ``Request(system, messages, tools)``: what is sent to the model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from fsm_stage.constants import USER_MESSAGE
from fsm_stage.log.events import Event
from fsm_stage.runtime import wording
from fsm_stage.runtime.messages import IdFactory, Message, new_id, text_block
from fsm_stage.runtime.stage_models import DEFAULT_CHOICE, ModelChoice
from fsm_stage.runtime.tools import ToolSpec

if TYPE_CHECKING:
    from fsm_stage.runtime.agent import Agent

TextFn = Callable[["Agent | None"], str]

SNAPSHOT_PLUGIN = "fsm_stage"
SNAPSHOT_FORM = "snapshot"


@attrs.frozen
class SystemSection:
    """A system-prompt section: ``name``, ``order`` (lower first), ``text(agent | None)``."""

    name: str
    order: int
    text: TextFn = attrs.field(eq=False)


@attrs.frozen
class ContextEntry:
    """A runtime-context entry: ``name``, ``order``, ``text(agent | None)`` (empty = absent)."""

    name: str
    order: int
    text: TextFn = attrs.field(eq=False)


@attrs.frozen
class RenderedSection:
    """A section's name, order and the text it rendered for one assembly."""

    name: str
    order: int
    text: str


@attrs.frozen
class Assembly:
    """One assembly: rendered ``sections`` (non-empty only), the joined ``system`` text, the
    ``tools`` list, the rendered non-empty ``context`` entries and the ``model`` choice of the
    current stage and plan mode (``DEFAULT_CHOICE``: the host's own)."""

    sections: tuple[RenderedSection, ...]
    tools: tuple[ToolSpec, ...]
    context: tuple[RenderedSection, ...] = ()
    model: ModelChoice = DEFAULT_CHOICE

    @property
    def system(self) -> str:
        """The system prompt: non-empty section texts joined by ``\\n\\n``."""
        return "\n\n".join(s.text for s in self.sections)

    @property
    def section_names(self) -> tuple[str, ...]:
        """Names of the sections present (non-empty) in this assembly."""
        return tuple(s.name for s in self.sections)

    @property
    def tool_names(self) -> tuple[str, ...]:
        """Tool names in order."""
        return tuple(t.name for t in self.tools)

    def section(self, name: str) -> str:
        """The text of section ``name`` (``""`` when absent or empty)."""
        for s in self.sections:
            if s.name == name:
                return s.text
        return ""


@attrs.frozen
class Request:
    """What goes to the model: ``system`` text, ``messages`` (surface history: a tuple, or the
    session's read-only ``PrefixView`` where a caller asked for the shared messages), ``tools``
    and the ``model`` choice of the current stage and plan mode (``DEFAULT_CHOICE``: the host's
    own model and settings)."""

    system: str
    messages: Sequence[Message]
    tools: tuple[ToolSpec, ...]
    model: ModelChoice = DEFAULT_CHOICE

    @property
    def tool_names(self) -> tuple[str, ...]:
        """Tool names in order."""
        return tuple(t.name for t in self.tools)


def render_sections(
    items: Sequence[SystemSection | ContextEntry], agent: Agent | None
) -> tuple[RenderedSection, ...]:
    """Render ``items`` for ``agent``: sorted by order (stable), empty texts dropped."""
    indexed = sorted(enumerate(items), key=lambda p: (p[1].order, p[0]))
    out: list[RenderedSection] = []
    for _, item in indexed:
        text = item.text(agent)
        if text:
            out.append(RenderedSection(item.name, item.order, text))
    return tuple(out)


def is_snapshot(event: Event) -> bool:
    """True for a ``user/message`` carrying one of our runtime-context snapshots."""
    if event.type != USER_MESSAGE or not isinstance(event.data, Mapping):
        return False
    src = event.data.get("source")
    return (isinstance(src, Mapping) and src.get("kind") == "plugin"
            and src.get("plugin") == SNAPSHOT_PLUGIN and src.get("form") == SNAPSHOT_FORM)


def snapshot_sections(event: Event) -> tuple[tuple[str, str], ...]:
    """The ``(name, text)`` pairs a snapshot event recorded."""
    src = event.data["source"]
    out: list[tuple[str, str]] = []
    for s in src.get("sections") or ():
        if isinstance(s, Mapping):
            out.append((str(s.get("name")), str(s.get("text"))))
    return tuple(out)


class SnapshotFold:
    """Projection: the ``(name, text)`` pairs of the last runtime-context snapshot, or None."""

    def init(self) -> tuple[tuple[str, str], ...] | None:
        return None

    def apply(
        self, state: tuple[tuple[str, str], ...] | None, event: Event
    ) -> tuple[tuple[str, str], ...] | None:
        return snapshot_sections(event) if is_snapshot(event) else state


SNAPSHOT_FOLD = SnapshotFold()


def snapshot_message(
    context: Sequence[RenderedSection], *, intro: str | None = None, id_factory: IdFactory = new_id
) -> Message:
    """The snapshot message for ``context``: intro (default: the ``runtime`` catalog's
    ``context.snapshot_intro``) then each text, blank-line separated."""
    head = intro if intro is not None else wording.text("context.snapshot_intro")
    text = "\n\n".join([head, *(c.text for c in context)])
    sections: list[dict[str, Any]] = [{"name": c.name, "text": c.text} for c in context]
    return {
        "id": id_factory(),
        "role": "user",
        "content": [text_block(text)],
        "source": {"kind": "plugin", "plugin": SNAPSHOT_PLUGIN, "form": SNAPSHOT_FORM, "sections": sections},
    }


def snapshot_if_changed(
    last: tuple[tuple[str, str], ...] | None,
    context: Sequence[RenderedSection],
    *,
    intro: str | None = None,
    id_factory: IdFactory = new_id,
) -> Message | None:
    """A new snapshot message when ``context`` differs from the ``last`` logged one, else None.

    No snapshot is produced while there has never been any context (``last is None`` and
    ``context`` empty); a context that became empty is recorded once as an empty snapshot.
    """
    current = tuple((c.name, c.text) for c in context)
    if last is None and not current:
        return None
    if last == current:
        return None
    return snapshot_message(context, intro=intro, id_factory=id_factory)
