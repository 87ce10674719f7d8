"""Issue 15 item 11: fuzzing the config loader and the log reader, sized to run in seconds.

Structure-aware mutations of the shipped stage graphs (native and plugin-list forms: keys
deleted, duplicated or retyped, odd scalars, control characters, aliases, tags, deep nesting,
byte flips, truncation) must give a ``ConfigError`` or a loaded graph — never another
exception and never a hang. Mutated real DSH logs (bit flips, truncations, duplicated or
garbled lines) must give a ``LogFormatError`` or a result with warnings. A seeded
``random.Random`` loop does the bulk; hypothesis adds shrinking on a smaller budget.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML
from shared_data import DSH_SESSIONS

from fsm_stage.config import load_config_text
from fsm_stage.errors import ConfigError, LogFormatError
from fsm_stage.log.dsh import read_log_data

GRAPHS = sorted((Path(__file__).resolve().parent.parent / "stage_graphs").glob("*.yaml"))
TEXTS = [p.read_text(encoding="utf-8") for p in GRAPHS]
DATA: list[Any] = [YAML(typ="safe", pure=True).load(t) for t in TEXTS]

ODD_SCALARS: list[Any] = [
    None, True, 0, -1, 10**400, -(10**400), 1e308, float("inf"), "", " ", "\x1b[31m", "\x00",
    "\x07bell", "\ud800", "a" * 5000, "<< stage_current.upper >>", "{{ x.y }}", [], {}, [[[]]],
    "../..", ".", "/abs", "会话一",
]
SNIPPETS = [
    "x-a: &a [1, 2]\n", "description: *nope\n", "stages: !!seq []\n", "name: !!int \"3\"\n",
    "x-b: &b {k: &c [*c]}\n", "<<: {a: 1}\n", "description: '" + "[" * 80 + "'\n",
    "description: " + "[" * 80 + "]" * 80 + "\n", "%YAML 1.1\n---\n", "---\n---\n", "\t", "\ufeff",
    '"\\ud800": 1\n', "? [a, b]\n: c\n", "&x a: *x\n",
]


def _mutate_data(rng: random.Random, value: Any, depth: int = 0) -> Any:
    """One random structural change somewhere in ``value`` (a copy)."""
    if isinstance(value, dict) and value and rng.random() < 0.7:
        key = rng.choice(list(value))
        out = dict(value)
        roll = rng.random()
        if roll < 0.2:
            del out[key]
        elif roll < 0.35:
            out[key + rng.choice(["_", "x", "\x1b", " "])] = out[key]
        elif roll < 0.55:
            out[key] = rng.choice(ODD_SCALARS)
        else:
            out[key] = _mutate_data(rng, out[key], depth + 1)
        return out
    if isinstance(value, list) and value and rng.random() < 0.7:
        i = rng.randrange(len(value))
        out_list = list(value)
        roll = rng.random()
        if roll < 0.2:
            del out_list[i]
        elif roll < 0.4:
            out_list.insert(i, out_list[i])
        elif roll < 0.6:
            out_list[i] = rng.choice(ODD_SCALARS)
        else:
            out_list[i] = _mutate_data(rng, out_list[i], depth + 1)
        return out_list
    if rng.random() < 0.1:
        nested: Any = value
        for _ in range(rng.randrange(1, 120)):
            nested = [nested]
        return nested
    return rng.choice(ODD_SCALARS)


def _dump(rng: random.Random, data: Any) -> str:
    text = json.dumps(data, ensure_ascii=rng.random() < 0.5)
    return text


def _mutate_text(rng: random.Random, text: str) -> str:
    roll = rng.random()
    if roll < 0.3:
        lines = text.splitlines(keepends=True)
        lines.insert(rng.randrange(len(lines) + 1), rng.choice(SNIPPETS))
        return "".join(lines)
    if roll < 0.5:
        return text[: rng.randrange(len(text) + 1)]
    if roll < 0.8:
        chars = list(text)
        for _ in range(rng.randrange(1, 4)):
            i = rng.randrange(len(chars))
            chars[i] = chr(ord(chars[i]) ^ (1 << rng.randrange(7)))
        return "".join(chars)
    lines = text.splitlines(keepends=True)
    i = rng.randrange(len(lines))
    return "".join(lines[:i] + [lines[i]] * 2 + lines[i:])


def _load_ok(text: str) -> None:
    try:
        load_config_text(text, "g.yaml")
    except ConfigError as err:
        assert err.problems and all("\n" not in p for p in err.problems)


def test_a_thousand_config_mutations_find_no_traceback() -> None:
    rng = random.Random(15)
    n = 0
    while n < 1000:
        i = rng.randrange(len(TEXTS))
        structural = rng.random() < 0.5
        text = _dump(rng, _mutate_data(rng, DATA[i])) if structural else _mutate_text(rng, TEXTS[i])
        _load_ok(text)
        n += 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), which=st.integers(0, len(TEXTS) - 1), structural=st.booleans())
def test_config_mutation_property(seed: int, which: int, structural: bool) -> None:
    rng = random.Random(seed)
    if structural:
        _load_ok(_dump(rng, _mutate_data(rng, DATA[which])))
    else:
        _load_ok(_mutate_text(rng, TEXTS[which]))


def _small_logs() -> list[bytes]:
    if not DSH_SESSIONS.is_dir():
        return []
    paths = sorted(p for p in DSH_SESSIONS.glob("*.jsonl") if p.stat().st_size < 20_000)
    return [p.read_bytes() for p in paths[:12]]


LOGS = _small_logs()


def _mutate_log(rng: random.Random, data: bytes) -> bytes:
    roll = rng.random()
    if roll < 0.35:
        buf = bytearray(data)
        for _ in range(rng.randrange(1, 5)):
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        return bytes(buf)
    if roll < 0.55:
        return data[: rng.randrange(len(data) + 1)]
    lines = data.splitlines(keepends=True)
    i = rng.randrange(len(lines))
    if roll < 0.75:
        return b"".join(lines[:i] + [lines[i]] * 2 + lines[i + 1:])
    garbled = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))) + b"\n"
    return b"".join([*lines[:i], garbled, *lines[i + 1:]])


def _read_ok(data: bytes) -> None:
    try:
        read_log_data(data, source="log.jsonl")
    except LogFormatError as err:
        assert "\n" not in str(err)


def test_thousands_of_log_mutations_find_no_traceback() -> None:
    if not LOGS:
        import pytest

        pytest.skip("DSH corpus absent")
    rng = random.Random(15)
    for _ in range(2000):
        _read_ok(_mutate_log(rng, rng.choice(LOGS)))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_log_mutation_property(seed: int) -> None:
    if LOGS:
        rng = random.Random(seed)
        _read_ok(_mutate_log(rng, rng.choice(LOGS)))
