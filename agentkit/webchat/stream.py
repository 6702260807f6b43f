"""A conversation's live events as Server-Sent Events (docs/web-api.md "Event stream").

One job: turn a session's numbered event bus (agentkit.chat.eventbus) into an SSE
stream that a dropped connection can resume without losing or repeating events.

Each event goes out as ``id: <seq>``, ``event: <type>``, ``data: <event JSON with
"seq">``. A reader that reconnects sends the last id it saw (``Last-Event-ID``, as
EventSource does by itself, or ``?after=<seq>``); the stream replays the kept events
after it and then goes on live, with nothing between the replay and the live part
lost. When the bus no longer holds everything after that id (its history is
bounded; or the id is from an earlier session of a reopened conversation whose
numbering went on past it, or cannot be known after a kill: agentkit.chat.eventbus),
the stream sends one ``reset`` event (``data: {"last_seq": n}``) first: the page
should reload the conversation, then follow the live events.

Every reader of one conversation shares one :class:`agentkit.webchat.fanout.Fanout`
(events encoded once, written in batches, fan-out kept to a share of the event
loop). A reader's stream writes nothing after its connection is lost: it waits on
the loop between writes, so the server's transport learns of the loss first.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from typing import Any

from sse_starlette import EventSourceResponse
from starlette.requests import Request

from agentkit.chat import Session
from agentkit.webchat.fanout import Fanout, fanout_for

__all__ = ["PING_SECONDS", "UNKNOWN", "event_stream", "resume_point"]

PING_SECONDS = 15
"""A comment line this often keeps proxies and idle timers from closing the stream."""


MAX_WRITE_COST = 0.005
"""Seconds one write counts against the fan-out at most (a write that waited for a
slow client spent that time waiting, not working)."""

UNKNOWN = -1
"""The resume point of a reader whose id is not one this server could have sent."""
_SEQ = re.compile(r"[0-9]{1,18}")


def resume_point(request: Request) -> int | None:
    """The seq a reader already has: ``Last-Event-ID``, else ``?after=``; None: none given
    (a new reader, who gets only events from now on). An id that is not a plain
    number of at most 18 digits (text, a sign, ``²``, 5000 digits) is :data:`UNKNOWN`:
    the stream then starts with a ``reset``, as for an id from another numbering."""
    for value in (request.headers.get("last-event-id"), request.query_params.get("after")):
        if value is not None:
            value = value.strip()
            return int(value) if _SEQ.fullmatch(value) else UNKNOWN
    return None


async def _events(
    registry: dict[Any, Fanout], session: Session, after: int | None
) -> AsyncIterator[bytes]:
    # Joined on the stream's first step, on the loop: a response that never starts
    # leaves no reader behind.
    fanout = fanout_for(registry, session.bus, asyncio.get_running_loop())
    reader, head = fanout.join(after)
    try:
        if head:
            yield head
        while True:
            if reader.ready.is_set():
                await asyncio.sleep(0)  # let the loop see a lost connection before writing
            else:
                await reader.ready.wait()
            reader.ready.clear()
            chunk, end = fanout.take(reader)
            if chunk:
                began = time.perf_counter()
                yield chunk  # written when the response resumes us: its cost is fan-out's
                fanout.spent(min(time.perf_counter() - began, MAX_WRITE_COST))
            if end:
                return
    finally:
        fanout.leave(reader)


def event_stream(session: Session, request: Request) -> EventSourceResponse:
    """Return the SSE response following ``session``'s events from the request's resume
    point (see the module docstring). It ends when the session closes or the reader
    leaves (or falls too far behind: agentkit.webchat.fanout)."""
    registry = request.app.state.agentkit.fanouts
    return EventSourceResponse(
        _events(registry, session, resume_point(request)),
        ping=PING_SECONDS,
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
