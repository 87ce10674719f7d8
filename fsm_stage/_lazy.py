"""PEP 562 lazy exports for the front-door packages: ``lazy_exports(__name__, table, globals())``
returns the package's ``__getattr__`` and ``__dir__``. A name loads its defining submodule on
first access and is cached in the package namespace; only ``importlib`` is imported here."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str], namespace: dict[str, Any],
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``exports`` maps each exported name to the
    submodule (relative to ``package``, or absolute when it starts with ``fsm_stage.``) that
    defines it, or to itself when the export is that submodule (``"errors": "errors"``);
    ``namespace`` is the package's ``globals()``. An unknown name raises ``AttributeError`` as
    a plain module would."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        absolute = module.startswith("fsm_stage.")
        target = importlib.import_module(module if absolute else f"{package}.{module}")
        value = target if module == name else getattr(target, name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
