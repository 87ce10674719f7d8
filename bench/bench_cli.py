"""Whole-process rows: ``fsm-stage state`` on a real-mix log, CLI start-up, and
``simulate`` scaling.

* **state** (row 7): ``fsm-stage state LOG`` as its own process on a real-mix log
  (``realmix.make_real_mix``: the recorded DSH sessions with fresh seqs, packed rows kept; 1M
  events in the full run) next to a process that runs a bare ``json.loads`` loop over the same
  file. CPU (user + system) and peak RSS of each child from ``os.wait4``; sides interleaved,
  medians.
* **start-up** (row 9): wall time of ``fsm-stage --help`` (the console script's code:
  ``from fsm_stage.cli import main; main()``) vs ``python -c pass``; interleaved, medians.
* **simulate scaling** (row 8): ``simulate`` of an ``n``-turn scenario (one prompt and one model
  answer per turn, no transition, so nothing is archived) at n and 4n turns (200 / 800 and 800 /
  3,200 in the full run): the time ratio (linear ≈ 4, quadratic ≈ 16) and the peak traced memory ratio.

``run(quick=False, smoke=False) -> dict``; ``python bench/bench_cli.py [--quick|--smoke]``
prints it as JSON.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

#: Prepended to every child's code: writes the process's peak RSS (``VmHWM``, which ``exec``
#: resets, unlike ``ru_maxrss`` that also counts the forked parent's pages) to ``$FSM_BENCH_HWM``.
HWM = """import atexit, os
def _hwm():
    with open("/proc/self/status") as fh:
        kb = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM"))
    with open(os.environ["FSM_BENCH_HWM"], "w") as out:
        out.write(str(kb * 1024))
atexit.register(_hwm)
"""
BARE = HWM + """import json, sys
loads = json.loads
with open(sys.argv[1], "rb") as fh:
    next(fh)
    for line in fh:
        loads(line)
"""
CONSOLE_SCRIPT = "from fsm_stage.cli import main; main()"  # what the ``fsm-stage`` script runs
CLI = HWM + CONSOLE_SCRIPT


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


def child(argv: list[str]) -> dict[str, float]:
    """Run ``argv`` (stdout discarded); its wall time, CPU seconds and peak RSS in bytes."""
    fd, hwm = tempfile.mkstemp(prefix="fsm-bench-hwm-")
    os.close(fd)
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**_env(), "FSM_BENCH_HWM": hwm})
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:4]} exited {proc.returncode}: {err.decode(errors='replace')[-300:]}")
    try:
        rss = float(Path(hwm).read_text() or "nan")
    finally:
        os.unlink(hwm)
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "rss_b": rss}


def state_process(events: int, repeat: int) -> dict[str, Any]:
    """``fsm-stage state`` vs the bare loop, as processes on one real-mix log."""
    import realmix

    with tempfile.TemporaryDirectory(prefix="fsm-bench-state-") as tmp:
        path = Path(tmp) / "real-mix.jsonl"
        made = realmix.make_real_mix(path, events)
        ours: list[dict[str, float]] = []
        bare: list[dict[str, float]] = []
        for _ in range(repeat):
            bare.append(child([sys.executable, "-c", BARE, str(path)]))
            ours.append(child([sys.executable, "-c", CLI, "state", "--json", str(path)]))
    med = {f"{side}_{k}": statistics.median(r[k] for r in runs)
           for side, runs in (("state", ours), ("bare", bare)) for k in ("cpu_s", "rss_b", "wall_s")}
    ratios = [o["cpu_s"] / b["cpu_s"] for o, b in zip(ours, bare, strict=True)]
    return {**made, **med, "repeat": repeat, "cpu_ratio": statistics.median(ratios),
            "mix": realmix.mix_summary()}


def startup(repeat: int) -> dict[str, Any]:
    """``fsm-stage --help`` vs ``python -c pass`` (wall time, interleaved)."""
    help_runs, bare_runs = [], []
    child([sys.executable, "-c", CONSOLE_SCRIPT, "--help"])  # warm the file cache and the .pyc files
    for _ in range(repeat):
        bare_runs.append(child([sys.executable, "-c", "pass"]))
        help_runs.append(child([sys.executable, "-c", CONSOLE_SCRIPT, "--help"]))
    ratios = [h["wall_s"] / b["wall_s"] for h, b in zip(help_runs, bare_runs, strict=True)]
    code = ("import sys\nfrom fsm_stage.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n"
            "    pass\nprint(len([m for m in sys.modules if m.startswith('fsm_stage')]), len(sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), check=True)
    fsm_modules, modules = (int(x) for x in out.stdout.split()[-2:])
    return {"help_s": statistics.median(r["wall_s"] for r in help_runs),
            "pass_s": statistics.median(r["wall_s"] for r in bare_runs),
            "ratio": statistics.median(ratios), "repeat": repeat,
            "fsm_stage_modules": fsm_modules, "modules": modules}


GRAPH = """name: lin
language: en
stages:
  - {name: explore, instruction: Read.}
  - {name: implement, instruction: Write.}
section: "Stage << stage_current >>; next: << stage_targets >>."
"""


def _scenario(turns: int, folder: Path) -> Any:
    from fsm_stage.scenario import load_scenario_text

    (folder / "g.yaml").write_text(GRAPH, encoding="utf-8")
    steps = "".join(f"  - user: prompt {i} asks for a little more work\n"
                    f"  - model: answer {i} does a little more work\n" for i in range(turns))
    return load_scenario_text(f"graph: g.yaml\nsteps:\n{steps}", str(folder / f"s{turns}.yaml"))


class _CollectorWatch:
    """A ``gc.callbacks`` entry adding up the time spent in collections and counting the full ones."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.full = 0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
            return
        self.seconds += time.perf_counter() - self._start
        self.full += info["generation"] == 2


def simulate_scaling(small: int, repeat: int) -> dict[str, Any]:
    """Time and peak memory of ``simulate`` at ``small`` and ``4 * small`` turns."""
    from fsm_stage.simulate import simulate

    large = 4 * small
    with tempfile.TemporaryDirectory(prefix="fsm-bench-sim-") as tmp:
        folder = Path(tmp)
        scenarios = {n: _scenario(n, folder) for n in (small, large)}
        simulate(scenarios[small], cwd=folder / "warm")  # imports, catalogs, compiled graph
        times: dict[int, list[float]] = {small: [], large: []}
        collecting: dict[int, list[float]] = {small: [], large: []}  # seconds in the collector
        full: dict[int, list[int]] = {small: [], large: []}  # full (oldest-generation) collections
        runs = 0
        for _ in range(repeat):
            for n in (small, large):
                gc.collect()
                watch = _CollectorWatch()
                gc.callbacks.append(watch)
                try:
                    t0 = time.perf_counter()
                    result = simulate(scenarios[n], cwd=folder / f"w{runs}")
                    times[n].append(time.perf_counter() - t0)
                finally:
                    gc.callbacks.remove(watch)
                collecting[n].append(watch.seconds)
                full[n].append(watch.full)
                assert len(result.records) == n
                runs += 1
                del result
        peaks = {}
        for n in (small, large):
            gc.collect()
            tracemalloc.start()
            try:
                simulate(scenarios[n], cwd=folder / f"m{n}")
                peaks[n] = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
    t_small, t_large = statistics.median(times[small]), statistics.median(times[large])
    return {"small_turns": small, "large_turns": large, "small_s": t_small, "large_s": t_large,
            "small_gc_s": statistics.median(collecting[small]),
            "large_gc_s": statistics.median(collecting[large]),
            "small_full_gc": max(full[small]), "large_full_gc": max(full[large]),
            "time_ratio": t_large / t_small, "small_peak_b": peaks[small], "large_peak_b": peaks[large],
            "memory_ratio": peaks[large] / peaks[small], "repeat": repeat}


def run(quick: bool = False, smoke: bool = False) -> dict[str, Any]:
    """Rows 7-9 (see the module docs); ``quick``/``smoke`` shrink the sizes."""
    import realmix

    events = 5_000 if smoke else 200_000 if quick else 1_000_000
    out: dict[str, Any] = {}
    try:  # row 7 runs on the recorded sessions; rows 8 and 9 need none
        out["state"] = state_process(events, 1 if smoke else 3)
    except realmix.NoRecordings as exc:
        out["state_skipped"] = f"skipped: {exc}"
    out |= {
        "startup": startup(2 if smoke else 7 if quick else 15),
        "simulate": simulate_scaling(10 if smoke else 50 if quick else 200,
                                     1 if smoke else 3 if quick else 5),
    }
    if not smoke and not quick:
        out["simulate_large"] = simulate_scaling(800, 5)
    return out


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv, smoke="--smoke" in sys.argv), indent=2))
