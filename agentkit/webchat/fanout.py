"""One conversation's events, encoded once and handed to every reader of its stream.

One job: a :class:`Fanout` per event bus, living on the server's event loop. It
attaches to the bus once, however many readers follow it; each event is encoded
into its SSE frame once; the bytes are appended to each reader's buffer, and each
reader's stream writes what has gathered in one piece.

Fairness: a fan-out round (encoding, then every reader's write) costs the event
loop time in proportion to the readers. The time it spends (measured in the round
and in each write, :meth:`Fanout.spent`) spaces the next round: it starts no sooner
than ``SPACING`` times that after the last one began (never later than
``MAX_DELAY`` seconds), so fan-out takes at most about a quarter of the loop and the
rest stays free for other requests. With a few readers a round costs well under a
millisecond and events go out at once; with hundreds they go out in batches, tens
of milliseconds apart: later, never fewer, never out of order.

A stream writes at most ``MAX_WRITE`` bytes at a time, so a client that stops
reading leaves little in the server's socket buffers. A reader with more than
``MAX_BEHIND`` bytes waiting for it (it stopped reading, or a burst outran it) is
cut: its buffer is dropped and its stream ends once it can write again;
EventSource then reconnects with the last id it got and resumes from the kept
history (or gets a ``reset``). Memory per reader stays bounded whatever it does.

Threads: the bus calls :meth:`Fanout.put` on the publishing thread (it only
appends and schedules); everything else runs on the loop's thread.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentkit.chat import EventBus, Numbered
from agentkit.webchat.text import clean_text

__all__ = [
    "MAX_BEHIND",
    "MAX_DELAY",
    "MAX_WRITE",
    "SPACING",
    "Fanout",
    "Reader",
    "fanout_for",
    "frame",
    "reset_frame",
]

SPACING = 3.0
"""A round starts at least this many times the previous round's cost after it."""
MAX_DELAY = 0.25
"""Seconds: the most a round waits for the previous one's spacing."""
MAX_BEHIND = 2 << 20
"""Bytes of frames that may wait for a reader before it is cut."""
MAX_WRITE = 256 << 10
"""Most bytes a stream writes in one piece (at least one frame)."""
MAX_BATCH = 200
"""Most events one step of the loop encodes and hands out; a larger burst goes on in
the next steps, so the loop serves other work in between."""
_LINE_BREAK = re.compile(r"[\r\n]")


def frame(item: Numbered) -> bytes:
    """The SSE frame of ``item``: ``id: <seq>``, ``event: <type>``, ``data: <event
    JSON with "seq">``, CRLF-separated as sse-starlette writes them (lone surrogates
    replaced, agentkit.webchat.text). The JSON is one line: ``json.dumps`` escapes
    every line break inside strings."""
    event = item.event.to_dict()
    data = json.dumps({"seq": item.seq, **event}, ensure_ascii=False, default=str)
    kind = _LINE_BREAK.sub(" ", str(event.get("type", "message")))
    text = f"id: {item.seq}\r\nevent: {kind}\r\ndata: {data}\r\n\r\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate somewhere (rare: checked only then)
        return clean_text(text).encode("utf-8")


def reset_frame(last_seq: int) -> bytes:
    """The ``reset`` frame: events were missed; live ones follow after ``last_seq``."""
    data = json.dumps({"last_seq": last_seq})
    return f"id: {last_seq}\r\nevent: reset\r\ndata: {data}\r\n\r\n".encode()


@dataclass(eq=False)
class Reader:
    """One stream's place in a :class:`Fanout`: ``floor``, the last seq it has (later
    frames only are added), its waiting ``chunks``, and whether it must end
    (``ended``: the bus closed, after what is buffered; ``cut``: too far behind)."""

    floor: int
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    ended: bool = False
    cut: bool = False

    def add(self, frames: list[tuple[int, bytes]]) -> None:
        """Append the frames after ``floor`` (cut past MAX_BEHIND) and wake the reader."""
        if self.cut:
            return
        fresh = frames if frames[0][0] > self.floor else [f for f in frames if f[0] > self.floor]
        for _, data in fresh:
            self.chunks.append(data)
            self.size += len(data)
        if self.size > MAX_BEHIND:
            self.chunks.clear()
            self.size = 0
            self.cut = True
        if fresh or self.cut:
            self.ready.set()


class Fanout:
    """The readers of one bus on one event loop (see the module docstring).

    Args:
        bus: the conversation's event bus (attached at once).
        loop: the running event loop (the server's).
        on_empty: called on the loop when the last reader leaves or the bus has
            closed and its readers have left (the owner forgets this fan-out).
    """

    def __init__(
        self, bus: EventBus, loop: asyncio.AbstractEventLoop, on_empty: Callable[[], None]
    ) -> None:
        self._bus = bus
        self._loop = loop
        self._on_empty = on_empty
        self._readers: set[Reader] = set()
        self._incoming: list[Numbered | None] = []
        self._lock = threading.Lock()  # guards _incoming and _scheduled (publisher side)
        self._scheduled = False
        self._closed = False
        self._round_start = 0.0
        self._spent = 0.0  # seconds the loop spent on fan-out since the last round began
        self.delivered = bus.attach(self.put)  # frames after it reach the readers

    # ------------------------------------------------------ publisher thread
    def put(self, item: Numbered | None) -> None:
        """Take an event (None: the bus closed) from the bus; schedules a round."""
        with self._lock:
            self._incoming.append(item)
            if self._scheduled:
                return
            self._scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._arm)
        except RuntimeError:  # the loop is closed: nobody reads any more
            self._bus.detach(self.put)

    # ------------------------------------------------------------ loop thread
    def _arm(self) -> None:
        spacing = min(MAX_DELAY, SPACING * self._spent)
        delay = self._round_start + spacing - self._loop.time()
        if delay > 0:
            self._loop.call_later(delay, self._drain)
        else:
            self._drain()

    def _drain(self) -> None:
        began = time.perf_counter()
        with self._lock:
            items, self._incoming = self._incoming[:MAX_BATCH], self._incoming[MAX_BATCH:]
            more = bool(self._incoming)
            self._scheduled = more
        if more:
            self._loop.call_soon(self._drain)  # the rest of a burst, after other work
        frames = [(item.seq, frame(item)) for item in items if item is not None]
        closed = any(item is None for item in items)
        self._round_start = self._loop.time()
        self._spent = 0.0
        if frames:
            self.delivered = frames[-1][0]
            for reader in self._readers:
                reader.add(frames)
        self._spent += time.perf_counter() - began
        if closed:
            self._closed = True
            self._bus.detach(self.put)
            for reader in self._readers:
                reader.ended = True
                reader.ready.set()
            if not self._readers:
                self._on_empty()

    def join(self, after: int | None) -> tuple[Reader, bytes]:
        """Add a reader that already has the events up to ``after`` (None: a new
        reader, who gets only what comes next; -1: an id this server could not have
        sent). Returns it and the bytes its stream starts with: the kept events
        after ``after``, or a ``reset`` frame when some of them are gone (or the id
        is unknown)."""
        last = self.delivered
        head = b""
        floor = last
        if after is not None:
            items, complete = self._bus.since(after)
            if after < 0 or after > self._bus.last_seq or not complete:
                head = reset_frame(last)
            else:
                head = b"".join(frame(n) for n in items if n.seq <= last)
                floor = max(last, after)
        reader = Reader(floor=floor, ended=self._closed)
        self._readers.add(reader)
        if self._closed:
            reader.ready.set()
        return reader, head

    def take(self, reader: Reader) -> tuple[bytes, bool]:
        """What ``reader`` has waiting, in one piece of at most MAX_WRITE bytes (at
        least one frame; the rest stays, with ``ready`` set), and whether its stream
        ends after it."""
        count = size = 0
        while count < len(reader.chunks) and (
            count == 0 or size + len(reader.chunks[count]) <= MAX_WRITE
        ):
            size += len(reader.chunks[count])
            count += 1
        chunk = b"".join(reader.chunks[:count])
        del reader.chunks[:count]
        reader.size -= size
        if reader.chunks:
            reader.ready.set()
        return chunk, reader.cut or (reader.ended and not reader.chunks)

    def spent(self, seconds: float) -> None:
        """Count ``seconds`` of the loop's time (a reader's write) against fan-out."""
        self._spent += seconds

    def leave(self, reader: Reader) -> None:
        """Remove ``reader``; the last one out detaches from the bus."""
        self._readers.discard(reader)
        if not self._readers:
            if not self._closed:
                self._bus.detach(self.put)
                self._closed = True
            self._on_empty()

    @property
    def readers(self) -> int:
        """How many readers follow the bus here."""
        return len(self._readers)

    @property
    def closed(self) -> bool:
        """True once detached from the bus: a new reader needs a new fan-out."""
        return self._closed


def fanout_for(
    registry: dict[Any, Fanout], bus: EventBus, loop: asyncio.AbstractEventLoop
) -> Fanout:
    """The live fan-out of ``bus`` in ``registry`` (one per bus), made when needed."""
    current = registry.get(bus)
    if current is not None and not current.closed:
        return current

    def forget() -> None:
        if registry.get(bus) is made:
            del registry[bus]

    made = Fanout(bus, loop, forget)
    registry[bus] = made
    return made
