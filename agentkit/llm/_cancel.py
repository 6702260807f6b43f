"""Aborting a model request that is blocked on the network when its cancel event is
set or its deadline passes.

A thread blocked in ``recv`` (waiting for a slow server's headers, or in a stalled
stream) cannot notice a ``threading.Event``, nor a clock. So LLMClient records the
sockets its HTTP client opens (httpcore's ``trace`` request extension reports each
new connection) and a shared watchdog thread, polling the requests in flight every
:data:`POLL_INTERVAL` seconds, shuts those sockets down when a request's cancel event
is set or its deadline (``Settings.request_total_timeout``) has
passed: the blocked read fails at once and LLMClient turns that into
:class:`agentkit.errors.Cancelled` or a ``timeout``. The watchdog exits after
:data:`IDLE_EXIT` seconds without work.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

POLL_INTERVAL = 0.05
IDLE_EXIT = 2.0


class SocketTracker:
    """Remembers the sockets of one HTTP client's connections (weakly) to abort them."""

    def __init__(self) -> None:
        self._sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()

    def on_request(self, request: Any) -> None:
        """httpx ``request`` event hook: ask httpcore to report the request's progress."""
        request.extensions["trace"] = self._trace

    def _trace(self, name: str, info: dict[str, Any]) -> None:
        if name == "connection.connect_tcp.complete":
            stream = info.get("return_value")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if isinstance(sock, socket.socket):
                self._sockets.add(sock)

    def abort(self) -> None:
        """Shut down every open connection; blocked reads on them fail immediately."""
        for sock in list(self._sockets):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


_Watched = tuple[threading.Event | None, Callable[[], None], float]


class Watchdog:
    """Calls ``abort()`` of a watched request as soon as its cancel event is set or
    its deadline passes, and at every poll after that until it is unwatched."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watched: dict[int, _Watched] = {}
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._idle = False
        self._tokens = itertools.count(1)

    def watch(
        self,
        cancel: threading.Event | None,
        abort: Callable[[], None],
        deadline: float = float("inf"),
    ) -> int:
        """Start watching: ``abort()`` once ``cancel`` is set or ``time.monotonic()``
        reaches ``deadline``. Returns a token for :meth:`unwatch`."""
        token = next(self._tokens)
        with self._lock:
            self._watched[token] = (cancel, abort, deadline)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="agentkit-cancel-watchdog", daemon=True
                )
                self._thread.start()
            elif self._idle:
                # Only an idle watchdog is woken: a polling one sees the request at its
                # next poll, and not waking it per request keeps it off the hot path.
                self._wake.set()
        return token

    def unwatch(self, token: int) -> None:
        """Stop watching the request of ``token``."""
        with self._lock:
            self._watched.pop(token, None)

    def _run(self) -> None:
        while True:
            self._wake.clear()  # before looking, so a watch() in between wakes us
            with self._lock:
                items = list(self._watched.items())
                self._idle = not items
            if not items:
                woken = self._wake.wait(IDLE_EXIT)
                with self._lock:
                    self._idle = False
                    if not woken and not self._watched:
                        self._thread = None
                        return
                continue
            now = time.monotonic()
            for _token, (cancel, abort, deadline) in items:
                # Again at every poll until the request unwatches itself: a cancel set
                # before its connection was made finds no socket at the first abort.
                if (cancel is not None and cancel.is_set()) or now >= deadline:
                    abort()
            time.sleep(POLL_INTERVAL)


WATCHDOG = Watchdog()
