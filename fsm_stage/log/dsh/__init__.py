"""Reader for DeepSeek Harness (DSH) session logs: real on-disk logs and DSH's test fixtures.

Follows docs/session-log.md. Modules, bottom up: ``records`` (header validation,
``RecordDecoder``, ``ReadResult``), ``opening`` (plain/zstd files, foreign files, the
torn-tail rule, ``open_session_log``), ``reader`` (``read_log``, ``iter_events``) and
``streams`` (``read_streams``/``read_stream`` for live envelope streams). This package
re-exports all of their public names; ``KNOWN_EVENT_TYPES`` lives in ``fsm_stage.constants``.
"""

from __future__ import annotations

from fsm_stage.constants import KNOWN_EVENT_TYPES
from fsm_stage.log.dsh.opening import (
    ZSTD_MAGIC,
    BodyScan,
    OpenedLog,
    OpenedSession,
    gc_paused,
    open_log_bytes,
    open_log_data,
    open_session_data,
    open_session_log,
    read_header,
    scan_body,
    unknown_types_warning,
)
from fsm_stage.log.dsh.reader import iter_events, read_log, read_log_data
from fsm_stage.log.dsh.records import (
    ENVELOPE_KEYS,
    HEADER_KEYS,
    LAZY_ROWS,
    PACKED_ROW_TYPES,
    RETIRED_HEADER_KEYS,
    PackedRow,
    ReadResult,
    RecordDecoder,
    UnreadEvent,
    parse_header,
    parse_surface_op,
    unknown_keys_warning,
)
from fsm_stage.log.dsh.streams import read_stream, read_streams, unwrap_envelope

__all__ = [
    "ENVELOPE_KEYS",
    "HEADER_KEYS",
    "KNOWN_EVENT_TYPES",
    "LAZY_ROWS",
    "PACKED_ROW_TYPES",
    "RETIRED_HEADER_KEYS",
    "ZSTD_MAGIC",
    "BodyScan",
    "OpenedLog",
    "OpenedSession",
    "PackedRow",
    "ReadResult",
    "RecordDecoder",
    "UnreadEvent",
    "gc_paused",
    "iter_events",
    "open_log_bytes",
    "open_log_data",
    "open_session_data",
    "open_session_log",
    "parse_header",
    "parse_surface_op",
    "read_header",
    "read_log",
    "read_log_data",
    "read_stream",
    "read_streams",
    "scan_body",
    "unknown_keys_warning",
    "unknown_types_warning",
    "unwrap_envelope",
]
