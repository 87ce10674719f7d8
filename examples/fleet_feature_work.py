"""A one-machine fleet, offline: a worker (DBOS on SQLite, JSONL logs in STORE) drives a
feature-work session; this script sends the task and approves the stage change the way a
reviewer would (``fsm-stage answer``), then prints the session's state.

    python examples/fleet_feature_work.py ./sessions

The same worker from the shell: ``fsm-stage worker --graph stage_graphs/feature-work.yaml
--guard tests_written=true --store ./sessions --model my_module:model``."""

from __future__ import annotations

import asyncio
import re
import sys
import tempfile

from fsm_stage import ModelReply, load_config
from fsm_stage.log.events import SessionHeader
from fsm_stage.resources import data_dir


class Model:  # the model function: a stand-in for an LLM that reads the stage it is in
    provider, name = "example", "fleet-example"

    async def complete(self, request, *, signal):
        text = request.system + str(request.messages)
        stage = (re.findall(r"Current stage: (\w+)", text) or ["explore"])[-1]
        if stage == "explore":
            return ModelReply.call("goto_stage", {"stage": "implement"}, id=f"c{len(request.messages)}")
        return ModelReply.say("Implemented the --greeting flag.")


async def main(store_dir: str) -> None:
    from fsm_stage.fleet import Store
    from fsm_stage.fleet.listing import list_sessions
    from fsm_stage.fleet.worker import run_worker
    from fsm_stage.fleet.workflows import FleetApp, FleetClient

    store, stop = Store(store_dir), asyncio.Event()
    app = FleetApp(store, load_config(data_dir("stage_graphs") / "feature-work.yaml"), Model, poll=2,
                   guards={"tests_written": True})
    worker = asyncio.create_task(run_worker(app, stop=stop))
    with FleetClient(store) as client:
        client.send_input("demo", "message", "Add a --greeting flag.", input_id="task-1",
                          create=SessionHeader("demo", cwd=tempfile.mkdtemp()))
        while True:
            await asyncio.sleep(0.3)
            (info,) = list_sessions(store)
            if info.state == "waiting-review" and info.review_id:
                client.answer("demo", info.review_id, "approve", by="example")
            elif info.state == "needs-input" and info.events > 1:
                break
    stop.set()
    await worker
    print(f"session demo: {info.state} after {info.events} events")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp()))
