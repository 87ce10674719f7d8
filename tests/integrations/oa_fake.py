"""A fake ``agents.Model`` for the Agents SDK adapter tests (a plain module; the SDK's own tests
fake ``Model.get_response`` the same way): answers with the scripted ``next_move`` (or the
``move`` given) and records (instructions, tools, input) and the ``ModelSettings`` of every
request."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from adapter_rig import next_move
from agents import Model, ModelResponse, Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from fsm_stage.integrations._host import StageHost


class FakeModel(Model):
    """Answers with ``move`` (default ``next_move``); records (instructions, tools, input) of
    every request in ``requests`` and its ``ModelSettings`` in ``settings``."""

    def __init__(self, host: StageHost,
                 move: Callable[[StageHost], tuple[str, dict[str, str]] | None] = next_move) -> None:
        self.host = host
        self.move = move
        self.requests: list[tuple[str | None, list[Any], list[Any]]] = []
        self.settings: list[Any] = []

    async def get_response(self, system_instructions: str | None, input: Any, model_settings: Any,
                           tools: list[Any], *args: Any, **kwargs: Any) -> ModelResponse:
        specs = [(t.name, t.description, json.dumps(t.params_json_schema)) for t in tools]
        self.requests.append((system_instructions, specs, list(input)))
        self.settings.append(model_settings)
        move, n = self.move(self.host), len(self.host.session.events)
        if move is None:
            text = ResponseOutputText(type="output_text", text="Verified.", annotations=[])
            out: list[Any] = [ResponseOutputMessage(id=f"m{n}", type="message", role="assistant",
                                                    status="completed", content=[text])]
        else:
            out = [ResponseFunctionToolCall(type="function_call", call_id=f"call_{n}", name=move[0],
                                            arguments=json.dumps(move[1]))]
        return ModelResponse(output=out, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError
