"""Packaging: the wheel ships ``templates/`` and ``stage_graphs/`` inside the package; the sdist
holds everything its own tests read; the metadata is complete (PEP 639 license, classifiers,
keywords) and its README has no relative link; shipped scenarios run by name from a wheel."""

from __future__ import annotations

import email
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder with the sdist and the wheel built from it (``python -m build``, offline)."""
    pytest.importorskip("hatchling", reason="hatchling (test extra) is needed to build offline")
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.fixture(scope="module")
def wheel(dist: Path) -> Path:
    (whl,) = dist.glob("*.whl")
    return whl


@pytest.fixture(scope="module")
def sdist_names(dist: Path) -> set[str]:
    (archive,) = dist.glob("*.tar.gz")
    with tarfile.open(archive) as tar:
        return {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}


def _tracked(folder: str) -> set[str]:
    """The files of ``folder`` in the checkout (git's list when it is a git checkout)."""
    proc = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--", folder], capture_output=True, text=True,
                          check=False)
    if proc.returncode == 0 and proc.stdout.strip():
        return {line for line in proc.stdout.splitlines() if (ROOT / line).is_file()}
    return {p.relative_to(ROOT).as_posix() for p in (ROOT / folder).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


@pytest.mark.parametrize("folder", ["docs", "examples", "tests", "bench", "stage_graphs", "templates"])
def test_the_sdist_holds_every_file_the_tests_read(sdist_names: set[str], folder: str) -> None:
    expected = _tracked(folder)
    assert expected, f"{folder}/ is empty in the checkout"
    assert expected <= sdist_names, sorted(expected - sdist_names)[:10]


def test_the_sdist_and_wheel_carry_the_license(sdist_names: set[str], wheel: Path) -> None:
    assert {"LICENSE", "README.md", "pyproject.toml", "hatch_build.py", ".ci/run"} <= sdist_names
    assert "MIT License" in (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in zipfile.ZipFile(wheel).namelist())


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        return email.message_from_bytes(zf.read(name))


def test_the_metadata_is_complete(wheel: Path) -> None:
    meta = _metadata(wheel)
    assert meta["License-Expression"] == "MIT" and meta["License-File"] == "LICENSE"
    assert meta["License"] is None  # PEP 639: the expression, not the legacy free-text field
    classifiers = meta.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers and "Programming Language :: Python :: 3.11" in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]  # PEP 639 forbids both
    assert "llm" in (meta["Keywords"] or "").split(",")
    assert meta["Description-Content-Type"] == "text/markdown"


def test_the_package_index_readme_has_no_relative_link(wheel: Path) -> None:
    readme = _metadata(wheel).get_payload()
    assert isinstance(readme, str) and "fsm-stage simulate --example feature-work" in readme
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    assert links and all(link.startswith(("https://", "http://", "#")) for link in links), links
    assert "docs/reviews.md" in readme  # named, so a reader of the index can find it in the sdist


def test_index_readme_links_point_into_the_source_at_the_release() -> None:
    sys.path.insert(0, str(ROOT))
    try:
        from hatch_build import index_readme
    finally:
        sys.path.remove(str(ROOT))
    text = "See [reviews](docs/reviews.md), [`examples/`](examples/), [x](https://a.b/c) and [y](#top)."
    assert index_readme(text, "https://example.org/r", "1.2.0") == (
        "See [reviews](https://example.org/r/blob/v1.2.0/docs/reviews.md), "
        "[`examples/`](https://example.org/r/tree/v1.2.0/examples/), [x](https://a.b/c) and [y](#top).")
    assert index_readme(text, None, "1.2.0") == (
        "See reviews (`docs/reviews.md` in the sdist), `examples/` (in the sdist), [x](https://a.b/c) "
        "and [y](#top).")


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


def test_shipped_scenarios_run_by_name(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "fsm_stage", "simulate", "--example", "refused-transition"],
                          capture_output=True, text=True, check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "expectations:" in proc.stdout and "passed" in proc.stdout
    unknown = subprocess.run([sys.executable, "-m", "fsm_stage", "simulate", "--example", "nope"],
                             capture_output=True, text=True, check=False)
    assert unknown.returncode == 2 and "feature-work" in unknown.stderr and "Traceback" not in unknown.stderr
    none = subprocess.run([sys.executable, "-m", "fsm_stage", "simulate"], capture_output=True, text=True,
                          check=False)
    assert none.returncode == 2 and "--example" in none.stderr
