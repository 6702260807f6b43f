"""The worker's end of the link to its parent: sends, the reader thread, claims.

One job: everything that arrives from or leaves for the parent inside a sub-agent
process (agentkit.subagent.contract, docs/architecture.md §4). The parent's messages
(ClaimAnswer, ApprovalAnswer, WrapUp, Terminate) are read on one thread and acted on in
one place, :meth:`ParentLink.dispatch`; the control plane's (Steer, Answer, BudgetWrapUp)
go to its ``control`` handler (agentkit.subagent.worker.steering.WorkerControl). A closed
link, a failed send or Terminate calls the
worker's ``on_gone`` (agentkit.subagent.worker.Worker.parent_gone), which records the
end, kills every process carrying the worker's mark and exits.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from agentkit.errors import ToolError
from agentkit.subagent.contract import (
    ApprovalAnswer,
    ApprovalRequest,
    Channel,
    ChannelClosed,
    ClaimAnswer,
    ClaimRequest,
    Endpoint,
    ParentMessage,
    Terminate,
    WorkerMessage,
    WrapUp,
)

if TYPE_CHECKING:
    from agentkit.tools.gate import AskAnswer, AskRequest

CLAIM_TIMEOUT = 30.0
"""Seconds a write claim waits for the parent's answer before the write is refused."""


class ParentLink:
    """The worker's side of the contract: thread-safe sends, one reader thread for
    claim answers, the wrap-up request and Terminate.

    Args:
        endpoint: the worker's end of the link.
        on_gone: called as ``on_gone(by_parent)`` when the parent is gone (the link
            closed, a send failed: ``False``) or ends this worker on purpose
            (Terminate: ``True``); it does not return (the worker exits).
    """

    def __init__(self, endpoint: Endpoint, on_gone: Callable[[bool], object]) -> None:
        self.channel: Channel[WorkerMessage, ParentMessage] = Channel(endpoint)
        self.on_gone = on_gone
        self._id_lock = threading.Lock()
        self._replies: dict[int, queue.Queue[str | None]] = {}
        self._approvals: dict[int, queue.Queue[ApprovalAnswer]] = {}
        self._next_id = 0
        self.wrapup = threading.Event()
        self.wrapup_seconds = 0
        # The control plane's messages (Steer, Answer, BudgetWrapUp) go to ``control``
        # once the worker set it (set_control); those that come earlier wait here.
        self.control: Callable[[ParentMessage], None] | None = None
        self._early: list[ParentMessage] = []
        self._control_lock = threading.Lock()
        self.end_reason: str | None = None  # Terminate's reason: timeout, terminated
        self._busy = False  # the reader holds a message it has not acted on yet

    def send(self, message: WorkerMessage) -> None:
        """Send one message; a broken link means the parent is gone: exit."""
        if not self.channel.send(message):
            self.on_gone(False)

    def start_reader(self) -> None:
        """Start the thread that reads the parent's messages and watches for its death."""
        threading.Thread(target=self._read, name="agentkit-parent-watch", daemon=True).start()

    def _read(self) -> None:
        while True:
            # Busy from before the bytes leave the pipe to after their dispatch, so
            # pending() never misses a message in between (see settle).
            self.channel.readable(None)
            self._busy = True
            try:
                message = self.channel.receive()
            except ChannelClosed:
                self.on_gone(False)
                return
            if message is not None:
                self.dispatch(message)
            self._busy = False

    def pending(self) -> bool:
        """True while a message of the parent's is unread or being acted on."""
        # This order: a message read between the two checks was busy before it left.
        return self.channel.readable(0) or self._busy

    def settle(self, seconds: float) -> None:
        """Wait up to ``seconds`` for the parent's unread messages to be acted on.

        The parent sends Terminate (with its reason: timeout, terminated) before its
        SIGTERM; a signal handled first would otherwise end the worker as if the
        parent were gone, a different end from the one the parent records."""
        deadline = time.monotonic() + seconds
        while self.pending() and self.end_reason is None and time.monotonic() < deadline:
            time.sleep(0.01)

    def dispatch(self, message: ParentMessage) -> None:
        """Act on one message from the parent (the one place they are handled)."""
        if isinstance(message, ClaimAnswer):
            box = self._replies.get(message.request)
            if box is not None:
                box.put(message.error)
        elif isinstance(message, ApprovalAnswer):
            answers = self._approvals.get(message.request)
            if answers is not None:
                answers.put(message)
        elif isinstance(message, WrapUp):
            self.wrapup_seconds = int(message.seconds_left)
            self.wrapup.set()
        elif isinstance(message, Terminate):
            self.end_reason = str(message.reason)
            self.on_gone(True)
        else:
            with self._control_lock:
                handler = self.control
                if handler is None:  # the worker is still preparing: keep it
                    self._early.append(message)
                    return
            handler(message)

    def set_control(self, handler: Callable[[ParentMessage], None]) -> None:
        """Hand the control plane's messages to ``handler`` from now on, those that
        came before first (a message sent while the worker prepared is not lost)."""
        with self._control_lock:
            self.control = handler
            early, self._early = self._early, []
        for message in early:
            handler(message)

    def _request_id(self) -> int:
        with self._id_lock:
            self._next_id += 1
            return self._next_id

    def ask_approval(self, ask: AskRequest, cancel: threading.Event) -> AskAnswer:
        """Send the parent an ApprovalRequest and wait for its answer, as long as it takes
        (the parent times it out and pauses this agent's clock; a gone parent ends this
        process). ``cancel``: a set event gives up with a ``cancelled`` deny."""
        from agentkit.tools.gate import AskAnswer

        request = self._request_id()
        answers: queue.Queue[ApprovalAnswer] = queue.Queue(maxsize=1)
        self._approvals[request] = answers
        message = ApprovalRequest(
            request, ask.tool, ask.arguments, ask.reason, ask.key, ask.call_id
        )
        self.send(message)
        try:
            while True:
                try:
                    got = answers.get(timeout=0.5)
                    return AskAnswer(got.decision, got.note, got.by)
                except queue.Empty:
                    if cancel.is_set():
                        return AskAnswer("deny", "cancelled", "cancelled")
        finally:
            self._approvals.pop(request, None)

    def claim(self, path: Path) -> None:
        """Ask the parent for the right to write ``path``; raises ToolError on conflict."""
        request = self._request_id()
        box: queue.Queue[str | None] = queue.Queue(maxsize=1)
        self._replies[request] = box
        self.send(ClaimRequest(request=request, path=str(path)))
        try:
            error = box.get(timeout=CLAIM_TIMEOUT)
        except queue.Empty:
            error = "the parent process did not answer the write claim in time; try again"
        finally:
            self._replies.pop(request, None)
        if error:
            raise ToolError("write_conflict", error)
