"""The normalised assistant turn that LLMClient returns, whatever the server sent.

Providers differ in how they stream content, tool calls, usage and reasoning
(docs/providers.md); LLMClient folds all of them into these
dataclasses so the engine sees one shape.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Usage:
    """Token usage of one request (tokens). ``estimated`` is True when the server sent
    none and the numbers were counted locally (tiktoken or the fallback estimate)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    estimated: bool = False
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass
class ToolCall:
    """One tool call requested by the model.

    Attributes:
        id: the provider's id echoed byte for byte, or a minted ``call_<hex>``.
        name: the function name.
        arguments: the parsed JSON object, or None when it could not be parsed.
        arguments_raw: the arguments text as received (after joining fragments).
        error: why the call cannot run (invalid or truncated JSON arguments, one call
            too many), else None; such a call is answered with this error, not run.
        extra: unknown per-call fields to echo back (e.g. Gemini ``extra_content``).
        error_code: the code of that error's tool result: ``invalid_argument``, or
            ``too_many_tool_calls`` (a call beyond ``max_tool_calls_per_turn``).
    """

    id: str
    name: str
    arguments: dict[str, Any] | None
    arguments_raw: str = ""
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    error_code: str = "invalid_argument"

    def wire(self) -> dict[str, Any]:
        """Return the OpenAI wire form, arguments re-serialised compactly (invalid
        JSON is never replayed; ``{}`` stands in for it)."""
        args = self.arguments if self.arguments is not None else {}
        item: dict[str, Any] = {
            "id": self.id,
            "type": "function",
            "function": {
                "name": self.name,
                "arguments": json.dumps(args, ensure_ascii=False, separators=(",", ":")),
            },
        }
        item.update(self.extra)
        return item


@dataclass
class AssistantTurn:
    """One assistant reply, normalised.

    Attributes:
        content: the text, or None when the model sent none.
        tool_calls: complete tool calls in the model's order (empty list if none).
        finish_reason: normalised: ``stop``, ``tool_calls``, ``length`` or ``content_filter``.
        raw_finish_reason: what the server said.
        usage: token usage (estimated if the server sent none).
        reasoning: ``reasoning_content``/``reasoning`` text, kept for the transcript.
        extra: other provider fields of the message, kept for the transcript.
        warnings: notes such as repaired arguments or suspected silent truncation.
        response_model, response_id: the ``model`` and ``id`` the server's response
            named (the model that answered may differ from the one asked), or None.
    """

    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str = "stop"
    raw_finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    reasoning: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    response_model: str | None = None
    response_id: str | None = None

    def message(self) -> dict[str, Any]:
        """Return the assistant message as stored in the transcript (OpenAI shape plus
        ``reasoning_content`` when present)."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [call.wire() for call in self.tool_calls]
        if self.reasoning:
            msg["reasoning_content"] = self.reasoning
        return msg
