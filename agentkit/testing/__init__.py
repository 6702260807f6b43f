"""FakeOpenAIServer: a real OpenAI-compatible HTTP server on loopback, scripted in Python.

For testing agents without a model: the server speaks ``POST /v1/chat/completions``
(streamed and not) and ``GET /v1/models`` on ``127.0.0.1``; what it answers comes
from your ``handler(request) -> reply``, which runs in the server's process (other
processes, such as sub-agent workers, simply connect to ``server.base_url``)::

    from agentkit.testing import FakeOpenAIServer, ScriptedModel

    script = ScriptedModel([
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
        "All done.",
    ])
    with FakeOpenAIServer(script) as server:
        settings = Settings(model="fake", base_url=server.base_url, api_key="x")
        ...
        assert server.requests[1]["messages"][-1]["role"] == "tool"

Replies (what a handler may return):

* ``str``: the assistant's text.
* ``dict``: an assistant message, keys as :class:`Reply` (``content``, ``tool_calls``
  as ``[{"name": ..., "arguments": dict-or-str, "id": optional}]``, ``reasoning``...);
  ``{"__raw_body__": "..."}`` is sent verbatim instead (HTML pages, JSON arrays).
* :class:`Reply`: the same with options (finish_reason, usage, latency, dropping the
  connection mid-stream).
* :class:`ErrorReply` / :class:`RawResponse`: an exact status, body and headers.
* :class:`RawChunks`: exact stream events, including these pseudo-events:
  an SSE comment, ``[DONE]``, a raw line, a dropped connection.

Simple replies get the normal OpenAI shape (id, created, model, choices, usage with
token counts from :mod:`agentkit.tokens`, prompt counted over the request's messages
and tools as agentkit counts them); streamed, text comes in a few pieces and tool-call
arguments split over several chunks, as OpenAI does, with a final usage chunk when
the request asks ``stream_options.include_usage``. A handler that raises (or a
:class:`ScriptedModel` with no reply left) yields HTTP 500 with the reason and
``Retry-After: 3600``, so agentkit's client fails at once rather than
retrying; the exception is kept in ``server.errors``.
"""

from agentkit.testing.server import (
    ErrorReply,
    FakeOpenAIServer,
    RawChunks,
    RawResponse,
    RecordedRequest,
    Reply,
    ReplyLike,
    ScriptedModel,
    ScriptExhausted,
)

__all__ = [
    "ErrorReply",
    "FakeOpenAIServer",
    "RawChunks",
    "RawResponse",
    "RecordedRequest",
    "Reply",
    "ReplyLike",
    "ScriptExhausted",
    "ScriptedModel",
]
