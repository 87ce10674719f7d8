"""A "real-mix" session log for the benchmarks, built from the recorded DSH sessions.

The bench's own event mix (``bench_log._turn``) has no packed chunk rows and an even shape;
real DeepSeek Harness logs are mostly streamed chunks, many of them packed into
``text-chunks`` / ``reasoning-chunks`` / ``tool-call-chunks`` rows, with long tool results and
DSH event types fsm_stage does not fold. ``make_real_mix(path, n)`` concatenates the bodies of
every recorded session under ``$FSM_STAGE_SHARED/data/dsh-sessions/`` (the files ``read_log``
accepts as session logs), over and over, with fresh seqs (``seq`` of plain records, ``seq0``
of packed rows; ``sourceEventSeqs`` and replace boundaries shifted alike) until the log holds
``n`` events. Packed rows are kept as rows (one line, many events). The log is generated at
bench time into a temporary folder and never committed.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PACKED = {"text-chunks": "texts", "reasoning-chunks": "texts", "tool-call-chunks": "args"}
HEADER = {"type": "session", "version": 0, "id": "bench-real-mix", "createdAt": 1_786_000_000_000,
          "cwd": "/bench/workspace"}


def sessions_dir() -> Path:
    """``$FSM_STAGE_SHARED/data/dsh-sessions`` (default: ``../shared`` next to the repository)."""
    shared = os.environ.get("FSM_STAGE_SHARED")
    base = Path(shared) if shared else REPO.parent / "shared"
    return base / "data" / "dsh-sessions"


class NoRecordings(RuntimeError):
    """The recorded DSH sessions the real-mix rows need are not there (``sessions_dir()``)."""


@cache
def _recordings() -> tuple[tuple[tuple[dict[str, Any], int], ...], ...]:
    """Per readable recorded session: its body lines as ``(record, events in it)``."""
    from fsm_stage.errors import LogFormatError
    from fsm_stage.log.dsh import read_log

    out: list[tuple[tuple[dict[str, Any], int], ...]] = []
    folder = sessions_dir()
    if not folder.is_dir():
        raise NoRecordings(f"no recorded DSH sessions at {folder}: set FSM_STAGE_SHARED to the folder "
                           "holding data/dsh-sessions (default: ../shared next to the repository)")
    for path in sorted(folder.glob("*.jsonl")):
        try:
            res = read_log(path)
        except LogFormatError:
            continue  # a foreign transcript (ACP, stream-json): not a session log
        if res.torn_tail_offset is not None or not res.events:
            continue
        lines: list[tuple[dict[str, Any], int]] = []
        with open(path, "rb") as fh:
            next(fh)
            for line in fh:
                if not line.strip():
                    continue
                rec = json.loads(line)
                field = PACKED.get(rec.get("type"))
                lines.append((rec, len(rec["data"][field]) if field else 1))
        out.append(tuple(lines))
    if not out:
        raise RuntimeError(f"no readable session log under {folder}")
    return tuple(out)


def _bodies() -> list[tuple[dict[str, Any], int]]:
    return [line for lines in _recordings() for line in lines]


def mix_summary() -> dict[str, Any]:
    """What one pass over the recordings holds: lines, events, packed rows, chunk share."""
    bodies = _bodies()
    events = sum(n for _, n in bodies)
    packed = [n for rec, n in bodies if rec["type"] in PACKED]
    chunks = sum(n for rec, n in bodies if rec["type"] == "assistant/chunk") + sum(packed)
    return {"lines": len(bodies), "events": events, "packed_rows": len(packed),
            "events_in_packed_rows": sum(packed), "chunk_share": chunks / events}


def make_real_mix(path: Path, n: int) -> dict[str, Any]:
    """Write a real-mix log of at least ``n`` events (whole lines; a packed row is not split)
    to ``path``; returns ``{"events", "lines", "bytes"}``."""
    recordings = _recordings()
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    seq = lines = 0
    with open(path, "w", encoding="utf-8") as out:
        out.write(dumps(HEADER) + "\n")
        while seq < n:
            for body in recordings:
                if seq >= n:
                    break
                events, written = _write(out, body, seq, n, dumps)
                seq, lines = seq + events, lines + written
    return {"events": seq, "lines": lines, "bytes": path.stat().st_size}


def _write(out: Any, body: Any, seq: int, n: int, dumps: Any) -> tuple[int, int]:
    """Write one recording's lines from ``seq`` on (until ``n`` events); returns (events, lines)."""
    start, lines = seq, 0
    base = seq  # seq shift of this recording (a reader numbers seq-less records from 0)
    for rec, count in body:
        if seq >= n:
            break
        rec = dict(rec)
        if rec["type"] in PACKED:
            old = rec.get("seq0")
            if isinstance(old, int):
                base = seq - old
                rec["seq0"] = seq
        else:
            old = rec.get("seq")
            if isinstance(old, int):
                base = seq - old
                rec["seq"] = seq
            srcs = rec.get("sourceEventSeqs")
            if isinstance(srcs, list):
                rec["sourceEventSeqs"] = [s + base for s in srcs]
            op = rec.get("surfaceOp")
            if isinstance(op, dict):  # replace boundaries are node seqs
                rec["surfaceOp"] = {k: v + base if k in ("start", "end") and isinstance(v, int) else v
                                    for k, v in op.items()}
        out.write(dumps(rec) + "\n")
        seq += count
        lines += 1
    return seq - start, lines
