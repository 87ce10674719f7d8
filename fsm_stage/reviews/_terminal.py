"""``TerminalReviewChannel``: the interactive review on a terminal.

Markdown is rendered by ``rich`` (tables, quotes, links with their URL, wrapping to the terminal
width; ``NO_COLOR`` and non-terminal output give plain text); a plan taller than the screen opens
in ``$PAGER`` (default ``less -R``) first. On a terminal the answer is read with
``prompt_toolkit``'s async prompt: one Ctrl-C raises ``ReviewDismissed`` with ``interrupted=True``,
with the terminal restored and no thread left behind. Piped input is read without a thread too
(an event-loop reader on pipes, a plain read on files). The abort ``signal`` ends the prompt
(``ReviewDismissed``); cancelling the task cancels the prompt. Free text that looks like consent
(``yes``, ``ok``, ``lgtm``, an option label…) asks for confirmation. The stage review shows the
question's ``context`` ``from`` / ``to`` / ``handoff_path`` when present (UI-only, not consent).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import os
import shutil
import signal as signals
import stat
import sys
import weakref
from collections.abc import Awaitable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import attrs
import click

from fsm_stage.reviews._channel import Answer, Question, ReviewDismissed
from fsm_stage.reviews._edits import MAX_FEEDBACK_CHARS, feedback_problem
from fsm_stage.runtime.abort import AbortSignal
from fsm_stage.text import is_plain, visible

if TYPE_CHECKING:
    from rich.console import Console

    from fsm_stage.runtime.agent import Agent

__all__ = ["TerminalReviewChannel", "TerminalWording", "render_markdown"]

T = TypeVar("T")
_SLOT = "\x00"
#: Free text read as "I agree" (compared case-folded, without trailing punctuation).
CONSENT_WORDS = frozenset({
    "approve", "approved", "accept", "y", "yes", "yep", "ok", "okay", "lgtm", "sure", "go", "go ahead",
    "同意", "好", "好的", "可以", "批准", "是", "行",
})


@attrs.frozen
class TerminalWording:
    """Wording of the terminal dialog; ``load(language)`` reads the ``runtime`` catalog.
    ``confirm`` holds ``\\x00`` where the option label goes."""

    choose: str
    feedback: str
    invalid: str
    confirm: str = f"Select “{_SLOT}”? (y/N)"
    control: str = "Control characters or escape sequences are not accepted; type plain text."
    too_long: str = (f"That is {_SLOT} characters; feedback holds at most {MAX_FEEDBACK_CHARS:,}. "
                     "Type a shorter text.")

    @classmethod
    def load(cls, language: str = "en") -> TerminalWording:
        """The ``terminal.*`` texts of ``templates/<language>/runtime.yaml``."""
        from fsm_stage.runtime import wording

        choose, feedback, invalid, control = (wording.text(f"terminal.{k}", language)
                                              for k in ("choose", "feedback", "invalid", "control"))
        confirm = wording.text("terminal.confirm", language, label=_SLOT)
        too_long = wording.text("terminal.too_long", language, length=_SLOT, limit=f"{MAX_FEEDBACK_CHARS:,}")
        return cls(choose, feedback, invalid, confirm, control, too_long)


def _console(file: Any, *, width: int | None = None, color: bool | None = None) -> Console:
    from rich.console import Console

    tty = color if color is not None else bool(getattr(file, "isatty", lambda: False)())
    styled = tty and not os.environ.get("NO_COLOR")  # NO_COLOR: no escape codes at all
    return Console(file=file, width=width or shutil.get_terminal_size().columns, force_terminal=styled,
                   color_system="auto" if styled else None, no_color=not styled, highlight=False,
                   emoji=False, soft_wrap=False)


def render_markdown(text: str, *, width: int | None = None, color: bool | None = None) -> str:
    """``text`` (markdown) rendered for a terminal ``width`` columns wide (default: the
    terminal's): headings, bullets ``•``, tables, quotes, code, links as ``text (url)``. Styled
    only when ``color`` (default: standard output is a terminal) and ``NO_COLOR`` is unset.
    Characters Markdown decodes from references (``&#x202E;``) that ``text.visible`` would
    escape are escaped as well. A text that would not show every line as Markdown
    (``_visible_md.hidden_lines``: a link reference definition, an HTML comment…) or that is
    longer than ``_visible_md.MARKDOWN_MAX_CHARS`` is shown as plain text instead, exactly as
    written (control characters as escapes, lines not re-wrapped), after a one-line notice
    saying why."""
    from rich.markdown import Markdown

    from fsm_stage.reviews._visible_md import hidden_lines, plain_text_notice, too_long_notice

    out = io.StringIO()
    tty = sys.stdout.isatty() if color is None else color
    console = _console(out, width=width, color=tty)
    notice = too_long_notice(len(text))
    if notice is None:
        markdown = Markdown(text, hyperlinks=False)  # parsed by rich's markdown-it settings
        hidden = hidden_lines(text, terminal=markdown.parsed)
        notice = plain_text_notice(hidden) if hidden else None
    if notice is not None:
        console.print(notice, style="bold", markup=False, soft_wrap=True)
        return out.getvalue().rstrip("\n") + "\n\n" + visible(text, keep="\n\t").strip("\n")
    for token in _walk(markdown.parsed):  # as the inbox's second pass over the rendered page
        token.content = visible(token.content, keep="\n\t")
    console.print(markdown)
    lines: list[str] = []
    for line in out.getvalue().strip("\n").splitlines():
        line = line.rstrip()
        if line or (lines and lines[-1]):  # one blank line between blocks, not rich's two
            lines.append(line)
    return "\n".join(lines)


def _walk(tokens: Sequence[Any]) -> Iterator[Any]:
    """Every markdown-it token of ``tokens`` and their children."""
    for token in tokens:
        yield token
        if token.children:
            yield from _walk(token.children)


def _option_number(text: str) -> int | None:
    """``text`` as an option number when it is ASCII digits only (``"2"``), else None; more than
    9 digits gives 0 (out of range). ``"¹"``/``"①"`` are neither a number nor feedback."""
    if text and text.isascii() and text.isdigit():
        return int(text) if len(text) <= 9 else 0
    return None


def _interactive() -> bool:
    try:
        return sys.stdin.isatty() and sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


class _PipeLines:
    """Lines of a non-terminal standard input, read without a thread: an event-loop reader on a
    pipe/FIFO, a plain ``readline`` on a regular file or a stream without a descriptor."""

    def __init__(self) -> None:
        self.buffer = b""
        self.eof = False

    def _fd(self) -> int | None:
        try:
            fd = sys.stdin.fileno()
            return None if stat.S_ISREG(os.fstat(fd).st_mode) else fd
        except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
            return None

    async def readline(self) -> str | None:
        fd = self._fd()
        if fd is None:
            line = sys.stdin.readline()
            return line if line else None
        while b"\n" not in self.buffer and not self.eof:
            await self._wait_readable(fd)
            chunk = os.read(fd, 65536)
            self.eof = not chunk
            self.buffer += chunk
        if not self.buffer:
            return None
        line, sep, rest = self.buffer.partition(b"\n")
        self.buffer = rest
        return (line + sep).decode("utf-8", "replace")

    @staticmethod
    async def _wait_readable(fd: int) -> None:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_reader(fd, wake)
        try:
            await ready
        finally:
            loop.remove_reader(fd)


@contextlib.contextmanager
def _terminal_modes_kept() -> Iterator[None]:
    """Restore standard input's terminal modes (echo, canonical input) on the way out, whatever
    a child such as the pager left behind; a no-op off a terminal."""
    try:
        import termios

        fd = sys.stdin.fileno()
        saved = termios.tcgetattr(fd)
    except (ImportError, AttributeError, OSError, ValueError, io.UnsupportedOperation):
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError, termios.error):
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)


@contextlib.contextmanager
def _sigint_recorded(hits: list[int]) -> Iterator[None]:
    """While inside, SIGINT appends to ``hits`` instead of interrupting this process (the
    foreground child, e.g. the pager, gets its own SIGINT); the previous handler comes back after.
    Off the main thread (no signal handlers there) nothing changes."""
    try:
        previous = signals.signal(signals.SIGINT, lambda signum, frame: hits.append(signum))
    except ValueError:
        yield
        return
    try:
        yield
    finally:
        signals.signal(signals.SIGINT, previous)


async def _until_aborted(work: Awaitable[T], signal: AbortSignal | None) -> T:
    """``await work``, unless ``signal`` fires first: then ``work`` is cancelled and
    ``ReviewDismissed`` raised. Cancelling the caller cancels ``work``."""
    if signal is None:
        return await work
    if signal.aborted:  # nothing is shown or read
        if asyncio.iscoroutine(work):
            work.close()
        raise ReviewDismissed(f"review aborted: {signal.reason}")
    task = asyncio.ensure_future(work)
    waiter = asyncio.ensure_future(signal.wait())
    try:
        done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        elif not task.cancelled():
            task.exception()  # retrieved, even when the caller itself was cancelled meanwhile
    if task in done:
        return task.result()
    raise ReviewDismissed(f"review aborted: {signal.reason}")

@functools.cache
def _typed_escapes() -> Any:
    """Key bindings for the prompt: what prompt_toolkit reads as a mouse report (``ESC [ 3 1 m``
    typed at the keyboard; the prompt asks for no mouse reports) is kept as the typed text, so
    the line is refused like any other control character instead of crashing the mouse handler."""
    from prompt_toolkit.key_binding import KeyBindings
    from prompt_toolkit.keys import Keys

    bindings = KeyBindings()

    @bindings.add(Keys.Vt100MouseEvent)
    def _(event: Any) -> None:
        event.current_buffer.insert_text(event.data)

    return bindings


class TerminalReviewChannel:
    """An interactive ``ReviewChannel`` on the terminal.

    Per question: the header, the stage move (``context`` ``from``/``to``/``handoff_path``), the
    question, the ``detail`` as markdown (paged when taller than the screen) and the numbered
    options; then one line: an option number selects it (any option but the approving one — the
    intent's ``approve`` label, else the first — asks for optional feedback); other text is
    feedback with nothing selected (B80), except text that looks like consent or an option
    label, which asks "Select …? (y/N)" first. An empty line or a bad number asks again. End of
    input raises ``ReviewDismissed``, Ctrl-C ``ReviewDismissed`` with ``interrupted`` set, the abort signal
    ``ReviewDismissed``. ``ctrl_c="interrupt"`` also raises SIGINT, as Ctrl-C does outside the
    prompt: under ``asyncio.run`` the main task is cancelled and ``asyncio.run`` raises
    ``KeyboardInterrupt`` (for an orchestrator where Ctrl-C means quit, past the controllers
    that turn a dismissal into a tool failure).
    """

    def __init__(self, wording: TerminalWording | None = None, *, language: str = "en",
                 pager: bool = True, ctrl_c: Literal["dismiss", "interrupt"] = "dismiss") -> None:
        self.wording = wording if wording is not None else TerminalWording.load(language)
        self.pager = pager
        self.ctrl_c = ctrl_c
        self._pipe = _PipeLines()
        self._turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary())  # one question on the terminal at a time, per event loop

    async def ask(
        self, questions: Sequence[Question], agent: Agent, *, signal: AbortSignal | None = None
    ) -> list[Answer]:
        """Ask every question in turn on the terminal; see the class docstring. Concurrent asks
        (two tool calls of one reply reviewed at once) wait for each other: one at a time."""
        loop = asyncio.get_running_loop()
        turn = self._turns.get(loop)
        if turn is None:
            turn = self._turns[loop] = asyncio.Lock()
        async with turn:
            answers: list[Answer] = []
            for q in questions:
                await _until_aborted(self._show(q), signal)
                answers.append(await _until_aborted(self._read_answer(q), signal))
            return answers

    def _ask_sync(self, questions: tuple[Question, ...]) -> list[Answer]:
        """``ask`` for callers without an event loop (runs one)."""
        return asyncio.run(self.ask(questions, None))  # type: ignore[arg-type]

    async def _show(self, q: Question) -> None:
        console = _console(sys.stdout)
        console.print(visible(q.header), style="bold", markup=False)
        context = q.context or {}
        if context.get("from") or context.get("to"):  # the stage review: which stage is left, for which
            move = f"{context.get('from') or '?'} → {context.get('to') or '?'}"
            path = context.get("handoff_path")
            console.print(visible(move + (f"   (handoff: {path})" if path else "")), markup=False)
        console.print(visible(q.question), markup=False)
        if q.detail is not None:
            # model-written text: no escape sequence of its own reaches the terminal
            body = render_markdown(visible(q.detail, keep="\n\t"), width=console.width,
                                   color=console.is_terminal)
            if not (self.pager and _interactive() and await self._page(body, len(q.options))):
                # rendered and wrapped once already: written as is, never re-wrapped by rich
                console.file.write("\n" + body + "\n\n")
                console.file.flush()
        for i, opt in enumerate(q.options, 1):
            desc = f" — {opt.description}" if opt.description else ""
            console.print(visible(f"  {i}. {opt.label}{desc}"), markup=False)

    async def _page(self, body: str, options: int) -> bool:
        """Show ``body`` in the pager when it is taller than the screen; whether it did.

        Ctrl-C while the pager runs belongs to the pager (``less`` gets ``-K``: it quits, restoring
        the terminal); this process waits for it, restores the terminal modes it saved (in case
        the pager did not), then ends the review as a Ctrl-C at the prompt does."""
        if body.count("\n") + options + 6 <= shutil.get_terminal_size().lines:
            return False
        command = os.environ.get("PAGER") or "less"
        env = {**os.environ, "LESS": os.environ.get("LESS", "-R") + " -K"}
        interrupted: list[int] = []
        with _terminal_modes_kept(), _sigint_recorded(interrupted):
            try:
                proc = await asyncio.create_subprocess_shell(command, stdin=asyncio.subprocess.PIPE, env=env)
            except OSError:
                return False
            try:
                assert proc.stdin is not None
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    proc.stdin.write(body.encode("utf-8") + b"\n")
                    await proc.stdin.drain()
                    proc.stdin.close()
                await proc.wait()
            finally:
                if proc.returncode is None:  # cancelled or aborted: let the pager restore the terminal
                    proc.terminate()
                    try:
                        await asyncio.wait_for(asyncio.shield(proc.wait()), 2.0)
                    except (TimeoutError, asyncio.CancelledError):
                        proc.kill()
                        await proc.wait()
        if interrupted:
            self._interrupted()
        return proc.returncode == 0

    def _interrupted(self) -> None:
        """End the review after Ctrl-C (see ``ctrl_c``)."""
        if self.ctrl_c == "interrupt":  # as if the terminal had sent SIGINT: under
            signals.raise_signal(signals.SIGINT)  # asyncio.run, the main task is cancelled
        raise ReviewDismissed("review interrupted at the terminal (Ctrl-C)", interrupted=True)

    async def _plain_line(self, message: str) -> str:
        """``_line`` asked again until it could be sent as feedback (``feedback_problem``: no
        control character or escape sequence, at most ``MAX_FEEDBACK_CHARS`` characters), as
        every reviewer text is checked (``answer_review``, the inbox), before any stripping,
        which would drop some at the ends; the reviewer is told why and types it again instead
        of the review being dismissed."""
        line = await self._line(message)
        while feedback_problem(line) is not None:
            if is_plain(line):
                click.echo(self.wording.too_long.replace(_SLOT, f"{len(line):,}"))
            else:
                click.echo(self.wording.control)
            line = await self._line(message)
        return line

    async def _line(self, message: str) -> str:
        """One line of input after ``message`` (without its newline)."""
        if _interactive():
            from prompt_toolkit import PromptSession

            try:
                session = PromptSession[str](key_bindings=_typed_escapes())
                answer: str = await session.prompt_async(f"{message}: ")
                return answer
            except KeyboardInterrupt:
                self._interrupted()
                raise  # not reached: _interrupted always raises
            except EOFError:
                raise ReviewDismissed("review dismissed at the terminal") from None
        click.echo(f"{message}: ", nl=False)
        line = await self._pipe.readline()
        if line is None:
            click.echo("")
            raise ReviewDismissed("review dismissed at the terminal")
        return line.rstrip("\r\n")

    def _consent_label(self, text: str, q: Question, approve: str) -> str | None:
        """The option ``text`` seems to choose: a label typed as text, or consent → ``approve``."""
        word = text.casefold().rstrip(".!。！ ")
        for label in q.labels:
            if word == label.casefold():
                return label
        return approve if word in CONSENT_WORDS else None

    async def _read_answer(self, q: Question) -> Answer:
        w = self.wording
        hinted = q.intent.get("approve") if q.intent is not None else None
        approve = hinted if isinstance(hinted, str) and hinted in q.labels else q.labels[0]
        while True:
            text = (await self._plain_line(w.choose)).strip()
            number = _option_number(text)
            label: str | None = None
            if number is not None and 1 <= number <= len(q.options):
                label = q.options[number - 1].label
            elif text and number is None and not text.isdigit():
                label = self._consent_label(text, q, approve)
                if label is None:
                    return Answer(q.id, (), text)
                reply = (await self._line(w.confirm.replace(_SLOT, label))).strip().casefold()
                if reply not in {"y", "yes", "是", "好"}:
                    continue
            if label is None:
                click.echo(w.invalid)
                continue
            if label == approve:
                return Answer(q.id, (label,))
            feedback = (await self._plain_line(w.feedback)).strip()
            return Answer(q.id, (label,), feedback or None)
