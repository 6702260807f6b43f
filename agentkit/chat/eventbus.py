"""One ordered event stream per conversation, for callbacks, threads and asyncio.

One job: number each event of a conversation (``seq``, 1, 2, 3...), keep the last
few hundred for late or reconnecting readers (an SSE client's ``Last-Event-ID``),
and hand every event, in order and one at a time, to each subscriber: callbacks
(called on the publishing thread under a lock, so a UI callback need not be
thread-safe), blocking iterators (``for e in bus.iter()``) and asyncio iterators
(``async for e in bus.aiter()``), each fed through its own queue so a slow reader
never blocks the conversation.

Numbering goes on across the sessions of one conversation (:func:`numbering_start`):
a reader that reconnects to a reopened conversation with an id from an earlier
session is either exactly where the new session starts, or is told it missed
events (agentkit.webchat.stream sends ``reset``): numbers never restart under it.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass

from agentkit.events import Event

log = logging.getLogger("agentkit")

__all__ = ["EventBus", "Numbered", "numbering_start"]

_CLOSED = None  # what iterators' queues get when the bus closes


def numbering_start(last_event_seq: int | None) -> int:
    """The seq after which a reopened conversation's events are numbered.

    Args:
        last_event_seq: the last seq its previous session sent, when that session
            closed cleanly and saved it (agentkit.conversation.Conversation); None
            when it is unknown (the process was killed, or the file predates it).

    Returns ``last_event_seq``, or when it is unknown the current time in
    microseconds since 1970 (about 1.8e15: exact in JavaScript, at most 16
    digits): above any number an earlier session could have sent, since none sends
    an event per microsecond of its life.
    """
    if last_event_seq is not None:
        return last_event_seq
    return time.time_ns() // 1000


@dataclass(frozen=True)
class Numbered:
    """An event with its position in the conversation's stream (``seq`` from 1)."""

    seq: int
    event: Event


class EventBus:
    """Ordered fan-out of one conversation's events.

    Args:
        history: how many recent events to keep for :meth:`since` (replay after a
            dropped connection). Older ones are gone; :meth:`since` says so.
        start: the first event gets ``start + 1`` (see :func:`numbering_start`).
    """

    def __init__(self, history: int = 1000, start: int = 0) -> None:
        self._lock = threading.RLock()
        self._seq = start
        self._history: deque[Numbered] = deque(maxlen=history)
        self._callbacks: list[Callable[[Event], None]] = []
        self._queues: list[Callable[[Numbered | None], None]] = []
        self._closed = False

    @property
    def last_seq(self) -> int:
        """The ``seq`` of the newest event (0 before any)."""
        return self._seq

    def publish(self, event: Event) -> Numbered:
        """Number ``event`` and deliver it to every subscriber; returns it numbered.

        Callback errors are logged, never raised: a UI must not break the run.
        """
        with self._lock:
            self._seq += 1
            item = Numbered(self._seq, event)
            self._history.append(item)
            for callback in list(self._callbacks):
                try:
                    callback(event)
                except KeyboardInterrupt:
                    raise
                except BaseException:  # sys.exit() in a callback too: a UI must not end the run
                    log.warning("event callback failed on %s", event.type, exc_info=True)
            for put in list(self._queues):
                put(item)
            return item

    def subscribe(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for every later event; returns the unsubscribe function."""
        with self._lock:
            self._callbacks.append(callback)

        def unsubscribe() -> None:
            with self._lock, _suppress_value_error():
                self._callbacks.remove(callback)

        return unsubscribe

    def since(self, seq: int) -> tuple[list[Numbered], bool]:
        """Return the kept events after ``seq`` and whether nothing in between was lost
        (False when events after ``seq`` were already dropped from the history)."""
        with self._lock:
            items = [n for n in self._history if n.seq > seq]
            complete = not items or items[0].seq == seq + 1 or seq >= self._seq
            if not items and seq < self._seq:
                complete = False
            return items, complete

    def iter(self, after: int | None = None, timeout: float | None = None) -> Iterator[Numbered]:
        """Iterate over events as they come (blocking), from ``after`` (a seq; None:
        only events published from this call on). Subscribed at once, so nothing
        published after the call is missed. Ends when the bus closes, or after
        ``timeout`` seconds with no event."""
        box: queue.Queue[Numbered | None] = queue.Queue()
        self._attach(box.put, after)

        def generate() -> Iterator[Numbered]:
            try:
                while True:
                    try:
                        got = box.get(timeout=timeout)
                    except queue.Empty:
                        return
                    if not isinstance(got, Numbered):  # the closing mark
                        return
                    yield got
            finally:
                self._detach(box.put)

        return generate()

    def aiter(self, after: int | None = None) -> AsyncIterator[Numbered]:
        """``async for`` form of :meth:`iter` (no timeout), fed thread-safely into the
        running event loop; must be called inside it. Subscribed at once."""
        loop = asyncio.get_running_loop()
        box: asyncio.Queue[Numbered | None] = asyncio.Queue()

        def put(item: Numbered | None) -> None:
            loop.call_soon_threadsafe(box.put_nowait, item)

        self._attach(put, after)

        async def generate() -> AsyncIterator[Numbered]:
            try:
                while True:
                    got = await box.get()
                    if not isinstance(got, Numbered):  # the closing mark
                        return
                    yield got
            finally:
                self._detach(put)

        return generate()

    @property
    def subscribers(self) -> int:
        """How many callbacks, iterators and attached readers follow the bus."""
        with self._lock:
            return len(self._callbacks) + len(self._queues)

    def attach(self, put: Callable[[Numbered | None], None]) -> int:
        """Call ``put(item)`` with every event published from now on, on the
        publishing thread under the bus lock (so it must only hand the item on),
        then ``put(None)`` once the bus closes (at once if it is closed). Returns
        the seq of the last event before the attachment: what ``put`` gets starts
        right after it. :meth:`detach` stops it."""
        with self._lock:
            self._attach(put, None)
            return self._seq

    def detach(self, put: Callable[[Numbered | None], None]) -> None:
        """Stop calling ``put`` (see :meth:`attach`)."""
        self._detach(put)

    def _attach(self, put: Callable[[Numbered | None], None], after: int | None) -> None:
        with self._lock:
            if after is not None:
                for item in self.since(after)[0]:
                    put(item)
            if self._closed:
                put(_CLOSED)
            else:
                self._queues.append(put)

    def _detach(self, put: Callable[[Numbered | None], None]) -> None:
        with self._lock, _suppress_value_error():
            self._queues.remove(put)

    def close(self) -> int:
        """End every iterator (after the events already queued); returns the seq of
        the last event they got. Callbacks stay. Events published later reach
        callbacks only."""
        with self._lock:
            self._closed = True
            for put in list(self._queues):
                put(_CLOSED)
            self._queues.clear()
            return self._seq


class _suppress_value_error:
    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: object, exc: object, tb: object) -> bool:
        return exc_type is ValueError
