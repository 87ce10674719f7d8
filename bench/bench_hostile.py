"""Time budgets on hostile input, kept out of the tests (which assert behaviour only).

* **alias bomb**: a 700-byte YAML document whose aliases would expand to 9^8 nodes loads (under
  an extension key) or is refused with one positioned problem (elsewhere) within
  ``ALIAS_BOMB_BUDGET_S``, with the libyaml and the pure parser.
* **mutations**: ``MUTATIONS`` random byte-level mutations of the shipped graphs each load or
  fail with one-line problems within ``MUTATION_BUDGET_S`` (all of them within
  ``MUTATIONS_TOTAL_BUDGET_S``).

``python bench/bench_hostile.py`` prints the times as JSON and exits 1 when a budget is missed.
"""

from __future__ import annotations

import contextlib
import json
import random
import sys
import time
from pathlib import Path

import fsm_stage._yaml.fast as fast
from fsm_stage.config import load_config_text
from fsm_stage.errors import ConfigError

ALIAS_BOMB_BUDGET_S = 5.0
MUTATION_BUDGET_S = 2.0
MUTATIONS_TOTAL_BUDGET_S = 60.0
MUTATIONS = 1000

BASE = ('name: g\nsection: "go << stage_targets >>"\nstages:\n  - name: a\n    instruction: do a\n'
        "    targets: [b]\n  - name: b\n    instruction: do b\n    targets: [a]\n")


def _bomb(key: str) -> str:
    lines = [f"{key}:", '  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefg", "bcdefgh", strict=True):
        lines.append(f"  {name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    return "\n".join(lines) + "\n"


def _timed_load(text: str) -> float:
    start = time.perf_counter()
    with contextlib.suppress(ConfigError):  # a refusal is a result too
        load_config_text(text, "g.yaml")
    return time.perf_counter() - start


def run() -> dict[str, float]:
    """Seconds of each measured case (the worst where there are many)."""
    out: dict[str, float] = {}
    for c_parser in (True, False):
        fast.USE_C_PARSER = c_parser
        parser = "libyaml" if c_parser else "pure"
        for key in ("x-b", "description"):
            out[f"alias_bomb_{key}_{parser}"] = _timed_load(_bomb(key) + BASE)
        one_alias = BASE.replace('section: "go << stage_targets >>"', 'section: "go"\ndescription: *h')
        out[f"alias_bomb_one_alias_{parser}"] = _timed_load(_bomb("x-b") + one_alias)
    fast.USE_C_PARSER = True
    texts = [p.read_text(encoding="utf-8")
             for p in sorted((Path(__file__).resolve().parents[1] / "stage_graphs").glob("*.yaml"))]
    rng = random.Random(15)
    worst = total = 0.0
    for _ in range(MUTATIONS):
        chars = list(rng.choice(texts))
        for _edit in range(rng.randint(1, 8)):
            chars[rng.randrange(len(chars))] = rng.choice(":-[]{}&*!|>'\"\n #\t\\x0")
        took = _timed_load("".join(chars))
        worst, total = max(worst, took), total + took
    out["mutation_worst"], out["mutations_total"] = worst, total
    return out


def main() -> int:
    times = run()
    print(json.dumps(times, indent=2))
    missed = [k for k, v in times.items()
              if v > (MUTATIONS_TOTAL_BUDGET_S if k == "mutations_total"
                      else MUTATION_BUDGET_S if k == "mutation_worst" else ALIAS_BOMB_BUDGET_S)]
    if missed:
        print(f"over budget: {', '.join(missed)}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
