"""Typed events for progress displays and UIs (``Agent.run(on_event=...)``,
``Session.subscribe``, ``async for ... in Session.events()``).

Every event is a small frozen dataclass; ``type`` names it for JSON consumers and
``conversation_id`` says which conversation it belongs to (filled in by the
session that publishes it). A conversation's events form one ordered stream
(agentkit.chat.eventbus numbers them); callbacks are called one at a time.

Conversation events (docs/architecture.md §9): :class:`RoundStarted` /
:class:`RoundFinished` bracket each round; ``RoundFinished.background`` lists the
sub-agents still running (work goes on), and :class:`AllWorkDone` follows once no
round and no sub-agent is left (the moment to ring a bell).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "AllWorkDone",
    "AssistantMessage",
    "ContextCompacted",
    "Event",
    "EventHandler",
    "MessageQueued",
    "Notification",
    "RetryScheduled",
    "RoundFinished",
    "RoundStarted",
    "RunFinished",
    "RunStarted",
    "StateChanged",
    "SubAgentFinished",
    "SubAgentProgress",
    "SubAgentStarted",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "UserMessage",
]


@dataclass(frozen=True)
class Event:
    """Base of all events: a frozen dataclass whose ``type`` is its class name.

    ``conversation_id`` (keyword-only, default "") names the conversation.
    """

    conversation_id: str = field(default="", kw_only=True)

    @property
    def type(self) -> str:
        """The event's class name, e.g. ``"ToolCallStarted"``."""
        return type(self).__name__

    def to_dict(self) -> dict[str, Any]:
        """Return the event as a JSON-able dict with a ``type`` key."""
        return {"type": self.type, **asdict(self)}


@dataclass(frozen=True)
class RunStarted(Event):
    """``Agent.run`` began on ``task`` (its first round; notification rounds follow
    until no sub-agent works, then :class:`RunFinished`)."""

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


@dataclass(frozen=True)
class UserMessage(Event):
    """A user message entered the conversation: at the start of a round, or at a turn
    boundary of a running round (``queued`` True: it waited for the current tool
    results)."""

    text: str
    queued: bool = False


@dataclass(frozen=True)
class MessageQueued(Event):
    """A user message arrived while a round runs; it waits for the next turn boundary.
    ``position`` is its place in the queue (1 = next)."""

    text: str
    position: int


@dataclass(frozen=True)
class Notification(Event):
    """Finished sub-agents were announced to the main agent with the specification's
    template (docs/specification.md §3): ``role`` "system" after a tool batch, "user"
    when it starts a round; ``agent_ids`` the sub-agents announced; ``text`` as sent."""

    agent_ids: list[int]
    role: str
    text: str


@dataclass(frozen=True)
class RoundStarted(Event):
    """A round began (``round`` counts from 1 per session); ``trigger`` is "user" (a
    message) or "notification" (a background sub-agent ended while no round ran)."""

    round: int
    trigger: str


@dataclass(frozen=True)
class RoundFinished(Event):
    """A round ended: ``status`` done, failed or cancelled; ``final_text`` the answer;
    ``background`` the ids of sub-agents still running (non-empty: the conversation
    waits for them and a completion will start a round by itself)."""

    round: int
    status: str
    final_text: str | None
    error: str | None = None
    background: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class AllWorkDone(Event):
    """No round runs and no sub-agent works: the conversation is idle (after the last
    round, or after the last background sub-agent of a conversation whose round had
    already ended without news to announce)."""
