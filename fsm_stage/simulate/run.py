"""Running a scenario: ``simulate`` / ``simulate_async``, ``prepare`` and the ``--log`` target.

``prepare`` loads the graph and checks the scenario's names against it; ``simulate`` runs the
engine in a work folder and, with ``log_path``, writes the session log through ``LogTarget``
(writer lock held for the whole run, temporary folder beside the target, atomic rename).
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

import filelock

from fsm_stage.config import ConfigFile, load_config
from fsm_stage.driver import guard_names
from fsm_stage.errors import LogFormatError, UserError
from fsm_stage.fileio import output_error
from fsm_stage.log.dsh import read_header
from fsm_stage.log.events import EventLog, MemoryLog, SessionHeader, wall_clock_ms
from fsm_stage.log.jsonl import JsonlLog, writer_lock
from fsm_stage.log.pg_transfer import open_new_session
from fsm_stage.log.postgres import is_postgres_location
from fsm_stage.reviews._team import load_reviewers
from fsm_stage.scenario import EligibilityFlip, Expect, Scenario
from fsm_stage.simulate.engine import GUIDANCE, _Engine
from fsm_stage.simulate.result import SimulationError, SimulationResult
from fsm_stage.tokens import HeuristicTokenMeter


def _header(scenario: Scenario, cwd: Path) -> SessionHeader:
    sub = scenario.session.subagent
    return SessionHeader(
        id=scenario.session_id, created_at=wall_clock_ms(), cwd=str(cwd),
        delegation_depth=1 if sub else 0, origin="subagent" if sub else None,
        parent_session=(scenario.session.parent or f"{scenario.session_id}-parent") if sub else None)


def prepare(scenario: Scenario, *, graph: str | Path | None = None) -> tuple[Path, ConfigFile]:
    """Load the graph a run uses (``graph`` overrides the scenario's) and check the scenario's
    names against it before anything runs: ``expect`` stages (``stage``, ``pending_stage``,
    ``handoff_exists``, ``handoff_missing``, ``next_request.stage``) must be stages of the graph,
    eligibility names (``eligible:`` and every flip) ``guidance`` or a guard named on its edges.

    Returns ``(graph path, config)``. Raises ``ConfigError`` for a bad graph and
    ``SimulationError`` listing every unknown name, one line each (``FILE:LINE:COL: …``).
    """
    graph_path = Path(graph) if graph is not None else scenario.graph
    config = load_config(graph_path)
    problems = _name_problems(scenario, config, graph_path)
    if problems:
        raise SimulationError("\n".join(problems))
    return graph_path, config


def _name_problems(scenario: Scenario, config: ConfigFile, graph_path: Path) -> list[str]:
    stages = [st.name for st in config.graph.stages] if config.graph is not None else []
    known_flags = (guard_names(config.graph) if config.graph is not None else frozenset()) | {GUIDANCE}
    out: list[str] = []

    def flags(values: Mapping[str, bool], where: str) -> None:
        unknown = sorted(set(values) - known_flags)
        if unknown:
            out.append(f"{where}: unknown eligibility predicate(s) {', '.join(unknown)}; this graph "
                       f"knows {', '.join(sorted(known_flags))}")

    def stage(where: str, key: str, name: object) -> None:
        if isinstance(name, str) and name not in stages:
            have = f"({', '.join(stages)})" if stages else "(it has no stage graph)"
            out.append(f"{where}: expect {key}: {name!r} is not a stage of {graph_path} {have}")

    flags(scenario.eligible, f"{scenario.path}: eligible")
    for step in scenario.steps:
        if isinstance(step, EligibilityFlip):
            flags(step.values, step.where)
        elif isinstance(step, Expect):
            stage(step.where, "stage", step.stage)
            stage(step.where, "pending_stage", step.pending_stage)
            for name in step.handoff_exists:
                stage(step.where, "handoff_exists", name)
            for name in step.handoff_missing:
                stage(step.where, "handoff_missing", name)
            if step.next_request is not None:
                stage(step.where, "next_request.stage", step.next_request.stage)
    return out


class LogTarget:
    """The ``--log`` output while a run writes it: the target's writer lock is held, the run writes
    a ``JsonlLog`` in a hidden temporary folder beside the target, and ``commit()`` renames it
    into place. ``close()`` removes the temporary folder and releases the lock; the lock file
    itself stays, as filelock intends (waiters must share one inode; ``JsonlLog`` leaves it too).

    Use ``LogTarget.open(path, inputs=…, replace=…)``; see ``simulate`` for the rules.
    """

    def __init__(self, out: Path, lock: filelock.BaseFileLock, folder: Path) -> None:
        self.out, self._lock, self.folder = out, lock, folder
        self.log: JsonlLog | None = None

    @classmethod
    def open(cls, path: str | Path, *, inputs: Mapping[str, Path], replace: bool) -> LogTarget:
        """Take ``path``'s writer lock and check it may be written.

        ``inputs``: files the run reads, by role (``{"scenario": …, "graph": …}``), never
        overwritten. Raises ``LogLockedError`` (a live writer holds the log), ``UserError`` (the
        target is an input, a directory, an existing file that is not a session log, an existing
        session log without ``replace``, or cannot be written). Creates missing parent folders.
        """
        out = Path(path)
        if out.is_dir():
            raise UserError(f"{out}: cannot write session log: it is a directory")
        _refuse_inputs(out, inputs)
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
        except (OSError, ValueError) as err:
            raise _log_error(out, err) from None
        try:
            lock = writer_lock(out)  # LogLockedError / LockFileError (a UserError) as they are
        except ValueError as err:
            raise _log_error(out, err) from None
        try:
            _refuse_inputs(out, inputs)  # re-checked under the lock
            _check_existing_log(out, replace)
            # under the lock no other run writes here: leftovers are from a killed run (SIGKILL)
            for stale in out.parent.glob(f".{glob.escape(out.name)}.*.partial"):
                if stale.is_dir() and not stale.is_symlink():
                    shutil.rmtree(stale, ignore_errors=True)
            folder = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
        except OSError as err:
            lock.release()
            raise _log_error(out, err) from None
        except BaseException:
            lock.release()
            raise
        return cls(out, lock, folder)

    def writer(self, header: SessionHeader) -> JsonlLog:
        """The ``JsonlLog`` the run appends to (in the temporary folder)."""
        self.log = JsonlLog(self.folder / self.out.name, header=header)
        return self.log

    def commit(self) -> None:
        """Close the writer and atomically replace the target with the finished log."""
        assert self.log is not None
        self.log.close()
        try:
            os.replace(self.log.path, self.out)
        except OSError as err:
            raise _log_error(self.out, err) from None
        self.log.path = self.out  # the closed writer now names the file it wrote

    def close(self) -> None:
        """Remove the temporary folder (whatever is in it) and release the target's lock."""
        if self.log is not None:
            self.log.close()
        shutil.rmtree(self.folder, ignore_errors=True)
        self._lock.release()


def _log_error(out: Path, err: OSError | ValueError) -> UserError:
    if isinstance(err, ValueError):
        return UserError(f"{out!r}: cannot write session log: {err}")
    return output_error(out, err, what="session log")


def _refuse_inputs(out: Path, inputs: Mapping[str, Path]) -> None:
    for role, path in inputs.items():
        with contextlib.suppress(OSError, ValueError):
            if out.exists() and out.samefile(path):
                raise UserError(f"{out}: refusing to overwrite the {role} file with the session log")


def _check_existing_log(out: Path, replace: bool) -> None:
    if not out.exists() and not out.is_symlink():
        return
    if not out.is_file():
        raise UserError(f"{out}: cannot write session log: not a regular file")
    try:
        with out.open("rb") as fh:
            read_header(fh, str(out))
    except LogFormatError:
        raise UserError(f"{out}: exists and is not a session log; refusing to overwrite it") from None
    if not replace:
        raise UserError(f"{out}: session log already exists; pass --force to replace it")


async def simulate_async(
    scenario: Scenario,
    *,
    graph: str | Path | None = None,
    log_path: str | Path | None = None,
    replace_log: bool = False,
    cwd: str | Path | None = None,
    meter: HeuristicTokenMeter | None = None,
) -> SimulationResult:
    """Run ``scenario`` (see ``simulate``) inside a running event loop."""
    graph_path, config = prepare(scenario, graph=graph)
    # the reviewers file is read before any log is opened (a PostgreSQL session is created there)
    team = load_reviewers(scenario.reviewers) if scenario.reviewers is not None else None
    meter = meter if meter is not None else HeuristicTokenMeter()
    with contextlib.ExitStack() as stack:
        target: LogTarget | None = None
        to_db = is_postgres_location(log_path)  # a shared store: written in place, no temp file
        if log_path is not None and not to_db:
            target = LogTarget.open(log_path, inputs={"scenario": Path(scenario.path), "graph": graph_path},
                                    replace=replace_log)
            stack.callback(target.close)
        if cwd is not None:
            work = _work_folder(Path(cwd), f"--cwd {str(cwd)!r}")
        elif scenario.session.cwd is not None:
            work = _work_folder(Path(scenario.path).parent / scenario.session.cwd,
                                f"{scenario.path}: session.cwd {scenario.session.cwd!r}")
        else:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fsm-sim-")))
        header = _header(scenario, work)
        log: EventLog = target.writer(header) if target is not None else MemoryLog(header)
        if to_db:
            log = stack.enter_context(open_new_session(str(log_path), header, replace=replace_log))
        engine = _Engine(scenario, config, graph_path, log, work, meter, team)
        try:
            await engine.run()
        except SimulationError:
            raise
        except Exception:
            # the scripted channel records what the scenario lacks, then fails the review; a
            # gate that lets a channel failure through must not turn that into a traceback
            if engine.fatal is not None:
                raise engine.fatal from None
            raise
        if target is not None:
            target.commit()
        return SimulationResult(tuple(engine.records), tuple(engine.notes), tuple(engine.failures),
                                graph_path, log, engine.checks, scenario.path, tuple(engine.warnings))
    raise AssertionError("unreachable")  # pragma: no cover - ExitStack does not swallow


def _work_folder(path: Path, shown: str) -> Path:
    """The session working directory, created when missing; a one-line ``SimulationError`` when
    it cannot be (a file is in the way, no permission, a NUL byte in the name) or is read-only."""
    try:
        work = path.resolve()
        work.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise SimulationError(f"{shown}: not a folder (a file is in the way)") from None
    except (OSError, ValueError) as err:
        reason = err.strerror.lower() if isinstance(err, OSError) and err.strerror else str(err)
        raise SimulationError(f"{shown}: cannot create the folder: {reason}") from None
    if not os.access(work, os.W_OK | os.X_OK):
        raise SimulationError(f"{shown}: the folder is not writable")
    return work


def simulate(
    scenario: Scenario,
    *,
    graph: str | Path | None = None,
    log_path: str | Path | None = None,
    replace_log: bool = False,
    cwd: str | Path | None = None,
    meter: HeuristicTokenMeter | None = None,
) -> SimulationResult:
    """Run ``scenario`` through the reference loop and record every model request.

    ``graph`` overrides the scenario's graph file (``--graph``). ``log_path``: also write the
    DSH-shaped session log there (``--log``). The target's one-writer lock (the one ``JsonlLog``
    takes) is held for the whole run, so a live writer makes this raise ``LogLockedError``
    before anything runs; the scenario and graph files are never overwritten, nor any existing
    file that is not a session log; an existing session log is replaced only when
    ``replace_log`` (``--force``). The log is written in a hidden temporary folder beside the
    target and renamed over it when the run finishes; a failed or interrupted run leaves the
    target as it was and no temporary file behind (the ``<log>.lock`` file stays, as with every
    ``JsonlLog`` writer: filelock keeps it so waiters share one inode). Missing parent folders
    are created.
    ``cwd``: the session's working directory (default: the scenario's
    ``session.cwd``, else a temporary directory removed afterwards); handoff documents are
    written under it. ``meter``: the token meter (default ``HeuristicTokenMeter()``).

    Returns a ``SimulationResult`` (records, notes, failed expectations). Raises ``ConfigError``
    for a bad graph and ``SimulationError`` when the scenario cannot be run as written (both
    ``UserError``: one line).
    """
    out: list[SimulationResult] = []

    async def main() -> None:
        # The main task returns nothing: asyncio.run restores the SIGINT handler through
        # signal._int_to_enum, whose failed enum lookup formats the old handler (a partial holding
        # the main task, whose repr holds its result) — every record and message once more.
        out.append(await simulate_async(scenario, graph=graph, log_path=log_path,
                                        replace_log=replace_log, cwd=cwd, meter=meter))

    asyncio.run(main())
    return out[0]
