"""Running the server: request-state keys and the two transports.

``state_security(key_file)`` returns the SDK's ``RequestStateSecurity`` under a key read from
``key_file`` (created with 32 random bytes, mode 0600, when missing), or the
``FSM_STAGE_MCP_STATE_KEY`` environment variable when set: a persistent key is what lets a
client finish an ``input_required`` review after the server restarted. ``serve_stdio`` and
``serve_http(host, port)`` (streamable HTTP at ``/mcp``) run a ``StageServer`` until stopped.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from mcp.server.request_state import RequestStateSecurity

from fsm_stage.mcp.server import StageServer

__all__ = ["KEY_ENV", "STATE_TTL", "serve_http", "serve_stdio", "state_security"]

KEY_ENV = "FSM_STAGE_MCP_STATE_KEY"
STATE_TTL = 24 * 3600.0
"""Seconds a sealed review state stays valid: a human may take a while; single use is enforced
by the log, not by the expiry. An expired state is refused; calling the tool again (same
arguments) resumes the same open call and asks again."""


def state_security(key_file: Path | None) -> RequestStateSecurity:
    """Request-state protection under a persistent key (see the module docstring); ephemeral
    when neither the environment variable nor ``key_file`` is given."""
    env = os.environ.get(KEY_ENV)
    if env:
        return RequestStateSecurity(keys=[env], ttl=STATE_TTL)
    if key_file is None:
        return RequestStateSecurity.ephemeral(ttl=STATE_TTL)
    if not key_file.exists():
        key_file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32))
    return RequestStateSecurity(keys=[key_file.read_text(encoding="utf-8").strip()], ttl=STATE_TTL)


async def serve_stdio(app: StageServer) -> None:
    """Serve over stdin/stdout until the client closes the stream."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await app.server.run(read, write, app.server.create_initialization_options())


async def serve_http(app: StageServer, host: str, port: int) -> None:
    """Serve streamable HTTP at ``http://HOST:PORT/mcp`` until interrupted."""
    import uvicorn

    asgi = app.server.streamable_http_app(host=host)
    config = uvicorn.Config(asgi, host=host, port=port, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()
