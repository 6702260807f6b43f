"""The worker's side of the control plane: steering messages, ask_parent, the
conversation's wrap-up (docs/control-plane.md).

One job: what the parent's control messages do inside a sub-agent process.

- :class:`Steering`: a Steer is taken (Receipt accepted) unless the sub-agent is
  finishing (finish_task accepted, or its run is over: Receipt refused,
  ``finishing``), the text is over ``CONTROL_TEXT_MAX`` characters (``too_long``) or
  the unread queue is full (``STEER_QUEUE_MAX`` messages or ``STEER_QUEUE_CHARS``
  characters together: ``queue_full``; the parent checks the same first); taken messages reach the model before its next request, each as one
  user message (``subagent/steer.txt``, the text verbatim inside), and the parent hears
  which (SteerRead). Those still queued when the run ends are reported unread in the
  Result: nothing is dropped silently, nothing delivered twice.
- :class:`AskParent` and :func:`make_ask_parent_tool`: ask_parent sends a Question and
  waits for the Answer, at most ``ask_parent_max_wait_seconds`` (the parent pauses the
  sub-agent's timeout clock meanwhile); then QuestionClosed, and an answer arriving
  after is refused (Receipt ``not_waiting``). One question at a time.
- :class:`WorkerControl`: both, and BudgetWrapUp, dispatched from the link's reader
  thread (agentkit.subagent.worker.parent_link).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from agentkit import prompts
from agentkit.subagent import inputs
from agentkit.subagent.contract import (
    Answer,
    BudgetWrapUp,
    ParentMessage,
    Question,
    QuestionClosed,
    Receipt,
    Steer,
    SteerRead,
    WorkerMessage,
)
from agentkit.tools.base import Tool, ToolContext

if TYPE_CHECKING:
    from agentkit.settings import Settings

__all__ = ["ASK_PARENT", "AskParent", "Steering", "WorkerControl", "make_ask_parent_tool"]

ASK_PARENT = "ask_parent"

Send = Callable[[WorkerMessage], None]


class Steering:
    """The queue of steering messages (see the module docstring); thread-safe.

    Args:
        send: sends a message to the parent (the link's send).
    """

    def __init__(self, send: Send) -> None:
        self._send = send
        self._lock = threading.Lock()
        self._queued: list[Steer] = []
        self._closed = False

    def offer(self, message: Steer) -> None:
        """Take ``message`` for the next request, or refuse it (finishing, too long,
        the queue full: see the module docstring); the parent gets the Receipt either
        way."""
        with self._lock:
            reason = self._refusal(message)
            if not reason:
                self._queued.append(message)
        self._send(Receipt(message.ref, not reason, reason))

    def _refusal(self, message: Steer) -> str:
        """Why ``message`` cannot be queued ("" when it can); the caller holds the lock."""
        if self._closed:
            return "finishing"
        limit = inputs.steer_limit([m.text for m in self._queued], message.text)
        if limit is None:
            return ""
        return "too_long" if limit[0] == "control_text_too_long" else "queue_full"

    def close(self) -> None:
        """No more messages are taken (finish_task was accepted, or the run ended)."""
        with self._lock:
            self._closed = True

    def take(self, language: str) -> list[dict[str, Any]]:
        """The queued messages as user messages, in the order sent; the parent hears
        they are read (SteerRead)."""
        with self._lock:
            taken, self._queued = self._queued, []
        if not taken:
            return []
        self._send(SteerRead(tuple(m.ref for m in taken)))
        return [
            {
                "role": "user",
                "content": prompts.render(language, "subagent/steer.txt", message=m.text),
            }
            for m in taken
        ]

    def unread(self) -> tuple[int, ...]:
        """Close the queue and return the refs of the messages never read."""
        with self._lock:
            self._closed = True
            return tuple(m.ref for m in self._queued)


class AskParent:
    """ask_parent's waits (see the module docstring); thread-safe.

    Args:
        send: sends a message to the parent.
        max_wait: seconds to wait for an answer.
    """

    def __init__(self, send: Send, max_wait: float) -> None:
        self._send = send
        self.max_wait = max_wait
        self._lock = threading.Lock()
        self._one_at_a_time = threading.Lock()
        self._waiting: dict[int, queue.Queue[str]] = {}
        self._next = 0

    def ask(self, text: str) -> str | None:
        """Send the question and return the answer, or None when none came in time."""
        with self._one_at_a_time:
            with self._lock:
                self._next += 1
                request = self._next
                box: queue.Queue[str] = queue.Queue(maxsize=1)
                self._waiting[request] = box
            self._send(Question(request, text))
            try:
                return box.get(timeout=self.max_wait)
            except queue.Empty:
                with self._lock:
                    if self._waiting.pop(request, None) is None:
                        return box.get_nowait()  # answered as the wait ended: taken
                self._send(QuestionClosed(request, "timed_out"))
                return None

    def answer(self, message: Answer) -> None:
        """Give ``message`` to the question waiting for it, or refuse it."""
        with self._lock:
            box = self._waiting.pop(message.request, None)
            if box is not None:
                box.put(message.text)
        self._send(Receipt(message.ref, box is not None, "" if box is not None else "not_waiting"))


class WorkerControl:
    """The parent's control messages in one worker (see the module docstring).

    Args:
        send: sends a message to the parent.
        settings: the worker's Settings (ask_parent_max_wait_seconds).
    """

    def __init__(self, send: Send, settings: Settings) -> None:
        self.steering = Steering(send)
        self.asker = AskParent(send, settings.ask_parent_max_wait_seconds)
        self.session_wrapup = threading.Event()

    def receive(self, message: ParentMessage) -> None:
        """Act on one control message (called on the link's reader thread)."""
        if isinstance(message, Steer):
            self.steering.offer(message)
        elif isinstance(message, Answer):
            self.asker.answer(message)
        elif isinstance(message, BudgetWrapUp):
            self.session_wrapup.set()


class AskParentParams(BaseModel):
    """Parameters of ask_parent (docs/control-plane.md §1)."""

    question: inputs.ControlText


def make_ask_parent_tool(asker: AskParent, language: str) -> Tool:
    """Return ask_parent: blocks until the parent answers (the answer is the result)
    or ``ask_parent_max_wait_seconds`` pass (the result says so; the sub-agent goes
    on). Results are JSON, ``success`` first."""

    def ask(p: AskParentParams, ctx: ToolContext) -> dict[str, Any]:
        answer = asker.ask(p.question)
        if answer is None:
            seconds = f"{asker.max_wait:g}"
            return {
                "success": False,
                "timed_out": True,
                "error": prompts.phrase(language, "ask_timed_out", seconds=seconds),
            }
        return {"success": True, "answer": answer}

    return Tool(
        ASK_PARENT,
        AskParentParams,
        ask,
        on_invalid_arguments=inputs.refusal_hook(ASK_PARENT),
    )
