"""The wheel ships ``templates/`` and ``stage_graphs/`` inside the package (issue: stage graphs, item 1)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("hatchling", reason="hatchling (test extra) is needed to build the wheel offline")
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (whl,) = out.glob("*.whl")
    return whl


def test_wheel_ships_templates_stage_graphs_and_typing_marker(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder in ("templates", "stage_graphs"):
        shipped = {p.relative_to(ROOT / folder).as_posix() for p in (ROOT / folder).rglob("*") if p.is_file()}
        assert shipped, f"{folder}/ is empty in the checkout"
        prefix = f"fsm_stage/_data/{folder}/"
        in_wheel = {n.split(prefix, 1)[1] for n in names if prefix in n}
        assert shipped == in_wheel
    assert "fsm_stage/py.typed" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "fsm-stage = fsm_stage.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_python_dash_m_runs_the_cli() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "fsm_stage", "--help"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0
    for command in ("validate", "draw", "schema", "state"):
        assert command in proc.stdout
