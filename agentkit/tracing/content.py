"""Message content on spans: the GenAI JSON shapes, scrubbed and capped (docs/tracing.md §3).

One job: turn Chat Completions messages, a reply and tool arguments and results into
the JSON strings of ``gen_ai.input.messages``, ``gen_ai.output.messages``,
``gen_ai.tool.call.arguments`` and ``gen_ai.tool.call.result`` (v1.41.1 schemas
gen-ai-input-messages.json / gen-ai-output-messages.json: ``{"role", "parts": [...]}``
with ``text``, ``tool_call``, ``tool_call_response`` and ``reasoning`` parts). JSON
strings rather than structured values: that is what backends (Phoenix) parse.

Only called when content capture is on. Every text goes through
:func:`agentkit.process.secrets.scrub_text` with the endpoint's key hidden; a part
keeps at most :data:`PART_MAX_CHARS` characters and an attribute at most
:data:`CONTENT_MAX_CHARS` (the oldest messages go first, a note says how many).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from agentkit.process.secrets import scrub_text

PART_MAX_CHARS = 16_000
CONTENT_MAX_CHARS = 64_000


def _text(value: Any, hidden: tuple[str | None, ...]) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) > PART_MAX_CHARS:
        cut = len(text) - PART_MAX_CHARS
        text = f"{text[:PART_MAX_CHARS]}… [{cut} characters cut]"
    return scrub_text(text, hidden)


def _content_parts(content: Any, hidden: tuple[str | None, ...]) -> list[dict[str, Any]]:
    if isinstance(content, list):  # content parts: keep the text ones
        texts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("text")]
        content = "\n".join(texts)
    if not content:
        return []
    return [{"type": "text", "content": _text(content, hidden)}]


def _call_part(call: dict[str, Any], hidden: tuple[str | None, ...]) -> dict[str, Any]:
    function = call.get("function") or {}
    raw = function.get("arguments", "")
    try:
        arguments: Any = json.loads(_text(raw, hidden))
    except (TypeError, ValueError):
        arguments = _text(raw, hidden)
    return {
        "type": "tool_call",
        "id": call.get("id"),
        "name": function.get("name"),
        "arguments": arguments,
    }


def message(msg: dict[str, Any], hidden: tuple[str | None, ...]) -> dict[str, Any]:
    """One Chat Completions message in the GenAI shape (``{"role", "parts"}``)."""
    role = str(msg.get("role") or "user")
    if role == "tool":
        response = _text(msg.get("content") or "", hidden)
        parts = [
            {"type": "tool_call_response", "id": msg.get("tool_call_id"), "response": response}
        ]
        return {"role": "tool", "parts": parts}
    parts = []
    reasoning = msg.get("reasoning_content")
    if reasoning:
        parts.append({"type": "reasoning", "content": _text(reasoning, hidden)})
    parts += _content_parts(msg.get("content"), hidden)
    parts += [_call_part(c, hidden) for c in msg.get("tool_calls") or [] if isinstance(c, dict)]
    return {"role": role, "parts": parts}


def _fit(items: Sequence[Any], shape: Callable[[Any], dict[str, Any]]) -> str:
    """JSON of ``shape(item)`` for the newest ``items`` that fit in CONTENT_MAX_CHARS (the
    newest always), a note in place of the older ones. Newest first, so a long
    conversation costs what the kept messages cost, not what all of them would."""
    kept: list[str] = []
    total = 0
    for item in reversed(items):
        encoded = json.dumps(shape(item), ensure_ascii=False)
        if kept and total + len(encoded) + 2 > CONTENT_MAX_CHARS:
            break
        kept.append(encoded)
        total += len(encoded) + 2
    kept.reverse()
    cut = len(items) - len(kept)
    if cut:
        note = {
            "role": "system",
            "parts": [{"type": "text", "content": f"[{cut} older messages cut]"}],
        }
        kept.insert(0, json.dumps(note))
    return "[" + ", ".join(kept) + "]"


def input_messages(messages: list[dict[str, Any]], hidden: tuple[str | None, ...]) -> str:
    """``gen_ai.input.messages``: the messages a request sent (the newest that fit)."""
    return _fit(messages, lambda m: message(m, hidden))


def output_messages(turn: Any, hidden: tuple[str | None, ...]) -> str:
    """``gen_ai.output.messages``: the reply (an AssistantTurn) with its finish reason."""
    out = message(turn.message(), hidden)
    out["finish_reason"] = turn.raw_finish_reason or turn.finish_reason
    return _fit([out], lambda m: m)


def tool_arguments(call: Any, hidden: tuple[str | None, ...]) -> str:
    """``gen_ai.tool.call.arguments``: the call's arguments (as received when unparsable)."""
    if call.arguments is None:
        return _text(call.arguments_raw or "", hidden)
    return _text(json.dumps(call.arguments, ensure_ascii=False), hidden)


def tool_result(output: str, hidden: tuple[str | None, ...]) -> str:
    """``gen_ai.tool.call.result``: the text the model was given."""
    return _text(output, hidden)
