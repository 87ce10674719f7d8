"""docs/step-driver.md: the host-loop example runs and writes the reference event order."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_documented_host_loop_runs() -> None:
    text = (ROOT / "docs" / "step-driver.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    example = next(b for b in blocks if "asyncio.run(main())" in b)
    out = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True, cwd=ROOT,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str([
        "turn/start", "step/start", "user/message", "user/message", "user/message", "request/header",
        "assistant/message", "tool/call", "tool/result", "step/end", "step/start", "assistant/message",
        "step/end", "turn/end"])


def test_the_documented_host_loop_is_at_most_20_lines_of_glue() -> None:
    """The glue of a host's own loop: ``main()``'s body, composition through ``open_session``."""
    text = (ROOT / "docs" / "step-driver.md").read_text(encoding="utf-8")
    example = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "asyncio.run(main())" in b)
    body = example.split("async def main() -> SessionHost:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert "open_session(" in body[0]
    assert 10 < len(body) <= 20, body


def test_the_contract_table_names_every_public_driver_method() -> None:
    from fsm_stage.driver import StagedSession

    text = (ROOT / "docs" / "step-driver.md").read_text(encoding="utf-8")
    public = [n for n in vars(StagedSession) if not n.startswith("_")]
    missing = [n for n in public if f"driver.{n}" not in text and f"`{n}" not in text]
    assert missing == []


def test_the_driver_is_exported_at_the_top() -> None:
    import fsm_stage
    from fsm_stage.driver import StagedSession

    assert fsm_stage.StagedSession is StagedSession


def test_the_host_loop_imports_only_from_package_faces() -> None:
    text = (ROOT / "docs" / "step-driver.md").read_text(encoding="utf-8")
    example = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "asyncio.run(main())" in b)
    deep = [m for m in re.findall(r"^from (fsm_stage\.[\w.]+) import", example, re.M) if m.count(".") > 1]
    assert deep == []
    assert "from fsm_stage import " in example and "user_message" in example
    assert "[*req.tools, READ_FILE]" in example  # the host's own tool spec reaches the model


def test_user_message_is_exported_from_the_runtime() -> None:
    import fsm_stage.runtime
    from fsm_stage.runtime.messages import user_message

    assert fsm_stage.runtime.user_message is user_message and "user_message" in fsm_stage.runtime.__all__


def test_the_documented_cross_process_resume_runs() -> None:
    """The suspend / answer elsewhere / resume example: the answer comes from the CLI in another
    process, and the reopened session ends in the approved stage."""
    text = (ROOT / "docs" / "step-driver.md").read_text(encoding="utf-8")
    example = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "third_process" in b)
    out = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True, cwd=ROOT,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert re.fullmatch(r"review rv_[0-9a-f]+: approve \(Approve\), logged at seq \d+", lines[0]), lines
    assert lines[-1] == "implement"


def test_model_reply_shortcuts_carry_usage() -> None:
    from fsm_stage.driver import ModelReply

    usage = {"inputTokens": 10, "outputTokens": 2}
    assert ModelReply.say("ok", usage=usage).usage == usage
    assert ModelReply.call("goto_stage", {"stage": "x"}, usage=usage).usage == usage
    assert ModelReply.say("ok").usage is None
