"""A listening TCP socket for the servers (``fsm-stage inbox serve``, ``fsm-stage mcp --http``):
``listen(host, port)`` binds before the server starts, so an address that cannot be used is one
``UserError`` line instead of the server's own traceback."""

from __future__ import annotations

import socket

from fsm_stage.errors import UserError

__all__ = ["listen"]


def listen(host: str, port: int, *, backlog: int = 128) -> socket.socket:
    """A socket bound to ``host`` (an address or a name; IPv6 with or without brackets) and
    ``port`` (0: any free port), listening, so connections queue from the moment its address is
    announced. Raises ``UserError`` (one line) when the name does not resolve or the address
    cannot be bound (in use, not an interface of this machine, a privileged port)."""
    bare = host.strip("[]")
    try:
        family, kind, proto, _name, address = socket.getaddrinfo(bare, port, type=socket.SOCK_STREAM)[0]
    except (OSError, UnicodeError) as err:
        raise UserError(f"cannot listen on {host}:{port}: {getattr(err, 'strerror', None) or err}") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
    except OSError as err:
        sock.close()
        raise UserError(f"cannot listen on {host}:{port}: {err.strerror or err}") from None
    return sock
