"""FakeOpenAIServer and the replies it can be scripted with (the guide is in the
docstring of :mod:`agentkit.testing`); the HTTP plumbing is in ``_http``, the
shaping of replies into bodies and stream events in ``_replies``."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from agentkit.errors import AgentkitError
from agentkit.testing._http import Exchange, LoopbackServer
from agentkit.testing._replies import DUMP, Shaped, raw_body, raw_events


@dataclass
class Reply:
    """An assistant reply, shaped by the server like OpenAI would.

    Attributes:
        content: the text, or None.
        tool_calls: ``[{"name": str, "arguments": dict | str, "id": str (optional)}]``.
        reasoning: sent as ``reasoning_content`` (DeepSeek style), or None.
        finish_reason: default ``"tool_calls"`` with tool calls, else ``"stop"``.
        usage: the usage object to send; default: estimated token counts.
        latency: seconds to wait before answering.
        chunk_delay: seconds between stream chunks.
        disconnect_after: streamed: drop the connection after this many chunks.
        headers: extra response headers.
        model: the ``model`` field; default: the request's model.
    """

    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    reasoning: str | None = None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    latency: float = 0.0
    chunk_delay: float = 0.0
    disconnect_after: int | None = None
    headers: dict[str, str] | None = None
    model: str | None = None


@dataclass
class RawResponse:
    """An exact non-streamed reply.

    ``body``: dict or list (sent as JSON), str or bytes (sent verbatim), or
    ``{"__raw_body__": str}`` (verbatim). ``headers`` override the defaults.
    """

    body: Any
    status: int = 200
    headers: dict[str, str] | None = None
    latency: float = 0.0

    def __post_init__(self) -> None:
        # RawResponse(body, status) and ErrorReply(status, body) differ in order;
        # a swapped call must fail here, not as a broken HTTP status line.
        if isinstance(self.status, bool) or not isinstance(self.status, int):
            raise TypeError(f"status must be an int HTTP status, got {self.status!r}")


@dataclass
class ErrorReply(RawResponse):
    """An HTTP error: ``ErrorReply(429, {"error": {...}}, {"retry-after": "1"})``.

    With ``body`` None an OpenAI-style error object naming the status is sent.
    """

    def __init__(
        self,
        status: int,
        body: Any = None,
        headers: dict[str, str] | None = None,
        latency: float = 0.0,
    ) -> None:
        if body is None:
            body = {
                "error": {"message": f"fake error {status}", "type": "fake_error", "code": None}
            }
        super().__init__(body=body, status=status, headers=headers, latency=latency)


@dataclass
class RawChunks:
    """An exact stream: each item is sent as one SSE event, in order.

    Items: a dict (a ``data:`` line with its JSON), a str/bytes (sent verbatim), or a
    pseudo-event: ``{"__sse__": "comment", "text": ": keep-alive"}``,
    ``{"__sse__": "done"}`` (``data: [DONE]``), ``{"__sse__": "raw", "line": "..."}``,
    ``{"__sse__": "disconnect"}`` (drop the connection there). Nothing is added:
    include the ``done`` event yourself.
    """

    chunks: list[Any]
    status: int = 200
    headers: dict[str, str] | None = None
    latency: float = 0.0
    chunk_delay: float = 0.0


ReplyLike = str | dict | Reply | RawResponse | RawChunks
Handler = Callable[[dict], ReplyLike]


@dataclass
class RecordedRequest:
    """One request the server received: method, path, lower-case headers, parsed body,
    and the body's bytes as they came (``raw_body``)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw_body: bytes = b""


class ScriptExhausted(AgentkitError, RuntimeError):
    """A ScriptedModel was asked for more replies than it was given."""


class ScriptedModel:
    """A handler that returns the given replies in order (thread-safe).

    Items are replies, or callables ``request -> reply`` called when their turn comes.
    When none is left, raises :class:`ScriptExhausted` (the server answers HTTP 500).
    """

    def __init__(self, replies: Iterable[ReplyLike | Handler]) -> None:
        self._replies = list(replies)
        self._lock = threading.Lock()
        self.used = 0

    @property
    def remaining(self) -> int:
        """Replies not used yet."""
        return len(self._replies) - self.used

    def __call__(self, request: dict) -> ReplyLike:
        with self._lock:
            if self.used >= len(self._replies):
                raise ScriptExhausted(
                    f"ScriptedModel: all {len(self._replies)} scripted replies were used; "
                    f"request #{self.used + 1} has none"
                )
            item = self._replies[self.used]
            self.used += 1
        if callable(item) and not isinstance(item, (Reply, RawResponse, RawChunks)):
            return item(request)
        return item


class FakeOpenAIServer:
    """A loopback OpenAI-compatible server (see the module docstring).

    Args:
        handler: ``request_body -> reply``, or a list of replies (a ScriptedModel).
        models: ids listed by ``GET /v1/models``.
        host, port: where to listen; port 0 picks a free one.

    Attributes:
        base_url: ``http://127.0.0.1:<port>/v1`` once started.
        requests: parsed bodies of the chat-completion requests, in arrival order.
        records: every request (method, path, headers, body), models listing included.
        errors: exceptions raised by the handler.
    """

    def __init__(
        self,
        handler: Handler | list[Any],
        *,
        models: Iterable[str] = ("fake-model",),
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.handler: Handler = ScriptedModel(handler) if isinstance(handler, list) else handler
        self.models = list(models)
        self.requests: list[dict[str, Any]] = []
        self.records: list[RecordedRequest] = []
        self.errors: list[BaseException] = []
        self._host, self._port = host, port
        self._server: LoopbackServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # -- lifecycle --------------------------------------------------------------

    def start(self) -> FakeOpenAIServer:
        """Start serving in a daemon thread; returns self."""
        if self._server is None:
            self._server = LoopbackServer(self._app, self._host, self._port)
            self._thread = threading.Thread(
                target=self._server.serve,
                name="FakeOpenAIServer",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, close every connection and wait for the server threads."""
        server, self._server = self._server, None
        if server is None:
            return
        server.wake()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        server.close_connections()
        server.server_close()

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The TCP port (after start)."""
        if self._server is None:
            raise RuntimeError("FakeOpenAIServer is not running")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, the value for Settings.base_url."""
        return f"http://{self._host}:{self.port}/v1"

    def clear(self) -> None:
        """Forget recorded requests and errors."""
        with self._lock:
            self.requests.clear()
            self.records.clear()
            self.errors.clear()

    # -- serving ----------------------------------------------------------------

    def _app(self, ex: Exchange) -> bool:
        path = ex.path.rstrip("/")
        try:
            body: Any = json.loads(ex.body) if ex.body else None
        except ValueError:
            body = ex.body.decode("utf-8", "replace")
        with self._lock:
            self.records.append(RecordedRequest(ex.method, ex.path, ex.headers, body, ex.body))
        if ex.method == "GET" and path in ("/v1/models", "/models"):
            data = [
                {"id": m, "object": "model", "created": 0, "owned_by": "agentkit"}
                for m in self.models
            ]
            ex.send(200, _JSON, DUMP({"object": "list", "data": data}).encode())
            return True
        if ex.method != "POST" or path not in ("/v1/chat/completions", "/chat/completions"):
            err = {"error": {"message": f"no route {ex.method} {ex.path}", "type": "not_found"}}
            ex.send(404, _JSON, DUMP(err).encode())
            return True
        if not isinstance(body, dict):
            err = {
                "error": {
                    "message": "the body must be a JSON object",
                    "type": "invalid_request_error",
                }
            }
            ex.send(400, _JSON, DUMP(err).encode())
            return True
        with self._lock:
            self.requests.append(body)
        try:
            reply = _coerce(self.handler(body))
        except Exception as exc:  # the handler's bug becomes the client's HTTP 500
            with self._lock:
                self.errors.append(exc)
            err = {
                "error": {"message": f"{type(exc).__name__}: {exc}", "type": "fake_server_error"}
            }
            ex.send(500, {**_JSON, "retry-after": "3600"}, DUMP(err).encode())
            return True
        return _send(ex, reply, body)


_JSON = {"content-type": "application/json"}
_SSE = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"}


def _coerce(reply: Any) -> Reply | RawResponse | RawChunks:
    if isinstance(reply, (Reply, RawResponse, RawChunks)):
        return reply
    if isinstance(reply, str):
        return Reply(content=reply)
    if isinstance(reply, dict):
        if "__raw_body__" in reply:
            return RawResponse(body=reply)
        fields = dict(reply)
        if "reasoning_content" in fields:
            fields["reasoning"] = fields.pop("reasoning_content")
        fields.pop("role", None)
        return Reply(**fields)
    raise TypeError(f"unsupported reply type {type(reply).__name__}: {reply!r:.100}")


def _send(ex: Exchange, reply: Reply | RawResponse | RawChunks, request: dict[str, Any]) -> bool:
    if reply.latency and ex.wait(reply.latency):
        return False
    if isinstance(reply, RawResponse):
        body, ctype = raw_body(reply.body)
        ex.send(reply.status, {"content-type": ctype, **(reply.headers or {})}, body)
        return True
    if isinstance(reply, RawChunks):
        return ex.send_stream(
            reply.status,
            {**_SSE, **(reply.headers or {})},
            raw_events(reply.chunks, reply.chunk_delay),
        )
    shaped = Shaped(reply, request, len(ex.body))
    if request.get("stream"):
        events = shaped.stream_events(
            bool((request.get("stream_options") or {}).get("include_usage"))
        )
        return ex.send_stream(200, {**_SSE, **(reply.headers or {})}, events)
    ex.send(200, {**_JSON, **(reply.headers or {})}, DUMP(shaped.body()).encode())
    return True
