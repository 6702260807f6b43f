"""What the web chat's read routes show of a conversation: its messages as people saw
them live, and its usage (docs/web-api.md "The conversation").

One job: shape a :class:`agentkit.conversation.Conversation` for the page, so that a
reloaded conversation looks as it did live: each message with a ``kind``, each tool
call with the words shown when it started (``actions``), the rounds that ended
without an answer and where they ended (with the same explanation a live failure
gets), and the tokens and cost of the main agent plus its sub-agents.
"""

from __future__ import annotations

import json
from typing import Any

from agentkit import prompts
from agentkit.chat.explain import round_failure
from agentkit.conversation import Conversation, usage_total
from agentkit.settings import Settings
from agentkit.subagent.notify import is_notification
from agentkit.tools.registry import ToolRegistry

__all__ = ["messages_view", "round_ends_view", "transcript_view", "usage_view"]


def _actions(
    message: dict[str, Any], language: str, registry: ToolRegistry | None
) -> dict[str, str]:
    """The words each tool call of ``message`` showed when it started (its last_action)."""
    out: dict[str, str] = {}
    for call in message.get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        raw = call.get("function")
        function: dict[str, Any] = raw if isinstance(raw, dict) else {}
        name = str(function.get("name") or "")
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except (TypeError, ValueError, RecursionError):
            arguments = {}
        tool = registry.get(name) if registry is not None else None
        key = (tool.action if tool is not None else None) or name
        args = arguments if isinstance(arguments, dict) else {}
        out[str(call.get("id"))] = prompts.last_action(language, key, args)
    return out


def round_ends_view(conv: Conversation, settings: Settings) -> list[dict[str, Any]]:
    """The rounds that ended without an answer (stopped, failed, interrupted), oldest
    first: ``{round, status, error, background, after}``, ``after`` the number of
    messages before it (at most all of them), and for a failure ``explanation``
    (agentkit.chat.explain), the words the live page showed."""
    out = []
    for mark in conv.round_ends:
        after = mark.get("after")
        entry: dict[str, Any] = {k: mark.get(k) for k in ("round", "status", "error")}
        entry["background"] = [i for i in mark.get("background") or [] if isinstance(i, int)]
        entry["after"] = (
            min(after, len(conv.messages)) if isinstance(after, int) else len(conv.messages)
        )
        if mark.get("status") == "failed":
            entry["explanation"] = round_failure(
                mark.get("error"),
                mark.get("error_kind"),
                base_url=settings.base_url,
                model=settings.model,
            )
        out.append(entry)
    return out


def messages_view(
    conv: Conversation, settings: Settings, registry: ToolRegistry | None = None
) -> list[dict[str, Any]]:
    """The conversation's messages, each with ``kind``: system (the prompt and notes),
    user, assistant (with ``actions``: call id → the words shown), tool, notification (a
    sub-agent's completion announced to the model with the spec §3 templates, as a user
    or a system message)."""
    out: list[dict[str, Any]] = []
    for message in conv.messages:
        role = message.get("role")
        shown = {**message, "kind": "notification" if is_notification(message) else role}
        if role == "assistant" and message.get("tool_calls"):
            shown["actions"] = _actions(message, settings.language, registry)
        out.append(shown)
    return out


def transcript_view(
    record: dict[str, Any], language: str, registry: ToolRegistry | None = None
) -> dict[str, Any]:
    """A sub-agent's record with ``actions`` (call id -> the words for it, as the
    conversation shows them: "Reading notes.txt") on each assistant message that
    calls tools, so the transcript tab names each call once, readably."""
    messages = []
    for message in record.get("messages") or []:
        calls = isinstance(message, dict) and message.get("tool_calls")
        if calls and message.get("role") == "assistant":
            message = {**message, "actions": _actions(message, language, registry)}
        messages.append(message)
    return {**record, "messages": messages}


def usage_view(conv: Conversation, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Tokens and cost of the whole conversation: the main agent's (its stats) plus
    each sub-agent's row, summed by agentkit.conversation.usage_total (the one rule,
    also behind ``/usage`` and the conversation file: the cost is None when any
    agent's is unknown, never a partial sum).

    Returns ``{"total_tokens", "main_tokens", "subagent_tokens", "cost_usd"}``."""
    total = usage_total(conv.stats, rows)
    main = usage_total(conv.stats, [])["tokens"]
    return {
        "total_tokens": total["tokens"],
        "main_tokens": main,
        "subagent_tokens": total["tokens"] - main,
        "cost_usd": total["cost_usd"],
    }
