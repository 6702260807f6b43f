"""Folding a streamed or whole Chat Completions reply into one AssistantTurn.

Choices may be empty, null or lack ``delta``; usage comes from the last chunk that
has it, else from ``choices[i].usage``; reasoning is ``reasoning_content`` or
``reasoning``; tool calls decide the outcome, not ``finish_reason``; ``length`` and
``content_filter`` override tool calls; a stream without a finish_reason failed;
text arrives in fragments kept compactly (``_pieces``); JSON nesting is bounded
(``_json``). docs/providers.md §1 maps its rules to these functions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from agentkit.errors import LLMError
from agentkit.llm import _text_toolcalls
from agentkit.llm._errors import classify
from agentkit.llm._json import REPLY_MAX_DEPTH, loads
from agentkit.llm._pieces import Pieces
from agentkit.llm._toolcall_accumulator import ToolCallAccumulator, mint_call_id
from agentkit.llm.turns import AssistantTurn, ToolCall, Usage
from agentkit.tokens import count_messages, count_text

_FINISH_ALIASES = {"sensitive": "content_filter", "function_call": "tool_calls", "eos": "stop"}
_FAILED_FINISH = frozenset(("network_error", "error"))
_KNOWN_MESSAGE_KEYS = frozenset(
    ("role", "content", "tool_calls", "reasoning_content", "reasoning", "function_call")
)
_USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")
# Silent truncation (Ollama, case 29): the server counted far fewer prompt tokens
# than were sent. Both a ratio and an absolute gap, so tokenizer differences do not trip it.
_TRUNCATION_RATIO = 0.5
_TRUNCATION_MIN_GAP = 1024


class RawTurn:
    """What the server sent, before normalisation."""

    __slots__ = (
        "content",
        "reasoning",
        "refusal",
        "calls",
        "finish",
        "usage",
        "choice_usage",
        "filtered",
        "extra",
        "done",
        "legacy",
        "response",
    )

    def __init__(self) -> None:
        self.content = Pieces()
        self.reasoning = Pieces()
        self.refusal = Pieces()
        self.calls = ToolCallAccumulator()
        self.finish: str | None = None
        self.usage: dict[str, Any] | None = None
        self.choice_usage: dict[str, Any] | None = None
        self.filtered: dict[str, Any] | None = None
        self.extra: dict[str, Any] = {}
        self.done = False
        #: The legacy ``function_call`` field (its deltas), used only without tool_calls.
        self.legacy = ToolCallAccumulator()
        #: The response's ``model`` and ``id`` as the server named them (for traces).
        self.response: dict[str, str] = {}

    def _note_response(self, payload: dict[str, Any]) -> None:
        for key in ("model", "id"):
            value = payload.get(key)
            if isinstance(value, str) and value and key not in self.response:
                self.response[key] = value

    def apply_event(
        self, event: str | None, payload: str, on_text: Callable[[str], None] | None
    ) -> None:
        """Apply one SSE event (its ``event:`` name and ``data:`` text). Raises LLMError
        for in-band errors and undecodable data."""
        if self.done:
            return  # the caller drains to EOF, but nothing after [DONE] counts
        if payload.strip() == "[DONE]":
            self.done = True
            return
        try:
            chunk = loads(payload, REPLY_MAX_DEPTH)
        except ValueError as exc:  # also JSONTooDeep: nesting too deep to parse safely
            if "\n" in payload:  # data lines without blank lines between them
                for line in payload.split("\n"):
                    if line.strip():
                        self.apply_event(event, line, on_text)
                return
            raise LLMError(
                "server_error",
                f"undecodable stream event ({exc}): {payload[:200]!r}",
                retryable=True,
            ) from None
        if event == "error":
            raise classify(None, chunk if isinstance(chunk, dict) else {"error": chunk})
        self.apply_chunk(chunk, on_text)

    def apply_chunk(self, chunk: Any, on_text: Callable[[str], None] | None) -> None:
        """Apply one decoded stream chunk. Raises LLMError for an in-band error."""
        if not isinstance(chunk, dict):
            if isinstance(chunk, list) and any(
                isinstance(i, dict) and i.get("error") for i in chunk
            ):
                raise classify(None, chunk)
            return
        if chunk.get("error"):
            raise classify(None, chunk)
        self._note_response(chunk)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
        choices = chunk.get("choices")
        if not choices or not isinstance(choices, list):
            return
        for choice in choices:
            if isinstance(choice, dict) and choice.get("index") in (0, None):
                self._apply_choice(choice, choice.get("delta"), on_text)

    def apply_body(self, body: Any) -> None:
        """Apply a whole (non-streamed) response body. Raises LLMError for error bodies."""
        if not isinstance(body, dict):
            if isinstance(body, list):
                raise classify(200, body)
            raise LLMError(
                "server_error", "the server's reply is not a JSON object", retryable=True
            )
        choices = body.get("choices")
        if body.get("error") and not choices:
            raise classify(200, body)  # OpenRouter / vLLM: HTTP 200 carrying an error
        if not choices or not isinstance(choices, list):
            raise LLMError(
                "server_error", "the server's reply has no choices", status=200, retryable=True
            )
        choice = next((c for c in choices if isinstance(c, dict)), None)
        if choice is None:
            raise LLMError("server_error", "the server's reply has no choice", retryable=True)
        self._note_response(body)
        message = choice.get("message") or choice.get("delta")
        if isinstance(message, dict):
            calls = message.get("tool_calls")
            if isinstance(calls, list):  # whole calls: one slot each, whatever their index
                message = {**message, "tool_calls": [_reindex(c, i) for i, c in enumerate(calls)]}
            for key, value in message.items():
                if key not in _KNOWN_MESSAGE_KEYS and key != "refusal" and value is not None:
                    self.extra[key] = value
        self._apply_choice(choice, message, None)
        usage = body.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
        if self.finish is None:
            self.finish = "stop"  # a complete body; some servers omit finish_reason

    def _apply_choice(
        self, choice: dict[str, Any], delta: Any, on_text: Callable[[str], None] | None
    ) -> None:
        if isinstance(delta, dict):
            text = delta.get("content")
            if isinstance(text, list):  # content parts instead of a string
                text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
            if text and isinstance(text, str):
                self.content.append(text)
                if on_text is not None:
                    on_text(text)
            thought = delta.get("reasoning_content") or delta.get("reasoning")
            if thought and isinstance(thought, str):
                self.reasoning.append(thought)
            details = delta.get("reasoning_details")
            if isinstance(details, list) and details:
                self.extra.setdefault("reasoning_details", []).extend(details)
            refusal = delta.get("refusal")
            if refusal and isinstance(refusal, str):
                self.refusal.append(refusal)
            calls = delta.get("tool_calls")
            if calls and isinstance(calls, list):
                for call in calls:
                    self.calls.add(call)
            legacy = delta.get("function_call")
            if isinstance(legacy, dict):
                # llama-cpp-python sends each call in both fields: the legacy one is the
                # same call, so it counts only when tool_calls never came.
                self.legacy.add({"index": 0, "function": legacy})
        usage = choice.get("usage")
        if isinstance(usage, dict):
            self.choice_usage = usage  # Moonshot puts usage inside the choice
        results = choice.get("content_filter_results")
        if isinstance(results, dict) and any(
            isinstance(v, dict) and v.get("filtered") for v in results.values()
        ):
            self.filtered = results  # Azure, possibly in a late annotation chunk (case 51)
        finish = choice.get("finish_reason")
        if finish and isinstance(finish, str):
            self.finish = finish  # "" means "not yet" (old Ollama, case 27)


def _reindex(call: Any, index: int) -> Any:
    return {**call, "index": index} if isinstance(call, dict) else call


def build_turn(
    raw: RawTurn,
    *,
    streamed: bool,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    max_tokens: int | None,
    text_fallback: bool,
    diagnostics: str = "",
) -> AssistantTurn:
    """Normalise ``raw`` into an AssistantTurn, or raise the LLMError it amounts to.

    Raises:
        LLMError: ``server_error`` for finish_reason ``network_error``/``error``,
            ``incomplete_stream`` for a stream without finish_reason,
            ``truncated_tool_call`` when tool calls were cut off (also when
            finish_reason is ``length``, which overrides the calls). For these,
            ``code`` holds the raw finish_reason.
    """
    _raise_failed_finish(raw.finish, streamed, diagnostics)
    warnings: list[str] = []
    source = raw.calls if raw.calls.slots else raw.legacy
    calls, truncated = source.finish(warnings)
    content = clean_text(raw.content.join()) or None
    reasoning = clean_text(raw.reasoning.join()) or None
    for call in calls:
        call.arguments_raw = clean_text(call.arguments_raw)
        if call.arguments is not None:
            call.arguments = clean_value(call.arguments)
    extra = dict(raw.extra)
    if raw.refusal:
        extra["refusal"] = raw.refusal.join()
    if raw.filtered is not None:
        extra["content_filter_results"] = raw.filtered
    turn = AssistantTurn(
        content=content,
        tool_calls=calls,
        finish_reason=_finish_reason(raw),
        raw_finish_reason=raw.finish,
        usage=_usage(raw, messages, tools, content, reasoning, calls, warnings),
        reasoning=reasoning,
        extra=extra,
        warnings=warnings,
        response_model=raw.response.get("model"),
        response_id=raw.response.get("id"),
    )
    if turn.finish_reason == "content_filter":
        if calls:
            warnings.append(f"dropped {len(calls)} tool call(s) of a filtered reply (rule F3)")
            turn.tool_calls = []
    elif calls:
        hit_limit = bool(max_tokens) and turn.usage.completion_tokens >= (max_tokens or 0)
        broken = any(call.error for call in calls)
        if turn.finish_reason == "length" or truncated or (hit_limit and broken):
            raise _truncated(turn)
        turn.finish_reason = "tool_calls"  # complete calls decide, whatever finish_reason said
    elif text_fallback and content and tools and turn.finish_reason == "stop":
        _read_text_calls(turn, tools)
    return turn


def _raise_failed_finish(raw_finish: str | None, streamed: bool, diagnostics: str) -> None:
    """Raise the LLMError of a reply that failed by its finish_reason or by ending
    without one."""
    if raw_finish in _FAILED_FINISH:
        raise LLMError(
            "server_error",
            f"the server ended the reply with finish_reason {raw_finish!r}",
            retryable=True,
            code=raw_finish,
        )
    if streamed and raw_finish is None:
        detail = f" (the server sent: {diagnostics})" if diagnostics else ""
        raise LLMError(
            "incomplete_stream",
            "the stream ended without a finish_reason" + detail,
            retryable=True,
        )


def _finish_reason(raw: RawTurn) -> str:
    """The normalised finish_reason; a filtered reply is ``content_filter``."""
    if raw.filtered is not None:
        return "content_filter"
    finish = _FINISH_ALIASES.get(raw.finish or "stop", raw.finish or "stop")
    if finish not in ("stop", "length", "tool_calls", "content_filter"):
        return "stop"  # unknown values: keep raw, treat as stop
    return finish


def _truncated(turn: AssistantTurn) -> LLMError:
    """The ``truncated_tool_call`` error of a turn whose calls were cut off,
    carrying the turn with every call marked unusable as ``error.turn``."""
    names = ", ".join(call.name or "?" for call in turn.tool_calls)
    error = LLMError(
        "truncated_tool_call",
        f"the reply was cut off inside tool call(s) {names} "
        f"(finish_reason {turn.raw_finish_reason!r}, "
        f"{turn.usage.completion_tokens} completion tokens)",
        retryable=True,
        code=turn.raw_finish_reason,
    )
    # Once retries are spent the caller answers these calls with tool errors (never
    # executes them), so the model learns and the loop goes on.
    for call in turn.tool_calls:
        call.arguments = None
        call.error = call.error or "the reply was cut off before the arguments were complete"
        call.error += "; split the work into smaller calls (for example write a long file in parts)"
    turn.finish_reason = "length"
    turn.warnings.append(error.message)
    error.turn = turn  # type: ignore[attr-defined]
    return error


def _read_text_calls(turn: AssistantTurn, tools: list[dict[str, Any]]) -> None:
    """Tool calls the model wrote in its text (opt-in fallback) become the turn's calls."""
    offered = {t.get("function", {}).get("name") for t in tools if isinstance(t, dict)}
    found, remaining = _text_toolcalls.extract(turn.content or "", {n for n in offered if n})
    if not found:
        return
    calls = [ToolCall(id=mint_call_id(), name=n, arguments=a) for n, a in found]
    for call in calls:
        call.arguments_raw = call.wire()["function"]["arguments"]
    turn.warnings.append(f"read {len(calls)} tool call(s) written as text (rule X1)")
    turn.tool_calls, turn.content, turn.finish_reason = calls, remaining, "tool_calls"


def clean_text(text: str) -> str:
    """Replace lone UTF-16 surrogates (half an emoji, cut by a server) with U+FFFD.

    JSON allows ``"\\ud83d"`` on its own, but such a string cannot be encoded as
    UTF-8: left in, it would break every later request and every save.
    """
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def clean_value(value: Any) -> Any:
    """:func:`clean_text` applied to every string inside parsed JSON."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(str(k)): clean_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_value(v) for v in value]
    return value


def _usage(
    raw: RawTurn,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    content: str | None,
    reasoning: str | None,
    calls: list[ToolCall],
    warnings: list[str],
) -> Usage:
    for source in (raw.usage, raw.choice_usage):
        if not isinstance(source, dict):
            continue
        prompt, completion = (
            _int(source.get("prompt_tokens")),
            _int(source.get("completion_tokens")),
        )
        if prompt is None and completion is None:
            continue
        prompt, completion = prompt or 0, completion or 0
        total = _int(source.get("total_tokens")) or prompt + completion
        extras = {k: v for k, v in source.items() if k not in _USAGE_KEYS and v is not None}
        if prompt:
            local = count_messages(messages, tools)
            if prompt < local * _TRUNCATION_RATIO and local - prompt >= _TRUNCATION_MIN_GAP:
                warnings.append(
                    f"context_truncated_by_server: the server counted {prompt} prompt tokens "
                    f"but about {local} were sent; it may have dropped part of the conversation"
                )
        return Usage(prompt, completion, total, estimated=False, extras=extras)
    prompt = count_messages(messages, tools)
    completion = count_text(content or "") + count_text(reasoning or "")
    for call in calls:
        completion += count_text(call.name) + count_text(call.arguments_raw)
    return Usage(prompt, completion, prompt + completion, estimated=True)


def _int(value: Any) -> int | None:
    """A token count from the server, or None (unreported: counted locally) when it is
    not a finite count >= 0 (a NaN or Infinity would crash int(), a negative one would
    lower the totals)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return int(value) if value >= 0 else None


def decode_body(content: bytes) -> Any:
    """Decode a whole JSON body; LLMError (retryable server_error) when it is not JSON."""
    try:
        return loads(content, REPLY_MAX_DEPTH)
    except ValueError as exc:  # also JSONTooDeep: nesting too deep to parse safely
        text = content.decode("utf-8", "replace")
        raise LLMError(
            "server_error",
            f"the server's reply is not usable JSON ({exc}): {text.strip()[:200]!r}",
            retryable=True,
        ) from None
