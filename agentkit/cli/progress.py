"""Progress views for ``agentkit run``: a live rich view and a plain-line printer.

Both are event handlers for ``Agent.run(on_event=...)`` (agentkit.events). Events
arrive from the run's thread and from sub-agent monitor threads, so each view
guards its state with a lock. The live view (on a terminal) shows a status line
for the main agent and the sub-agents' table (docs/architecture.md §3 CLI: id, summary, status,
runtime, counters, last action); the plain printer (pipes, logs) writes one line
per tool call, sub-agent start or finish, retry and compaction.

rich is imported when a LiveDisplay is made (importing it costs ~0.1-0.3 s), so
plain output never pays for it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from agentkit import events as ev
from agentkit.cli.safe_text import terminal_safe
from agentkit.conversation import SEED_COUNTERS

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.table import Table
    from rich.text import Text


def shorten(text: str, limit: int) -> str:
    """Return ``text`` on one line (whitespace runs folded), cut to ``limit`` chars with '…'."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: max(0, limit - 1)] + "…"


def format_arguments(arguments: dict[str, Any] | None, limit: int = 160) -> str:
    """Return tool-call arguments as compact one-line JSON, cut to ``limit`` chars."""
    if arguments is None:
        return "(invalid arguments)"
    try:
        text = json.dumps(arguments, ensure_ascii=False, separators=(", ", ": "), default=str)
    except (TypeError, ValueError):
        text = repr(arguments)
    return shorten(text, limit)


def format_runtime(seconds: float | int | None) -> str:
    """Return a duration in seconds as ``45s``, ``3m05s`` or ``1h02m``."""
    if seconds is None:
        return "-"
    total = int(seconds)
    if total < 60:
        return f"{total}s"
    if total < 3600:
        return f"{total // 60}m{total % 60:02d}s"
    return f"{total // 3600}h{total % 3600 // 60:02d}m"


STATUS_WORDS = {
    "completed": "done",
    "timeout": "timed out",
    "terminated": "stopped",
    "budget_exhausted": "budget used up",
}
"""A sub-agent's status as people read it (the web page's words); others as they are."""


def runtime_words(info: dict[str, Any]) -> str:
    """Return a status row's runtime: ``45s``, or ``3m05s in total over 2 runs`` for a
    continued sub-agent (the row's ``runs``, added by agentkit.chat.runs)."""
    text = format_runtime(info.get("runtime_seconds"))
    runs = info.get("runs")
    if isinstance(runs, int) and runs > 1:
        text += f" in total over {runs} runs"
    return text


def task_words(info: dict[str, Any]) -> str:
    """Return what a sub-agent works on: a continued run's task, else its summary."""
    return str(info.get("task") or info.get("summary", ""))


def status_text(status: Any) -> str:
    """Return a sub-agent status row's ``status`` in words (``timeout`` -> ``timed out``)."""
    return STATUS_WORDS.get(str(status), str(status))


def counters_text(info: dict[str, Any]) -> str:
    """Return ``2 files read, 1 search, 0 web pages, 1 command`` from a status row
    (agentkit.chat.explain.counter_words: the words every front end uses)."""
    from agentkit.chat.explain import counter_words

    return counter_words(info)


def usage_text(info: dict[str, Any]) -> str:
    """Return ``1,234 tokens · $0.001200`` from a row's ``tokens`` and ``cost_usd``
    (agentkit.chat.explain.usage_words: ``cost unknown`` without a known price, ``0
    tokens`` before it reached the model)."""
    from agentkit.chat.explain import usage_words

    return usage_words(info)


def event_line(event: ev.Event) -> str | None:
    """Return the plain progress line for ``event``, or None when it gets no line.

    Lines: one per tool call, sub-agent start and finish, retry and compaction. The
    line is terminal-safe (:func:`agentkit.cli.safe_text.terminal_safe`): arguments,
    summaries and error messages come from the model or the tools.
    """
    line = _event_text(event)
    return None if line is None else terminal_safe(line)


def _event_text(event: ev.Event) -> str | None:
    if isinstance(event, ev.ToolCallStarted):
        return f"tool {event.name} {format_arguments(event.arguments)}"
    if isinstance(event, ev.SubAgentStarted):
        info = event.info
        begun = f"runs again (run {info['runs']})" if info.get("task") else "started"
        return (
            f"sub-agent #{info.get('agent_id')} {begun}: {shorten(task_words(info), 80)}"
            f" (deliverables: {info.get('deliverables_dir', '?')})"
        )
    if isinstance(event, ev.SubAgentFinished):
        info = event.info
        return (
            f"sub-agent #{info.get('agent_id')} {status_text(info.get('status', 'finished'))}"
            f" after {runtime_words(info)}: {counters_text(info)}"
        )
    if isinstance(event, ev.SubAgentQuestion):
        return (
            f"sub-agent #{event.agent_id} asks: {shorten(event.question, 300)}"
            f" (answer with /answer {event.agent_id} TEXT)"
        )
    if isinstance(event, ev.SubAgentAnswered):
        how = {
            "answered": f"answered by {event.by or 'the main agent'}",
            "timed_out": "no answer came",
        }
        return f"sub-agent #{event.agent_id}'s question: {how.get(event.outcome, 'withdrawn (it ended)')}"
    if isinstance(event, ev.SubAgentMessage):
        state = "delivered" if event.delivered else "not delivered"
        return f"message to sub-agent #{event.agent_id} {state}: {shorten(event.text, 80)}"
    if isinstance(event, ev.BudgetWarning):
        who = "conversation" if event.scope == "session" else f"sub-agent #{event.agent_id}"
        state = "used up" if event.exhausted else "almost used up"
        cost = f"${event.cost_usd:.6f}" if event.cost_usd is not None else "cost unknown"
        return f"budget of the {who} {state}: {event.tokens:,} tokens, {cost}"
    if isinstance(event, ev.RetryScheduled):
        return (
            f"retry: {event.kind} (attempt {event.attempt}) in {event.delay_seconds:.1f}s:"
            f" {shorten(event.message, 160)}"
        )
    if isinstance(event, ev.ContextCompacted):
        return (
            f"context compacted ({event.how}): {event.tokens_before} -> {event.tokens_after} tokens"
        )
    return None


class PlainPrinter:
    """Event handler writing one plain line per notable event to ``stream``.

    Args:
        stream: a text stream (stdout for plain runs, stderr beside ``--json``).
        on_failed: called with the OSError when a write fails (its reader has gone, a
            full disk), e.g. :meth:`agentkit.cli.signals.Signals.output_failed`; None:
            failed lines are dropped (progress is optional).
    """

    def __init__(
        self, stream: IO[str], on_failed: Callable[[OSError], object] | None = None
    ) -> None:
        self.stream = stream
        self.on_failed = on_failed
        self.lines = 0  # lines written so far
        self._lock = threading.Lock()

    def __call__(self, event: ev.Event) -> None:
        """Write the event's line, if it has one (never raises)."""
        line = event_line(event)
        if line is None:
            return
        with self._lock:
            try:
                self.stream.write(line + "\n")
                self.stream.flush()
                self.lines += 1
            except OSError as exc:
                if self.on_failed is not None:
                    self.on_failed(exc)
            except ValueError:  # the stream was closed: nothing more to show
                pass

    def start(self) -> None:
        """No-op (symmetry with LiveDisplay)."""

    def stop(self) -> None:
        """No-op (symmetry with LiveDisplay)."""

    def pause(self, paused: bool) -> None:
        """No-op (symmetry with LiveDisplay)."""


class LiveDisplay:
    """Live terminal view: main-agent status line plus the sub-agents' table.

    Args:
        console: the rich Console to draw on (stdout, or stderr beside ``--json``).
        tokens: returns the main conversation's total tokens so far (read on each
            refresh; events do not carry usage).
        refresh_per_second: redraws per second.

    Use ``start()`` before the run and ``stop()`` after; between them the object is
    the ``on_event`` handler. Notable events are also printed as lines above the view.
    """

    def __init__(
        self,
        console: Console,
        tokens: Callable[[], int] | None = None,
        refresh_per_second: float = 4,
    ) -> None:
        self.console = console
        self._tokens = tokens or (lambda: 0)
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self.turn = 0
        self.state = "starting"
        self.last_action = ""
        self.streamed_chars = 0
        # agent_id -> (status row, monotonic time the row arrived)
        self.subagents: dict[int, tuple[dict[str, Any], float]] = {}
        from rich.live import Live

        self._live = Live(
            console=console,
            get_renderable=self.render,
            refresh_per_second=refresh_per_second,
            transient=False,
            redirect_stdout=False,
            redirect_stderr=False,
        )

    def start(self) -> None:
        """Start redrawing."""
        self._live.start()

    def stop(self) -> None:
        """Draw a last time and stop; the final view stays on screen."""
        try:
            self._live.refresh()
        finally:
            self._live.stop()

    def pause(self, paused: bool) -> None:
        """Stop redrawing while the person answers a question below the view
        (``paused`` True), then go on (False)."""
        if paused:
            self._live.stop()
        else:
            self._live.start()

    def __call__(self, event: ev.Event) -> None:
        """Update the view from ``event`` and print its line above the view, if any."""
        line = event_line(event)
        with self._lock:
            self._apply(event)
        if line is not None:
            from rich.text import Text

            self._live.console.print(Text(line, style="dim"), soft_wrap=True)

    def _apply(self, event: ev.Event) -> None:
        if isinstance(event, ev.AssistantMessage):
            self.turn = event.turn
            self.streamed_chars = 0
            if not event.tool_calls:
                self.last_action = "answered"
        elif isinstance(event, ev.TextDelta):
            self.streamed_chars += len(event.text)
        elif isinstance(event, ev.ToolCallStarted):
            self.last_action = event.last_action or event.name
        elif isinstance(event, ev.StateChanged):
            self.state = event.state
        elif isinstance(event, (ev.SubAgentStarted, ev.SubAgentProgress, ev.SubAgentFinished)):
            agent_id = event.info.get("agent_id")
            if isinstance(agent_id, int):
                self.subagents[agent_id] = (dict(event.info), time.monotonic())
        elif isinstance(event, ev.RunFinished):
            self.state = event.status

    def render(self) -> RenderableType:
        """Return the current view (called by rich on each refresh)."""
        with self._lock:
            status = self._status_line()
            rows = sorted(self.subagents.items())
        if not rows:
            return status
        from rich.console import Group

        return Group(status, self._table(rows))

    def _status_line(self) -> Text:
        elapsed = format_runtime(time.monotonic() - self._started)
        try:
            tokens = int(self._tokens())
        except Exception:  # the display must never break the run
            tokens = 0
        from rich.text import Text

        text = Text()
        text.append("main ", style="bold")
        text.append(f"[{terminal_safe(self._state_text())}] ", style="cyan")
        text.append(f"turn {self.turn} · {tokens:,} tokens · {elapsed}")
        if self.streamed_chars:
            text.append(f" · receiving ({self.streamed_chars} chars)")
        if self.last_action:
            text.append(" · ")
            text.append(terminal_safe(shorten(self.last_action, 80)), style="italic")
        return text

    def _state_text(self) -> str:
        """The main agent's state in words (``working``, ``waiting for 1 sub-agent``)."""
        if self.state not in ("running", "waiting_for_subagents"):
            return self.state  # starting, done, failed, cancelled: words already
        from agentkit.chat.explain import state_words

        running = sum(1 for info, _ in self.subagents.values() if info.get("status") == "running")
        return state_words(self.state, running)

    def _table(self, rows: list[tuple[int, tuple[dict[str, Any], float]]]) -> Table:
        from rich.table import Table
        from rich.text import Text

        wide = self.console.width >= WIDE_COLUMNS
        table = Table(title="sub-agents", title_justify="left", expand=False, pad_edge=False)
        # id, status and runtime never shrink (rich narrows only wrappable columns);
        # the summary and the last action share the rest, each cell one line cut with
        # "…"; below WIDE_COLUMNS the counters give way (they would become "…").
        for name, justify, min_width in _columns(wide):
            table.add_column(
                name,
                justify=justify,  # type: ignore[arg-type]
                no_wrap=name not in ("summary", "last action"),
                min_width=min_width,
            )
        now = time.monotonic()
        for agent_id, (info, seen) in rows:
            raw = str(info.get("status", "?"))
            runtime = info.get("runtime_seconds") or 0
            if raw == "running":  # advance the clock between progress events
                runtime = float(runtime) + (now - seen)
            style = {"running": "yellow", "completed": "green"}.get(raw, "red")
            status = terminal_safe(status_text(raw))
            counters = [
                *(str(info.get(k, 0)) for k in SEED_COUNTERS),
                f"{int(info.get('tokens') or 0):,}",
                _cost_cell(info.get("cost_usd")),
            ]
            # Text, not str: rich reads a str cell as markup ("[link=...]" from a model).
            table.add_row(
                str(agent_id),
                _one_line(shorten(task_words(info), 40)),
                Text(status, style=style),
                format_runtime(runtime),
                *(counters if wide else []),
                _one_line(shorten(str(info.get("last_action", "") or ""), 50)),
            )
        return table


WIDE_COLUMNS = 120
"""Terminal columns from which the live table shows the counters, tokens and cost."""


def _one_line(text: str) -> Text:
    """A cell that stays one line, cut with "…" when its column is narrowed."""
    from rich.text import Text

    return Text(terminal_safe(text), no_wrap=True, overflow="ellipsis")


def _columns(wide: bool) -> list[tuple[str, str, int | None]]:
    """The live table's columns: (header, justify, minimum width)."""
    counters = [(name, "right", None) for name in ("files", "searches", "web", "cmds")]
    return [
        ("id", "right", 3),
        ("summary", "left", 8),
        ("status", "left", 9),
        ("runtime", "right", 7),
        *((*counters, ("tokens", "right", None), ("cost", "right", None)) if wide else ()),
        ("last action", "left", 12),
    ]


def _cost_cell(cost: Any) -> str:
    return f"${cost:.4f}" if isinstance(cost, (int, float)) else "unknown"


def print_final_markdown(console: Console, text: str | None) -> None:
    """Render the final answer as Markdown (nothing when there is no text); the text is
    made terminal-safe first (rich's Markdown passes escape sequences through)."""
    if text:
        from rich.markdown import Markdown

        console.print()
        console.print(Markdown(terminal_safe(text)))
