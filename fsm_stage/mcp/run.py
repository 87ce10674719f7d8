"""Running the server: request-state keys and the two transports.

``state_security(key_file)`` returns the SDK's ``RequestStateSecurity`` under a key read from
``key_file`` (created with 32 random bytes, mode 0600, when missing), or the
``FSM_STAGE_MCP_STATE_KEY`` environment variable when set: a persistent key is what lets a
client finish an ``input_required`` review after the server restarted. ``serve_stdio`` and
``serve_http(host, port)`` (streamable HTTP at ``/mcp``) run a ``StageServer`` until stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import anyio
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


class _StdinLines:
    """stdin's lines, read by a daemon thread into the loop: Ctrl-C stops the server at once (the
    SDK's worker thread, blocked in ``read``, would hold the shutdown until the client writes)."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        threading.Thread(target=self._read, name="fsm-stage-mcp-stdin", daemon=True).start()

    def _put(self, line: str | None) -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: the server has stopped
            self._loop.call_soon_threadsafe(self._lines.put_nowait, line)

    def _read(self) -> None:
        # os.read on the descriptor, not sys.stdin: a daemon thread parked in a buffered
        # reader's lock aborts the interpreter at exit
        pending = b""
        while True:
            try:
                chunk = os.read(0, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                self._put(line.decode("utf-8", errors="replace") + "\n")
        if pending:
            self._put(pending.decode("utf-8", errors="replace"))
        self._put(None)

    def __aiter__(self) -> _StdinLines:
        return self

    async def __anext__(self) -> str:
        line = await self._lines.get()
        if line is None:
            raise StopAsyncIteration
        return line


async def serve_stdio(app: StageServer) -> None:
    """Serve over stdin/stdout until the client closes the stream (Ctrl-C:
    ``KeyboardInterrupt``, at once)."""
    from mcp.server.stdio import stdio_server

    loop = asyncio.get_running_loop()
    interrupted = False
    with anyio.CancelScope() as scope:
        def stop() -> None:
            nonlocal interrupted
            interrupted = True
            scope.cancel()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread
            loop.add_signal_handler(signal.SIGINT, stop)
        try:
            async with stdio_server(stdin=cast(Any, _StdinLines())) as (read, write):
                await app.server.run(read, write, app.server.create_initialization_options())
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(signal.SIGINT)
    if interrupted:
        raise KeyboardInterrupt


async def serve_http(app: StageServer, host: str, port: int, *,
                     announce: Callable[[str], None] | None = None) -> None:
    """Serve streamable HTTP at ``http://HOST:PORT/mcp`` until interrupted; ``announce(url)``
    is called once the socket listens. Ctrl-C raises ``KeyboardInterrupt`` after a clean
    shutdown (uvicorn re-raises the signal it captured). Raises ``UserError`` (one line) when
    the address cannot be listened on (``_listen.listen``: a name that does not resolve, a port
    in use)."""
    import uvicorn

    from fsm_stage._listen import listen

    sock = listen(host, port)
    asgi = app.server.streamable_http_app(host=host)
    config = uvicorn.Config(asgi, host=host, port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started and not task.done():
        await asyncio.sleep(0.05)
    if server.started and announce is not None:
        shown = f"[{host}]" if ":" in host else host
        announce(f"http://{shown}:{port}/mcp")
    try:
        await task
    finally:
        sock.close()
