"""One live session per conversation, across threads and processes.

One job: a conversation file written by two live sessions loses messages (the
last writer wins), so opening a conversation claims it. The claim is a small
file beside the conversation (``<id>.lock``: the owner's pid and process start
time) plus, within this process, a table of open sessions. A claim whose owner is
gone (its process ended, even by SIGKILL, or its session was closed) is taken
over; a live one is refused with a message naming the owner.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

from agentkit.errors import ConfigurationError

__all__ = ["claim_conversation"]

_open_here: dict[str, Callable[[], bool]] = {}  # lock path -> "is that session still open?"
_table_lock = threading.Lock()


def _start_time(pid: int) -> float | None:
    try:
        import psutil

        return float(psutil.Process(pid).create_time())
    except Exception:  # gone, or not ours to see
        return None


def _held_elsewhere(path: Path) -> int | None:
    """The pid of another live process holding ``path``, else None."""
    try:
        data = json.loads(path.read_text())
        pid, started = int(data["pid"]), float(data["started"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # no claim, or a damaged one: free
    if pid == os.getpid():
        return None
    now = _start_time(pid)
    return pid if now is not None and abs(now - started) <= 1.0 else None


def claim_conversation(
    path: Path, conversation_id: str, still_open: Callable[[], bool]
) -> Callable[[], None]:
    """Claim the conversation whose lock file is ``path``; returns the release function.

    Args:
        path: ``<conversations folder>/<id>.lock``.
        conversation_id: for messages.
        still_open: tells whether the session holding the claim in this process is
            still open (a closed or abandoned one no longer holds it).

    Raises:
        ConfigurationError: a live session of this process or another live process
            has the conversation open.
    """
    key = str(path)
    with _table_lock:
        holder = _open_here.get(key)
        if holder is not None and holder():
            raise ConfigurationError(
                f"conversation {conversation_id} is already open in this process; "
                "use that session (Workspace.open returns it) or close it first"
            )
        other = _held_elsewhere(path)
        if other is not None:
            raise ConfigurationError(
                f"conversation {conversation_id} is open in another agentkit process "
                f"(pid {other}); close it there first"
            )
        _open_here[key] = still_open
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            me = {"pid": os.getpid(), "started": _start_time(os.getpid()) or 0.0}
            path.write_text(json.dumps(me))
        except OSError:
            pass  # an unwritable folder fails at the first save, with its own message

    def release() -> None:
        with _table_lock:
            if _open_here.get(key) is still_open:
                del _open_here[key]
                try:
                    path.unlink()
                except OSError:
                    pass

    return release
