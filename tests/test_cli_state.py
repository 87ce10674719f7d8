"""``fsm-stage state``: every corpus file, --at time travel, --graph fallback, errors."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from shared_data import DSH_SESSIONS, PLAN_REVIEW_LOG

from fsm_stage.cli import main
from fsm_stage.log.events import Replace, SessionHeader
from fsm_stage.log.jsonl import JsonlLog

REPO = Path(__file__).resolve().parents[1]
DSH_DIR = DSH_SESSIONS
PLAN_REVIEW = PLAN_REVIEW_LOG
CORPUS = sorted(p.name for p in DSH_DIR.iterdir()) if DSH_DIR.is_dir() else []


def is_session_log(path: Path) -> bool:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                return bool(json.loads(line).get("type") == "session")
    return False


def invoke(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(main, ["state", *args])
    return res.exit_code, res.stdout, res.stderr


@pytest.mark.parametrize("name", CORPUS or ["<no corpus>"])
def test_state_on_every_corpus_file(name: str) -> None:
    if not CORPUS:
        pytest.skip(f"DSH corpus not found at {DSH_DIR}")
    path = DSH_DIR / name
    code, out, err = invoke("--json", str(path))
    if is_session_log(path):
        assert code == 0, err
        report = json.loads(out)
        assert report["events"] == report["folded_events"] >= 0
        assert report["surface"] is not None
        assert isinstance(report["plan_mode"]["active"], bool)
    else:
        assert code == 1
        assert err.startswith("fsm-stage: not a session log: ") and err.count("\n") == 1
        assert out == ""


def test_plan_review_text_and_time_travel() -> None:
    if not PLAN_REVIEW.is_file():
        pytest.skip("corpus absent")
    code, out, _ = invoke(str(PLAN_REVIEW))
    assert code == 0
    assert "events:       343 (seq 0–342)" in out
    assert "turn:         idle" in out
    assert "active=false, pending=false" in out
    assert "last header:  seq 291 (change): plan mode inactive" in out
    # line 2: after the /plan command/run the view is pending
    code, out, _ = invoke("--json", "--at", "0", str(PLAN_REVIEW))
    r = json.loads(out)
    expected = {"active": False, "pending": True, "pending_exit": False}
    assert (r["folded_events"], r["plan_mode"]) == (1, expected)
    code, out, _ = invoke("--json", "--at", "290", str(PLAN_REVIEW))
    r = json.loads(out)
    assert r["turn"] == {"open": True, "turn": 1}
    assert r["last_header"]["plan_active"] is True and r["plan_mode"]["active"] is False


def test_at_past_the_end_is_a_one_line_error() -> None:
    if not PLAN_REVIEW.is_file():
        pytest.skip("corpus absent")
    code, _, err = invoke("--at", "343", str(PLAN_REVIEW))
    assert code == 1 and err == "fsm-stage: --at 343 is past the end of the log (the last seq is 342)\n"


GRAPH = """\
stages:
  - name: explore
    instruction: Look around.
  - name: build
    instruction: Build it.
section: "Stage <<stage_current>>"
"""


def _stage_log(path: Path, stage: str | None) -> Path:
    with JsonlLog(
        path,
        header=SessionHeader(id="s", cwd="/w", origin="subagent", delegation_depth=1, parent_session="p"),
        clock=lambda: 1,
    ) as log:
        log.append("turn/start", {"turn": 1})
        log.append(
            "user/message",
            {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}},
            surface_op="append",
        )
        if stage is not None:
            log.append(
                "user/message",
                {
                    "content": [{"type": "text", "text": f"Current stage: {stage}"}],
                    "source": {
                        "kind": "stage-switch",
                        "form": "notice",
                        "summary": f"Current stage: {stage}",
                    },
                },
                surface_op=Replace(1, 1),
                source_event_seqs=[1],
            )
        log.append("request/header", {"header": {"config": {}}, "reason": "initial"})
    return path


def test_graph_initial_is_the_fallback_and_log_stage_wins(tmp_path: Path) -> None:
    graph = tmp_path / "g.yaml"
    graph.write_text(GRAPH, encoding="utf-8")
    code, out, err = invoke("--graph", str(graph), str(_stage_log(tmp_path / "a.jsonl", None)))
    assert code == 0, err
    assert "stage:        explore (graph initial; no stage record)" in out
    assert "origin subagent, depth 1, parent p" in out
    code, out, _ = invoke("--json", "--graph", str(graph), str(_stage_log(tmp_path / "b.jsonl", "build")))
    r = json.loads(out)
    assert r["stage"] == {
        "current": "build",
        "pending": None,
        "source": "log",
        "at_last_header": "build",
        "has_stage_prompt": True,
    }
    assert r["surface"] == {"nodes": 1, "replace_generation": 1, "head_is_system": False}
    code, out, _ = invoke("--json", "--graph", str(graph), str(_stage_log(tmp_path / "c.jsonl", "ghost")))
    assert any("'ghost'" in w for w in json.loads(out)["warnings"])


def test_bad_graph_and_warnings(tmp_path: Path) -> None:
    log = _stage_log(tmp_path / "a.jsonl", None)
    code, _, err = invoke("--graph", str(tmp_path / "missing.yaml"), str(log))
    assert code == 1 and "missing.yaml" in err and "Traceback" not in err
    with open(log, "ab") as fh:
        fh.write(b'{"type":"future/x","seq":3,"time":1,"data":{}}\n{"type":"turn/e')
    code, out, _ = invoke(str(log))
    assert code == 0
    assert "warnings:" in out and "torn tail" in out and "future/x" in out
    code, _, err = invoke("--strict", str(log))
    assert code == 1 and "unknown event type 'future/x'" in err


def test_progress_stays_silent_when_not_a_terminal() -> None:
    from fsm_stage.cli.progress import Progress

    p = Progress(100)
    p.t0 -= 10  # pretend the read has been slow
    p(50)
    p.phase("folding", 10)
    p(10)
    assert p.bar is None and p.shown == []  # CliRunner/pytest stderr is not a tty
    p.close()


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_appears_on_a_terminal_after_the_delay() -> None:
    from fsm_stage.cli import progress

    fake = _Tty()
    p = progress.Progress(1000, file=fake)
    p(100)  # within the first half second: nothing shown
    assert p.bar is None
    p.t0 -= progress.PROGRESS_AFTER_S + 1
    p(500)
    assert p.bar is not None
    p.close()
    assert "reading log" in fake.getvalue() and p.bar is None


def test_state_progress_covers_reading_and_folding(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Issue 16: the bar used to reach 100% after reading, then stay silent while folding
    (~2.6 s on a 1M-event log). Since issue 17 the log is read and folded in one streaming
    pass: one phase covers both and ends at 100%."""
    from fsm_stage.cli import log_cmds, progress

    monkeypatch.setattr(progress, "PROGRESS_AFTER_S", 0.0)
    monkeypatch.setattr(log_cmds, "_FOLD_CHUNK", 2)  # several updates on a small log
    fake = _Tty()
    bars: list[progress.Progress] = []

    def make(total: int, label: str = "reading log", **kw: object) -> progress.Progress:
        bars.append(progress.Progress(total, label, file=fake))
        return bars[-1]

    monkeypatch.setattr(log_cmds, "Progress", make)
    path = _stage_log(tmp_path / "p.jsonl", "beta")
    result = CliRunner().invoke(main, ["state", "--json", str(path)])
    assert result.exit_code == 0, result.output
    assert bars[0].shown == ["reading and folding log"]
    drawn = fake.getvalue()
    assert "100%" in drawn.split("reading and folding log")[-1]
    assert json.loads(result.stdout)["stage"]["current"] == "beta"


def test_checkpoint_dir_resumes_at_the_tail(tmp_path: Path) -> None:
    if not PLAN_REVIEW.is_file():
        pytest.skip("corpus absent")
    log = tmp_path / "pr.jsonl"
    log.write_bytes(PLAN_REVIEW.read_bytes())
    ck = tmp_path / "ck"
    code, out, _ = invoke("--json", "--checkpoint-dir", str(ck), str(log))
    first = json.loads(out)
    assert code == 0 and first["checkpoint"]["resumed_from"] is None and first["surface"] is None
    with open(log, "a", encoding="utf-8") as fh:
        fh.write('{"type":"command/run","data":{"commandId":"c","name":"plan","args":" again"}}\n')
    code, out, _ = invoke("--checkpoint-dir", str(ck), str(log))
    assert code == 0
    assert "checkpoint:   resumed after seq 342, folded 1 new event(s)" in out
    assert "pending=true" in out and "events:       344" in out
    plain = json.loads(invoke("--json", str(log))[1])
    code, out, _ = invoke("--json", "--checkpoint-dir", str(ck), str(log))
    again = json.loads(out)
    for key in ("plan_mode", "turn", "stage", "last_header", "events"):
        assert again[key] == plain[key]
    code, _, err = invoke("--at", "3", "--checkpoint-dir", str(ck), str(log))
    assert code == 2 and "--at" in err


# -- one CLI convention (exit 1 for bad input, `fsm-stage: ` prefix, exit 2 usage) ------------


@pytest.mark.parametrize(
    ("make", "reason"),
    [(lambda p: None, "no such file"), (lambda p: p.mkdir(), "it is a directory")],
    ids=["missing", "directory"],
)
def test_state_unreadable_log_is_one_line_exit_1(
    tmp_path: Path, make: Callable[[Path], object], reason: str
) -> None:
    path = tmp_path / "s.jsonl"
    make(path)
    code, out, err = invoke(str(path))
    assert code == 1 and out == ""
    assert err == f"fsm-stage: {path}: cannot read session log: {reason}\n"


def test_state_negative_at_is_a_usage_error_exit_2(tmp_path: Path) -> None:
    code, _, err = invoke("--at", "-1", str(_stage_log(tmp_path / "a.jsonl", None)))
    assert code == 2 and "--at" in err


def test_state_on_a_live_stream_gives_cli_advice(tmp_path: Path) -> None:
    """`state` on a headless stream-json file names what to pass instead, not a Python function."""
    path = tmp_path / "stdout.jsonl"
    path.write_text(
        '{"type":"session_event","sessionId":"s","event":{"type":"turn/start","seq":0,"time":1,"data":{}}}\n'
    )
    code, out, err = invoke(str(path))
    assert code == 1 and out == ""
    assert err.startswith(f"fsm-stage: not a session log: {path}: ")
    assert "read_stream" not in err and "session log file" in err and err.count("\n") == 1


def test_state_graph_problems_print_as_positioned_lines(tmp_path: Path) -> None:
    """A bad --graph: its problems print as PATH:LINE:COLUMN: KEY: message lines (no prefix);
    an unreadable --graph is `fsm-stage: PATH: cannot read stage graph: …`."""
    log = _stage_log(tmp_path / "a.jsonl", None)
    graph = tmp_path / "g.yaml"
    graph.write_text("stages: []\nsection: s\n", encoding="utf-8")
    code, out, err = invoke("--graph", str(graph), str(log))
    assert code == 1 and out == ""
    assert err == (
        f"{graph}:1:9: stages: is empty; "
        "expected a non-empty `stages` list of {name, instruction} mappings\n"
    )
    code, _, err = invoke("--graph", str(tmp_path / "missing.yaml"), str(log))
    assert code == 1
    assert err == f"fsm-stage: {tmp_path / 'missing.yaml'}: cannot read stage graph: no such file\n"


def test_json_header_is_the_session_header_as_read(tmp_path: Path) -> None:
    """The ``header`` of ``state --json`` is ``SessionHeader.to_json(absent_as_null=True)``
    without ``type``: every modelled field (absent ones as null, a missing ``version`` as null,
    not 0) and any unmodelled header key, so a new header field cannot be forgotten here."""
    path = tmp_path / "h.jsonl"
    head = {"type": "session", "id": "h1", "createdAt": 5, "cwd": "/w", "futureKey": [1]}
    path.write_text(json.dumps(head) + "\n", encoding="utf-8")
    code, out, err = invoke("--json", str(path))
    assert code == 0, err
    assert json.loads(out)["header"] == {
        "id": "h1",
        "created_at": 5,
        "cwd": "/w",
        "origin": None,
        "delegation_depth": 0,
        "parent_session": None,
        "seed_length": None,
        "version": None,
        "future_key": [1],
    }
    written = SessionHeader(id="s", cwd="/w", origin="subagent", delegation_depth=1, parent_session="p")
    full = written.to_json(absent_as_null=True)
    assert full["seedLength"] is None and full["type"] == "session"
    assert written.to_json() == {k: v for k, v in full.items() if v is not None}


# -- plan/mode records with an invalid payload --------------------------------------------------


def _plan_log(path: Path, *payloads: object) -> Path:
    lines = [json.dumps({"type": "session", "version": 0, "id": "s", "createdAt": 1, "cwd": "/w",
                         "delegationDepth": 0})]
    lines += [json.dumps({"type": "plan/mode", "seq": i, "time": 1, "data": d})
              for i, d in enumerate(payloads)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("checkpointed", [False, True])
def test_state_warns_about_invalid_plan_mode_records_and_strict_refuses_them(
    tmp_path: Path, checkpointed: bool
) -> None:
    """B105–B108 (docs/contracts.md): a ``plan/mode`` without a boolean ``active`` is named
    in the warnings (the fold keeps the last valid record's value), and ``--strict`` refuses
    the log with a one-line error."""
    log = _plan_log(tmp_path / "p.jsonl", {"active": True}, {"active": "yes"}, {})
    extra = ["--checkpoint-dir", str(tmp_path / "ck")] if checkpointed else []
    code, out, err = invoke("--json", *extra, str(log))
    assert code == 0, err
    report = json.loads(out)
    assert report["plan_mode"]["active"] is True  # the last valid plan/mode
    problems = [w for w in report["warnings"] if "plan/mode" in w]
    assert len(problems) == 2
    assert 'seq 1: plan/mode active must be a boolean, got "yes"' in problems[0]
    assert "seq 2: plan/mode active must be a boolean, got undefined" in problems[1]
    code, out, err = invoke("--strict", *extra, str(log))
    assert code == 1 and out == ""
    assert err.startswith("fsm-stage: ") and err.count("\n") == 1
    assert 'seq 1: plan/mode active must be a boolean, got "yes"' in err


def test_state_valid_plan_mode_records_give_no_warning(tmp_path: Path) -> None:
    log = _plan_log(tmp_path / "p.jsonl", {"active": True}, {"active": False})
    code, out, err = invoke("--json", "--strict", str(log))
    assert code == 0, err
    assert json.loads(out)["warnings"] == []


def test_ctrl_c_never_redraws_a_finished_bar() -> None:
    from fsm_stage.cli import progress

    fake = _Tty()
    with pytest.raises(KeyboardInterrupt), progress.Progress(1000, file=fake) as p:
        p.t0 -= progress.PROGRESS_AFTER_S + 1
        p(230)
        raise KeyboardInterrupt
    drawn = fake.getvalue()
    assert "23%" in drawn and "100%" not in drawn and drawn.endswith("\x1b[?25h\n")
    fake = _Tty()
    with progress.Progress(1000, file=fake) as p:  # a finished command still completes its bar
        p.t0 -= progress.PROGRESS_AFTER_S + 1
        p(230)
    assert "100%" in fake.getvalue()


def _bars(monkeypatch: pytest.MonkeyPatch, module: object) -> list[Any]:
    from fsm_stage.cli import progress

    monkeypatch.setattr(progress, "PROGRESS_AFTER_S", 0.0)
    bars: list[progress.Progress] = []

    def make(total: int, label: str = "reading log", **kw: object) -> progress.Progress:
        bars.append(progress.Progress(total, label, file=_Tty()))
        return bars[-1]

    monkeypatch.setattr(module, "Progress", make)
    return bars


def test_review_and_scenario_show_progress_on_a_terminal(monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    """On a 1M-event log these commands used to be silent for 25 s / over a minute."""
    from fsm_stage.cli import review_cmds, sim_cmds

    path = _stage_log(tmp_path / "p.jsonl", "beta")
    bars = _bars(monkeypatch, review_cmds)
    assert CliRunner().invoke(main, ["review", str(path)]).exit_code == 0
    assert bars[0].shown == ["reading log", "folding reviews"]
    recorded = tmp_path / "feature.jsonl"
    made = CliRunner().invoke(main, ["simulate", "--example", "feature-work", "--log", str(recorded),
                                     "--cwd", str(tmp_path / "cwd")])
    assert made.exit_code == 0, made.output
    bars = _bars(monkeypatch, sim_cmds)
    result = CliRunner().invoke(main, ["scenario", str(recorded)])
    assert result.exit_code == 0, result.output
    assert bars[0].shown == ["reading log", "replaying", "writing scenario"]


def test_an_open_budget_review_says_whose_budget_ran_out(tmp_path: Path) -> None:
    """A budget review moves nowhere by itself: ``state`` names the stage whose budget ran out
    (it printed ``budget -> ,`` with an empty target, helper-79); ``--json`` gives its ``from``."""
    from two_stages import budget_review_waiting

    path = tmp_path / "s.jsonl"
    budget_review_waiting(path, "b-state")
    code, out, _ = invoke(str(path))
    assert code == 0
    (line,) = [ln for ln in out.splitlines() if ln.startswith("open review:")]
    assert "(budget: explore (its budget ran out), since seq" in line
    code, out, _ = invoke("--json", str(path))
    (opened,) = json.loads(out)["reviews"]["open"]
    assert (opened["kind"], opened["from"], opened["target"]) == ("budget", "explore", "")
