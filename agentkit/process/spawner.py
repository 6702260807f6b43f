"""The spawner thread: one long-lived thread that forks every program agentkit owns.

PR_SET_PDEATHSIG (``setpriv --pdeathsig``, bubblewrap's ``--die-with-parent``) fires
when the *thread* that forked exits, not the process. A program forked by a tool's
short-lived thread would be killed when that thread ends; forked here, its death
signal means "the agent process ended", whatever ended it (agentkit.process.spawn).

Public API: :func:`on_spawner`.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["on_spawner"]

_requests: queue.Queue[tuple[Callable[[], Any], queue.Queue[Any]]] = queue.Queue()
_spawner: threading.Thread | None = None
_lock = threading.Lock()


def _serve() -> None:
    while True:
        func, reply = _requests.get()
        try:
            reply.put((True, func()))
        except BaseException as exc:  # handed back to the caller's thread
            reply.put((False, exc))


def on_spawner(func: Callable[[], Any]) -> Any:
    """Run ``func`` (which forks) on the spawner thread, started on first use and alive
    as long as the process; returns what it returns and raises what it raises."""
    global _spawner
    with _lock:
        if _spawner is None:
            _spawner = threading.Thread(target=_serve, name="agentkit-spawner", daemon=True)
            _spawner.start()
    reply: queue.Queue[Any] = queue.Queue(maxsize=1)
    _requests.put((func, reply))
    ok, value = reply.get()
    if not ok:
        raise value
    return value
