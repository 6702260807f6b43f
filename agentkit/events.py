"""Typed events for progress displays and UIs (``Agent.run(on_event=...)``).

Every event is a small frozen dataclass; ``type`` names it for JSON consumers.
Callbacks run on the thread that produced the event (the run's thread, or the
sub-agent monitor thread for sub-agent events); keep them quick.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "AssistantMessage",
    "ContextCompacted",
    "Event",
    "EventHandler",
    "RetryScheduled",
    "RunFinished",
    "RunStarted",
    "StateChanged",
    "SubAgentFinished",
    "SubAgentProgress",
    "SubAgentStarted",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallStarted",
]


@dataclass(frozen=True)
class Event:
    """Base of all events: a frozen dataclass whose ``type`` is its class name."""

    @property
    def type(self) -> str:
        """The event's class name, e.g. ``"ToolCallStarted"``."""
        return type(self).__name__

    def to_dict(self) -> dict[str, Any]:
        """Return the event as a JSON-able dict with a ``type`` key."""
        return {"type": self.type, **asdict(self)}


@dataclass(frozen=True)
class RunStarted(Event):
    """A run (a round of the main agent) began on ``task`` in conversation ``conversation_id``."""

    conversation_id: str
    task: str


@dataclass(frozen=True)
class TextDelta(Event):
    """A piece of streamed assistant text (may be replaced if the request is retried)."""

    text: str


@dataclass(frozen=True)
class AssistantMessage(Event):
    """The model answered: ``content`` (text or None) and ``tool_calls`` (OpenAI shape), at model request number ``turn``."""

    content: str | None
    tool_calls: list[dict[str, Any]]
    turn: int


@dataclass(frozen=True)
class ToolCallStarted(Event):
    """A tool call began: ``name`` with parsed ``arguments`` (None when they did not parse); ``last_action`` is the short phrase shown in status rows."""

    call_id: str
    name: str
    arguments: dict[str, Any] | None
    last_action: str


@dataclass(frozen=True)
class ToolCallFinished(Event):
    """A tool call ended: ``ok`` False for an ``Error:`` result or a seed-tool refusal; ``output`` is the result text; ``duration_seconds`` wall time."""

    call_id: str
    name: str
    ok: bool
    output: str
    duration_seconds: float


@dataclass(frozen=True)
class RetryScheduled(Event):
    """A transient model error; the request is retried after ``delay_seconds``."""

    kind: str
    attempt: int
    delay_seconds: float
    message: str


@dataclass(frozen=True)
class ContextCompacted(Event):
    """The context budget shrank the history from ``tokens_before`` to ``tokens_after`` tokens; ``how`` names the step taken."""

    tokens_before: int
    tokens_after: int
    how: str


@dataclass(frozen=True)
class StateChanged(Event):
    """The conversation state changed (idle, running, waiting_for_subagents, done, failed)."""

    state: str


@dataclass(frozen=True)
class SubAgentStarted(Event):
    """A sub-agent's worker started; ``info`` is its get_sub_agent_status row (agent_id, summary, status, counters, last_action, deliverables_dir)."""

    info: dict[str, Any]


@dataclass(frozen=True)
class SubAgentProgress(Event):
    """A sub-agent's counters or last_action changed; ``info`` is a get_sub_agent_status row."""

    info: dict[str, Any]


@dataclass(frozen=True)
class SubAgentFinished(Event):
    """A sub-agent ended (completed, failed, timeout or terminated); ``info`` is its final status row."""

    info: dict[str, Any]


@dataclass(frozen=True)
class RunFinished(Event):
    """A run ended with ``status`` (done, failed, cancelled), the ``final_text`` answer, an ``error`` text when it failed, and ``stats``."""

    status: str
    final_text: str | None
    error: str | None = None
    stats: dict[str, Any] = field(default_factory=dict)


EventHandler = Callable[[Event], None]
