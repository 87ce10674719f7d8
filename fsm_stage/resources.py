"""Locate the data folders that ship with the package (``templates/``, ``stage_graphs/``).

In a wheel they live under ``fsm_stage/_data/``; in a source checkout (editable install) they
are the top-level folders of the repository. ``data_dir`` hides the difference.
"""

from __future__ import annotations

import functools
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


@functools.cache
def data_dir(name: str) -> Path:
    """Return the directory of shipped data folder ``name`` (``"templates"`` or ``"stage_graphs"``).

    Raises ``FileNotFoundError`` when neither the wheel location nor the checkout location exists.
    Found once per process (an installation does not move while it runs).
    """
    for candidate in (_PACKAGE_DIR / "_data" / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"fsm_stage data folder {name!r} is missing from this installation")
