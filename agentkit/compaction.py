"""Keeping a conversation inside the model's context window.

Two steps, cheapest first (issue 2, DESIGN §5): shrink the oldest tool outputs,
then compact older turns into one summary message. The summary is built
mechanically from the messages (no extra model call), so compaction cannot fail
or cost tokens. Originals go to the conversation's ``archive``: nothing is lost
from the record, only from what is sent.
"""

from __future__ import annotations

import json
from typing import Any

SHRINK_KEEP_CHARS = 400
SUMMARY_MAX_CHARS = 8000


def shrink_tool_outputs(
    messages: list[dict[str, Any]],
    sizes: list[int],
    target: int,
    archive: list[dict[str, Any]],
    count: Any,
) -> bool:
    """Shorten old tool messages in place, oldest first, until ``sum(sizes) <= target``.

    Args:
        messages: the conversation messages (modified in place).
        sizes: token count of each message, kept in step with ``messages``.
        target: the token budget to reach.
        archive: receives ``{"index", "role", "content"}`` of every original.
        count: ``count(message) -> tokens`` for one message.

    Returns True when the budget was reached. The results of the latest
    assistant message are never shrunk: the model is working with them.
    """
    total = sum(sizes)
    latest = max(
        (i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=len(messages)
    )
    for i, msg in enumerate(messages[:latest]):
        if total <= target:
            break
        content = msg.get("content")
        if msg.get("role") != "tool" or not isinstance(content, str):
            continue
        if len(content) <= SHRINK_KEEP_CHARS + 100:
            continue
        archive.append({"index": i, "role": "tool", "content": content})
        omitted = len(content) - SHRINK_KEEP_CHARS
        msg["content"] = (
            content[:SHRINK_KEEP_CHARS]
            + f"\n[... {omitted} chars of this old tool output removed to fit the context window]"
        )
        new_size = count(msg)
        total += new_size - sizes[i]
        sizes[i] = new_size
    return total <= target


def _shorten(value: Any, keep: int) -> tuple[Any, int]:
    """Return ``value`` with every string longer than ``keep`` + 100 cut to ``keep``
    characters and a note, and how many characters were removed."""
    if isinstance(value, str) and len(value) > keep + 100:
        removed = len(value) - keep
        return value[:keep] + f"[... {removed} chars removed to fit the context window]", removed
    if isinstance(value, dict):
        out, total = {}, 0
        for key, item in value.items():
            out[key], cut = _shorten(item, keep)
            total += cut
        return out, total
    if isinstance(value, list):
        items = [_shorten(item, keep) for item in value]
        return [item for item, _ in items], sum(cut for _, cut in items)
    return value, 0


def shrink_call_arguments(
    messages: list[dict[str, Any]],
    sizes: list[int],
    target: int,
    archive: list[dict[str, Any]],
    count: Any,
) -> bool:
    """Shorten long string arguments of tool calls already answered, oldest first,
    until ``sum(sizes) <= target`` (a 3 MB write_file content, say). The arguments
    stay valid JSON; originals go to ``archive``. Returns True when the budget was
    reached. Arguments parameters are the same as :func:`shrink_tool_outputs`.
    """
    total = sum(sizes)
    for i, msg in enumerate(messages):
        if total <= target:
            break
        if msg.get("role") != "assistant" or not msg.get("tool_calls"):
            continue
        changed = False
        calls = []
        for call in msg["tool_calls"]:
            function = call.get("function") or {}
            raw = function.get("arguments")
            if not isinstance(raw, str) or len(raw) <= SHRINK_KEEP_CHARS * 2:
                calls.append(call)
                continue
            try:
                shortened, removed = _shorten(json.loads(raw), SHRINK_KEEP_CHARS)
            except ValueError:
                calls.append(call)
                continue
            if not removed:
                calls.append(call)
                continue
            archive.append(
                {"index": i, "role": "assistant", "tool_call_id": call.get("id"), "arguments": raw}
            )
            arguments = json.dumps(shortened, ensure_ascii=False, separators=(",", ":"))
            calls.append({**call, "function": {**function, "arguments": arguments}})
            changed = True
        if changed:
            msg["tool_calls"] = calls
            new_size = count(msg)
            total += new_size - sizes[i]
            sizes[i] = new_size
    return total <= target


def _cut_index(
    messages: list[dict[str, Any]], sizes: list[int], start: int, keep_tokens: int
) -> int:
    """Return the first index of the recent tail to keep: at most ``keep_tokens``,
    starting at a user or assistant message so tool results stay with their call."""
    acc = 0
    cut = len(messages)
    for i in range(len(messages) - 1, start - 1, -1):
        acc += sizes[i]
        if acc > keep_tokens and cut < len(messages):
            break
        if messages[i].get("role") in ("user", "assistant"):
            cut = i
    return max(cut, start)


def _summarise(messages: list[dict[str, Any]]) -> str:
    lines: list[str] = []
    for msg in messages:
        role = msg.get("role")
        content = msg.get("content") if isinstance(msg.get("content"), str) else ""
        if role == "user" or role == "system":
            lines.append(f"- {role}: {' '.join(content.split())[:300]}")
        elif role == "assistant":
            if content:
                lines.append(f"- assistant: {' '.join(content.split())[:300]}")
            for call in msg.get("tool_calls") or []:
                fn = call.get("function", {})
                args = str(fn.get("arguments", ""))[:150]
                lines.append(f"- assistant called {fn.get('name')}({args})")
        elif role == "tool":
            first = " ".join(content.split())[:200]
            lines.append(f"  → {first}")
    text = "\n".join(lines)
    if len(text) > SUMMARY_MAX_CHARS:
        text = "…\n" + text[-SUMMARY_MAX_CHARS:]
    return text


def compact_turns(
    messages: list[dict[str, Any]],
    sizes: list[int],
    target: int,
    archive: list[dict[str, Any]],
    count: Any,
    header: str,
) -> bool:
    """Replace older turns by one summary user message, in place.

    Keeps the leading system message(s) and the first user message (the task), and
    the most recent messages that fit in half of ``target``. ``header`` is the
    summary's first line (from prompts, in the conversation language).
    Returns True when the result fits ``target``.
    """
    start = 0
    while start < len(messages) and messages[start].get("role") == "system":
        start += 1
    if start < len(messages) and messages[start].get("role") == "user":
        start += 1
    cut = _cut_index(messages, sizes, start, max(target // 2, 1))
    if cut <= start:
        return sum(sizes) <= target
    removed = messages[start:cut]
    archive.extend({"index": start + k, **m} for k, m in enumerate(removed))
    summary = {"role": "user", "content": f"{header}\n{_summarise(removed)}"}
    messages[start:cut] = [summary]
    sizes[start:cut] = [count(summary)]
    return sum(sizes) <= target
