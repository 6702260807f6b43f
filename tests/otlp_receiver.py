"""A small OTLP/HTTP (protobuf) trace receiver on 127.0.0.1 for tests.

It keeps what Arize Phoenix drops (span kind, links, resource attributes, scope,
request headers). Modes: ``ok`` answers 200; ``hang`` accepts and never answers
(until stopped); a dead collector is a refused port (:func:`refused_port`). Decoding
uses ``opentelemetry-proto``, which the OTLP exporter depends on already.
"""

from __future__ import annotations

import gzip
import socket
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return _attributes(v.kvlist_value.values)
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


def decode(body: bytes) -> list[dict[str, Any]]:
    """The spans of one ExportTraceServiceRequest, as plain dicts."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    spans = []
    request = ExportTraceServiceRequest.FromString(body)
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for s in scope_spans.spans:
                spans.append(
                    {
                        "name": s.name,
                        "trace_id": s.trace_id.hex(),
                        "span_id": s.span_id.hex(),
                        "parent_span_id": s.parent_span_id.hex() or None,
                        "kind": s.kind,  # 1 INTERNAL, 2 SERVER, 3 CLIENT
                        "status": {"code": s.status.code, "message": s.status.message},
                        "attributes": _attributes(s.attributes),
                        "events": [
                            {"name": e.name, "attributes": _attributes(e.attributes)}
                            for e in s.events
                        ],
                        "links": [
                            {
                                "trace_id": link.trace_id.hex(),
                                "span_id": link.span_id.hex(),
                                "attributes": _attributes(link.attributes),
                            }
                            for link in s.links
                        ],
                        "resource": resource,
                        "scope": {
                            "name": scope_spans.scope.name,
                            "version": scope_spans.scope.version,
                            "schema_url": scope_spans.schema_url,
                        },
                    }
                )
    return spans


class CaptureReceiver:
    """``with CaptureReceiver() as receiver:`` an OTLP/HTTP endpoint at ``receiver.endpoint``
    (the base URL for ``OTEL_EXPORTER_OTLP_ENDPOINT``); ``receiver.spans`` holds what
    arrived, ``receiver.requests`` the request headers."""

    def __init__(self, mode: str = "ok") -> None:
        self.mode = mode
        self.spans: list[dict[str, Any]] = []
        self.requests: list[dict[str, str]] = []
        self.lock = threading.Lock()
        self.released = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver.lock:
                    receiver.requests.append(dict(self.headers))
                if receiver.mode == "hang":
                    receiver.released.wait(600)
                    return
                encoding = self.headers.get("Content-Encoding", "")
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                spans = decode(body)
                with receiver.lock:
                    receiver.spans.extend(spans)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> CaptureReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()

    def clear(self) -> None:
        """Forget what arrived so far."""
        with self.lock:
            self.spans.clear()
            self.requests.clear()

    def wait_for(self, predicate: Any, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Poll until ``predicate(spans)`` holds (or ``timeout`` seconds pass); return the spans."""
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                spans = list(self.spans)
            if predicate(spans) or time.monotonic() > deadline:
                return spans
            time.sleep(0.05)


def refused_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
