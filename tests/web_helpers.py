"""Shared pieces of the web chat tests: a real server on loopback with a scripted model,
an httpx client, and an SSE reader that records events by seq.

Both are cheap to make, and the reader to close:

- Every client here shares one TLS context (:func:`tls_context`): a new client loads
  certifi's bundle, about 0.2 s of CPU each (more on a loaded machine), and these
  servers are plain HTTP on loopback anyway.
- :meth:`SseReader.close` shuts its connection's socket down, so the reading thread
  wakes at once. A stream that has nothing to say blocks its reader in ``recv`` until
  the server's next ping (15 s), and closing the client alone does not wake it.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import httpx
from subagent_helpers import scripted_settings

from agentkit import Settings
from agentkit.testing import FakeOpenAIServer
from agentkit.webchat import create_app
from agentkit.webchat.serve import BackgroundServer

JSON = {"Content-Type": "application/json"}


@cache
def tls_context() -> ssl.SSLContext:
    """One default TLS context for every client of the process (made on first use)."""
    return ssl.create_default_context()


def settings_for(model: FakeOpenAIServer, **overrides: Any) -> Settings:
    """Settings for a model played by ``model`` (see subagent_helpers.scripted_settings)."""
    return scripted_settings(model, "en", **overrides)


@dataclass
class Web:
    """A running web chat: ``url``, ``client`` (httpx, base_url set), the model server."""

    url: str
    client: httpx.Client
    model: FakeOpenAIServer
    server: BackgroundServer
    workspace: Path

    def post(
        self, path: str, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        return self.client.post(path, content=json.dumps(body or {}), headers=headers or JSON)

    def new_conversation(self) -> str:
        response = self.post("/api/conversations", {})
        assert response.status_code == 201, response.text
        return str(response.json()["id"])


@contextmanager
def running_web(
    workspace: Path, handler: Any, token: str | None = None, **overrides: Any
) -> Iterator[Web]:
    """A FakeOpenAIServer(handler), the web app on a free loopback port, a client."""
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


@dataclass
class SseReader:
    """Reads one event stream in a thread: ``events`` as parsed dicts (with ``seq``;
    a ``reset`` event as ``{"type": "reset", ...}``)."""

    url: str
    headers: dict[str, str] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)

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

    def _run(self) -> None:
        try:
            with self._client.stream("GET", self.url, headers=self.headers) as response:
                self.status = response.status_code
                self.connected.set()
                kind, data, ident = "message", [], None
                for line in response.iter_lines():
                    if self._stop.is_set():
                        return
                    if line == "":
                        if data:
                            event = json.loads("\n".join(data))
                            if kind == "reset":
                                event = {"type": "reset", **event}
                            self.events.append(event)
                            if ident is not None:
                                self.ids.append(ident)
                        kind, data, ident = "message", [], None
                    elif line.startswith("event:"):
                        kind = line[6:].strip()
                    elif line.startswith("data:"):
                        data.append(line[5:].lstrip())
                    elif line.startswith("id:"):
                        ident = line[3:].strip()
        except (httpx.HTTPError, RuntimeError):
            return
        finally:
            self.connected.set()

    def types(self) -> list[str]:
        return [e["type"] for e in self.events]

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


class CuttableProxy:
    """A TCP forwarder on a free loopback port to ``target_port``; ``cut()`` drops every
    connection at once (a dropped event stream, as a flaky network does it)."""

    def __init__(self, target_port: int) -> None:
        import socket

        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[Any] = []
        self.lock = threading.Lock()
        self.cuts = 0
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        import socket

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self.lock:
                self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: Any, sink: Any) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.close()
                except OSError:
                    pass

    def cut(self) -> None:
        import socket

        with self.lock:
            sockets, self.sockets = self.sockets, []
            self.cuts += 1
        for s in sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self.listener.close()
        self.cut()


@dataclass
class ServeProcess:
    """``agentkit serve`` running as its own process: ``url``, ``client``, ``proc``."""

    url: str
    client: httpx.Client
    proc: Any
    workspace: Path
    log: Any  # its stdout and stderr, a temporary file

    def post(self, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        return self.client.post(path, content=json.dumps(body or {}), headers=JSON)

    def output(self) -> str:
        """What it printed so far."""
        self.log.flush()
        self.log.seek(0)
        return str(self.log.read().decode("utf-8", "replace"))

    def stop(self, sig: int) -> int:
        """Send ``sig`` and wait; returns the exit code."""
        self.proc.send_signal(sig)
        return int(self.proc.wait(60))


@contextmanager
def serve_process(
    workspace: Path, base_url: str, *, env: dict[str, str] | None = None, nofile: int | None = None
) -> Iterator[ServeProcess]:
    """``python -m agentkit serve`` on a free loopback port against the model at
    ``base_url`` (no retries); ``nofile`` lowers its RLIMIT_NOFILE (soft and hard) in
    the child before it starts. Stopped with SIGINT (SIGKILL if it lingers)."""
    import os
    import resource
    import signal
    import subprocess
    import sys
    import tempfile
    import time

    from agentkit.webchat.serve import free_port

    port = free_port()
    root = Path(__file__).resolve().parents[1]
    environment = {
        **os.environ,
        "PYTHONPATH": str(root),
        "AGENTKIT_MAX_RETRIES": "0",
        **(env or {}),
    }
    argv = [sys.executable, "-m", "agentkit", "serve", "-w", str(workspace), "--port", str(port),
            "--model", "m", "--base-url", base_url, "--api-key", "k", "--lang", "en"]  # fmt: skip

    def limit() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    # To a file: a pipe nobody reads could fill and stall the server.
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(argv, env=environment, stdout=log, stderr=log, preexec_fn=limit)
        url = f"http://127.0.0.1:{port}"
        client = httpx.Client(base_url=url, timeout=30)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if client.get("/api/conversations").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert proc.poll() is None and time.monotonic() < deadline, "serve did not start"
                time.sleep(0.1)
            yield ServeProcess(url, client, proc, workspace, log)
        finally:
            client.close()
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
