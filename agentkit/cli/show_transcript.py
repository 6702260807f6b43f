"""A transcript as ``agentkit transcript`` and ``/show N`` print it.

One job: render a saved conversation's or sub-agent's messages as readable text: the
task, status and result first, then each turn's tool calls, the system prompt folded
to one line unless asked for (``system=True``). Light imports only.
"""

from __future__ import annotations

import json
from typing import Any


def flat(text: Any, limit: int) -> str:
    """``text`` on one line (runs of white space made one space), at most ``limit``
    characters (cut with "…")."""
    one = " ".join(str(text).split())
    return one if len(one) <= limit else one[: max(0, limit - 1)] + "…"


def _clip(text: str, limit: int) -> str:
    """Keep line breaks, cut to ``limit`` chars (0: no cut) with a note of what was left."""
    if limit <= 0 or len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit} more chars)"


def _tokens(stats: dict[str, Any]) -> str:
    usage = stats.get("token_usage") or {}
    return (
        f"tokens {usage.get('total', 0)} (prompt {usage.get('prompt', 0)},"
        f" completion {usage.get('completion', 0)})"
    )


def stats_line(stats: dict[str, Any]) -> str:
    """Return one line summarising a conversation's or a sub-agent's stats."""
    from agentkit.chat.explain import counter_words  # lazily: the chat package is heavy

    parts = []
    if "turns" in stats:
        parts.append(f"turns {stats['turns']}")
    if "runtime_seconds" in stats:
        parts.append(f"runtime {stats['runtime_seconds']}s")
    calls = stats.get("tool_calls")
    words = counter_words(stats)
    if isinstance(calls, dict) and calls:  # which tools, after the counters' words
        words += " (" + ", ".join(f"{k} {v}" for k, v in sorted(calls.items())) + ")"
    parts.append(words)
    parts.append(_tokens(stats) + (" estimated" if stats.get("usage_estimated") else ""))
    return " · ".join(parts)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts (text / image_url)
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            else:
                parts.append(json.dumps(part, ensure_ascii=False, default=str))
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False, default=str)


def _call_text(call: Any) -> str:
    if not isinstance(call, dict):
        return str(call)
    inner = call.get("function")
    function = inner if isinstance(inner, dict) else call
    name = function.get("name", "?")
    args = function.get("arguments", "")
    if isinstance(args, str):
        try:  # re-dump compactly and with real unicode
            args = json.dumps(json.loads(args), ensure_ascii=False)
        except ValueError:
            pass
    else:
        args = json.dumps(args, ensure_ascii=False, default=str)
    return f"{name}({args})"


def render_transcript(
    doc: dict[str, Any],
    *,
    tool_chars: int = 800,
    text_chars: int = 0,
    system: bool = False,
    system_hint: str = "agentkit transcript TARGET --system",
) -> str:
    """Return a main conversation or sub-agent record as readable text: first the
    head (a sub-agent's summary, task, status, result and the tool calls it made, in
    order), then the messages.

    Args:
        doc: a conversation file or a sub-agent conversations.json (docs/specification.md §6).
        tool_chars: cut tool results to this many chars (0: keep all).
        text_chars: cut system/user/assistant texts to this many chars (0: keep all).
        system: print system prompts whole; by default each is one line saying its
            size and how to see it (``system_hint``, the command that shows it).
        system_hint: the command named in a folded system prompt's line.
    """
    messages = [m for m in doc.get("messages") or [] if isinstance(m, dict)]
    lines = _transcript_head(doc, messages)
    for message in messages:
        role = message.get("role", "?")
        text = _content_text(message.get("content"))
        if role == "tool":
            label = f"[tool result: {message.get('name') or message.get('tool_call_id', '?')}]"
            lines.append(label)
            if text:
                lines.append(_indent(_clip(text, tool_chars)))
        elif role == "system" and not system:
            count = len(text.splitlines())
            lines.append(f"[system] the system prompt, {count} lines: {system_hint} shows it")
        else:
            lines.append(f"[{role}]")
            if message.get("reasoning_content"):
                lines.append(
                    _indent("(reasoning) " + _clip(str(message["reasoning_content"]), 300))
                )
            if text:
                lines.append(_indent(_clip(text, text_chars)))
            for call in message.get("tool_calls") or []:
                lines.append(_indent("-> " + _clip(_call_text(call), tool_chars)))
        lines.append("")
    if doc.get("final_text") and "agent_id" not in doc:
        lines.append(f"final: {flat(doc['final_text'], 300)}")
    if doc.get("error"):
        lines.append(f"error: {flat(doc['error'], 300)}")
    lines.append("stats: " + stats_line(doc.get("stats") or {}))
    return "\n".join(lines)


def _transcript_head(doc: dict[str, Any], messages: list[dict[str, Any]]) -> list[str]:
    """The lines before the messages: what it is, its task, status and result, and
    the names of its tool calls in order (``read_file ×3, run_command``)."""
    if "agent_id" in doc:
        head = f"sub-agent #{doc.get('agent_id')}: {flat(doc.get('summary', ''), 100)}"
    else:
        head = f"conversation {doc.get('conversation_id', '?')}"
    lines = [head, "=" * min(len(head), 80)]
    if doc.get("task"):
        lines.append(f"task: {flat(doc['task'], 300)}")
    lines.append(f"status: {doc.get('status') or doc.get('state') or '?'}")
    if doc.get("result_summary"):
        lines.append(f"result: {doc['result_summary']}")
    names = [
        _call_name(call)
        for m in messages
        if m.get("role") == "assistant"
        for call in m.get("tool_calls") or []
    ]
    lines.append(f"tool calls: {_runs_of(names) or 'none'}")
    lines.append("")
    return lines


def _call_name(call: Any) -> str:
    inner = call.get("function") if isinstance(call, dict) else None
    function = inner if isinstance(inner, dict) else call if isinstance(call, dict) else {}
    return str(function.get("name") or "?")


def _runs_of(names: list[str]) -> str:
    """``read_file ×3, run_command``: the names in order, repeats folded."""
    parts: list[str] = []
    count = 0
    for index, name in enumerate(names):
        count += 1
        if index + 1 == len(names) or names[index + 1] != name:
            parts.append(name if count == 1 else f"{name} ×{count}")
            count = 0
    return ", ".join(parts)


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines() or [""])
