"""PostgreSQL locations, session ids, connections and errors of the PostgreSQL store.

``split_location`` takes ``postgresql://…?session=ID`` apart (the id percent-decoded strictly
and validated: ``check_session_id``); ``redact`` hides passwords in every spelling libpq
accepts; ``connect`` / ``connection_pool`` open connections; ``db_error`` turns any psycopg
error into one typed, one-line ``DatabaseError`` (``transient`` set when the server is
unreachable or dropped the connection: retry later). psycopg is imported only when a
connection is made.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any
from urllib.parse import unquote, urlsplit

from fsm_stage.errors import DatabaseError, UserError
from fsm_stage.text import hide_url_password

SCHEMES = ("postgresql", "postgres")
INSTALL_HINT = "PostgreSQL logs need psycopg: pip install 'fsm_stage[postgres]'"
POOL_HINT = "a connection pool needs psycopg_pool: pip install 'fsm_stage[postgres]'"
MAX_SESSION_ID = 200
"""Longest session id, in characters (at most 800 UTF-8 bytes: far below the 2,704-byte limit of
a PostgreSQL b-tree entry, so every accepted id can be stored, indexed and appended to)."""

_PASSWORD_KV = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&#]*)", re.IGNORECASE)


def psycopg_module() -> Any:
    """The ``psycopg`` module; ``UserError`` with the install hint when it is missing."""
    try:
        import psycopg
    except ImportError:
        raise UserError(INSTALL_HINT) from None
    return psycopg


def redact(location: str) -> str:
    """``location`` with every password replaced by ``***``: the URL's ``user:password@``, a
    ``password=`` query parameter and a keyword-form ``password=…`` (for messages)."""
    try:
        text = hide_url_password(str(location))
    except ValueError:
        return "<postgresql location>"
    return _PASSWORD_KV.sub(lambda m: m.group(1) + "***", text)


def check_session_id(session: object, where: str = "") -> str:
    """Return ``session`` when it is a valid store session id, else raise ``UserError`` (one
    line): a non-empty str of at most ``MAX_SESSION_ID`` characters, with no control
    character (NUL included), no lone surrogate and no line or paragraph separator."""
    prefix = f"{where}: " if where else ""
    if not isinstance(session, str) or not session:
        raise UserError(f"{prefix}the session id must be a non-empty string")
    if len(session) > MAX_SESSION_ID:
        raise UserError(f"{prefix}the session id is {len(session)} characters long; at most "
                        f"{MAX_SESSION_ID} are allowed")
    for i, ch in enumerate(session):
        if unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp"):
            raise UserError(f"{prefix}the session id holds the control character U+{ord(ch):04X} at "
                            f"index {i}; use printable characters")
    return session


def split_location(location: str) -> tuple[str, str | None]:
    """``(conninfo, session)``: the libpq URL without its ``session`` query parameter, and that
    parameter (None when absent). Raises ``UserError`` for a non-PostgreSQL URL, one that
    cannot be parsed (an unclosed ``[`` IPv6 host, a single host's port that is no number from 0
    to 65535), an empty, repeated, not UTF-8 percent-encoded or invalid (``check_session_id``)
    ``session``."""
    try:
        parts = urlsplit(location)
        if "," not in parts.netloc:  # libpq's host1:port1,host2:port2 lists are left to libpq
            _ = parts.port  # a port that is no number is a typo, never a connection to retry
    except ValueError as err:
        raise UserError(f"{redact(location)}: not a valid PostgreSQL URL ({err}); expected "
                        "postgresql://USER@HOST:PORT/DB?session=ID") from None
    if parts.scheme.lower() not in SCHEMES:
        raise UserError(f"{redact(location)}: not a PostgreSQL URL (postgresql://USER@HOST:PORT/DB?session=ID)")
    base, _, rest = location.partition("?")
    query, hash_, fragment = rest.partition("#")
    kept, sessions = [], []
    for item in query.split("&") if query else []:
        key, _, value = item.partition("=")
        if unquote(key) == "session":
            try:
                sessions.append(unquote(value, errors="strict"))
            except UnicodeDecodeError:
                raise UserError(f"{redact(location)}: `session` is not UTF-8 once percent-decoded") from None
        else:
            kept.append(item)  # passed to libpq exactly as written
    if len(sessions) > 1:
        raise UserError(f"{redact(location)}: `session` given {len(sessions)} times")
    if sessions and not sessions[0]:
        raise UserError(f"{redact(location)}: empty `session` (write ?session=ID)")
    if sessions:
        check_session_id(sessions[0], redact(base))
    conninfo = base + ("?" + "&".join(kept) if kept else "") + hash_ + fragment
    return conninfo, (sessions[0] if sessions else None)


def first_line(err: BaseException, default: str = "database error") -> str:
    """The first non-blank line of ``err``'s text (libpq's first line names the cause)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else default


def is_disconnect(err: BaseException, conn: Any = None) -> bool:
    """Whether ``err`` means the connection is gone (server restart, network, shutdown): a
    psycopg ``OperationalError`` after which ``conn`` (when given) is closed, or an admin
    shutdown / cannot-connect SQLSTATE (class 08, 57P01–57P03)."""
    psycopg = psycopg_module()
    if not isinstance(err, psycopg.OperationalError):
        return False
    state = getattr(err, "sqlstate", None) or ""
    if state.startswith("08") or state in ("57P01", "57P02", "57P03"):
        return True
    return conn is None or bool(getattr(conn, "closed", True))


def db_error(where: str, doing: str, err: BaseException, conn: Any = None) -> DatabaseError:
    """``err`` (a psycopg error) as one typed ``DatabaseError`` line, ``transient`` for a lost
    or refused connection; ``where`` must be redacted already."""
    why = redact(first_line(err))
    if is_disconnect(err, conn):
        return DatabaseError(f"{where}: {doing} failed: {why} (the database is unreachable; "
                             "retry when it is back)", transient=True)
    return DatabaseError(f"{where}: {doing} failed: {why}")


#: Words of a connection error that no retry can mend (libpq's and the server's): a bad value, a
#: wrong password, a database or role that does not exist, a refused host entry, SSL the server
#: lacks. Any other connection error is transient (the server is unreachable or restarting).
FINAL_MARKS = ("invalid ", "password authentication failed", "does not exist", "no pg_hba.conf entry",
               "does not support ssl", "ssl is not enabled", "password is required")
#: libpq's ``sslmode`` values: another is a typo, never worth a retry.
SSLMODES = frozenset({"disable", "allow", "prefer", "require", "verify-ca", "verify-full"})


def _refuse_unusable(conninfo: str) -> None:
    """Raise the final ``DatabaseError`` when ``conninfo`` can never work (``_conninfo_problem``)."""
    problem = _conninfo_problem(conninfo)
    if problem is not None:
        raise DatabaseError(f"{redact(conninfo)}: cannot connect to PostgreSQL: {redact(problem)}")


def _conninfo_problem(conninfo: str) -> str | None:
    """What makes ``conninfo`` unusable whatever the server does (an unknown parameter, a port
    that is no number from 1 to 65535, an unknown ``sslmode``), or None."""
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = conninfo_to_dict(conninfo)
    except ProgrammingError as err:
        why = first_line(err, "invalid connection string")
        # libpq quotes the offending token, which may be (part of) a password; a parameter's
        # name is safe to show
        return why if why.startswith("invalid URI query parameter") else re.sub(r'"[^"]*"', '"…"', why)
    for port in str(params.get("port") or "").split(","):
        digits = port.strip().removeprefix("+")  # libpq reads " 5432", "+5432" as 5432
        if port.strip() and not (digits.isascii() and digits.isdigit() and 0 < int(digits) < 65536):
            return f"port {port!r:.40} is not a number from 1 to 65535"
    sslmode = params.get("sslmode")
    if sslmode is not None and sslmode not in SSLMODES:
        return f"sslmode {sslmode!r:.40} is not one of {', '.join(sorted(SSLMODES))}"
    return None


def connect(conninfo: str, *, autocommit: bool = True) -> Any:
    """A psycopg connection to ``conninfo`` (a libpq URL or keyword string). Raises
    ``DatabaseError`` (a ``UserError``; one line: where and why, password redacted): a
    transient one when the server cannot be reached, a final one for a connection string that
    can never work (``_conninfo_problem``, or an error ``FINAL_MARKS`` names: a value libpq calls
    invalid, a wrong password, a missing database), so a caller that retries transient errors
    does not retry a typo for ever."""
    psycopg = psycopg_module()
    _refuse_unusable(conninfo)
    try:
        return psycopg.connect(conninfo, autocommit=autocommit)
    except psycopg.Error as err:
        why = redact(first_line(err, "connection failed"))
        final = isinstance(err, psycopg.ProgrammingError) or any(m in str(err).lower() for m in FINAL_MARKS)
        raise DatabaseError(f"{redact(conninfo)}: cannot connect to PostgreSQL: {why}",
                            transient=not final) from None


def connection_pool(conninfo: str, *, min_size: int = 1, max_size: int = 10, **options: Any) -> Any:
    """A ``psycopg_pool.ConnectionPool`` of autocommit connections to ``conninfo``, opened, for
    ``PostgresLog(..., pool=pool)`` / ``open_log(location, pool=pool)``: many session logs of
    one process share ``max_size`` connections instead of one each (``options`` go to the pool,
    e.g. ``timeout`` seconds to wait for a free connection, 30 by default). Close it with
    ``pool.close()`` after the logs. Raises ``UserError`` without psycopg_pool, and the final
    ``DatabaseError`` of ``connect`` for a connection string that can never work."""
    psycopg_module()
    _refuse_unusable(conninfo)
    try:
        from psycopg_pool import ConnectionPool
    except ImportError:
        raise UserError(POOL_HINT) from None
    pool = ConnectionPool(conninfo, min_size=min_size, max_size=max_size, open=False,
                          kwargs={"autocommit": True}, check=ConnectionPool.check_connection, **options)
    pool.open()
    return pool
