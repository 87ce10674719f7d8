"""``fsm-stage state``: fold a session log (DSH or fsm_stage) and print what it says.

``state LOG [--graph GRAPH] [--at SEQ] [--json] [--strict]`` prints the header (id, cwd,
origin, delegation depth, parent), the event count, the open turn, plan mode
``{active, pending}``, the current stage (the graph's initial stage when the log has no stage
record and ``--graph`` is given), what the last ``request/header`` told the model, the
surface length and any warnings (torn tail, unknown event types, surface problems, and
``plan/mode`` records with an invalid payload: plan mode is then the last *valid* record's
value, B105–B108; ``--strict`` refuses such a log).
``--at SEQ`` folds only events ``0..SEQ`` (time travel). ``--checkpoint-dir DIR`` keeps
projection checkpoints (``fsm_stage.log.checkpoints``) so a later read of a grown log seeks to
the tail and folds only the new events (the surface is not folded in that mode). A progress
bar appears on stderr when reading takes more than half a second and stderr is a terminal.

Exit status (the CLI convention, see ``fsm_stage.cli``): 0 on success; 1 for invalid input
(LOG or ``--graph`` missing / a directory / unreadable: ``fsm-stage: PATH: cannot read …``;
not a session log, newer format, corruption, ``--at`` past the end: ``fsm-stage: …``; a bad
graph: its positioned lines); 2 for click usage errors (unknown option, ``--at -1``,
``--at`` with ``--checkpoint-dir``).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from fsm_stage.errors import LogFormatError, UserError
from fsm_stage.log.checkpoints import CheckpointStore, cold_fold
from fsm_stage.log.dsh import ReadResult, read_log
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.projections import (
    OpenTurn,
    PlanModeProblems,
    PlanModeProblemsState,
    PlanView,
    Projection,
    StageProjection,
    StageState,
    ToldProjection,
    fold,
)
from fsm_stage.log.surface import Surface, SurfaceOpError

PROGRESS_AFTER_S = 0.5


class _Progress:
    """Lazily shows a click progress bar on stderr once a read has run for ``PROGRESS_AFTER_S``."""

    def __init__(self, total: int) -> None:
        self.total = max(total, 1)
        self.t0 = time.monotonic()
        self.bar: Any = None
        self.done = 0
        self.enabled = sys.stderr.isatty()

    def __call__(self, offset: int) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            if time.monotonic() - self.t0 < PROGRESS_AFTER_S:
                return
            self.bar = click.progressbar(length=self.total, label="reading log", file=sys.stderr)
            self.bar.__enter__()
        step = min(offset, self.total) - self.done
        if step > 0:
            self.bar.update(step)
            self.done += step

    def close(self) -> None:
        if self.bar is not None:
            self.bar.update(self.total - self.done)
            self.bar.__exit__(None, None, None)


def check_log_input(path: Path) -> None:
    """Refuse a LOG that cannot be opened with the convention's one line
    (``PATH: cannot read session log: reason``, a ``UserError``). The content is judged by
    the reader (a session log is read in binary, possibly zstd, so not ``read_text_input``)."""
    if path.is_dir():
        raise UserError(f"{path}: cannot read session log: it is a directory")
    try:
        with open(path, "rb"):
            pass
    except FileNotFoundError:
        raise UserError(f"{path}: cannot read session log: no such file") from None
    except (OSError, ValueError) as err:
        reason = err.strerror.lower() if isinstance(err, OSError) and err.strerror else str(err)
        raise UserError(f"{path}: cannot read session log: {reason}") from None


def _read(path: Path, strict: bool) -> ReadResult:
    progress = _Progress(path.stat().st_size)
    try:
        return read_log(path, strict=strict, on_progress=progress)
    finally:
        progress.close()


def _initial_stage(graph: str | None) -> tuple[str | None, set[str] | None]:
    if graph is None:
        return None, None
    from fsm_stage.config import load_config_text
    from fsm_stage.fileio import read_text_input

    cfg = load_config_text(read_text_input(graph, what="stage graph"), graph)
    if cfg.graph is None:
        raise UserError(f"{graph}: declares no stage graph (only plan mode); --graph needs a stage graph")
    return cfg.graph.initial_stage, {s.name for s in cfg.graph.stages}


def _projections() -> tuple[Projection[Any], ...]:
    return PlanView(), OpenTurn(), StageProjection(), ToldProjection(), PlanModeProblems()


def _plan_mode_warnings(path: str | None, state: PlanModeProblemsState, *, strict: bool) -> list[str]:
    """One warning per invalid ``plan/mode`` record (the folds keep the last valid record's
    value); with ``strict`` the first one is a ``LogFormatError``."""
    if state.count == 0:
        return []
    where = f"{path}: " if path else ""
    if strict:
        more = f" (and {state.count - 1} more)" if state.count > 1 else ""
        raise LogFormatError(f"{where}invalid plan/mode record: {state.first[0]}{more}")
    warnings = [f"{where}{p}; plan mode keeps the last valid plan/mode record" for p in state.first]
    if state.count > len(state.first):
        warnings.append(f"{state.count - len(state.first)} more invalid plan/mode record(s)")
    return warnings


def _assemble(
    header: SessionHeader,
    states: Mapping[str, Any],
    *,
    total: int,
    folded: int,
    at: int | None,
    graph: str | None,
    surface: dict[str, Any] | None,
    warnings: list[str],
    torn: int | None,
    unknown: Mapping[str, int],
    source: str | None,
    strict: bool,
    checkpoint: dict[str, Any] | None = None,
) -> dict[str, Any]:
    plan, turn, stage, told = PlanView(), OpenTurn(), StageProjection(), ToldProjection()
    warnings.extend(_plan_mode_warnings(source, states[PlanModeProblems.key], strict=strict))
    initial, names = _initial_stage(graph)
    stage_state: StageState = states[stage.key]
    current: str | None
    stage_source: str | None
    if stage_state.stage is not None:
        current, stage_source = stage_state.stage, "log"
        if names is not None and current not in names:
            warnings.append(f"stage {current!r} from the log is not a stage of {graph}")
    else:
        current, stage_source = initial, ("graph initial" if initial is not None else None)
    out = {
        "header": {k: v for k, v in header.to_json(absent_as_null=True).items() if k != "type"},
        "events": total,
        "foldedEvents": folded,
        "at": at,
        "turn": turn.view(states[turn.key]),
        "planMode": plan.view(states[plan.key]),
        "stage": {
            "current": current,
            "source": stage_source,
            "atLastHeader": stage_state.stage_at_last_header,
            "hasStagePrompt": stage_state.has_stage_prompt,
        },
        "lastHeader": told.view(states[told.key]),
        "surface": surface,
        "tornTailOffset": torn,
        "unknownTypes": dict(unknown),
        "warnings": warnings,
    }
    if checkpoint is not None:
        out["checkpoint"] = checkpoint
    return out


def state_report(
    res: ReadResult,
    *,
    at: int | None = None,
    graph: str | None = None,
    strict: bool = False,
    source: str | None = None,
) -> dict[str, Any]:
    """The ``state`` command's data as a JSON-able dict (see module docstring).

    Raises ``UserError`` when ``at`` is past the last seq or the graph cannot be loaded, and
    (``strict``) ``LogFormatError`` for a ``plan/mode`` record with an invalid payload, which is
    otherwise a warning (B105–B108); ``source`` (the log's path) prefixes those messages.
    """
    total = len(res.events)
    if at is not None and at >= total:
        last = "the log has no events" if total == 0 else f"the last seq is {total - 1}"
        raise UserError(f"--at {at} is past the end of the log ({last})")
    events = res.events if at is None else res.events[: at + 1]
    warnings = list(res.warnings)
    states = {p.key: fold(p, events) for p in _projections()}
    surface: dict[str, Any] | None
    s = Surface()
    try:
        s.extend(events)
        surface = {
            "nodes": len(s),
            "replaceGeneration": s.replace_generation,
            "headIsSystem": s.head_is_system,
        }
    except SurfaceOpError as err:
        surface = None
        warnings.append(f"surface fold failed: {err}")
    return _assemble(
        res.header,
        states,
        total=total,
        folded=len(events),
        at=at,
        graph=graph,
        surface=surface,
        warnings=warnings,
        torn=res.torn_tail_offset,
        unknown=res.unknown_types,
        source=source,
        strict=strict,
    )


def checkpointed_report(
    path: Path, store_dir: Path, *, graph: str | None = None, strict: bool = False
) -> dict[str, Any]:
    """The ``state`` data from a checkpointed cold read (``cold_fold``): seeks to the last
    checkpoint's watermark and folds only newer events, then saves a fresh checkpoint in
    ``store_dir``. The surface is not folded in this mode (it needs every node), so
    ``surface`` is None; ``checkpoint`` says whether the read resumed and from which seq.
    """
    progress = _Progress(path.stat().st_size)
    try:
        res = cold_fold(
            path, _projections(), store=CheckpointStore(store_dir), strict=strict, on_progress=progress
        )
    finally:
        progress.close()
    note = {"resumedFrom": res.resumed_from, "eventsFolded": res.events_applied, "note": res.checkpoint_note}
    return _assemble(
        res.header,
        res.states,
        total=res.last_seq + 1,
        folded=res.last_seq + 1,
        at=None,
        graph=graph,
        surface=None,
        warnings=list(res.warnings),
        torn=res.torn_tail_offset,
        unknown=res.unknown_types,
        source=str(path),
        strict=strict,
        checkpoint=note,
    )


def _dash(v: Any) -> str:
    return "-" if v is None else str(v)


def _human(path: str, r: dict[str, Any]) -> str:
    h = r["header"]
    lines = [
        f"log:          {path}",
        f"session:      {h['id']}",
        f"  cwd {_dash(h['cwd'])}, origin {_dash(h['origin'])}, depth {h['delegationDepth']}, "
        f"parent {_dash(h['parentSession'])}, version {_dash(h['version'])}",
    ]
    if r["at"] is None:
        span = f" (seq 0–{r['events'] - 1})" if r["events"] else ""
        lines.append(f"events:       {r['events']}{span}")
    else:
        lines.append(f"events:       {r['events']}; folded {r['foldedEvents']} (seq 0–{r['at']}, --at)")
    t = r["turn"]
    lines.append(f"turn:         {'open (turn ' + _dash(t['turn']) + ')' if t['open'] else 'idle'}")
    pm = r["planMode"]
    lines.append(
        f"plan mode:    {'active' if pm['active'] else 'inactive'}"
        f"{', change pending' if pm['pending'] else ''}  (active={str(pm['active']).lower()}, "
        f"pending={str(pm['pending']).lower()})"
    )
    st = r["stage"]
    if st["current"] is None:
        lines.append("stage:        - (no stage record; pass --graph to use the graph's initial stage)")
    else:
        lines.append(
            f"stage:        {st['current']}"
            + (" (graph initial; no stage record)" if st["source"] == "graph initial" else "")
        )
    told = r["lastHeader"]
    if told is None:
        lines.append("last header:  - (no request/header yet)")
    else:
        lines.append(
            f"last header:  seq {told['seq']} ({_dash(told['reason'])}): plan mode "
            f"{'active' if told['planActive'] else 'inactive'}, stage {_dash(told['stage'])}"
        )
    sf = r["surface"]
    lines.append(
        "surface:      - (not folded in a checkpointed read)"
        if sf is None and "checkpoint" in r
        else "surface:      -"
        if sf is None
        else f"surface:      {sf['nodes']} node{'s' if sf['nodes'] != 1 else ''}"
        f" ({sf['replaceGeneration']} replace{'s' if sf['replaceGeneration'] != 1 else ''})"
    )
    cp = r.get("checkpoint")
    if cp is not None:
        lines.append(
            f"checkpoint:   resumed after seq {cp['resumedFrom']}, folded {cp['eventsFolded']} new event(s)"
            if cp["resumedFrom"] is not None
            else f"checkpoint:   full fold of {cp['eventsFolded']} event(s) ({cp['note']}); checkpoint saved"
        )
    if r["warnings"]:
        lines.append("warnings:")
        lines.extend(f"  - {w}" for w in r["warnings"])
    return "\n".join(lines)


@click.command()
@click.argument("location", metavar="LOG", type=click.Path())  # a str: postgresql:// keeps its //
@click.option(
    "--graph",
    "graph",
    type=str,
    default=None,
    help="Stage-graph YAML; its initial stage is shown when the log has no stage record.",
)
@click.option(
    "--at",
    "at",
    type=click.IntRange(min=0),
    default=None,
    metavar="SEQ",
    help="Fold only events 0..SEQ (time travel).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@click.option(
    "--strict", is_flag=True, help="Refuse unknown event types without ignorable:true, as DSH does."
)
@click.option(
    "--checkpoint-dir",
    "checkpoint_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep projection checkpoints here: later reads seek to the tail (no surface fold; not with --at).",
)
def state(
    location: str, graph: str | None, at: int | None, as_json: bool, strict: bool, checkpoint_dir: Path | None
) -> None:
    """Fold a session log and print its state (header, turn, plan mode, stage, surface).

    Exit 0 on success, 1 for invalid input (unreadable LOG or GRAPH, not a session log,
    corruption, --at past the end), 2 for usage errors (unknown option, --at -1).
    """
    from fsm_stage.log.postgres import is_postgres_location

    if is_postgres_location(location):  # LOG is postgresql://…?session=ID
        if checkpoint_dir is not None:
            raise click.UsageError("--checkpoint-dir works on files, not on a PostgreSQL location")
        from fsm_stage.log.postgres import read_postgres, redact

        report = state_report(read_postgres(location, strict=strict), at=at, graph=graph, strict=strict,
                              source=redact(location))
        shown = redact(location)
        if as_json:
            click.echo(json.dumps({"path": shown, **report}, ensure_ascii=False, indent=2))
        else:
            click.echo(_human(shown, report))
        return
    log = Path(location)
    check_log_input(log)
    if checkpoint_dir is not None:
        if at is not None:
            raise click.UsageError("--at folds a prefix and cannot use --checkpoint-dir")
        report = checkpointed_report(log, checkpoint_dir, graph=graph, strict=strict)
    else:
        report = state_report(_read(log, strict), at=at, graph=graph, strict=strict, source=str(log))
    if as_json:
        click.echo(json.dumps({"path": str(log), **report}, ensure_ascii=False, indent=2))
    else:
        click.echo(_human(str(log), report))


COMMANDS = [state]
