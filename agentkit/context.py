"""Keeping a conversation inside the model's context window.

:class:`ContextWindow` holds the conversation as it is sent (wire format, token
sizes, the budget) and calls the steps below when a request would not fit.
Steps, cheapest first (issue 2, docs/architecture.md §5): shrink the oldest tool outputs,
then long arguments of answered tool calls, then compact older turns into one summary message. The summary is built
mechanically from the messages (no extra model call), so compaction cannot fail
or cost tokens. Originals go to the conversation's ``archive``: nothing is lost
from the record, only from what is sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentkit import events as ev
from agentkit import prompts
from agentkit.llm.wire import WireMessage

if TYPE_CHECKING:
    from agentkit.conversation import Conversation
    from agentkit.settings import Settings

SHRINK_KEEP_CHARS = 400
SUMMARY_MAX_CHARS = 8000


MIN_BUDGET = 256
"""Tokens a request's messages may always use, however small the context window."""


def message_budget(settings: Settings, reserved: int) -> int:
    """Tokens a request's messages may use: ``context_window * context_budget`` less
    ``reserved`` (tool schemas, and whatever else the caller sets aside) and
    ``max_output_tokens``, at least :data:`MIN_BUDGET`."""
    budget = int(settings.context_window * settings.context_budget)
    return max(budget - reserved - (settings.max_output_tokens or 0), MIN_BUDGET)


def schema_tokens(schemas: list[dict[str, Any]]) -> int:
    """Tokens of a request's ``tools`` list, counted as sent."""
    from agentkit.tokens import count_text

    return count_text(json.dumps(schemas, ensure_ascii=False))


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
        raw = msg.get("content")
        content = raw if isinstance(raw, str) else ""
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


class ContextWindow:
    """The conversation as it is sent: wire-format messages, their sizes, the budget.

    Owns appending messages to the conversation, so the wire-format copy and the
    token count of each message stay in step with ``conversation.messages``
    without re-encoding the history every turn (docs/architecture.md §8): each
    message becomes one :class:`~agentkit.llm.wire.WireMessage`, counted and
    encoded once, and kept while its stored message is unchanged (a request body
    is then a join of kept fragments). ``fit`` shrinks and compacts the stored
    messages when the request would not fit the budget.

    Args:
        conversation: the conversation (``messages`` and ``archive`` are used).
        settings: uses ``context_window`` and ``context_budget`` (share, 0-1),
            ``max_output_tokens``, ``replay_reasoning`` and ``language``.
        tools_schema: returns the tool schemas offered (their tokens count
            against the budget; asked once).
        emit: receives ContextCompacted events.
    """

    def __init__(
        self,
        conversation: Conversation,
        settings: Settings,
        tools_schema: Callable[[], list[dict[str, Any]]],
        emit: Callable[[ev.Event], None],
    ) -> None:
        self.conversation = conversation
        self.settings = settings
        self._tools_schema = tools_schema
        self._emit = emit
        self._wire: list[WireMessage] = []
        self._sizes: list[int] = []
        # The stored message each wire message was made from (same index).
        self._sources: list[dict[str, Any]] = []
        self._tool_tokens: int | None = None

    @property
    def wire(self) -> list[dict[str, Any]]:
        """The messages to send (OpenAI shape, read-only WireMessages), in step with
        the conversation."""
        self._sync()
        return self._wire  # type: ignore[return-value]  # WireMessage is a dict

    @property
    def tokens(self) -> int:
        """Estimated tokens of :attr:`wire`."""
        return sum(self._sizes)

    def append(self, message: dict[str, Any]) -> None:
        """Append ``message`` to the conversation and to the wire cache."""
        self.conversation.messages.append(message)
        if len(self._wire) == len(self.conversation.messages) - 1:
            wire = WireMessage(self._to_wire(message))
            self._wire.append(wire)
            self._sizes.append(wire.tokens)
            self._sources.append(message)

    def rebuild(self) -> None:
        """Bring the wire copy in step after the history was changed in place (a
        compaction, a repair, messages added directly). A message whose wire form is
        unchanged keeps its WireMessage, so only what changed is encoded and counted
        again."""
        kept = {id(src): (src, wire) for src, wire in zip(self._sources, self._wire, strict=True)}
        wires: list[WireMessage] = []
        for message in self.conversation.messages:
            fresh = self._to_wire(message)
            source, wire = kept.get(id(message), (None, None))
            if source is not message or wire is None or wire != fresh:
                wire = WireMessage(fresh)
            wires.append(wire)
        self._wire = wires
        self._sizes = [w.tokens for w in wires]
        self._sources = list(self.conversation.messages)

    def budget(self) -> int:
        """Tokens a request's messages may use: :func:`message_budget` less the tool
        schemas."""
        if self._tool_tokens is None:
            self._tool_tokens = schema_tokens(self._tools_schema())
        return message_budget(self.settings, self._tool_tokens)

    def fit(self, budget: int) -> None:
        """Bring :attr:`wire` within ``budget`` tokens, cheapest step first: shrink old
        tool outputs, then long arguments of answered calls, then compact old turns.
        Emits ContextCompacted when anything changed; originals go to the archive."""
        self._sync()
        before = self.tokens
        if before <= budget:
            return
        msgs = self.conversation.messages
        archive = self.conversation.archive
        sizes = list(self._sizes)  # shrinking works on the stored messages
        how = "shrink"

        def count(message: dict[str, Any]) -> int:
            return _count(self._to_wire(message))

        if not shrink_tool_outputs(msgs, sizes, budget, archive, count):
            how = "shrink arguments"
            if not shrink_call_arguments(msgs, sizes, budget, archive, count):
                how = "compact"
                header = prompts.load(self.settings.language, "compaction_header.txt").strip()
                compact_turns(msgs, sizes, budget, archive, count, header)
        self.rebuild()
        self._emit(ev.ContextCompacted(tokens_before=before, tokens_after=self.tokens, how=how))

    def _sync(self) -> None:
        if len(self._wire) != len(self.conversation.messages):
            self.rebuild()  # messages were added without append() (a hook, a repair)

    def _to_wire(self, msg: dict[str, Any]) -> dict[str, Any]:
        role = msg.get("role")
        if role == "assistant":
            out: dict[str, Any] = {"role": "assistant", "content": msg.get("content")}
            if msg.get("tool_calls"):
                out["tool_calls"] = msg["tool_calls"]
                if self.settings.replay_reasoning and msg.get("reasoning_content"):
                    out["reasoning_content"] = msg["reasoning_content"]
            return out
        if role == "tool":
            return {
                "role": "tool",
                "tool_call_id": msg.get("tool_call_id"),
                "name": msg.get("name"),
                "content": msg.get("content") or "",
            }
        return {"role": role, "content": msg.get("content") or ""}


def _count(message: dict[str, Any]) -> int:
    from agentkit.tokens import count_message  # tiktoken loads on first use, not at import

    return count_message(message)
