"""fsm_stage as an MCP server (optional extra ``fsm_stage[mcp]``; ``fsm-stage mcp``).

``sessions`` (handles → session logs, one composition per log), ``review`` (the review channel
and the elicitation form), ``durable`` (the seam to durable review events), ``server``
(``build_server``: tools ``exit_plan_mode``/``get_stage``/``goto_stage``, resources), ``run``
(request-state keys, stdio and streamable-HTTP transports). Importing ``fsm_stage`` never
imports this package or the ``mcp`` SDK. Guide: ``docs/mcp.md``.
"""
