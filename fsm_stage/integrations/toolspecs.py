"""Tool-spec exports: re-exports ``fsm_stage.integrations._toolspecs`` and adds
``goto_stage_spec_for``, the ``goto_stage`` spec with ``stage`` as an ``enum`` of a graph's
stages (it needs the stage switch's catalog, a layer above the runtime)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from fsm_stage.integrations._toolspecs import (
    OpenAIApi,
    Target,
    export_specs,
    strict_schema,
    to_anthropic,
    to_gemini,
    to_mcp,
    to_openai,
    with_stage_enum,
)
from fsm_stage.runtime.tools import ToolSpec

if TYPE_CHECKING:
    from fsm_stage.config.model import GraphConfig
    from fsm_stage.prompts import Catalog

__all__ = [
    "OpenAIApi",
    "Target",
    "export_specs",
    "goto_stage_spec_for",
    "strict_schema",
    "to_anthropic",
    "to_gemini",
    "to_mcp",
    "to_openai",
    "with_stage_enum",
]


def goto_stage_spec_for(
    graph: GraphConfig | Sequence[str], *, catalog: Catalog | None = None
) -> ToolSpec:
    """The ``goto_stage`` spec with ``stage`` as an ``enum`` of ``graph``'s stages.

    ``graph`` is a ``GraphConfig`` or a sequence of stage names. ``catalog`` defaults to the
    stage switch's catalog in the graph's language (English for a plain name list). Raises
    ``TypeError`` for a bare string and ``ValueError`` for an empty stage list.
    """
    from fsm_stage.prompts import load_catalog
    from fsm_stage.stage_switch import CATALOG_NAME
    from fsm_stage.stage_switch.tool import goto_stage_tool_spec

    if isinstance(graph, str):
        raise TypeError("goto_stage_spec_for needs a GraphConfig or a sequence of stage names")
    if isinstance(graph, Sequence):
        names: Sequence[str] = graph
        language: str = "en"
    else:
        names = graph.stage_names
        language = graph.language
    if catalog is None:
        catalog = load_catalog(CATALOG_NAME, language)
    return with_stage_enum(goto_stage_tool_spec(catalog), names)
