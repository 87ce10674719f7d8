"""``fsm-stage simulate`` and ``fsm-stage scenario`` (the simulator's command line).

``simulate SCENARIO... [--example NAME]... [--log OUT.jsonl [--force]] [--json] [--graph OVERRIDE]
[--cwd DIR] [--full]``
    runs scenario files (``--example NAME``: a scenario shipped with the package, so a wheel
    install runs ``fsm-stage simulate --example feature-work`` with no checkout) and prints, per
    model request, what the model sees and the prompt-cache effect; exits 1 when an ``expect:``
    block fails (listing each failure).
``scenario LOG [--graph GRAPH] [-o OUT.yaml] [--id ID]``
    prints (or writes) a scenario (YAML) replaying a recorded DSH session log.

``SCENARIO`` and ``LOG`` may be ``-`` (standard input) or a pipe/FIFO (``fsm_stage.cli.inputs``);
a scenario read from standard input anchors its relative ``graph:`` at the current folder.
``--json`` prints one JSON object per model request, ``format_version`` first (docs/cli.md).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import click

from fsm_stage.cli import JSON_FORMAT_VERSION
from fsm_stage.cli.inputs import STDIN, display_name, read_text_arg, spooled
from fsm_stage.cli.progress import Progress
from fsm_stage.config import load_config, load_config_text
from fsm_stage.constants import GOTO_STAGE, TOOL_CALL
from fsm_stage.errors import ConfigError, UserError
from fsm_stage.fileio import atomic_write, output_error, read_text_input
from fsm_stage.handoff import session_segment
from fsm_stage.log.dsh import ReadResult, read_log
from fsm_stage.log.events import Event
from fsm_stage.log.projections import stage_from_event
from fsm_stage.resources import data_dir
from fsm_stage.scenario import Scenario, SessionSettings, dump_scenario, load_scenario_text, replay_events
from fsm_stage.simulate import prepare, render_human, simulate


def example_scenarios() -> dict[str, Path]:
    """The scenarios shipped with the package: name (file stem) -> path, sorted by name."""
    folder = data_dir("stage_graphs") / "scenarios"
    return {p.stem: p for p in sorted(folder.glob("*.yaml"))}


def _example(name: str) -> Path:
    shipped = example_scenarios()
    if name not in shipped:
        raise click.BadParameter(f"no shipped scenario {name!r}; choose one of: {', '.join(shipped)}",
                                 param_hint="--example")
    return shipped[name]


@click.command("simulate")
@click.argument("scenarios", nargs=-1, type=click.Path(allow_dash=True, path_type=Path))
@click.option("--example", "examples", multiple=True, metavar="NAME",
              help="Run a scenario shipped with the package, by name (repeatable), e.g. feature-work; "
                   "an unknown name lists them.")
@click.option("--log", "log_path", type=click.Path(),
              help="Also write the DSH-shaped session log (JSONL) here (parent folders are created), "
                   "or to postgresql://…?session=ID. "
                   "Refused while another writer holds the log, and for the scenario, its graph or any "
                   "existing file that is not a session log. One scenario only.")
@click.option("--force", is_flag=True, help="Replace an existing session log at the --log path.")
@click.option("--json", "as_json", is_flag=True, help="One JSON record per model request on stdout.")
@click.option("--graph", type=click.Path(path_type=Path),
              help="Run under this stage-graph file instead of the scenario's `graph`.")
@click.option("--cwd", type=click.Path(path_type=Path),
              help="Session working directory (handoff documents land here); default: the "
                   "scenario's session.cwd, else a temporary directory.")
@click.option("--full", is_flag=True, help="Print every text in full instead of one line each.")
def simulate_cmd(scenarios: tuple[Path, ...], examples: tuple[str, ...], log_path: str | None, force: bool,
                 as_json: bool, graph: Path | None, cwd: Path | None, full: bool) -> None:
    """Run SCENARIO (or several) and show what the model sees at every request.

    Per request: turn/step, stage, plan mode, system sections (order, name, tokens), runtime
    context entries, tools, the messages (kept from the previous request / new), and the
    prompt prefix reused from the previous request. Exits 1 when an expectation fails.
    Several scenarios run one after the other (a regression suite); all the scenario files are
    parsed before any runs. --example NAME runs a scenario shipped with the package.
    """
    scenarios = (*scenarios, *(_example(name) for name in examples))
    if not scenarios:
        raise click.UsageError("give a SCENARIO file or --example NAME (e.g. --example feature-work)")
    if log_path is not None and len(scenarios) > 1:
        raise click.UsageError("--log takes one scenario")
    if sum(str(p) == STDIN for p in scenarios) > 1:
        raise click.UsageError("standard input (-) can be read only once")
    parsed, problems = [], list[UserError]()
    for path in scenarios:  # every file's mistakes are reported before anything runs
        try:
            parsed.append(_load_scenario(path))
        except UserError as err:
            problems.append(err)
    for scenario in parsed:  # and their names checked against the graph each one runs under
        try:
            prepare(scenario, graph=graph)
        except UserError as err:
            problems.append(err)
    if len(problems) == 1:
        raise problems[0]  # a ConfigError prints as bare PATH:LINE:COLUMN lines, like a graph's
    if problems:
        raise UserError("\n".join(str(p) for p in problems))
    failed = 0
    for k, scenario in enumerate(parsed):
        # one subfolder per session, named like its handoff folder: never a path, never too long
        work = cwd / session_segment(scenario.session_id) if cwd is not None and len(parsed) > 1 else cwd
        result = simulate(scenario, graph=graph, log_path=log_path, replace_log=force, cwd=work)
        if log_path is not None and cwd is None and scenario.session.cwd is None:  # once the log exists
            from fsm_stage.log.postgres import redact

            click.echo(f"fsm-stage: warning: --log without --cwd: the header of {redact(log_path)} names a "
                       "temporary folder that was deleted after the run (pass --cwd DIR to keep it and its "
                       "handoff documents)", err=True)
        if as_json:
            for record in result.records:
                record_json = {"format_version": JSON_FORMAT_VERSION, "scenario": scenario.path,
                               **record.to_json()}
                click.echo(json.dumps(record_json, ensure_ascii=False))
            for warning in result.warnings:
                click.echo(f"fsm-stage: warning: {warning}", err=True)
            for failure in result.failures:
                click.echo(failure.line(), err=True)
        else:
            if k:
                click.echo("")
            click.echo(render_human(result, full=full))
        failed += bool(result.failures)
    if len(parsed) > 1 and not as_json:
        click.echo(f"\n{len(parsed) - failed} of {len(parsed)} scenarios passed")
    if failed:
        sys.exit(1)


def _load_scenario(arg: Path) -> Scenario:
    """Read the scenario ``arg`` (``-`` = standard input, named ``<stdin>``; a pipe or FIFO is read
    once). From standard input, a relative ``graph:`` / ``session.cwd`` is anchored at the current
    folder; from any other path, at that path's folder (as for a file)."""
    text, name = read_text_arg(arg, what="scenario"), display_name(arg)
    try:
        return load_scenario_text(text, name)
    except ConfigError:
        if _is_stage_graph(text, name):  # one line, not one "unknown key" per graph key
            raise UserError(
                f"{name}: this is a stage graph, not a scenario (a scenario names its graph with "
                "`graph:` and lists `steps:`, e.g. stage_graphs/scenarios/feature-work.yaml; "
                "check a stage graph with `fsm-stage validate`)") from None
        raise


def _is_stage_graph(text: str, name: str) -> bool:
    """Whether ``text`` loads as a stage-graph file (a graph or plan mode, no ``steps``)."""
    from fsm_stage.config import load_config_text

    try:
        config = load_config_text(text, name)
    except UserError:
        return False
    return config.graph is not None or config.plan_mode is not None


#: shipped graphs a replay may default to, in order of preference
_SHIPPED_GRAPHS = ("feature-work.yaml", "seed-stage-switch.yaml", "release-train.yaml")
_PLAN_MODE_GRAPH = "seed-plan-mode.yaml"


def _default_graph(stages: set[str], uses_goto: bool) -> Path:
    """The shipped graph a replay runs under when no ``--graph`` is given: the first shipped
    graph that has every stage the log names (the log does not say which graph it ran), or the
    plan-mode seed when the log never used the stage switch. Raises ``UserError`` when no
    shipped graph has the recorded stages."""
    folder = data_dir("stage_graphs")
    if not stages and not uses_goto:
        return folder / _PLAN_MODE_GRAPH
    for name in _SHIPPED_GRAPHS:
        graph = load_config(folder / name).graph
        if graph is not None and stages <= {st.name for st in graph.stages}:
            return folder / name
    raise UserError(f"the log names stages ({', '.join(sorted(stages))}) that no shipped graph has; "
                    "pass --graph YOUR-GRAPH.yaml")


PACKAGE_DIR = Path(__file__).resolve().parents[1]
"""The installed ``fsm_stage`` package folder (a wheel ships its graphs under ``_data/``)."""


def _read_with_progress(path: Path, progress: Progress) -> ReadResult:
    """``read_log(path)`` with a ``reading log`` bar (bytes) on a terminal."""
    progress.phase("reading log", path.stat().st_size)
    return read_log(path, on_progress=progress)


def _graph_reference(graph: Path, output: Path | None) -> str:
    """``graph:`` as the scenario writes it: relative to the output file's folder, else absolute
    (stdout may be saved anywhere). A graph inside the installed package (a wheel's shipped
    graphs, ``…/site-packages/fsm_stage/_data/stage_graphs/``) is always written absolute: a
    path relative to the output would climb through the venv's folders and break as soon as the
    output file moved."""
    if output is None or graph.resolve().is_relative_to(PACKAGE_DIR):
        return str(graph)
    try:
        return os.path.relpath(graph, output.resolve().parent)
    except ValueError:  # another drive (Windows)
        return str(graph)


@click.command("scenario")
# LOG is a str: postgresql:// keeps its //
@click.argument("location", metavar="LOG", type=click.Path(allow_dash=True))
@click.option("--graph", type=click.Path(path_type=Path), default=None,
              help="The stage-graph file the replay runs under (written as the scenario's `graph:`, "
                   "relative to --output, else absolute; a graph shipped inside the installed package "
                   "is always written absolute); also used to infer which guards held. "
                   "Default: the first shipped graph with every stage the log names (the plan-mode "
                   "seed when the log used no stages); a note on stderr says which.")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Write the scenario to this file (replaced atomically) instead of stdout.")
@click.option("--id", "session_id", type=str, default=None,
              help="Session id (default: the log's; must not be empty).")
def scenario_cmd(location: str, graph: Path | None, output: Path | None, session_id: str | None) -> None:
    """Turn a recorded session LOG into a scenario (stdout, or --output).

    Keeps user prompts, slash commands, each model answer with its tool calls and each call's
    recorded outcome (review answers — with the reviewer's comments when the log has them — for
    exit_plan_mode / goto_stage, canned results for other tools), the host system prompt, the
    eligibility flips the log reveals, and before each model step an
    `expect: {next_request: {stage, plan_mode}}` with what was recorded, so
    `fsm-stage simulate scenario.yaml --graph NEW.yaml` re-runs the session under a changed graph
    and fails where it diverges.
    """
    if session_id is not None and not session_id.strip():
        raise click.BadParameter("must be a non-empty session id", param_hint="--id")
    from fsm_stage.log.postgres import is_postgres_location, read_postgres, redact, split_location

    with Progress(0) as progress:
        log: Path | None = None
        if is_postgres_location(location):  # LOG is postgresql://…?session=ID
            res, shown = read_postgres(location), redact(location)
            name = f"session {split_location(location)[1]}"
        elif location == STDIN:
            with spooled(location) as seekable:  # copied to a temporary file first: the reader seeks
                res = _read_with_progress(seekable, progress)
            shown = name = display_name(location)
        else:
            log = Path(location)
            if log.is_dir():
                raise UserError(f"{log}: cannot read session log: it is a directory")
            if not log.exists():
                raise UserError(f"{log}: cannot read session log: no such file")
            with spooled(log) as seekable:  # a pipe or FIFO is spooled; a regular file is read in place
                res = _read_with_progress(seekable, progress)
            shown, name = str(log), log.name
        progress.close()  # a finished bar before any warning line
        for warning in res.warnings:
            click.echo(f"fsm-stage: warning: {warning}", err=True)
        stages = {s for s in (stage_from_event(ev) for ev in res.events) if s is not None}
        if graph is not None:
            # missing, a folder, binary: the same one line as every other command's --graph
            graph_text = read_text_input(graph, what="stage graph")
            graph_file = graph.resolve()
        else:
            uses_goto = any(ev.type == TOOL_CALL and isinstance(ev.data, dict)
                            and ev.data.get("name") == GOTO_STAGE for ev in res.events)
            graph_file = _default_graph(stages, uses_goto)
            click.echo(f"fsm-stage: note: replaying under the shipped {graph_file.name} (pass --graph to "
                       "choose)", err=True)
        config = (load_config_text(graph_text, str(graph)) if graph is not None
                  else load_config(graph_file))
        progress.phase("replaying", len(res.events))
        replay = replay_events(res.events, config.graph, on_progress=progress)
        if not replay.steps:
            raise UserError(f"{shown}: no user prompts, commands or model answers to replay")
        progress.close()
        for warning in replay.warnings:
            click.echo(f"fsm-stage: warning: {warning}", err=True)
        if _names_groups(res.events):
            click.echo("fsm-stage: note: the log's reviews name @group approvers; add `reviewers: FILE` "
                       "(the reviewers file, relative to the scenario) before replaying its answers by "
                       "named reviewers", err=True)
        sub, parent = res.header.is_subagent, res.header.parent_session
        session = SessionSettings(id=session_id if session_id is not None else res.header.id,
                                  subagent=sub,
                                  parent=parent if sub and parent is not None and parent.strip() else None)
        progress.phase("writing scenario", 1)
        text = dump_scenario(_graph_reference(graph_file, output), session, replay.steps,
                             description=f"Replay of {name}", system=replay.system)
    if output is None:
        click.echo(text, nl=False)
        return
    if output.exists() and (output.is_dir() or (log is not None and output.samefile(log))
                            or output.samefile(graph_file)):
        raise UserError(f"{output}: refusing to overwrite the log, the graph or a folder with the scenario")
    try:
        atomic_write(output, text.encode("utf-8"))
    except OSError as err:
        raise output_error(output, err, what="scenario") from None


def _names_groups(events: Sequence[Event]) -> bool:
    """Whether a logged review request's rules name an ``@group`` approver."""
    from fsm_stage.constants import REVIEW_REQUEST
    from fsm_stage.reviews._team import names_groups

    return any(e.type == REVIEW_REQUEST and isinstance(e.data, dict) and names_groups(e.data.get("rules"))
               for e in events)


COMMANDS = [simulate_cmd, scenario_cmd]
