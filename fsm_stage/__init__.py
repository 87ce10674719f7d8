"""fsm_stage: explicit, durable, reviewable stages for LLM agent orchestrators.

Data flows one way: config (YAML → attrs) → compiled graph (``transitions``) → controllers
(plan mode, stage switch) → runtime (per session) → CLI / simulator.
"""

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """Lazy top-level exports (no import at package load, so no cycle): ``StagedSession``,
    the public step driver (``fsm_stage.runtime.driver``; docs/step-driver.md)."""
    if name == "StagedSession":
        from fsm_stage.runtime.driver import StagedSession

        return StagedSession
    raise AttributeError(f"module 'fsm_stage' has no attribute {name!r}")
