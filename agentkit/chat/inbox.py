"""User messages waiting for the main agent, each with the answer it will get.

One job: a thread-safe FIFO of :class:`Pending` messages. A message is *taken*
when it enters the conversation (at the start of a round, or at a turn boundary
of a running round: docs/architecture.md §9), and its future is resolved with the
:class:`RoundResult` of the round it was taken into. Nothing is ever dropped
silently: closing the inbox fails the futures of messages never taken.

Durability: a message is on disk from the moment it is accepted. The inbox calls
its ``persist`` hook after each put (agentkit.chat.store.ConversationFile saves the
conversation's ``queued`` list and waits for the write), and :meth:`Inbox.unsaved`
tells each save which messages are not yet in the saved ``messages``: those never
taken, and those taken whose message (the very dict :attr:`Pending.message`) is not
in the saved list yet. Closing keeps the untaken ones for that list: the next
opening of the conversation delivers them.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkit.errors import Cancelled

if TYPE_CHECKING:
    from agentkit.engine_roles import RunStatus
    from agentkit.errors import ErrorKind

__all__ = ["Inbox", "Pending", "RoundResult"]

log = logging.getLogger("agentkit")

CLOSED = (
    "the conversation was closed before this message was answered "
    "(it is saved, and delivered when the conversation is opened again)"
)
"""Why the futures of messages never taken fail when the inbox closes."""


@dataclass
class RoundResult:
    """How one round of the main agent ended (what ``Session.send`` returns).

    Attributes:
        conversation_id: the conversation.
        round: the round's number in the conversation (from 1; a reopened
            conversation numbers on from its last round).
        status: a :data:`~agentkit.engine.RunStatus`: ``done``, ``failed`` or
            ``cancelled``.
        final_text: the main agent's answer (None if it gave none).
        error: one line saying why, when status is not ``done``.
        error_kind: an :data:`~agentkit.errors.ErrorKind` when a model error (its
            LLMError kind) or a spent budget (``budget_exhausted``) ended the round.
        background: ids of sub-agents still running when the round ended (their
            completion will start a round by itself).
        stats: conversation stats (turns, tool calls, token usage, seed counters,
            cost_usd) and ``usage_total`` (agentkit.conversation.usage_total: the main
            agent and every sub-agent summed).
        transcript_path: the conversation's JSON file (None when it is kept in memory).
    """

    conversation_id: str
    round: int
    status: RunStatus
    final_text: str | None
    error: str | None = None
    error_kind: ErrorKind | None = None
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
    """A user message and the future of its round's result. ``message`` is the user
    message it becomes in the conversation: that very dict is appended (the inbox
    recognises it there by identity, see :meth:`Inbox.unsaved`); ``context``: what its
    UserPromptSubmit hooks add after it (a system message), or None."""

    text: str
    future: Future[RoundResult] = field(default_factory=Future)
    context: str | None = None
    message: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.message = {"role": "user", "content": self.text}


class Inbox:
    """FIFO of user messages, safe from any thread.

    Args:
        on_put: called (without the inbox lock held) after a message is added, to
            wake whoever starts rounds.

    Attributes:
        persist: called (without the lock) after each put, before ``put`` returns:
            makes the message durable (it may raise OSError; the message then stays
            queued in memory and the failure is logged). None: not saved.
    """

    def __init__(self, on_put: Callable[[], None]) -> None:
        self._lock = threading.Lock()
        self._items: deque[Pending] = deque()
        self._taken: list[Pending] = []  # taken, not yet seen in a saved conversation
        self._on_put = on_put
        self._closed = False
        self.persist: Callable[[], None] | None = None

    def put(self, text: str, context: str | None = None) -> tuple[Pending, int]:
        """Queue ``text`` (with its hooks' ``context``); returns the pending message and
        its position (1 = next). Returns once the message is saved (``persist``).

        Raises:
            Cancelled: the inbox is closed (the conversation was closed).
        """
        pending = Pending(text, context=context)
        with self._lock:
            if self._closed:
                raise Cancelled("the conversation is closed; the message was not sent")
            self._items.append(pending)
            position = len(self._items)
        persist = self.persist
        if persist is not None:
            try:
                persist()
            except OSError as exc:
                log.info("a queued message could not be saved (it stays queued): %s", exc)
        self._on_put()
        return pending, position

    def restore(self, texts: list[str]) -> None:
        """Queue ``texts`` (messages saved by an earlier session, never taken) ahead
        of any new ones, without saving them again; wakes the driver when any."""
        with self._lock:
            self._items.extendleft(Pending(t) for t in reversed(texts))
        if texts:
            self._on_put()

    def take_all(self) -> list[Pending]:
        """Remove and return every queued message, oldest first (none once closed:
        they are kept for the next opening)."""
        with self._lock:
            if self._closed:
                return []
            items = list(self._items)
            self._items.clear()
            self._taken += items
            return items

    def unsaved(self, messages: list[dict[str, Any]]) -> list[str]:
        """The texts a save of ``messages`` (a snapshot of the conversation's list)
        must keep as queued, oldest first: messages taken whose dict is not in
        ``messages`` yet (a taken message whose round has ended is in the
        conversation, compacted or not), then those never taken."""
        with self._lock:
            self._taken = [
                p
                for p in self._taken
                if not p.future.done() and not any(m is p.message for m in reversed(messages))
            ]
            return [p.text for p in self._taken] + [p.text for p in self._items]

    def texts(self) -> list[str]:
        """The texts of the messages not taken yet, oldest first."""
        with self._lock:
            return [p.text for p in self._items]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def close(self, reason: str = CLOSED) -> None:
        """Refuse new messages and fail the futures of those never taken (their text
        is in the exception, so a caller can show what was not sent). They stay
        listed by :meth:`unsaved`: saved as queued, for the next opening."""
        with self._lock:
            self._closed = True
            items = list(self._items)
        for pending in items:
            if not pending.future.done():
                pending.future.set_exception(Cancelled(f"{reason}: {pending.text[:200]!r}"))
