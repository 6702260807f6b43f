"""The typed, bounded channel that carries the contract's messages over one link.

One job: move picklable messages between the parent and a worker over any
:class:`Endpoint` (a multiprocessing ``Connection`` is one) so that a send never blocks
its caller for long (a sender thread writes, the caller waits a bounded time) and a
gone peer is a clear ``False`` or :class:`ChannelClosed`. The messages themselves are
agentkit.subagent.contract's, which re-exports these names.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from agentkit.errors import AgentkitError

__all__ = ["SEND_TIMEOUT", "Channel", "ChannelClosed", "Endpoint"]

SendT = TypeVar("SendT")
ReceiveT = TypeVar("ReceiveT")


class Endpoint(Protocol):
    """One end of a duplex link that carries picklable objects
    (``multiprocessing.connection.Connection`` is one)."""

    def send(self, obj: Any) -> None: ...

    def recv(self) -> Any: ...

    def poll(self, timeout: float | None = ...) -> bool: ...

    def close(self) -> None: ...


class ChannelClosed(AgentkitError):
    """The other end is gone (its process died or closed the link)."""


SEND_TIMEOUT = 10.0
"""Seconds a send may wait for the endpoint before it counts as failed. A reader that
is alive drains a pipe in microseconds, so only a stopped or stuck one (its buffer
full) reaches this."""

_SENDER_IDLE = 2.0  # seconds an idle sender thread waits for more before it ends


@dataclass
class _Outgoing:
    """One message on its way: the sender thread's progress with it."""

    message: Any
    done: threading.Event = field(default_factory=threading.Event)
    started: bool = False
    dropped: bool = False
    sent: bool = False
    error: BaseException | None = None


class Channel(Generic[SendT, ReceiveT]):
    """Typed messages over an Endpoint; sends are thread-safe and bounded, one reader
    at a time.

    The parent holds ``Channel[ParentMessage, WorkerMessage]``, the worker
    ``Channel[WorkerMessage, ParentMessage]``.

    A send never blocks its caller for longer than ``send_timeout`` seconds: the
    endpoint is written by a sender thread of the channel (started on demand, ended
    when idle), in the order the sends were made, and the caller waits for its own
    message at most that long. A caller may hold locks others need (a signal's
    cancel, a kill): a reader that stopped reading must not stop it.
    """

    def __init__(self, endpoint: Endpoint, send_timeout: float = SEND_TIMEOUT) -> None:
        self.endpoint = endpoint
        self.send_timeout = send_timeout
        self._lock = threading.Lock()  # guards the fields below and the queue's ends
        self._outbox: queue.Queue[_Outgoing] = queue.Queue()
        self._sender: threading.Thread | None = None
        self._stalled = False  # a send past its time is still blocked in the endpoint
        self._closed = False

    def send(self, message: SendT, timeout: float | None = None) -> bool:
        """Send one message; returns False when the other end is gone or the message
        could not be written within ``timeout`` seconds (default ``send_timeout``).

        While a send that ran out of time is still blocked in the endpoint, later
        sends return False at once. A message that ran out of time before it was
        begun is dropped; one already being written may still arrive (a pipe cannot
        take bytes back). Errors other than a gone peer (a message that cannot be
        pickled) are raised here, as the endpoint raised them.
        """
        item = _Outgoing(message)
        with self._lock:
            if self._closed or self._stalled:
                return False
            self._outbox.put(item)
            if self._sender is None:
                self._sender = threading.Thread(
                    target=self._send_queued, name="agentkit-channel-send", daemon=True
                )
                self._sender.start()
        if not item.done.wait(self.send_timeout if timeout is None else timeout):
            with self._lock:
                if item.started and not item.done.is_set():
                    self._stalled = True
                else:
                    item.dropped = True
            return item.sent
        if item.error is not None:
            raise item.error
        return item.sent

    def _send_queued(self) -> None:
        """The sender thread: write queued messages in order; end when idle."""
        while True:
            try:
                item = self._outbox.get(timeout=_SENDER_IDLE)
            except queue.Empty:
                with self._lock:
                    if self._outbox.empty():
                        self._sender = None
                        return
                continue
            with self._lock:
                if item.dropped:
                    continue
                item.started = True
            try:
                self.endpoint.send(item.message)
                item.sent = True
            except (OSError, ValueError):
                pass  # the other end is gone: False
            except BaseException as exc:  # raised in the caller's thread
                # A close() from another thread in the middle of the write leaves
                # multiprocessing's handle None (a TypeError in its write): this end
                # was closed, which is a send that returns False, not an error.
                if not (isinstance(exc, TypeError) and self._closed):
                    item.error = exc
            with self._lock:
                self._stalled = False
            item.done.set()

    def receive(self, timeout: float | None = None) -> ReceiveT | None:
        """Return the next message, or None if none came within ``timeout`` seconds
        (None: wait for ever). Raises ChannelClosed when the other end is gone."""
        try:
            if timeout is not None and not self.endpoint.poll(timeout):
                return None
            message: ReceiveT = self.endpoint.recv()
        except (EOFError, OSError) as exc:
            raise ChannelClosed(str(exc)) from exc
        return message

    def readable(self, timeout: float | None = 0.0) -> bool:
        """Return True once a message, or the other end's close, waits to be received
        (``timeout`` seconds at most; None: for ever), else False. A closed end is
        readable too: the next :meth:`receive` raises ChannelClosed."""
        try:
            return bool(self.endpoint.poll(timeout))
        except (EOFError, OSError, ValueError):
            return True

    def close(self) -> None:
        """Close this end (idempotent; errors ignored); later sends return False."""
        with self._lock:
            self._closed = True
        try:
            self.endpoint.close()
        except OSError:
            pass
