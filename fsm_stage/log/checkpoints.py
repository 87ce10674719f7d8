"""Projection checkpoints: cold reads of a JSONL log that seek to the tail instead of refolding.

``CheckpointStore(directory)`` keeps one JSON ``Checkpoint`` per log file (named after a hash
of the log's resolved path; writes are atomic and fail-soft; nothing is written beside the
log, so read-only DSH logs can be checkpointed). A checkpoint holds the log's identity, the
watermark (last folded ``seq``, the byte offset and digest of its line, the file size, device,
inode and mtime) and one ``{ver: STATE_VERSION, state}`` row per projection key.

``cold_fold(path, projections, store=…)`` validates the header and, when a checkpoint still
matches the file, folds only the events after the watermark; on any mismatch it refolds from
the start. It then writes a fresh checkpoint, which only ever reflects committed lines.
``checkpoint_log(store, log, cursors)`` checkpoints a log this process is writing. What a
match requires, and its known limit: ``docs/log-decisions.md`` (Projection checkpoints)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from fsm_stage.errors import LogFormatError
from fsm_stage.fileio import atomic_write
from fsm_stage.log.dsh import (
    LAZY_ROWS,
    BodyScan,
    RecordDecoder,
    gc_paused,
    open_session_log,
    read_header,
    scan_body,
    unknown_keys_warning,
    unknown_types_warning,
)
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.log.projections import Projection, ProjectionCursor, routes

CHECKPOINT_FORMAT = 2


@attrs.frozen
class LogIdentity:
    """Header identity a checkpoint is valid for: ``id``, ``createdAt``, ``cwd``."""

    id: str
    created_at: int
    cwd: str | None

    @classmethod
    def of(cls, header: SessionHeader) -> LogIdentity:
        return cls(header.id, header.created_at, header.cwd)


@attrs.frozen
class Checkpoint:
    """A projection checkpoint of one log (see module docstring)."""

    identity: LogIdentity
    seq: int
    offset: int
    line_seq0: int
    line_no: int
    line_hash: str
    size: int
    rows: Mapping[str, Mapping[str, Any]]
    header_hash: str = ""
    file_id: tuple[int, int] = (0, 0)
    mtime_ns: int = 0
    strict: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "format": CHECKPOINT_FORMAT,
            "identity": attrs.asdict(self.identity),
            "seq": self.seq,
            "offset": self.offset,
            "lineSeq0": self.line_seq0,
            "lineNo": self.line_no,
            "lineHash": self.line_hash,
            "size": self.size,
            "rows": {k: dict(v) for k, v in self.rows.items()},
            "headerHash": self.header_hash,
            "fileId": list(self.file_id),
            "mtimeNs": self.mtime_ns,
            "strict": self.strict,
        }

    @classmethod
    def from_json(cls, raw: Any) -> Checkpoint:
        """Raises ``ValueError``/``KeyError``/``TypeError`` for a malformed record."""
        if not isinstance(raw, dict) or raw.get("format") != CHECKPOINT_FORMAT:
            raise ValueError("not a checkpoint record of this format")
        ident = raw["identity"]
        ints = [raw[k] for k in ("seq", "offset", "lineSeq0", "lineNo", "size", "mtimeNs")]
        file_id = raw["fileId"]
        if (
            not all(isinstance(v, int) for v in ints)
            or not isinstance(raw["lineHash"], str)
            or not isinstance(raw["headerHash"], str)
            or not isinstance(file_id, list)
            or len(file_id) != 2
            or not all(isinstance(v, int) for v in file_id)
        ):
            raise ValueError("bad checkpoint numbers")
        rows = raw["rows"]
        if not isinstance(rows, dict):
            raise ValueError("bad checkpoint rows")
        strict = raw.get("strict", False)
        if not isinstance(strict, bool):
            raise ValueError("bad checkpoint strictness")
        return cls(
            LogIdentity(ident["id"], ident["created_at"], ident["cwd"]),
            raw["seq"],
            raw["offset"],
            raw["lineSeq0"],
            raw["lineNo"],
            raw["lineHash"],
            raw["size"],
            rows,
            raw["headerHash"],
            (file_id[0], file_id[1]),
            raw["mtimeNs"],
            strict,
        )


def line_digest(line: bytes) -> str:
    """The checkpoint's line fingerprint: the first 16 hex chars of SHA-256."""
    return hashlib.sha256(line).hexdigest()[:16]


class CheckpointStore:
    """A directory of checkpoint files, one per log (``<sha256(resolved log path)[:32]>.json``)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def path_for(self, log_path: str | os.PathLike[str]) -> Path:
        key = hashlib.sha256(str(Path(log_path).resolve()).encode()).hexdigest()[:32]
        return self.directory / f"{key}.json"

    def load(self, log_path: str | os.PathLike[str]) -> Checkpoint | None:
        """The stored checkpoint, or None when absent or unreadable (never raises)."""
        try:
            raw = json.loads(self.path_for(log_path).read_text(encoding="utf-8"))
            return Checkpoint.from_json(raw)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save(self, log_path: str | os.PathLike[str], checkpoint: Checkpoint) -> bool:
        """Write atomically (``fileio.atomic_write``); returns False (and leaves the old file)
        on any OS error."""
        data = json.dumps(checkpoint.to_json(), separators=(",", ":")).encode("utf-8")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path_for(log_path), data)
        except OSError:
            return False
        return True


@attrs.frozen
class ColdFold:
    """Result of ``cold_fold``.

    ``states`` maps projection key → state; ``last_seq`` is the last committed seq (-1 when
    empty); ``events_applied`` counts events folded in this call; ``resumed_from`` is the
    checkpoint watermark used (None for a full fold) and ``checkpoint_note`` says why a
    checkpoint was not used.
    """

    header: SessionHeader
    states: Mapping[str, Any]
    last_seq: int
    events_applied: int
    resumed_from: int | None
    checkpoint_note: str | None
    warnings: tuple[str, ...]
    torn_tail_offset: int | None
    unknown_types: Mapping[str, int]


def _file_stamp(st: os.stat_result) -> tuple[tuple[int, int], int]:
    """``((st_dev, st_ino), st_mtime_ns)`` of a log file."""
    return (st.st_dev, st.st_ino), st.st_mtime_ns


def _restore(
    cp: Checkpoint | None,
    identity: LogIdentity,
    projections: Sequence[Projection[Any]],
    st: os.stat_result,
    header_hash: str,
    strict: bool,
) -> tuple[dict[str, Any] | None, str | None]:
    if cp is None:
        return None, "no checkpoint"
    if strict and not cp.strict:
        return None, "the checkpoint was written by a lenient read; a strict read checks every line"
    if cp.identity != identity:
        return None, "checkpoint identity differs (recreated or swapped log)"
    if cp.header_hash != header_hash:
        return None, "the log's header line changed"
    file_id, mtime_ns = _file_stamp(st)
    if cp.file_id != file_id:
        return None, "the log file was replaced (another inode)"
    if st.st_size < cp.size:
        return None, "log is shorter than the checkpoint (truncated or rewritten)"
    if st.st_size == cp.size and mtime_ns != cp.mtime_ns:
        return None, "the log was rewritten in place (same size, another modification time)"
    states: dict[str, Any] = {}
    for p in projections:
        row = cp.rows.get(p.key)
        if row is None:
            return None, f"checkpoint has no row for {p.key!r}"
        if row.get("ver") != p.STATE_VERSION:
            return (
                None,
                f"checkpoint row {p.key!r} has state version {row.get('ver')}, expected {p.STATE_VERSION}",
            )
        try:
            states[p.key] = p.load(row.get("state"))
        except (ValueError, TypeError, KeyError) as err:
            return None, f"checkpoint row {p.key!r} does not load: {err}"
    return states, None


def cold_fold(
    path: str | os.PathLike[str],
    projections: Sequence[Projection[Any]],
    *,
    store: CheckpointStore | None = None,
    strict: bool = False,
    write: bool = True,
    on_progress: Callable[[int], None] | None = None,
) -> ColdFold:
    """Fold ``projections`` over the log at ``path``, seeking to a checkpoint's tail when valid.

    Costs O(new events) after a matching checkpoint, O(log) otherwise. Raises
    ``LogFormatError`` like ``read_log``. With ``store`` and ``write`` a fresh checkpoint is
    saved (plain files only; zstd logs cannot seek and always refold). A ``strict`` read
    resumes only from a checkpoint a strict read wrote: a lenient read's watermark may lie past
    lines a strict read refuses.
    """
    p = Path(path)
    source = str(p)
    session = open_session_log(p, strict=strict)
    opened, body_start, header = session.log, session.body_start, session.header
    fh, compressed, warnings = opened.stream, opened.compressed, opened.warnings
    with fh:
        identity = LogIdentity.of(header)
        states: dict[str, Any] | None = None
        note: str | None = "no checkpoint store"
        resumed: int | None = None
        first_seq, start, skip_upto, line_no = 0, body_start, -1, 1
        st = None if compressed else os.fstat(fh.fileno())
        header_hash = ""
        if store is not None and st is not None:
            fh.seek(0)
            header_hash = line_digest(fh.read(body_start))
        if store is not None and compressed:
            note = "zstd log: checkpoints need a seekable plain file"
        elif store is not None and st is not None:
            cp = store.load(p)
            states, note = _restore(cp, identity, projections, st, header_hash, strict)
            if states is not None and cp is not None:
                fh.seek(cp.offset)
                if line_digest(fh.readline()) == cp.line_hash:
                    first_seq, start, skip_upto, line_no = (
                        cp.line_seq0,
                        cp.offset,
                        cp.seq,
                        max(cp.line_no - 1, 0),
                    )
                    resumed = cp.seq
                else:
                    states, note = None, "the checkpoint's watermark line changed"
        if states is None:
            states = {pr.key: pr.init() for pr in projections}
        fh.seek(start)
        # Each event goes only to the projections whose ``READS`` name its type (or to all of
        # them when it has a surface op); the rest are decoded and checked, never applied.
        # Packed chunk rows hold only ``assistant/chunk`` events without surface ops: when no
        # projection reads that type a row is validated and skipped by its span, never built.
        route = routes(projections)
        decoder = RecordDecoder(
            source=source, next_seq=first_seq, strict=strict, lazy_packed=route.skip_packed,
            unread=route.unread,
        )
        scan = BodyScan(offset=start, line_no=line_no, warnings=warnings)
        keys = [pr.key for pr in projections]
        applies = [pr.apply for pr in projections]
        folded = [states[k] for k in keys]
        by_type, every = route.by_type, route.every
        last: tuple[int, bytes, int, int] | None = None
        applied = 0
        last_seq = skip_upto
        with gc_paused():
            for n, (off, raw, evs) in enumerate(scan_body(iter(fh), decoder, scan), 1):
                if type(evs) in LAZY_ROWS:  # a packed row or one event nobody reads: its span
                    first, last_seq = evs.seq0, evs.seq0 + evs.size - 1  # type: ignore[attr-defined]
                    applied += max(0, last_seq - max(first, skip_upto + 1) + 1)
                else:
                    for ev in evs:
                        if ev.seq <= skip_upto:
                            continue
                        applied += 1
                        if by_type is None or ev.surface_op is not None or ev.source_event_seqs is not None:
                            targets = every
                        else:
                            targets = by_type.get(ev.type, ())
                        for i in targets:
                            folded[i] = applies[i](folded[i], ev)
                    first, last_seq = evs[0].seq, evs[-1].seq
                last = (off, raw, first, scan.line_no)
                if on_progress is not None and n % 4096 == 0:
                    on_progress(off)
        states = dict(zip(keys, folded, strict=True))
        if resumed is not None and last_seq < resumed:
            raise LogFormatError(
                f"{source}: log ends before its checkpoint watermark {resumed}"
            )  # pragma: no cover
    if store is not None and write and st is not None and last is not None:
        off, raw, seq0, ln = last
        file_id, mtime_ns = _file_stamp(st)
        store.save(
            p,
            Checkpoint(
                identity=identity,
                seq=last_seq,
                offset=off,
                line_seq0=seq0,
                line_no=ln,
                line_hash=line_digest(raw),
                size=scan.offset,
                rows={
                    pr.key: {"ver": pr.STATE_VERSION, "state": pr.dump(states[pr.key])} for pr in projections
                },
                header_hash=header_hash,
                file_id=file_id,
                mtime_ns=mtime_ns,
                strict=strict,
            ),
        )
    if decoder.unknown:
        warnings.append(unknown_types_warning(source, decoder.unknown))
    if decoder.unknown_keys:
        warnings.append(unknown_keys_warning(source, decoder))
    return ColdFold(
        header=header,
        states=states,
        last_seq=last_seq,
        events_applied=applied,
        resumed_from=resumed,
        checkpoint_note=None if resumed is not None else note,
        warnings=tuple(warnings),
        torn_tail_offset=scan.offset
        if opened.torn and scan.torn_tail_offset is None
        else scan.torn_tail_offset,
        unknown_types=dict(decoder.unknown),
    )


def checkpoint_log(store: CheckpointStore, log: JsonlLog, cursors: Sequence[ProjectionCursor[Any]]) -> bool:
    """Write a checkpoint of live ``cursors`` over an open ``JsonlLog`` (call at ``turn/end``
    and at close — the log is already durable, so the cache never leads it).

    Every cursor is read up to the log's end first. Returns False for an empty log or a
    failed (fail-soft) write. The checkpoint is marked lenient (a strict ``cold_fold`` refolds
    once and writes its own): the log may have been opened by a lenient read.
    """
    if len(log) == 0:
        return False
    rows = {}
    for c in cursors:
        state = c.read()
        rows[c.projection.key] = {"ver": c.projection.STATE_VERSION, "state": c.projection.dump(state)}
    w = len(log) - 1
    try:
        st = os.stat(log.path)
        with open(log.path, "rb") as fh:  # the header line as ``cold_fold`` hashes it
            _, body_start = read_header(fh, str(log.path))
            fh.seek(0)
            header_hash = line_digest(fh.read(body_start))
    except OSError:
        return False
    file_id, mtime_ns = _file_stamp(st)
    cp = Checkpoint(
        identity=LogIdentity.of(log.header),
        seq=w,
        offset=log.line_offset(w),
        line_seq0=log.line_start_seq(w),
        line_no=0,
        line_hash=log.line_hash(w),
        size=log.size,
        rows=rows,
        header_hash=header_hash,
        file_id=file_id,
        mtime_ns=mtime_ns,
    )
    return store.save(log.path, cp)
