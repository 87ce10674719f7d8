"""A local HTTP server that answers every POST with a redirect, for the tests of what fsm_stage
posts to configured endpoints (OTLP collectors, review webhooks): ``redirecting(target)``."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def redirecting(target: str, code: int = 302) -> Iterator[int]:
    """Serve on 127.0.0.1 while the block runs, answering every POST ``code`` to ``target``;
    yields the port."""

    class Moved(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(code)
            self.send_header("Location", target)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Moved)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
