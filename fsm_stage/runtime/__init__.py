"""Runtime seams (DESIGN.md §8): small protocols plus working implementations.

An orchestrator plugs fsm_stage into its own agent loop through these seams, or uses the
shipped ones end to end (the reference loop in :mod:`fsm_stage.runtime.loop`):

=====================  ===========================================================
module                 seam
=====================  ===========================================================
``session``            ``Session``: id, header, log, surface, cached projections
``agent``              ``Agent`` protocol and ``InboxAgent`` (steer wakes, inject does not)
``messages``           user-message / plugin-notice builders with fresh ids
``abort``              ``AbortSignal`` (cancellation forwarded to tools and reviews)
``review``             ``ReviewChannel`` protocol, ``ReviewDismissed``, scripted + terminal channels
``tools``              ``ToolSpec``, ``Tool``, ``ToolFailure``, DSH-style dispatch, schema export
``commands``           ``/name rest`` parser, ``Command`` protocol, ``command/run``/``done`` dispatch
``assembly``           ``SystemSection``, ``ContextEntry``, ``Assembly``, ``Request``
``runtime``            ``Runtime`` registry (pre-step, assemble, tools, commands) and ``Controller``
``controller``         ``ControllerLifecycle``: one attach/close for every controller
``pending``            pending selection + accepted-boundary flush + header-relative narration
``driver``             ``StagedSession``: the public step driver for a host's own loop
``openstep``           fold of the open turn: its step, tool calls, suspended reviews
``loop``               reference loop (built on ``driver``), ``Model`` protocol, ``ScriptedModel``
``repair``             crash repair on resume: ``repair_open_turn(session)`` closes a dead open turn
``wording``            the runtime's texts (``templates/<lang>/runtime.yaml``)
=====================  ===========================================================

Concurrency: everything is synchronous except the awaits of models, tools, reviews and
commands; a fold → fire → append sequence never awaits, so one event loop serialises it per
session. The seams are not thread-safe: drive a runtime from one event-loop thread.
"""
