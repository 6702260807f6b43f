"""Typed events for progress displays and UIs (``Agent.run(on_event=...)``).

Every event is a small frozen dataclass; ``type`` names it for JSON consumers.
Callbacks run on the thread that produced the event (the run's thread, or the
sub-agent monitor thread for sub-agent events); keep them quick.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Event:
    """Base of all events."""

    @property
    def type(self) -> str:
        """The event's class name, e.g. ``"ToolCallStarted"``."""
        return type(self).__name__

    def to_dict(self) -> dict[str, Any]:
        """Return the event as a JSON-able dict with a ``type`` key."""
        return {"type": self.type, **asdict(self)}


@dataclass(frozen=True)
class RunStarted(Event):
    conversation_id: str
    task: str


@dataclass(frozen=True)
class TextDelta(Event):
    """A piece of streamed assistant text (may be replaced if the request is retried)."""

    text: str


@dataclass(frozen=True)
class AssistantMessage(Event):
    content: str | None
    tool_calls: list[dict[str, Any]]
    turn: int


@dataclass(frozen=True)
class ToolCallStarted(Event):
    call_id: str
    name: str
    arguments: dict[str, Any] | None
    last_action: str


@dataclass(frozen=True)
class ToolCallFinished(Event):
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
    tokens_before: int
    tokens_after: int
    how: str


@dataclass(frozen=True)
class StateChanged(Event):
    """The conversation state changed (idle, running, waiting_for_subagents, done, failed)."""

    state: str


@dataclass(frozen=True)
class SubAgentStarted(Event):
    info: dict[str, Any]


@dataclass(frozen=True)
class SubAgentProgress(Event):
    """A sub-agent's counters or last_action changed; ``info`` is a get_sub_agent_status row."""

    info: dict[str, Any]


@dataclass(frozen=True)
class SubAgentFinished(Event):
    info: dict[str, Any]


@dataclass(frozen=True)
class RunFinished(Event):
    status: str
    final_text: str | None
    error: str | None = None
    stats: dict[str, Any] = field(default_factory=dict)


EventHandler = Callable[[Event], None]
EVENT_TYPES = (
    RunStarted,
    TextDelta,
    AssistantMessage,
    ToolCallStarted,
    ToolCallFinished,
    RetryScheduled,
    ContextCompacted,
    StateChanged,
    SubAgentStarted,
    SubAgentProgress,
    SubAgentFinished,
    RunFinished,
)
