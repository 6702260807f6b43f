"""An event-stream reader and a running web chat for the web chat tests, both cheap to
make (and the reader to close).

:class:`SseReader` is ``web_helpers.SseReader`` (the same parsing, ``events``, ``ids``,
``connected``, ``types()``) with two differences:

- Its httpx client shares one TLS context with every other reader: a new client loads
  certifi's bundle, about 0.2 s of CPU each (more on a loaded machine), and these
  streams are plain HTTP on loopback anyway.
- ``close()`` shuts its connection's socket down, so the reading thread wakes at once.
  A stream that has nothing to say blocks its reader in ``recv`` until the server's
  next ping (15 s), and closing the client alone does not wake it: the reader's
  ``thread.join(5)`` then waited out its 5 s on every close.

:func:`running_web` is ``web_helpers.running_web`` with its client on that shared TLS
context too.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import web_helpers
from web_helpers import Web, settings_for

from agentkit.testing import FakeOpenAIServer
from agentkit.webchat import create_app
from agentkit.webchat.serve import BackgroundServer

__all__ = ["SseReader", "running_web", "tls_context"]


@cache
def tls_context() -> ssl.SSLContext:
    """One default TLS context for every reader of the process (made on first use)."""
    return ssl.create_default_context()


class SseReader(web_helpers.SseReader):
    """``web_helpers.SseReader`` that is made with a shared TLS context and whose
    ``close()`` wakes its thread at once (see the module docstring)."""

    def __post_init__(self) -> None:
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._client = httpx.Client(
            timeout=httpx.Timeout(30, read=None),
            verify=tls_context(),
            event_hooks={"response": [self._keep_socket]},
        )
        self._stop = threading.Event()
        self.connected = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _keep_socket(self, response: httpx.Response) -> None:
        """Note the socket the stream arrives on (shut at once if closed already)."""
        stream: Any = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is None:
            return
        with self._lock:
            self._sockets.append(sock)
            if self._stop.is_set():
                _shut(sock)

    def close(self) -> None:
        """Stop reading: shut the stream's socket (the thread wakes), close, join."""
        with self._lock:
            self._stop.set()
            for sock in self._sockets:
                _shut(sock)
        self._client.close()
        self.thread.join(5)
        assert not self.thread.is_alive(), "the reader's thread did not end"


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed by either side
        pass


@contextmanager
def running_web(
    workspace: Path, handler: Any, token: str | None = None, **overrides: Any
) -> Iterator[Web]:
    """A FakeOpenAIServer(handler), the web app on a free loopback port, a client (as
    ``web_helpers.running_web``, the client on the shared TLS context)."""
    with FakeOpenAIServer(handler) as model:
        app = create_app(workspace, settings_for(model, **overrides), token=token)
        server = BackgroundServer(app).start()
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        client = httpx.Client(
            base_url=server.url, headers=headers, timeout=30, verify=tls_context()
        )
        try:
            yield Web(server.url, client, model, server, workspace)
        finally:
            client.close()
            server.stop()
