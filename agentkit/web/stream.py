"""A conversation's live events as Server-Sent Events (docs/web-api.md "Event stream").

One job: turn a session's numbered event bus (agentkit.chat.eventbus) into an SSE
stream that a dropped connection can resume without losing or repeating events.

Each event goes out as ``id: <seq>``, ``event: <type>``, ``data: <event JSON with
"seq">``. A reader that reconnects sends the last id it saw (``Last-Event-ID``, as
EventSource does by itself, or ``?after=<seq>``); the stream replays the kept events
after it (``bus.since``) and then goes on live, with nothing between the replay and
the live part lost (the bus queues live events from the moment of the replay). When
the bus no longer holds everything after that id (its history is bounded, or the
conversation was closed and reopened, which restarts the numbering), the stream
sends one ``reset`` event (``data: {"last_seq": n}``) first: the page should reload
the conversation, then follow the live events.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request

from agentkit.chat import Session
from agentkit.web.text import clean_text

__all__ = ["PING_SECONDS", "UNKNOWN", "event_stream", "resume_point"]

PING_SECONDS = 15
"""A comment line this often keeps proxies and idle timers from closing the stream."""


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


def _frame(seq: int, event: dict[str, Any]) -> ServerSentEvent:
    return ServerSentEvent(
        data=clean_text(json.dumps({"seq": seq, **event}, ensure_ascii=False, default=str)),
        event=str(event.get("type", "message")),
        id=str(seq),
    )


async def _events(session: Session, after: int | None) -> AsyncIterator[ServerSentEvent]:
    bus = session.bus
    start = after
    if after is not None:
        complete = after >= 0 and after <= bus.last_seq and bus.since(after)[1]
        if not complete:
            # Events were lost (or the numbering restarted): tell the page, then go
            # on live from here.
            yield ServerSentEvent(
                data=json.dumps({"last_seq": bus.last_seq}), event="reset", id=str(bus.last_seq)
            )
            start = bus.last_seq
    if start is None:
        start = bus.last_seq
    # aiter(after=start) replays what is kept after ``start`` and queues live ones under
    # the bus lock, so no event falls between the replay and the live part.
    async for item in bus.aiter(after=start):
        yield _frame(item.seq, item.event.to_dict())


def event_stream(session: Session, request: Request) -> EventSourceResponse:
    """Return the SSE response following ``session``'s events from the request's resume
    point (see the module docstring). It ends when the session closes or the reader
    leaves."""
    return EventSourceResponse(
        _events(session, resume_point(request)),
        ping=PING_SECONDS,
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
