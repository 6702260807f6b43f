"""The worker's end of the link to its parent: sends, the reader thread, claims, and
how the worker ends when the parent goes.

One job: everything that arrives from or leaves for the parent inside a sub-agent
process (agentkit.subagent.contract, docs/architecture.md §4). ClaimAnswer, WrapUp and
Terminate are read on one thread; a closed link or Terminate calls :func:`parent_gone`,
which runs the worker's callbacks, kills every process carrying its mark and exits.
"""

from __future__ import annotations

import os
import queue
import threading
from pathlib import Path
from typing import Any

from agentkit.errors import ToolError
from agentkit.subagent.contract import (
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

CLAIM_TIMEOUT = 30.0
"""Seconds a write claim waits for the parent's answer before the write is refused."""


class ParentLink:
    """The worker's side of the contract: thread-safe sends, one reader thread for
    claim answers, the wrap-up request and Terminate."""

    def __init__(self, endpoint: Endpoint, mark: str) -> None:
        self.channel: Channel[WorkerMessage, ParentMessage] = Channel(endpoint)
        self.mark = mark
        self._id_lock = threading.Lock()
        self._replies: dict[int, queue.Queue[str | None]] = {}
        self._next_id = 0
        self.wrapup = threading.Event()
        self.wrapup_seconds = 0

    def send(self, message: WorkerMessage) -> None:
        """Send one message; a broken link means the parent is gone: exit."""
        if not self.channel.send(message):
            parent_gone(self.mark)

    def start_reader(self) -> None:
        """Start the thread that reads the parent's messages and watches for its death."""
        threading.Thread(target=self._read, name="agentkit-parent-watch", daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                message = self.channel.receive()
            except ChannelClosed:
                parent_gone(self.mark)
                return
            if isinstance(message, ClaimAnswer):
                box = self._replies.get(message.request)
                if box is not None:
                    box.put(message.error)
            elif isinstance(message, WrapUp):
                self.wrapup_seconds = int(message.seconds_left)
                self.wrapup.set()
            elif isinstance(message, Terminate):
                parent_records.set()
                parent_gone(self.mark)
                return

    def claim(self, path: Path) -> None:
        """Ask the parent for the right to write ``path``; raises ToolError on conflict."""
        with self._id_lock:
            self._next_id += 1
            request = self._next_id
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


on_parent_gone: list[Any] = []
"""Callbacks run, in order, before the worker exits because its parent went."""
# Set once the final record is written: from then on the parent-gone and SIGTERM
# handlers only kill leftovers and exit; they never rewrite the record.
final_written = threading.Event()
# Set by Terminate: the parent ends this worker on purpose and records how (timeout,
# terminated, with the files left), so the handlers leave the record to it.
parent_records = threading.Event()


def parent_gone(mark: str) -> None:
    """Record the end, kill every process this worker started (by mark), exit at once."""
    from agentkit.proctree import kill_tree
    from agentkit.tools._command_launch import end_all

    try:
        end_all()  # commands being launched right now too
        for callback in on_parent_gone:
            callback()
        kill_tree(None, mark, grace=0.5)
    finally:
        os._exit(3)
