"""The terminal front end of ``agentkit chat``.

One job: a chat on a terminal. The input line (prompt_toolkit) stays usable while
the main agent works: output printed meanwhile appears above it (``patch_stdout``),
and a bottom toolbar shows the state, the running sub-agents and the tail of the
answer as it streams. Once a round ends its answer is rendered as Markdown (rich).
Sub-agents get a line when they start and finish (and all of them on ``/status``).
Ctrl-C cancels the current round only; Ctrl-D or ``/quit`` leaves (sub-agents end,
the conversation is saved, one line says so).

Events come from the session's threads; printing goes through prompt_toolkit's
stdout proxy, which is thread-safe, and the view's own fields are guarded by a lock.
"""

from __future__ import annotations

import functools
import io
import shutil
import sys
import threading
from typing import TYPE_CHECKING, Any

from agentkit import events as ev
from agentkit.chat_cli import Signals
from agentkit.chat_commands import ChatCommands, CommandError, message_text
from agentkit.display import event_line, shorten
from agentkit.terminal_text import terminal_safe

if TYPE_CHECKING:
    from agentkit.chat import Session, Workspace

__all__ = ["TerminalChat", "render_markdown"]

BELL = "\a"


class _Leave(Exception):
    """Raised out of the prompt when a signal ends the chat."""


def render_markdown(text: str, width: int | None = None) -> str:
    """Return ``text`` rendered as Markdown for a terminal (ANSI styles), ``width`` columns
    (default: the terminal's, at most 120). ``text`` is made terminal-safe first: rich's
    Markdown passes escape sequences in it through."""
    from rich.console import Console
    from rich.markdown import Markdown

    columns = width or min(shutil.get_terminal_size((100, 40)).columns, 120)
    buffer = io.StringIO()
    Console(file=buffer, force_terminal=True, width=columns).print(Markdown(terminal_safe(text)))
    return buffer.getvalue().rstrip("\n")


class TerminalChat:
    """A chat on a terminal (see the module docstring).

    Args:
        workspace: the chat's Workspace.
        session: the conversation to start in.
    """

    def __init__(self, workspace: Workspace, session: Session) -> None:
        self._lock = threading.Lock()
        self._state = session.state
        self._streamed = ""
        self._running: dict[int, str] = {}  # running sub-agents: id -> summary
        self._round_open = False
        self._rounds_since_done = 0
        self._done_pending = False
        self._prompt: Any = None
        self._unsubscribe = session.subscribe(self._on_event)
        self.commands = ChatCommands(workspace, session, self._switched)

    # ------------------------------------------------------------------ loop
    def run(self) -> int:
        """Read and act on input lines until the user leaves; returns the exit code."""
        from prompt_toolkit import PromptSession
        from prompt_toolkit.patch_stdout import patch_stdout

        self._prompt = PromptSession(bottom_toolbar=self._toolbar, refresh_interval=0.5)
        session = self.commands.session
        with patch_stdout(raw=True), Signals(self._interrupt, self._signal_leave) as sig:
            _say(
                f"agentkit chat · {session.id} · {self.commands.workspace.path}\n"
                "/help lists the commands · Ctrl-C cancels a round · Ctrl-D or /quit leaves"
            )
            while sig.signum is None:
                try:
                    line = self._prompt.prompt("› ")
                except KeyboardInterrupt:  # Ctrl-C typed at the prompt
                    self._interrupt()
                    continue
                except (EOFError, _Leave):  # Ctrl-D, or a signal ended the prompt
                    break
                if not self._handle(line.strip()):
                    break
            farewell = self._leave()
        _say(farewell)
        return 0 if sig.signum is None else 128 + sig.signum

    def _handle(self, line: str) -> bool:
        """Act on one input line; False to leave."""
        if not line:
            return True
        text = message_text(line)
        if text is None:
            try:
                result = self.commands.execute(line)
            except CommandError as exc:
                _show(_style(str(exc), "31"))
                return True
            if result.ok:
                _say(result.text)
            else:
                _show(_style(result.text, "31"))
            return not result.quit
        self.commands.session.post(text)
        return True

    def _leave(self) -> str:
        session = self.commands.session
        ended = sum(1 for r in session.subagents() if r.get("status") == "running")
        self.commands.workspace.close()  # every open conversation: sub-agents end, saved
        self._unsubscribe()
        tail = f"; {ended} running sub-agent(s) ended" if ended else ""
        return f"left: conversation {session.id} saved to {session.transcript_path}{tail}"

    def _interrupt(self) -> bool:
        """Ctrl-C: cancel the round, or say how to leave. Never ends the chat."""
        if self.commands.session.cancel():
            _show(
                _style(
                    "cancelling the round… (background sub-agents go on; /stop N ends one)", "33"
                )
            )
        else:
            _say("no round is running: Ctrl-D or /quit leaves")
        return True

    def _signal_leave(self, signum: int) -> None:
        """SIGTERM/SIGHUP: end the prompt; the loop then leaves cleanly."""
        app = getattr(self._prompt, "app", None)
        if app is not None and app.is_running and getattr(app, "loop", None) is not None:
            app.loop.call_soon_threadsafe(functools.partial(app.exit, exception=_Leave()))

    def _switched(self, old: Session, new: Session) -> None:
        with self._lock:
            self._running.clear()
            self._state = new.state
            self._streamed = ""
        self._unsubscribe = new.subscribe(self._on_event)

    # ---------------------------------------------------------------- events
    def _toolbar(self) -> str:
        with self._lock:
            parts = [self._state]
            if self._running:
                parts.append("sub-agents running: " + " ".join(f"#{i}" for i in self._running))
            if self._streamed:
                parts.append("answer: …" + shorten(self._streamed[-200:], 70)[-70:])
        return terminal_safe(" " + " · ".join(parts))

    def _on_event(self, event: ev.Event) -> None:
        """Print what the event means (called on the session's threads, one at a time)."""
        with self._lock:
            lines = self._apply(event)
        for line in lines:
            _show(line)  # built by _style and render_markdown, which made the text safe

    def _apply(self, event: ev.Event) -> list[str]:
        if isinstance(event, ev.StateChanged):
            self._state = event.state
        elif isinstance(event, ev.TextDelta):
            self._streamed += event.text
        elif isinstance(event, ev.RoundStarted):
            self._round_open, self._streamed = True, ""
            self._rounds_since_done += 1
            if event.trigger == "notification":
                return [
                    _style("· background work finished: the main agent reads the results", "36")
                ]
        elif isinstance(event, ev.AssistantMessage):
            self._streamed = ""
            if event.tool_calls and (event.content or "").strip():
                return [_style(event.content.strip(), "2")]  # type: ignore[union-attr]
        elif isinstance(event, ev.MessageQueued):
            return [
                _style(
                    f"queued ({event.position}): it reaches the main agent after the current tool results",
                    "33",
                )
            ]
        elif isinstance(event, ev.UserMessage) and event.queued:
            return [_style(f"· queued message delivered: {shorten(event.text, 60)}", "36")]
        elif isinstance(event, (ev.SubAgentStarted, ev.SubAgentFinished)):
            agent_id = event.info.get("agent_id")
            if isinstance(event, ev.SubAgentStarted) and isinstance(agent_id, int):
                self._running[agent_id] = str(event.info.get("summary", ""))
            elif isinstance(agent_id, int):
                self._running.pop(agent_id, None)
            return [_style(event_line(event) or "", "35")]
        elif isinstance(event, ev.RoundFinished):
            return self._round_finished(event)
        elif isinstance(event, ev.AllWorkDone):
            if self._round_open:  # the session says "idle" just before the round's end
                self._done_pending = True
                return []
            return self._all_done()
        else:
            line = event_line(event)  # tool calls, retries, compaction
            if line is not None and not isinstance(event, ev.SubAgentProgress):
                return [_style(line, "2")]
        return []

    def _round_finished(self, event: ev.RoundFinished) -> list[str]:
        self._round_open, self._streamed = False, ""
        lines = []
        if event.status == "done":
            text = (event.final_text or "").strip()
            lines.append(render_markdown(text) if text else _style("(no answer text)", "2"))
        elif event.status == "cancelled":
            lines.append(_style("round cancelled", "33"))
        else:
            lines.append(_style(f"round failed: {event.error}", "31"))
        if event.background:
            ids = " ".join(f"#{i}" for i in event.background)
            lines.append(
                _style(
                    f"round finished · background work still running: sub-agents {ids} "
                    "(their results start a round by themselves; /status shows them)",
                    "36",
                )
            )
        elif self._done_pending:
            lines += self._all_done()
        return lines

    def _all_done(self) -> list[str]:
        bell = BELL if self._rounds_since_done else ""
        self._rounds_since_done, self._done_pending = 0, False
        return [_style("✓ all done: no round and no sub-agent running", "32") + bell]


def _style(text: str, code: str) -> str:
    """``text`` made terminal-safe, in an ANSI style (``"2"`` dim, ``"31"`` red...)."""
    return f"\x1b[{code}m{terminal_safe(text)}\x1b[0m"


def _say(text: str) -> None:
    """Print plain text (model, tool or file text allowed) above the input line,
    terminal-safe."""
    _show(terminal_safe(text))


def _show(text: str) -> None:
    """Print a line already made for the terminal (by :func:`_style` or
    :func:`render_markdown`, whose escapes are ours) above the input line, through
    prompt_toolkit's proxy when patched."""
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except (OSError, ValueError):  # a closed terminal: the chat is ending anyway
        pass
