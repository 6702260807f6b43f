"""A plain HTTP server on 127.0.0.1 for tests, serving a BaseHTTPRequestHandler class."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextlib.contextmanager
def serve_loopback(handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    """Serve ``handler`` in a daemon thread; yields the port; stops and closes on exit."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(httpd.server_address[1])
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
