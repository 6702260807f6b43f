"""The request body, and the shape repairs a server taught this client session.

One job: turn a :class:`~agentkit.llm._toolmode.Wire` into the JSON body of one Chat
Completions request, in the shape this server accepts. Servers differ in what they
refuse with a 400, so each of these is tried once and, when refused, dropped for
the client's lifetime (docs/providers.md §4.2): ``max_tokens`` (some want
``max_completion_tokens``), ``stream_options`` (usage in streams), and a system
message after the first (then sent as a user message). How tools go on the wire
(native or prompted, and the prompted constraint) is ``_toolmode``'s job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentkit.errors import LLMError
from agentkit.llm._toolmode import Wire, forced_tool
from agentkit.settings import Settings

__all__ = ["RequestShape"]


@dataclass
class RequestShape:
    """What this client session sends, and what the server refused (see the module).

    Attributes:
        allow_mid_system: system messages after the first go as they are; False
            once a server refused one (``Settings.system_role_after_start`` starts it).
        max_tokens_key: ``max_tokens`` or, once refused, ``max_completion_tokens``.
        stream_options: ask for usage in streams; False once refused.
    """

    allow_mid_system: bool = True
    max_tokens_key: str = "max_tokens"
    stream_options: bool = True

    def messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` as this server takes them: the same list object when nothing
        needs to change, else a copy with later system messages sent as user ones."""
        if self.allow_mid_system or not _has_mid_system(messages):
            return messages
        return [messages[0]] + [
            {**m, "role": "user"} if m.get("role") == "system" else m for m in messages[1:]
        ]

    def body(
        self, settings: Settings, wire: Wire, stream: bool, max_tokens: int | None
    ) -> dict[str, Any]:
        """The request body: model, messages, the wire's extra fields, tools and
        ``tool_choice`` (a forced name becomes the function form), stream, temperature
        and the output-token limit, each in the form this server accepts."""
        tools = wire.tools
        body: dict[str, Any] = {"model": settings.model, "messages": wire.messages}
        body.update(wire.extra)
        if tools:
            body["tools"] = tools
            choice = settings.tool_choice
            if choice in ("auto", "required", "none"):
                body["tool_choice"] = choice
            elif choice:  # tool names: force the first one offered (none offered: default)
                forced = forced_tool(choice, tools)
                if forced:
                    body["tool_choice"] = {"type": "function", "function": {"name": forced}}
        if stream:
            body["stream"] = True
            if self.stream_options:
                body["stream_options"] = {"include_usage": True}
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        if max_tokens:
            body[self.max_tokens_key] = max_tokens
        return body

    def repair(self, error: LLMError, messages: list[dict[str, Any]], settings: Settings) -> bool:
        """Adapt once to a server refusing ``max_tokens``, ``stream_options`` or a
        system message after the first (``messages``: what was sent); True to resend."""
        if error.kind != "invalid_request":
            return False
        if self.allow_mid_system and _has_mid_system(messages):
            # Some servers refuse a system message mid-conversation (any 400 then):
            # send those as user messages from now on, for this client's session.
            self.allow_mid_system = False
            return True
        text = error.message.lower()
        if (
            "max_completion_tokens" in text
            and self.max_tokens_key == "max_tokens"
            and settings.max_output_tokens
        ):
            self.max_tokens_key = "max_completion_tokens"
            return True
        if "stream_options" in text and self.stream_options:
            self.stream_options = False
            return True
        return False


def _has_mid_system(messages: list[dict[str, Any]]) -> bool:
    return any(m.get("role") == "system" for m in messages[1:])
