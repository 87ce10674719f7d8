"""Option types of the command line shared by several commands.

``FiniteFloatRange(min, max, …)`` is ``click.FloatRange`` that also refuses ``nan`` and the
infinities: NaN passes every range comparison, and ``time.sleep(nan)`` or a render scale of
``inf`` raises far from the option. Use it for any float option::

    @click.option("--interval", type=FiniteFloatRange(0.05, 3600))
"""

from __future__ import annotations

import math
from typing import Any

import click


class FiniteFloatRange(click.FloatRange):
    """A ``click.FloatRange`` of finite numbers: ``nan``, ``inf`` and ``-inf`` are a usage error
    (exit 2, one line) whatever the bounds."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number
