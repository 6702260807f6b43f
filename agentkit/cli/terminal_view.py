"""What the terminal chat prints for each event, and its bottom toolbar.

One job: :class:`TerminalView` turns a conversation's events into styled,
terminal-safe lines: tool calls in words, sub-agents starting and ending, a round's
answer rendered as Markdown (:func:`render_markdown`), a failed round in words
(agentkit.chat.explain), and ``✓ all done`` with the bell only once background work
has ended, never after a plain answer nor while the chat is leaving. It keeps what
the toolbar shows. agentkit.cli.terminal owns the prompt, the input and the lock
that guards this view; nothing here reads input or writes to the terminal.
"""

from __future__ import annotations

import io
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentkit import events as ev
from agentkit.chat.explain import round_failure, state_words
from agentkit.cli.progress import event_line, shorten, task_words
from agentkit.cli.safe_text import terminal_safe

if TYPE_CHECKING:
    from agentkit.settings import Settings

__all__ = ["BELL", "TerminalView", "fit_words", "render_markdown", "style"]

BELL = "\a"
MIN_COLUMNS = 20
"""Narrower terminals (or a width read as 0) are wrapped as this many columns."""


def render_markdown(text: str, width: int | None = None) -> str:
    """Return ``text`` rendered as Markdown for a terminal (ANSI styles), ``width`` columns
    (default: the terminal's, at most 120). ``text`` is made terminal-safe first: rich's
    Markdown passes escape sequences in it through."""
    from markdown_it import MarkdownIt
    from rich.console import Console
    from rich.markdown import Markdown

    columns = width or min(shutil.get_terminal_size((100, 40)).columns, 120)
    buffer = io.StringIO()
    safe = terminal_safe(text)
    shown = Markdown(safe)
    # rich parses HTML and then drops it: "use <div> here" read "use  here". Parsed
    # with HTML off, tags are text, shown as the model wrote them.
    parser = MarkdownIt("commonmark", {"html": False}).enable("strikethrough").enable("table")
    shown.parsed = parser.parse(safe)
    Console(file=buffer, force_terminal=True, width=columns).print(shown)
    return buffer.getvalue().rstrip("\n")


@dataclass
class TerminalView:
    """The terminal chat's view of one conversation (fields as the events left them).

    Attributes:
        settings: the conversation's settings, asked when a failed round is explained.
        state: the session's state (``idle``, ``running``, ``waiting_for_subagents``).
        streamed: the answer streamed so far in this turn (the toolbar's tail).
        running: the running sub-agents, id to summary.
        round_open: a round started and has not finished.
        background_ran: background work ran since the last ``✓ all done``.
        leaving: the chat is ending (no "send a message to go on", no "all done").
        typed: messages posted from this terminal and not yet in the conversation;
            any other that arrives was kept by an earlier session, and is shown.
        done_pending: AllWorkDone came before its round's RoundFinished.
    """

    settings: Callable[[], Settings]
    state: str = "idle"
    streamed: str = ""
    running: dict[int, str] = field(default_factory=dict)
    round_open: bool = False
    background_ran: bool = False
    leaving: bool = False
    typed: list[str] = field(default_factory=list)
    done_pending: bool = False

    def toolbar(self) -> str:
        """The bottom toolbar's text: the state in words, the running sub-agents, the
        tail of the answer as it streams."""
        parts = [state_words(self.state, len(self.running))]
        if self.running:
            parts.append("sub-agents running: " + " ".join(f"#{i}" for i in self.running))
        if self.streamed:
            parts.append("answer: …" + shorten(self.streamed[-200:], 70)[-70:])
        return terminal_safe(" " + " · ".join(parts))

    def apply(self, event: ev.Event) -> list[str]:
        """The lines ``event`` prints (styled, terminal-safe), after updating the view."""
        if isinstance(event, ev.StateChanged):
            self.state = event.state
        elif isinstance(event, ev.TextDelta):
            self.streamed += event.text
        elif isinstance(event, ev.RoundStarted):
            self.round_open, self.streamed = True, ""
            if event.trigger == "notification":
                return [style("· background work finished: the main agent reads the results", "36")]
        elif isinstance(event, ev.AssistantMessage):
            self.streamed = ""
            if event.tool_calls and (event.content or "").strip():
                return [style(event.content.strip(), "2")]  # type: ignore[union-attr]
        elif isinstance(event, ev.MessageQueued):
            return [
                style(
                    f"queued ({event.position}): it reaches the main agent after the current tool results",
                    "33",
                )
            ]
        elif isinstance(event, ev.ToolCallStarted) and event.last_action:
            # Words first (as the web page), the tool's name after them.
            return [style(f"· {shorten(event.last_action, 100)} ({event.name})", "2")]
        elif isinstance(event, ev.UserMessage):
            if event.text not in self.typed:  # kept by an earlier session (/quit, a crash)
                return [style(f"· sent, kept from before: {shorten(event.text, 60)}", "36")]
            self.typed.remove(event.text)
            if event.queued:
                return [style(f"· queued message delivered: {shorten(event.text, 60)}", "36")]
        elif isinstance(event, (ev.SubAgentStarted, ev.SubAgentFinished)):
            agent_id = event.info.get("agent_id")
            if isinstance(event, ev.SubAgentStarted) and isinstance(agent_id, int):
                self.running[agent_id] = task_words(event.info)
            elif isinstance(agent_id, int):
                self.running.pop(agent_id, None)
            return [style(event_line(event) or "", "35")]
        elif isinstance(event, ev.SubAgentQuestion):  # it waits: the user may answer it
            return [style("? " + (event_line(event) or ""), "1;33")]
        elif isinstance(event, ev.RoundFinished):
            return self._round_finished(event)
        elif isinstance(event, ev.AllWorkDone):
            if self.round_open:  # the session says "idle" just before the round's end
                self.done_pending = True
                return []
            return self._all_done()
        else:
            line = event_line(event)  # tool calls, retries, compaction
            if line is not None and not isinstance(event, ev.SubAgentProgress):
                return [style(line, "2")]
        return []

    def _round_finished(self, event: ev.RoundFinished) -> list[str]:
        self.round_open, self.streamed = False, ""
        lines = []
        if event.status == "done":
            text = (event.final_text or "").strip()
            lines.append(render_markdown(text) if text else style("(no answer text)", "2"))
        elif event.status == "cancelled":
            going = " ".join(f"#{i}" for i in event.background)
            tail = f" Sub-agents {going} keep working in the background." if going else ""
            again = "" if self.leaving else " Send a message to go on."
            lines.append(style(f"Round stopped.{'' if self.leaving else tail}{again}", "33"))
        else:
            settings = self.settings()
            why = event.explanation or round_failure(
                event.error, event.error_kind, base_url=settings.base_url, model=settings.model
            )
            lines.append(style(why, "31"))
        if event.background:
            self.background_ran = True
            ids = " ".join(f"#{i}" for i in event.background)
            lines.append(
                style(
                    f"round finished · background work still running: sub-agents {ids} "
                    "(their results start a round by themselves; /status shows them)",
                    "36",
                )
            )
        elif self.done_pending:
            lines += self._all_done()
        return lines

    def _all_done(self) -> list[str]:
        """``✓ all done`` with the bell, once background work has ended; nothing after a
        round that left nothing running (its answer says it is done)."""
        ran, self.background_ran, self.done_pending = self.background_ran, False, False
        if not ran or self.leaving:  # leaving ends the work: that is not "all done"
            return []
        return [style("✓ all done: no round and no sub-agent running", "32") + BELL]


def style(text: str, code: str, width: int | None = None) -> str:
    """``text`` made terminal-safe, in an ANSI style (``"2"`` dim, ``"31"`` red...), its
    long lines wrapped at word boundaries to ``width`` columns (:func:`fit_words`)."""
    lines = fit_words(terminal_safe(text), width)
    return "\n".join(f"\x1b[{code}m{line}\x1b[0m" for line in lines)


def fit_words(text: str, width: int | None = None) -> list[str]:
    """``text``'s lines, each one wider than ``width`` columns (default: the terminal's)
    wrapped at word boundaries, counting wide characters as two columns (a word wider
    than a line is cut); shorter lines stay as they are. Printed as it was, a long line
    was broken by the terminal at its last column, mid-word ("themse" / "lves")."""
    from rich.cells import cell_len

    columns = max(width or shutil.get_terminal_size((100, 40)).columns, MIN_COLUMNS)
    fitted: list[str] = []
    for line in text.split("\n"):
        if cell_len(line) <= columns:
            fitted.append(line)
            continue
        from rich.console import Console
        from rich.text import Text

        parts = Text(line).wrap(Console(width=columns), columns)
        fitted += [part.plain.rstrip(" ") for part in parts]
    return fitted
