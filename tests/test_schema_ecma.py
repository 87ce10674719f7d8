"""The JSON Schema in ECMA-262 engines, not only Python's ``re`` (issue 16).

Every ``pattern`` compiles with ``regress`` (an ECMA-262 engine) under the ``u`` flag and gives
the same verdict as Python's ``re`` on probe strings; blank strings are judged like the loader
(``"\\ufeff"`` is text, ``"\\x1c"`` is blank); ajv 2020 compiles the whole schema and gives
every shipped and bad graph the verdict jsonschema gives (needs node + ajv: skipped with a
reason outside CI, a failure when ``CI`` is set).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import regress
from test_config_bad_graphs import BAD_GRAPHS
from test_schema import _data

from fsm_stage.config import ConfigError, load_config_text
from fsm_stage.config.schema import NOT_BLANK, ecma_pattern
from fsm_stage.resources import data_dir
from fsm_stage.schema import json_schema

ROOT = Path(__file__).resolve().parents[1]
PROBES = [
    "", " ", "a", "explore", "explore\n", "dsh-stage-switch", "@x/dsh-stage-switch", "dsh\\-stage",
    "/abs", "a/../b", "..", "C:\\x", "~/x", "\x00", "\ufeff", "\x1c", "\x85", "\u3000", "é", "😀",
    "ok.1", "Tests_pass", "1abc",
]


def _patterns(node: Any) -> list[str]:
    out: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern":
                out.append(value)
            elif key == "patternProperties":
                out.extend(value)
            out.extend(_patterns(value))
    elif isinstance(node, list):
        for value in node:
            out.extend(_patterns(value))
    return out


PATTERNS = sorted(set(_patterns(json_schema())))


def test_the_schema_has_patterns() -> None:
    assert len(PATTERNS) >= 6 and NOT_BLANK in PATTERNS


@pytest.mark.parametrize("pattern", PATTERNS)
def test_pattern_is_ecma_262_unicode_and_agrees_with_python(pattern: str) -> None:
    ecma = regress.Regex(pattern, "u")  # raises RegressError on e.g. `\-` outside a class
    for probe in PROBES:
        assert (ecma.find(probe) is not None) is (re.search(pattern, probe) is not None), (pattern, probe)


def test_re_escape_output_is_made_ecma_safe() -> None:
    """The old schema's `dsh\\-stage\\-switch` is refused by the `u` flag; the converted one is not."""
    with pytest.raises(regress.RegressError):
        regress.Regex(re.escape("dsh-stage switch#~"), "u")
    converted = ecma_pattern(re.escape("dsh-stage switch#~") + r"[a\-z]\x00\s")
    assert converted == r"dsh-stage switch#~[a\-z]\x00\s"
    regress.Regex(converted, "u")


@pytest.mark.parametrize(("text", "loads"), [("\ufeff", True), ("\x1c", False), ("\x85", False),
                                             ("\u3000x", True), ("\u3000", False), ("\t\n", False)])
def test_blank_strings_judged_like_the_loader(text: str, loads: bool) -> None:
    data = {"stages": [{"name": "a", "instruction": text}], "section": "s"}
    try:
        load_config_text(json.dumps(data))
        loaded = True
    except ConfigError:
        loaded = False
    assert loaded is loads
    assert (not list(jsonschema.Draft202012Validator(json_schema()).iter_errors(data))) is loads
    assert (regress.Regex(NOT_BLANK, "u").find(text) is not None) is loads


def test_root_names_the_form_of_the_file() -> None:
    """A native mapping with one bad key is blamed on the native form, not on the plugin list."""
    validator = jsonschema.Draft202012Validator(json_schema())
    bad = {"stages": [{"name": "a", "instruction": "x"}], "section": "s", "handoff_dir": 5}
    best = jsonschema.exceptions.best_match(validator.iter_errors(bad))
    assert best is not None and list(best.absolute_path) == ["handoff_dir"], best.message
    entry = [{"id": "plan-mode", "config": {"section": 3}}]
    best = jsonschema.exceptions.best_match(validator.iter_errors(entry))
    assert best is not None and list(best.absolute_path) == [0, "config", "section"], best.message


# --- ajv ----------------------------------------------------------------------------------------

_AJV_SCRIPT = r"""
const Ajv2020 = require("ajv/dist/2020").default;
const fs = require("fs");
const [schemaPath, casesPath] = process.argv.slice(2);
const ajv = new Ajv2020({allErrors: true, strict: true});  // every strict option, strictRequired too
const validate = ajv.compile(JSON.parse(fs.readFileSync(schemaPath, "utf8")));
const cases = JSON.parse(fs.readFileSync(casesPath, "utf8"));
const out = {};
for (const [name, data] of Object.entries(cases)) out[name] = validate(data);
process.stdout.write(JSON.stringify(out));
"""


def _node_modules() -> Path | None:
    for base in (ROOT / ".ci" / "node", ROOT):  # .ci/run installs into .ci/node
        if (base / "node_modules" / "ajv" / "dist" / "2020.js").is_file() and shutil.which("node"):
            return base
    if os.environ.get("CI"):
        pytest.fail("CI: node and ajv must be installed (.ci/run installs them)")
    pytest.skip("node or ajv not installed (npm install ajv ajv-cli); runs in CI")


def _yaml_cases() -> dict[str, Any]:
    cases: dict[str, Any] = {}
    paths = sorted(data_dir("stage_graphs").glob("*.yaml")) + [b.path for b in BAD_GRAPHS]
    for path in paths:
        try:
            data = _data(path.read_text(encoding="utf-8"))
            cases[path.name] = json.loads(json.dumps(data, allow_nan=False))
        except Exception:
            continue  # not one YAML document of JSON values: nothing for a validator to judge
    return cases


def test_ajv_compiles_the_schema_and_agrees_with_jsonschema(tmp_path: Path) -> None:
    base = _node_modules()
    assert base is not None
    schema_file = tmp_path / "schema.json"
    schema_file.write_text(json.dumps(json_schema()), encoding="utf-8")
    cli = base / "node_modules" / ".bin" / "ajv"
    if cli.exists():
        args = ["compile", "--spec=draft2020", "--strict=true", "-s", str(schema_file)]
        done = subprocess.run([str(cli), *args],
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
    cases = _yaml_cases()
    cases_file = tmp_path / "cases.json"
    cases_file.write_text(json.dumps(cases, allow_nan=False), encoding="utf-8")
    script = tmp_path / "check.js"
    script.write_text(_AJV_SCRIPT, encoding="utf-8")
    env = {**os.environ, "NODE_PATH": str(base / "node_modules")}
    done = subprocess.run(["node", str(script), str(schema_file), str(cases_file)], capture_output=True,
                          text=True, timeout=60, check=False, env=env)
    assert done.returncode == 0, done.stderr
    verdicts = json.loads(done.stdout)
    validator = jsonschema.Draft202012Validator(json_schema())
    assert len(verdicts) > 20
    for name, data in cases.items():
        assert verdicts[name] is validator.is_valid(data), name
