"""Wire shapes of agentkit.testing's replies: OpenAI response bodies and SSE events.

Kept apart from the public module so each stays small. Bytes are built with one
compact JSON encoder and, for streams, a pre-encoded chunk prefix: the fake server
sits on the hot path of engine tests and benchmarks.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentkit.testing._http import Disconnect, Pause
from agentkit.tokens import count_messages, count_text

if TYPE_CHECKING:
    from agentkit.testing.server import Reply

# ASCII-escaped: any string a handler returns (even a lone surrogate) is valid JSON on the wire.
DUMP = json.JSONEncoder(ensure_ascii=True, separators=(",", ":")).encode


def raw_body(body: Any) -> tuple[bytes, str]:
    """Encode a RawResponse body; return (bytes, default content type)."""
    if isinstance(body, dict) and "__raw_body__" in body:
        body = body["__raw_body__"]
        text = body if isinstance(body, str) else str(body)
        return text.encode(), "text/html" if text.lstrip().startswith("<") else "application/json"
    if isinstance(body, bytes):
        return body, "application/octet-stream"
    if isinstance(body, str):
        return body.encode(), "text/plain; charset=utf-8"
    return DUMP(body).encode(), "application/json"


def raw_events(chunks: list[Any], delay: float) -> Iterator[Any]:
    """Turn RawChunks items (dicts, text, pseudo-events) into stream pieces."""
    for i, item in enumerate(chunks):
        if i and delay:
            yield Pause(delay)
        if isinstance(item, bytes):
            yield item
        elif isinstance(item, str):
            yield item.encode()
        elif isinstance(item, dict) and "__sse__" in item:
            kind = item["__sse__"]
            if kind == "disconnect":
                yield Disconnect()
            elif kind == "done":
                yield b"data: [DONE]\n\n"
            elif kind == "comment":
                text = str(item.get("text", ": keep-alive"))
                yield (text if text.startswith(":") else ": " + text).encode() + b"\n\n"
            elif kind == "raw":
                yield str(item.get("line", "")).encode() + b"\n\n"
            else:
                raise ValueError(f"unknown pseudo-event {kind!r}")
        else:
            yield b"data: " + DUMP(item).encode() + b"\n\n"


def pieces(text: str, parts: int = 3) -> list[str]:
    """Split ``text`` into up to ``parts`` pieces, as a model streams it."""
    if len(text) < parts * 2:
        return [text] if text else []
    step = -(-len(text) // parts)
    return [text[i : i + step] for i in range(0, len(text), step)]


@dataclass
class Shaped:
    """A Reply dressed in OpenAI's response shape for one request."""

    reply: Reply
    request: dict[str, Any]
    request_bytes: int
    calls: list[dict[str, Any]] = field(init=False)

    def __post_init__(self) -> None:
        self.id = "chatcmpl-" + uuid.uuid4().hex[:24]
        self.created = int(time.time())
        self.model = self.reply.model or str(self.request.get("model") or "fake-model")
        self.calls = []
        for call in self.reply.tool_calls or []:
            args = call.get("arguments", {})
            self.calls.append(
                {
                    "id": call.get("id") or "call_" + uuid.uuid4().hex[:24],
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": args if isinstance(args, str) else DUMP(args),
                    },
                }
            )
        self.finish = self.reply.finish_reason or ("tool_calls" if self.calls else "stop")

    def usage(self) -> dict[str, int]:
        if self.reply.usage is not None:
            return self.reply.usage
        # Counted as agentkit counts a request (tiktoken, else its estimate): what a
        # real server reports is close to that, and a test comparing the client's own
        # estimate with the server's needs the same yardstick (not bytes / 4, which
        # counts JSON punctuation and tool schemas never rendered as such).
        messages = self.request.get("messages")
        tools = self.request.get("tools")
        prompt = max(
            1,
            count_messages(
                messages if isinstance(messages, list) else [],
                tools if isinstance(tools, list) else None,
            ),
        )
        completion = count_text(self.reply.content or "") + count_text(self.reply.reasoning or "")
        for call in self.calls:
            completion += count_text(call["function"]["arguments"]) + 4
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def body(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.reply.content}
        if self.reply.reasoning is not None:
            message["reasoning_content"] = self.reply.reasoning
        if self.calls:
            message["tool_calls"] = self.calls
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": self.finish}
            ],
            "usage": self.usage(),
        }

    def stream_events(self, include_usage: bool) -> Iterator[Any]:
        head = (
            f'data: {{"id":"{self.id}","object":"chat.completion.chunk","created":{self.created},'
            f'"model":{DUMP(self.model)},"choices":'
        ).encode()
        deltas: list[tuple[dict[str, Any], str | None]] = [
            ({"role": "assistant", "content": ""}, None)
        ]
        deltas += [({"reasoning_content": p}, None) for p in pieces(self.reply.reasoning or "")]
        deltas += [({"content": p}, None) for p in pieces(self.reply.content or "")]
        for index, call in enumerate(self.calls):
            fn = call["function"]
            first = {"index": index, "id": call["id"], "type": "function"}
            deltas.append(
                (
                    {"tool_calls": [{**first, "function": {"name": fn["name"], "arguments": ""}}]},
                    None,
                )
            )
            for piece in pieces(fn["arguments"]):
                deltas.append(
                    ({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}, None)
                )
        deltas.append(({}, self.finish))
        limit = self.reply.disconnect_after
        for n, (delta, finish) in enumerate(deltas):
            if limit is not None and n >= limit:
                yield Disconnect()
                return
            if n and self.reply.chunk_delay:
                yield Pause(self.reply.chunk_delay)
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            yield head + b"[" + DUMP(choice).encode() + b"]}\n\n"
        if include_usage:
            yield head + b'[],"usage":' + DUMP(self.usage()).encode() + b"}\n\n"
        yield b"data: [DONE]\n\n"
