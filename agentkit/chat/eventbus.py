"""One ordered event stream per conversation, for callbacks, threads and asyncio.

One job: number each event of a conversation (``seq``, 1, 2, 3...), keep the last
few hundred for late or reconnecting readers (an SSE client's ``Last-Event-ID``),
and hand every event, in order and one at a time, to each subscriber: callbacks
(called on the publishing thread under a lock, so a UI callback need not be
thread-safe), blocking iterators (``for e in bus.iter()``) and asyncio iterators
(``async for e in bus.aiter()``), each fed through its own queue so a slow reader
never blocks the conversation.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass

from agentkit.events import Event

log = logging.getLogger("agentkit")

__all__ = ["EventBus", "Numbered"]

_CLOSED = object()


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
    """

    def __init__(self, history: int = 1000) -> None:
        self._lock = threading.RLock()
        self._seq = 0
        self._history: deque[Numbered] = deque(maxlen=history)
        self._callbacks: list[Callable[[Event], None]] = []
        self._queues: list[Callable[[Numbered | object], None]] = []
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
        box: queue.Queue[Numbered | object] = queue.Queue()
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
        box: asyncio.Queue[Numbered | object] = asyncio.Queue()

        def put(item: Numbered | object) -> None:
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

    def _attach(self, put: Callable[[Numbered | object], None], after: int | None) -> None:
        with self._lock:
            if after is not None:
                for item in self.since(after)[0]:
                    put(item)
            self._queues.append(put)
            if self._closed:
                put(_CLOSED)

    def _detach(self, put: Callable[[Numbered | object], None]) -> None:
        with self._lock, _suppress_value_error():
            self._queues.remove(put)

    def close(self) -> None:
        """End every iterator (after the events already queued). Callbacks stay."""
        with self._lock:
            self._closed = True
            for put in list(self._queues):
                put(_CLOSED)


class _suppress_value_error:
    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: object, exc: object, tb: object) -> bool:
        return exc_type is ValueError
