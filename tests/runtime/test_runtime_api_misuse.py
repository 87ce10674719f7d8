"""Runtime API misuse: pre_step's messages argument."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_helpers import new_agent

from fsm_stage.runtime.messages import user_message
from fsm_stage.runtime.runtime import Runtime


@pytest.mark.parametrize("bad", ["hello", b"hi", {"role": "user"}, None, 3, [user_message("ok"), "x"]])
def test_pre_step_refuses_messages_that_are_not_a_list_of_messages(bad: Any) -> None:
    """Anything but a list of messages (a bare string is not split into characters) is a
    TypeError raised before any participant runs."""
    runtime = Runtime()
    seen: list[Any] = []
    runtime.add_pre_step(lambda agent, messages, aborted: seen.append(messages) or messages)
    with pytest.raises(TypeError, match="messages"):
        runtime.pre_step(new_agent(), bad)
    assert seen == []


def test_pre_step_accepts_a_list_or_tuple_of_messages() -> None:
    """A list or tuple of message mappings is copied into a new list."""
    runtime = Runtime()
    batch = (user_message("a"), user_message("b"))
    out = runtime.pre_step(new_agent(), batch)
    assert out == list(batch) and isinstance(out, list)
