"""The smallest stage graph a test needs: ``explore`` → ``implement``, with optional graph-level
``review`` rules and an ``explore`` ``budget`` (stopping), and the model reply that takes the
edge with a handoff document."""

from __future__ import annotations

from fsm_stage import ModelReply


def two_stages(*, review: str | None = None, budget: str | None = None) -> str:
    """The graph's YAML; ``review`` and ``budget`` are the insides of YAML flow mappings
    (``"approvers: [alice], deadline: 1s"``, ``"steps: 1"``)."""
    rules = f"review: {{{review}}}\n" if review is not None else ""
    spend = f"    budget: {{{budget}}}\n    on_budget: stop\n" if budget is not None else ""
    return ("name: two\nsection: Call goto_stage when done.\ninitial: explore\n" + rules
            + "stages:\n  - name: explore\n    instruction: Explore.\n    targets: [implement]\n" + spend
            + "  - name: implement\n    instruction: Implement.\n")


def move(handoff: str = "## Next\n- build") -> ModelReply:
    """The model's ``goto_stage implement`` with ``handoff``."""
    return ModelReply.call("goto_stage", {"stage": "implement", "handoff": handoff})
