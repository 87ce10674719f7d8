"""fsm_stage: explicit, durable, reviewable stages for LLM agent orchestrators.

Data flows one way: config (YAML → attrs) → compiled graph (``transitions``) → controllers
(plan mode, stage switch) → runtime (per session) → CLI / simulator.
"""

__version__ = "0.1.0"
