"""The DSH reader (docs/session-log.md): the real corpus and every tolerance rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from log_helpers import DSH_DIR, PLAN_REVIEW, dsh_files, is_session_log

from fsm_stage.errors import LogFormatError
from fsm_stage.log.dsh import iter_events, read_log, read_stream
from fsm_stage.log.events import Replace


def write(path: Path, *records: object, raw_tail: bytes = b"") -> Path:
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records) + raw_tail)
    return path


HDR = {"type": "session", "version": 0, "id": "s", "createdAt": 1, "cwd": "/w", "delegationDepth": 0}


# --- the corpus -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", dsh_files() or ["<no corpus>"])
def test_every_corpus_file_reads_or_is_refused_in_one_line(name: str, dsh_dir: Path) -> None:
    """Session logs read with no error; everything else gets the one-line "not a session log"."""
    path = dsh_dir / name
    if is_session_log(path):
        res = read_log(path)
        assert [e.seq for e in res.events] == list(range(len(res.events)))
        assert res.torn_tail_offset is None
        assert not [w for w in res.warnings if "torn" in w]
    else:
        with pytest.raises(LogFormatError) as err:
            read_log(path)
        msg = str(err.value)
        assert msg.startswith("not a session log: ") and "\n" not in msg


def test_corpus_counts_match_the_census(dsh_dir: Path) -> None:
    """172 session logs, 108 others; 12,474 assistant/chunk events once packed rows expand."""
    logs = [p for p in sorted(dsh_dir.iterdir()) if is_session_log(p)]
    assert len(logs) == 172
    chunks = sum(sum(e.type == "assistant/chunk" for e in read_log(p).events) for p in logs)
    assert chunks == 12474


def test_packed_rows_expand_so_later_seqs_resolve(dsh_dir: Path) -> None:
    """plan-review: 39 lines decode to 343 events; the first assistant/message cites 8–284."""
    res = read_log(dsh_dir / PLAN_REVIEW)
    assert len(res.events) == 343
    first_msg = next(e for e in res.events if e.type == "assistant/message")
    assert first_msg.source_event_seqs == tuple(range(8, 285))
    assert all(res.events[s].type == "assistant/chunk" for s in first_msg.source_event_seqs)
    # members of one packed row share their line's offset: 38 record lines in all
    assert len(set(res.line_offsets)) == 38
    assert res.header.version == 0 and res.header.delegation_depth == 0


def test_explicit_seqs_are_kept_and_resolve(dsh_dir: Path) -> None:
    """Logs with explicit seqs: session/title.messageSeqs resolve to user messages."""
    checked = 0
    for p in sorted(dsh_dir.iterdir()):
        if not is_session_log(p):
            continue
        res = read_log(p)
        for e in res.events:
            if e.type == "session/title":
                for s in e.data["messageSeqs"]:
                    assert res.events[s].type == "user/message"
                    checked += 1
    assert checked >= 28


@pytest.mark.parametrize(
    "name", [n for n in dsh_files() if "stream-json" in n or "notifications" in n][:13] or ["<no corpus>"]
)
def test_live_envelope_streams_unwrap(name: str, dsh_dir: Path) -> None:
    """Both live envelope forms (session_event.event, session.event params.event) unwrap."""
    res = read_stream(dsh_dir / name)
    assert res.events and [e.seq for e in res.events] == list(range(len(res.events)))
    assert res.events[0].type in {"agent/inbox/spliced", "turn/start", "approval/policy", "user/message"}


# --- header -------------------------------------------------------------------------------------


def test_newer_version_is_refused_with_upgrade_message(tmp_path: Path) -> None:
    path = write(tmp_path / "n.jsonl", {**HDR, "version": 1}, {"type": "turn/start", "seq": 0, "data": {}})
    with pytest.raises(LogFormatError, match="written by a newer harness"):
        read_log(path)
    assert len(read_log(path, allow_newer=True).events) == 1


def test_absent_version_and_depth_are_accepted(tmp_path: Path) -> None:
    hdr = {"type": "session", "id": "s", "createdAt": 3}
    res = read_log(write(tmp_path / "a.jsonl", hdr, {"type": "turn/start", "data": {"turn": 1}}))
    assert res.header.version is None and res.header.delegation_depth == 0 and res.header.cwd is None
    with pytest.raises(LogFormatError, match="no version"):
        read_log(tmp_path / "a.jsonl", strict=True)


def test_header_fields_exposed(tmp_path: Path) -> None:
    hdr = {
        **HDR,
        "parentSession": "p",
        "origin": "subagent",
        "delegationDepth": 1,
        "seedLength": 4,
        "agentPreset": "x",
    }
    res = read_log(write(tmp_path / "h.jsonl", hdr))
    h = res.header
    assert (h.id, h.created_at, h.cwd, h.parent_session, h.origin, h.delegation_depth, h.seed_length) == (
        "s",
        1,
        "/w",
        "p",
        "subagent",
        1,
        4,
    )
    assert h.is_subagent and h.extra == {"agentPreset": "x"}
    assert res.events == []


@pytest.mark.parametrize(
    ("first", "fragment"),
    [
        ({"jsonrpc": "2.0", "id": 1, "result": {}}, "ACP JSON-RPC transcript"),
        ({"type": "session_event", "sessionId": "x", "event": {}}, "stream-json"),
        ({"method": "session.event", "params": {}}, "session.event"),
        ({"type": "other"}, "first line is not a session header"),
    ],
)
def test_non_session_files_get_one_line_error(
    tmp_path: Path, first: dict[str, object], fragment: str
) -> None:
    with pytest.raises(LogFormatError) as err:
        read_log(write(tmp_path / "x.jsonl", first))
    assert str(err.value).startswith("not a session log: ") and fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_empty_and_garbage_files(tmp_path: Path) -> None:
    (tmp_path / "e.jsonl").write_bytes(b"")
    with pytest.raises(LogFormatError, match=r"not a session log: .*empty"):
        read_log(tmp_path / "e.jsonl")
    (tmp_path / "g.jsonl").write_bytes(b"hello\n")
    with pytest.raises(LogFormatError, match=r"not a session log: .*not JSON"):
        read_log(tmp_path / "g.jsonl")


# --- body ---------------------------------------------------------------------------------------


def test_seqs_synthesised_when_absent_and_checked_when_present(tmp_path: Path) -> None:
    res = read_log(
        write(tmp_path / "p.jsonl", HDR, {"type": "turn/start", "data": {}}, {"type": "turn/end", "data": {}})
    )
    assert [(e.seq, e.time) for e in res.events] == [(0, 0), (1, 0)]
    gap = write(
        tmp_path / "g.jsonl",
        HDR,
        {"type": "turn/start", "seq": 0, "time": 5, "data": {}},
        {"type": "step/start", "seq": 2, "time": 5, "data": {}},
    )
    res = read_log(gap)  # gap on the last line, no later turn/end: dropped as torn
    assert len(res.events) == 1 and res.torn_tail_offset is not None


def test_packed_row_members_become_chunks_with_times(tmp_path: Path) -> None:
    row = {
        "type": "text-chunks",
        "seq0": 1,
        "time0": 100,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [5, -2], "texts": ["a", "b", "c"]},
    }
    tool = {
        "type": "tool-call-chunks",
        "data": {"turn": 1, "step": 1, "index": 1, "dt": [1], "id": "c1", "name": "bash", "args": ["{", "}"]},
    }
    res = read_log(write(tmp_path / "c.jsonl", HDR, {"type": "turn/start", "seq": 0, "data": {}}, row, tool))
    chunks = res.events[1:]
    assert [(e.seq, e.time) for e in chunks] == [(1, 100), (2, 105), (3, 103), (4, 0), (5, 1)]
    assert [e.data["chunk"]["type"] for e in chunks] == ["text-delta"] * 3 + ["tool-call-delta"] * 2
    assert chunks[4].data["chunk"] == {
        "type": "tool-call-delta",
        "index": 1,
        "id": "c1",
        "name": "bash",
        "argumentsDelta": "}",
    }


def test_malformed_packed_row_is_corruption(tmp_path: Path) -> None:
    row = {
        "type": "reasoning-chunks",
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [], "texts": ["a", "b"]},
    }
    with pytest.raises(LogFormatError, match="malformed reasoning-chunks row"):
        read_log(write(tmp_path / "m.jsonl", HDR, row))


def test_unknown_types_kept_and_strict_refuses(tmp_path: Path) -> None:
    path = write(
        tmp_path / "u.jsonl",
        HDR,
        {"type": "future/thing", "seq": 0, "time": 0, "data": {}},
        {"type": "fsm/stage", "seq": 1, "time": 0, "data": {}, "ignorable": True},
    )
    res = read_log(path)
    assert [e.type for e in res.events] == ["future/thing", "fsm/stage"]
    assert res.unknown_types == {"future/thing": 1}
    assert any("future/thing" in w for w in res.warnings)
    with pytest.raises(LogFormatError, match="unknown event type 'future/thing'"):
        read_log(path, strict=True)
    ok = write(
        tmp_path / "i.jsonl", HDR, {"type": "fsm/stage", "seq": 0, "time": 0, "data": {}, "ignorable": True}
    )
    assert read_log(ok, strict=True).events[0].ignorable


def test_replace_read_in_both_spellings(tmp_path: Path) -> None:
    ev = {"type": "user/message", "data": {}, "sourceEventSeqs": [0]}
    res = read_log(
        write(
            tmp_path / "r.jsonl",
            HDR,
            {"type": "user/message", "data": {}, "surfaceOp": "append"},
            {**ev, "surfaceOp": {"op": "replace", "start": 0, "end": 0}},
            {**ev, "surfaceOp": {"op": "replace", "startSeq": 1, "endSeq": 1}, "sourceEventSeqs": [1]},
        )
    )
    assert [e.surface_op for e in res.events] == ["append", Replace(0, 0), Replace(1, 1)]


def test_legacy_shapes_are_tolerated(tmp_path: Path) -> None:
    res = read_log(
        write(
            tmp_path / "l.jsonl",
            HDR,
            {"type": "turn/start", "data": {"turn": 1, "trigger": "user"}},
            {
                "type": "user/message",
                "data": {"content": "hi", "source": {"kind": "user"}},
                "surfaceOp": "append",
            },
            {
                "type": "tool/result",
                "data": {"callId": "c", "content": "x", "isError": False},
                "surfaceOp": "append",
            },
            {"type": "turn/end", "data": {"error": "boom"}},
        )
    )
    assert len(res.events) == 4


# --- torn tail ----------------------------------------------------------------------------------


def test_last_line_without_newline_is_dropped_and_reported(tmp_path: Path) -> None:
    path = write(
        tmp_path / "t.jsonl",
        HDR,
        {"type": "turn/start", "data": {}},
        raw_tail=b'{"type":"turn/end","data":{}}',
    )
    good_end = path.stat().st_size - len(b'{"type":"turn/end","data":{}}')
    res = read_log(path)
    assert len(res.events) == 1
    assert res.torn_tail_offset == good_end == res.good_end
    assert any("torn tail" in w for w in res.warnings)


def test_bad_line_after_last_turn_end_is_torn(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", HDR, {"type": "turn/end", "data": {}}, raw_tail=b"{oops\n{}\n")
    res = read_log(path)
    assert len(res.events) == 1 and res.torn_tail_offset is not None


def test_damage_before_a_later_turn_end_is_corruption(tmp_path: Path) -> None:
    """The same defect at or before a later turn/end is corruption."""
    path = tmp_path / "c.jsonl"
    path.write_bytes(json.dumps(HDR).encode() + b"\n{oops\n" + b'{"type":"turn/end","data":{}}\n')
    with pytest.raises(LogFormatError, match="corrupt session log"):
        read_log(path)


def test_iter_events_streams_and_resumes(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", HDR, *({"type": "turn/start", "seq": i, "data": {}} for i in range(5)))
    full = list(iter_events(path))
    assert [e.seq for _, e in full] == list(range(5))
    off3 = full[3][0]
    assert [e.seq for _, e in iter_events(path, start_offset=off3, first_seq=3)] == [3, 4]


# --- zstd ---------------------------------------------------------------------------------------


def test_zstd_multi_frame_and_incomplete_last_frame(tmp_path: Path) -> None:
    zstd = pytest.importorskip("zstandard")
    cctx = zstd.ZstdCompressor()
    lines = [
        json.dumps(HDR) + "\n",
        json.dumps({"type": "turn/start", "seq": 0, "time": 1, "data": {}}) + "\n",
        json.dumps({"type": "turn/end", "seq": 1, "time": 2, "data": {}}) + "\n",
    ]
    frames = [cctx.compress(line.encode()) for line in lines]
    path = tmp_path / "session.jsonl.zstd"
    path.write_bytes(b"".join(frames))
    res = read_log(path)
    assert [e.type for e in res.events] == ["turn/start", "turn/end"] and res.compressed
    path.write_bytes(b"".join(frames[:2]) + frames[2][: len(frames[2]) // 2])
    res = read_log(path)
    assert [e.type for e in res.events] == ["turn/start"]
    assert res.torn_tail_offset is not None and any("zstd" in w for w in res.warnings)
    # a frame is one durable batch: a cut last frame is dropped whole, even its complete lines
    batch = cctx.compress(
        (lines[1].replace('"seq": 0', '"seq": 1') + lines[2].replace('"seq": 1', '"seq": 2')).encode()
    )
    for cut in range(1, len(batch)):
        path.write_bytes(frames[0] + frames[1] + batch[:cut])
        res = read_log(path)
        assert [e.seq for e in res.events] == [0]
        assert res.torn_tail_offset == len(lines[0].encode()) + len(lines[1].encode())


def test_corpus_dir_constant_points_at_shared() -> None:
    assert DSH_DIR.name == "dsh-sessions" and DSH_DIR.parent.name == "data"


def test_interleaved_subagent_streams_are_split(dsh_dir: Path) -> None:
    """A notification stream interleaving a parent and an in-process child splits into sessions."""
    from fsm_stage.log.dsh import read_streams

    name = (
        "examples__jsonrpc-agent__tests__snapshots__subagent-spawn-in-process__notifications.expected.jsonl"
    )
    streams = read_streams(dsh_dir / name)
    assert len(streams) >= 2
    for s in streams:
        assert [e.seq for e in s.events] == list(range(len(s.events)))
    assert streams[0].events[98].type == "tool/call" and streams[0].events[99].seq == 99


def test_reader_and_cold_fold_report_unknown_types_with_one_warning(tmp_path: Path) -> None:
    """``read_log`` and ``checkpoints.cold_fold`` word the unknown-types warning the same
    way, through ``dsh.unknown_types_warning`` (sorted types with counts)."""
    from fsm_stage.log.checkpoints import cold_fold
    from fsm_stage.log.dsh import unknown_types_warning
    from fsm_stage.log.projections import standard_projections

    path = write(
        tmp_path / "u.jsonl",
        HDR,
        {"type": "z/thing", "seq": 0, "time": 0, "data": {}},
        {"type": "future/thing", "seq": 1, "time": 0, "data": {}},
        {"type": "z/thing", "seq": 2, "time": 0, "data": {}},
    )
    expected = unknown_types_warning(str(path), {"z/thing": 2, "future/thing": 1})
    assert expected.endswith("future/thing ×1, z/thing ×2") and str(path) in expected
    assert expected in read_log(path).warnings
    assert expected in cold_fold(path, standard_projections()).warnings


# --- JSON nested too deep for the parser -------------------------------------------------------


def _deep(depth: int) -> bytes:
    return b'{"type":"fsm/x","ignorable":true,"data":{"a":' + b"[" * depth + b"]" * depth + b"}}\n"


def test_json_nested_too_deep_as_last_line_is_a_torn_tail(tmp_path: Path) -> None:
    """A line whose nesting exceeds the JSON parser's recursion limit is an unparsable line like
    any other: the last one is a torn tail, never a RecursionError."""
    path = write(tmp_path / "d.jsonl", HDR, {"type": "turn/end", "data": {}}, raw_tail=_deep(100_000))
    res = read_log(path)
    assert len(res.events) == 1 and res.torn_tail_offset is not None
    assert any("torn tail" in w and "not valid JSON" in w for w in res.warnings)


def test_json_nested_too_deep_before_a_turn_end_is_one_line_corruption(tmp_path: Path) -> None:
    path = write(tmp_path / "d.jsonl", HDR, raw_tail=_deep(100_000) + b'{"type":"turn/end","data":{}}\n')
    with pytest.raises(LogFormatError, match="corrupt session log") as info:
        read_log(path)
    assert "\n" not in str(info.value)


def test_json_nested_too_deep_in_header_or_event_stream_is_one_line(tmp_path: Path) -> None:
    deep_header = tmp_path / "h.jsonl"
    deep_header.write_bytes(b'{"type":"session","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n")
    with pytest.raises(LogFormatError, match="not a session log"):
        read_log(deep_header)
    stream = tmp_path / "s.jsonl"
    stream.write_bytes(b'{"jsonrpc":"2.0","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n")
    with pytest.raises(LogFormatError, match="not valid JSON"):
        read_stream(stream)


def test_moderately_deep_json_within_the_parser_limit_reads(tmp_path: Path) -> None:
    """Nesting the parser accepts (here 500 levels) is ordinary data and must read and fold."""
    path = write(tmp_path / "d.jsonl", HDR, raw_tail=_deep(500))
    res = read_log(path)
    assert len(res.events) == 1 and res.torn_tail_offset is None
