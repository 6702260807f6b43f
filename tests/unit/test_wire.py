"""Messages encoded once (agentkit.llm.wire) and the ContextWindow that keeps them:
the request bodies stay byte for byte what encoding them whole gives, over a long run
with shrinking, compaction, a context-length refusal and repairs."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Any

import pytest
from wire_tools import registry, whole

from agentkit.conversation import Conversation
from agentkit.engine import Engine
from agentkit.llm.wire import WireMessage, encode_body
from agentkit.settings import Settings
from agentkit.tokens import count_message, count_messages
from agentkit.tools.base import ToolContext

MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "sys"},
    {"role": "user", "content": 'héllo 你好 \U0001f600 "quoted" \\ back\nslash\t'},
    {"role": "user", "content": "half an emoji \ud83d here"},  # sent as "?"
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "name": "f", "content": ""},
    {"role": "user", "content": [{"type": "text", "text": "parts"}, {"type": "image_url"}]},
    {"role": "assistant", "content": "n", "extra": [1.5, 1e300, -0.0, True, None, 10**30]},
]


@pytest.mark.parametrize(
    "fields",
    [
        {"model": "m", "messages": None, "stream": True},
        {"messages": None, "model": "m"},
        {"model": "m", "tools": [{"type": "function"}], "messages": None},
        {"model": "m", "messages": None},
    ],
)
@pytest.mark.parametrize("kept", ["all", "none", "mixed"])
def test_encode_body_is_byte_for_byte_the_whole_encoding(fields: dict[str, Any], kept: str) -> None:
    messages: list[dict[str, Any]] = [
        WireMessage(m) if kept == "all" or (kept == "mixed" and i % 2) else dict(m)
        for i, m in enumerate(MESSAGES)
    ]
    body = {k: (messages if k == "messages" else v) for k, v in fields.items()}
    assert encode_body(body) == whole(body)
    body["messages"] = messages[:1]
    assert encode_body(body) == whole(body)
    body["messages"] = []
    assert encode_body(body) == whole(body)


def test_encode_body_refuses_what_json_refuses() -> None:
    with pytest.raises(TypeError):
        encode_body({"model": "m", "messages": [WireMessage({"content": object()})]})


def test_a_wire_message_is_read_only_and_its_copies_are_plain_dicts() -> None:
    message = WireMessage({"role": "user", "content": "x"})
    for change in (
        lambda: message.__setitem__("content", "y"),
        lambda: message.__delitem__("content"),
        lambda: message.update(content="y"),
        lambda: message.pop("content"),
        lambda: message.setdefault("name", "n"),
        message.clear,
        message.popitem,
    ):
        with pytest.raises(TypeError, match="read-only"):
            change()
    assert message == {"role": "user", "content": "x"}
    for duplicate in (dict(message), {**message}, copy.copy(message), copy.deepcopy(message)):
        assert type(duplicate) is dict and duplicate == message
        duplicate["content"] = "changed"  # a copy may be edited
    assert type(pickle.loads(pickle.dumps(message))) is dict


def test_counting_uses_the_count_a_wire_message_keeps() -> None:
    kept = [WireMessage({"role": "user", "content": "some words " * 50}, tokens=7)] * 3
    assert count_messages(kept) == 3 + 3 * 7  # reply priming + the kept counts
    fresh = WireMessage({"role": "user", "content": "some words " * 50})
    assert fresh.tokens == count_message(dict(fresh))
    assert count_messages([fresh]) == count_messages([dict(fresh)])


# ------------------------------------------------------------------ a long run


def test_compaction_keeps_the_encoding_of_messages_it_did_not_change(workspace: Path) -> None:
    settings = Settings(model="m", api_key="k", language="en", context_window=2048)
    conversation = Conversation(messages=[{"role": "system", "content": "s"}])
    engine = Engine(
        model=None,  # type: ignore[arg-type]  # no request is made
        registry=registry(),
        conversation=conversation,
        ctx=ToolContext(workspace=workspace, settings=settings),
    )
    window = engine.window
    window.append({"role": "user", "content": "task"})
    for i in range(12):
        window.append({"role": "assistant", "content": f"step {i}"})
        window.append({"role": "user", "content": f"result {i} " + "x " * 400})
    tail = list(window.wire[-3:])
    for message in window.wire:
        assert isinstance(message, WireMessage)
        _ = message.json
    window.fit(window.budget())
    assert conversation.archive  # compacted
    assert all(a is b for a, b in zip(window.wire[-3:], tail, strict=True))
    assert window.tokens == sum(count_message(dict(m)) for m in window.wire)
    # A message replaced in the history gets a new wire message; the others stay.
    before = list(window.wire)
    conversation.messages[1] = {"role": "user", "content": "another task"}
    window.rebuild()
    assert window.wire[1] is not before[1] and window.wire[1]["content"] == "another task"
    assert all(a is b for a, b in zip(window.wire[2:], before[2:], strict=True))
