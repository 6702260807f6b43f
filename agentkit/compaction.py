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


def compact_json_size(messages: list[dict[str, Any]]) -> int:
    """Return the JSON size of ``messages`` in characters (for diagnostics)."""
    return len(json.dumps(messages, ensure_ascii=False))
