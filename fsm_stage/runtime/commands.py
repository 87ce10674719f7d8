"""Command seam: ``/name rest`` parsing and logged dispatch.

``parse_command(line) -> ParsedCommand(name, raw_input) | None``: ``raw_input`` is everything
after the name including the separating whitespace (``"/plan  x"`` → ``"  x"``), as DSH records
it in ``command/run.args``. A ``Command`` has a ``spec`` (``CommandSpec(name, description,
hint=None, images=False, record_input=True)``) and ``handle(agent, raw_input, images) ->
CommandReply(kind, text)`` (may be a coroutine).

``CommandRegistry.run(agent, line, images=())`` logs ``command/run {commandId, name, args?,
source: {kind: user}}`` before the handler and ``command/done {commandId, kind, text}`` after;
a handler that raises settles as ``error`` with its message. An unparsable line or an unknown
name logs nothing and returns ``None`` (not handled)."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import re
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import attrs

from fsm_stage.constants import COMMAND_DONE, COMMAND_RUN
from fsm_stage.runtime import wording
from fsm_stage.runtime.messages import Block

if TYPE_CHECKING:
    from fsm_stage.runtime.agent import Agent

log = logging.getLogger(__name__)

_COMMAND_RE = re.compile(r"^/([^\s/]+)(.*)\Z", re.DOTALL)

Disposer = Callable[[], None]


@attrs.frozen
class ParsedCommand:
    """A parsed ``/name rest`` line: lowercase ``name`` and the verbatim ``raw_input``."""

    name: str
    raw_input: str


def parse_command(line: str) -> ParsedCommand | None:
    """Parse ``/name rest``; None when ``line`` does not start with ``/`` and a name.

    The name is the run of non-whitespace after ``/`` (lowercased); ``raw_input`` keeps the
    separator whitespace exactly as typed.
    """
    m = _COMMAND_RE.match(line)
    if m is None:
        return None
    return ParsedCommand(m.group(1).lower(), m.group(2))


@attrs.frozen
class CommandSpec:
    """Descriptor: name, description, input ``hint``, whether images are accepted, and
    whether ``command/run`` records the raw input as ``args``."""

    name: str
    description: str
    hint: str | None = None
    images: bool = False
    record_input: bool = True


@attrs.frozen
class CommandReply:
    """A handler's result: ``kind`` success/error and the UI-only ``text`` (never model input)."""

    kind: Literal["success", "error"]
    text: str

    @classmethod
    def success(cls, text: str) -> CommandReply:
        """A success reply."""
        return cls("success", text)

    @classmethod
    def error(cls, text: str) -> CommandReply:
        """An error reply."""
        return cls("error", text)


@runtime_checkable
class Command(Protocol):
    """A slash command: ``spec`` and ``handle(agent, raw_input, images)``."""

    @property
    def spec(self) -> CommandSpec: ...

    def handle(
        self, agent: Agent, raw_input: str, images: Sequence[Block]
    ) -> CommandReply | Awaitable[CommandReply]: ...


class CommandRegistry:
    """Registered commands plus the logged dispatch (see module docstring).

    ``images_refused`` is the error text for images sent to a command that does not accept
    them (default: the ``runtime`` catalog's ``commands.images_refused``). Command ids look like
    DSH's: ``cmd-<8 hex>-<n>``. A handler cancelled mid-way settles as ``error`` and the
    cancellation propagates.
    """

    def __init__(self, *, images_refused: str | None = None) -> None:
        self._commands: dict[str, Command] = {}
        self._prefix = f"cmd-{secrets.token_hex(4)}"
        self._counter = itertools.count(1)
        self.images_refused = images_refused if images_refused is not None else wording.text(
            "commands.images_refused")

    def register(self, command: Command) -> Disposer:
        """Register ``command`` under its spec name (replacing none: a duplicate raises
        ``ValueError``); returns an idempotent disposer."""
        name = command.spec.name
        if name in self._commands:
            raise ValueError(f"command /{name} is already registered")
        self._commands[name] = command

        def dispose() -> None:
            if self._commands.get(name) is command:
                del self._commands[name]

        return dispose

    def get(self, name: str) -> Command | None:
        """The command called ``name`` or None."""
        return self._commands.get(name)

    @property
    def specs(self) -> list[CommandSpec]:
        """Descriptors of every registered command, sorted by name."""
        return [self._commands[n].spec for n in sorted(self._commands)]

    def next_id(self) -> str:
        """A fresh command id ``cmd-<8 hex>-<n>``."""
        return f"{self._prefix}-{next(self._counter)}"

    async def run(self, agent: Agent, line: str, images: Sequence[Block] = ()) -> CommandReply | None:
        """Parse and run ``line`` for ``agent``; None when not a known command (nothing logged)."""
        parsed = parse_command(line)
        if parsed is None:
            return None
        command = self._commands.get(parsed.name)
        if command is None:
            return None
        return await self.invoke(agent, command, parsed.raw_input, images)

    async def invoke(
        self, agent: Agent, command: Command, raw_input: str, images: Sequence[Block] = ()
    ) -> CommandReply:
        """Run ``command`` with logging (``command/run`` → handler → ``command/done``)."""
        spec = command.spec
        command_id = self.next_id()
        run: dict[str, Any] = {"commandId": command_id, "name": spec.name}
        if spec.record_input:
            run["args"] = raw_input
        run["source"] = {"kind": "user"}
        agent.session.append(COMMAND_RUN, run)
        try:
            if images and not spec.images:
                reply = CommandReply.error(self.images_refused)
            else:
                result = command.handle(agent, raw_input, images)
                reply = await result if inspect.isawaitable(result) else result
        except asyncio.CancelledError:
            agent.session.append(COMMAND_DONE, {"commandId": command_id, "kind": "error",
                                                "text": wording.text("commands.aborted")})
            raise
        except Exception as exc:
            log.warning("command /%s failed: %s", spec.name, exc)
            reply = CommandReply.error(str(exc) or type(exc).__name__)
        done: Mapping[str, Any] = {"commandId": command_id, "kind": reply.kind, "text": reply.text}
        agent.session.append(COMMAND_DONE, dict(done))
        return reply
