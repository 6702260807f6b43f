"""Whether the reader of this process's output has gone, seen without writing.

One job: :func:`output_gone`, and :func:`terminal` for a descriptor that may have hung
up. ``agentkit run … | head -1``, an editor that stops reading ``agentkit acp``'s
answers and a closed terminal window show it only at the next write, which may not
come for minutes (a long command writes nothing). ``poll`` on the write end reports
it when asked for no event at all: an error (``POLLERR``) on a pipe every reader has
closed, a hang-up on a socket, both on a terminal that hung up (Linux and the BSDs).
"""

from __future__ import annotations

import errno
import os
import select
import stat

__all__ = ["output_gone", "terminal"]


def output_gone(fd: int) -> OSError | None:
    """The error a write to ``fd`` would now fail with, when its reader has gone.

    Args:
        fd: a file descriptor this process writes to (1 for standard output).

    Returns:
        ``BrokenPipeError`` (EPIPE) for a pipe or socket whose reader has gone,
        ``OSError`` (EIO) for a terminal that hung up, None otherwise (a file,
        ``/dev/null``, a closed descriptor, or no ``select.poll``: Windows). Never raises.
    """
    try:
        kind = os.fstat(fd).st_mode
        piped = stat.S_ISFIFO(kind) or stat.S_ISSOCK(kind)
        if not (piped or stat.S_ISCHR(kind)):
            return None
        poller = select.poll()
        poller.register(fd, 0)  # no events asked: only POLLERR, POLLHUP, POLLNVAL come
        if not poller.poll(0):
            return None
    except (OSError, ValueError, AttributeError):
        return None
    if piped:
        return BrokenPipeError(errno.EPIPE, "the reader of the output has gone")
    return OSError(errno.EIO, "the terminal hung up")


def terminal(fd: int) -> bool:
    """Whether ``fd`` is a terminal, even one that hung up (its ``isatty`` then fails):
    a character device. Never raises."""
    try:
        return os.isatty(fd) or stat.S_ISCHR(os.fstat(fd).st_mode)
    except OSError:
        return False
