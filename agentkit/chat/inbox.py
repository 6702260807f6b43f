"""User messages waiting for the main agent, each with the answer it will get.

One job: a thread-safe FIFO of :class:`Pending` messages. A message is *taken*
when it enters the conversation (at the start of a round, or at a turn boundary
of a running round: docs/architecture.md §9), and its future is resolved with the
:class:`RoundResult` of the round it was taken into. Nothing is ever dropped
silently: closing the inbox fails the futures of messages never taken.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentkit.errors import Cancelled

__all__ = ["Inbox", "Pending", "RoundResult"]


@dataclass
class RoundResult:
    """How one round of the main agent ended (what ``Session.send`` returns).

    Attributes:
        conversation_id: the conversation.
        round: the round's number in this session (from 1).
        status: ``done``, ``failed`` or ``cancelled``.
        final_text: the main agent's answer (None if it gave none).
        error: one line saying why, when status is not ``done``.
        error_kind: the LLMError kind when a model error ended the round.
        background: ids of sub-agents still running when the round ended (their
            completion will start a round by itself).
        stats: conversation stats (turns, tool calls, token usage, seed counters).
        transcript_path: the conversation's JSON file.
    """

    conversation_id: str
    round: int
    status: str
    final_text: str | None
    error: str | None = None
    error_kind: str | None = None
    background: list[int] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    transcript_path: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return {
            "conversation_id": self.conversation_id,
            "round": self.round,
            "status": self.status,
            "final_text": self.final_text,
            "error": self.error,
            "error_kind": self.error_kind,
            "background": list(self.background),
            "stats": self.stats,
            "transcript_path": str(self.transcript_path) if self.transcript_path else None,
        }


@dataclass
class Pending:
    """A user message and the future of its round's result."""

    text: str
    future: Future[RoundResult] = field(default_factory=Future)


class Inbox:
    """FIFO of user messages, safe from any thread.

    Args:
        on_put: called (without the inbox lock held) after a message is added, to
            wake whoever starts rounds.
    """

    def __init__(self, on_put: Callable[[], None]) -> None:
        self._lock = threading.Lock()
        self._items: deque[Pending] = deque()
        self._on_put = on_put
        self._closed = False

    def put(self, text: str) -> tuple[Pending, int]:
        """Queue ``text``; returns the pending message and its position (1 = next).

        Raises:
            Cancelled: the inbox is closed (the conversation was closed).
        """
        pending = Pending(text)
        with self._lock:
            if self._closed:
                raise Cancelled("the conversation is closed; the message was not sent")
            self._items.append(pending)
            position = len(self._items)
        self._on_put()
        return pending, position

    def take_all(self) -> list[Pending]:
        """Remove and return every queued message, oldest first."""
        with self._lock:
            items = list(self._items)
            self._items.clear()
            return items

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def close(self, reason: str) -> None:
        """Refuse new messages and fail the futures of those never taken (their text
        is in the exception, so a caller can show what was not sent)."""
        with self._lock:
            self._closed = True
            items = list(self._items)
            self._items.clear()
        for pending in items:
            if not pending.future.done():
                pending.future.set_exception(Cancelled(f"{reason}: {pending.text[:200]!r}"))
