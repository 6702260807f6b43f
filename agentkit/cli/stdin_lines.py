"""Standard input as batches of lines that arrived together (``agentkit chat --jsonl``).

One job: :func:`read_batches` reads standard input and queues each batch of non-blank
lines that arrived together (one write: ``printf 'a\\nb\\n' |``, a pasted block), so
the chat can answer them one by one instead of merging them into a round at work. A
line longer than one read is still being written when the read returns: the lines
read with it wait for its rest, so the pipe's size never splits a batch.
"""

from __future__ import annotations

import os
import queue
import select
import sys

from agentkit.cli.commands import message_text

__all__ = ["READ_BYTES", "REST_WAIT", "read_batches"]

READ_BYTES = 65536
"""Bytes one read of standard input takes (a pipe's usual capacity)."""
REST_WAIT = 1.0
"""Seconds to wait for the rest of a line cut by a read before acting on the lines (a
writer descheduled on a loaded machine pauses between its writes)."""


def read_batches(batches: queue.Queue[list[str] | None]) -> None:
    """Read standard input to its end, putting each batch of lines read together on
    ``batches`` (a list of str, blank lines left out), then None. Read errors end it
    as the end of input does. Runs on a daemon thread: it uses ``os.read``, because a
    thread blocked inside a buffered reader holds its lock, and the interpreter aborts
    at exit when it finds that lock taken."""
    pending = b""
    lines: list[bytes] = []
    try:
        fd = sys.stdin.fileno()
        while chunk := os.read(fd, READ_BYTES):
            pending += chunk
            *complete, pending = pending.split(b"\n")
            lines += complete
            if (pending or len(chunk) == READ_BYTES) and _more_soon(fd):
                continue  # the rest of a cut line, and what comes with it: one batch
            _put(batches, lines)
            lines = []
        _put(batches, [*lines, pending])
    except (OSError, ValueError):
        pass
    finally:
        batches.put(None)


def _more_soon(fd: int) -> bool:
    """True when ``fd`` has more to read (data or its end) within :data:`REST_WAIT`."""
    try:
        return bool(select.select([fd], [], [], REST_WAIT)[0])
    except (OSError, ValueError):
        return False


def _put(batches: queue.Queue[list[str] | None], raws: list[bytes]) -> None:
    """Queue the non-blank lines of ``raws`` as one batch (UTF-8, bad bytes replaced;
    a command line stripped, a message kept as typed)."""
    batch = []
    for raw in raws:
        line = raw.decode("utf-8", errors="replace").rstrip("\r")
        if line.strip():
            command = message_text(line.lstrip()) is None  # "//..." is a message: kept
            batch.append(line.strip() if command else line)
    if batch:
        batches.put(batch)
