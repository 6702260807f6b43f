"""How tools and tool-call history go on the wire, learnt per client session.

``Settings.tool_calling``: ``native`` sends the ``tools`` parameter; ``prompted``
describes the tools in the prompt and reads calls from the text (``_prompted``),
with the reply constrained to a valid call as ``Settings.tool_call_constraint`` says:
a JSON-schema ``response_format`` (``_call_schema``), a llama.cpp ``grammar``
(``_grammar``), or ``auto``: the schema, then the grammar when the server refuses the
schema, then nothing when it refuses that too (each refusal once per session, logged);
``auto`` starts native and switches to prompted
for the session, saying so once, when the first native attempt shows the server
cannot do it: an HTTP error, or a prompt-token count showing the tools were left
out of the prompt (llama-cpp-python's chatml-function-calling without
``tool_choice``).

Also the session repairs of history shapes a server refuses: an assistant message
with tool calls and ``"content": null`` (llama-cpp-python: HTTP 500, a validation
error) is sent with ``""`` from then on.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from agentkit.errors import LLMError
from agentkit.llm import _prompted
from agentkit.llm._call_schema import tool_call_response_format, tool_call_schema
from agentkit.llm._grammar import tool_call_grammar
from agentkit.llm.turns import AssistantTurn
from agentkit.settings import Settings
from agentkit.tokens import count_messages, count_text

log = logging.getLogger("agentkit.llm")

#: Kinds of a native attempt's failure that make ``auto`` switch to prompted calls.
_SWITCH_KINDS = frozenset(("invalid_request", "server_error"))
#: The tools count as left out when the server counted fewer prompt tokens than
#: this share of the messages plus this share of the tool schemas (tokenizers differ).
_MESSAGES_SHARE = 0.8
_TOOLS_SHARE = 0.3
_MIN_TOOL_TOKENS = 50


@dataclass
class Wire:
    """One request's wire form: messages, the ``tools`` parameter, and extra body fields."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    extra: dict[str, Any] = field(default_factory=dict)
    prompted: bool = False


class ToolMode:
    """The tool-calling state of one LLMClient (see the module docstring).

    Args:
        mode: ``native``, ``prompted`` or ``auto``.
        language: ``zh`` or ``en``, for the prompted texts.
        constraint: ``Settings.tool_call_constraint``: ``auto``, ``json_schema``,
            ``grammar`` or ``none``; what a server refuses is dropped for the session
            (``auto``: the schema falls back to the grammar, the grammar to nothing).
        tool_choice: ``Settings.tool_choice``; in prompted mode ``required`` leaves
            the final answer out of the constraint and a forced tool
            (:func:`forced_tool`) is the only one it allows.
    """

    def __init__(
        self, mode: str, language: str, *, constraint: str, tool_choice: str | None
    ) -> None:
        self.mode = mode
        self.language = language
        #: The constraints still to try, best first; the first is sent.
        self.constraints: list[str] = {
            "auto": ["json_schema", "grammar"],
            "json_schema": ["json_schema"],
            "grammar": ["grammar"],
        }.get(constraint, [])
        self.tool_choice = tool_choice
        #: False once a server refused ``"content": null`` on an assistant message.
        self.null_content = True
        self._decided = mode != "auto"  # auto: until native calls proved to work
        self._cache: dict[str, dict[str, Any]] = {}

    @property
    def constraint(self) -> str | None:
        """The constraint prompted requests carry now (``json_schema``, ``grammar``), or None."""
        return self.constraints[0] if self.constraints else None

    @property
    def prompted(self) -> bool:
        """Whether requests with tools go in the prompted form."""
        return self.mode == "prompted"

    def wire(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Wire:
        """The wire form of a request of ``messages`` (standard shape) offering ``tools``."""
        if tools and self.prompted:
            sent = _prompted.to_wire(messages, tools, self.language)
            return Wire(sent, None, self._constraint_fields(tools), prompted=True)
        if not self.null_content:
            messages = [
                {**m, "content": ""}
                if m.get("role") == "assistant" and m.get("tool_calls") and m.get("content") is None
                else m
                for m in messages
            ]
        return Wire(messages, tools)

    def _constraint_fields(self, tools: list[dict[str, Any]]) -> dict[str, Any]:
        """The request fields constraining a prompted reply to a valid call."""
        kind = self.constraint
        if kind is None:
            return {}
        choice = self.tool_choice
        key = json.dumps([kind, tools, choice], sort_keys=True, default=str)
        cached = self._cache.get(key)
        if cached is None:
            offered = tools
            forced = forced_tool(choice, tools)
            if forced:
                offered = [t for t in tools if t.get("function", {}).get("name") == forced]
            answer = None if choice == "required" or forced else _prompted.ANSWER_TOOL
            if kind == "grammar":
                cached = {"grammar": tool_call_grammar(offered, answer)}
            else:
                cached = {
                    "response_format": tool_call_response_format(tool_call_schema(offered, answer))
                }
            self._cache = {key: cached}  # one tool set per session in practice
        return cached

    def read(self, turn: AssistantTurn, wire: Wire, tools: list[dict[str, Any]] | None) -> bool:
        """Finish ``turn`` (read prompted calls); True when ``auto`` just switched to
        prompted because the tools were missing from the prompt (resend the request)."""
        if wire.prompted and tools:
            _prompted.read_reply(turn, tools)
            return False
        if self._decided or not tools:
            return False
        if turn.tool_calls:
            self._decided = True
            return False
        usage = turn.usage
        if usage.estimated or not usage.prompt_tokens:
            return False  # no server count: nothing learnt yet
        tool_tokens = count_text(json.dumps(tools, ensure_ascii=False, separators=(",", ":")))
        if tool_tokens < _MIN_TOOL_TOKENS:
            return False
        floor = count_messages(wire.messages) * _MESSAGES_SHARE + tool_tokens * _TOOLS_SHARE
        if usage.prompt_tokens >= floor:
            self._decided = True
            return False
        self._switch(
            f"the server counted {usage.prompt_tokens} prompt tokens, fewer than the "
            f"messages and the {tool_tokens} tokens of tool schemas: it left the tools out"
        )
        return True

    def repair(self, error: LLMError, wire: Wire) -> bool:
        """Adapt to a refusal of this request's shape; True to resend at once."""
        if error.status is None or error.kind not in _SWITCH_KINDS:
            return False
        text = error.message.lower()
        if self.null_content and "content" in text and _has_null_call_content(wire.messages):
            self.null_content = False
            log.info('the server refused content null on tool-call messages; sending ""')
            return True
        kind = self.constraint
        if wire.prompted and kind is not None and _names_constraint(kind, text):
            self.constraints.pop(0)
            then = f"sends the {self.constraint} instead" if self.constraint else "sends none"
            log.info("the server refused the %s constraint; the client %s", kind, then)
            return True
        if not self._decided and wire.tools:
            self._switch(f"the server refused a request with tools ({error.one_line()})")
            return True
        return False

    def _switch(self, reason: str) -> None:
        self.mode, self._decided = "prompted", True
        log.warning(
            "agentkit: native tool calls do not work with this server (%s); "
            "switching to prompted tool calls (tool_calling=prompted) for this session",
            reason,
        )


def forced_tool(choice: str | None, tools: list[dict[str, Any]]) -> str | None:
    """The tool that ``Settings.tool_choice`` forces for a request offering ``tools``:
    the first of its comma-separated names that is offered (so one setting can force
    ``create_sub_agent`` on a main agent and ``finish_task`` on its sub-agents), or
    None (``auto``, ``required``, ``none``, unset, or no listed tool offered)."""
    if not choice or choice in ("auto", "required", "none"):
        return None
    offered = {t.get("function", {}).get("name") for t in tools if isinstance(t, dict)}
    return next((n for n in (p.strip() for p in choice.split(",")) if n in offered), None)


def _has_null_call_content(messages: list[dict[str, Any]]) -> bool:
    return any(
        m.get("role") == "assistant" and m.get("tool_calls") and m.get("content") is None
        for m in messages
    )


def _names_constraint(kind: str, error_text: str) -> bool:
    """Whether a refusal's text (lower case) is about the ``kind`` constraint's field."""
    words = ("grammar",) if kind == "grammar" else ("response_format", "json_schema")
    return any(w in error_text for w in words)


def call_constraint(settings: Settings) -> str:
    """``Settings.tool_call_constraint``, or ``none`` when the older
    ``tool_call_grammar`` switch is off (kept for settings written before)."""
    return "none" if not settings.tool_call_grammar else settings.tool_call_constraint
