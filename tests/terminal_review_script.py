"""A tiny program using ``TerminalReviewChannel`` (driven by the terminal-review tests).

``python terminal_review_script.py [plan|long|stage] [--abort-after SECONDS] [--ctrl-c-interrupts]``:
asks one review question, prints ``ANSWER <answers>`` and exits 0; a dismissal prints
``DISMISSED`` (exit 3); Ctrl-C prints ``INTERRUPTED (dismissed)`` (``ReviewInterrupted``) or
``INTERRUPTED`` (``KeyboardInterrupt``) and exits 130 (the program's own handler), as a CLI would.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import cast

from fsm_stage.reviews import Option, Question, ReviewDismissed
from fsm_stage.reviews._terminal import ReviewInterrupted, TerminalReviewChannel
from fsm_stage.runtime.abort import AbortSignal
from fsm_stage.runtime.agent import Agent

NO_AGENT = cast(Agent, None)  # the terminal channel never reads the asking agent

PLAN = """# Add a --greeting flag

> Keep the default greeting unchanged.

| step | file |
|---|---|
| parse the flag | cli.py |
| print it | hello.py |

* parse it with **click**, see [the docs](https://click.palletsprojects.com)
* an *italic* note
"""
LONG = PLAN + "".join(f"\n{i}. step number {i} of the very long plan" for i in range(1, 80))


def question(kind: str) -> Question:
    if kind == "stage":
        return Question("stage-review", "Stage transition", 'Approve moving to stage "implement"?',
                        (Option("Approve", "move"), Option("Keep current stage", "stay")), detail=PLAN,
                        context={"from": "explore", "to": "implement",
                                 "handoff_path": "handoff/implement.md"})
    return Question("plan-review", "Plan review", "Approve this plan?",
                    (Option("Approve", "go"), Option("Keep planning", "stay")),
                    detail=LONG if kind == "long" else PLAN,
                    intent={"kind": "plan-review", "approve": "Approve"})


async def main(kind: str, abort_after: float | None) -> None:
    signal = AbortSignal()
    if abort_after is not None:
        asyncio.get_running_loop().call_later(abort_after, signal.abort, "turn cancelled")
    channel = TerminalReviewChannel(ctrl_c="interrupt" if "--ctrl-c-interrupts" in sys.argv else "dismiss")
    answers = await channel.ask([question(kind)], NO_AGENT, signal=signal)
    print("ANSWER", answers, "THREADS", threading.active_count(), flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    after = float(args[args.index("--abort-after") + 1]) if "--abort-after" in args else None
    try:
        asyncio.run(main(args[0] if args else "plan", after))
    except ReviewInterrupted:
        print("INTERRUPTED (dismissed)", flush=True)
        sys.exit(130)
    except ReviewDismissed as exc:
        print("DISMISSED", exc, "THREADS", threading.active_count(), flush=True)
        sys.exit(3)
    except KeyboardInterrupt:
        print("INTERRUPTED", flush=True)
        sys.exit(130)
