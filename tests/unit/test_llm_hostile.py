"""The model client under hostile or failing servers (issue 20 items 6, 20 and 24):
one retry rule for every transient error, bounded response time, bounded JSON nesting,
unique tool-call ids, a cap on calls per reply, and a compact stream assembler.
Real HTTP against FakeOpenAIServer, real server and worker processes
(docs/providers.md rules cited per test)."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

from agentkit.llm._assemble import RawTurn, build_turn

USER = [{"role": "user", "content": "Please help."}]


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


# -- memory of a long stream (item 24) ----------------------------------------------


def test_the_assembler_keeps_streamed_text_in_about_its_own_size() -> None:
    """Regression: every delta was kept as its own small string (~17 bytes of memory
    per byte of text); benchmarks/stream_memory.py measures the whole client."""
    events = [json.dumps(chunk({"content": "abcd"})) for _ in range(20_000)]
    tracemalloc.start()
    try:
        raw = RawTurn()
        before = tracemalloc.get_traced_memory()[0]
        for event in events:
            raw.apply_event(None, event, None)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    turn = build_turn(
        raw, streamed=False, messages=USER, tools=None, max_tokens=None, text_fallback=False
    )
    assert turn.content == "abcd" * 20_000
    assert held < 3 * 80_000  # 80 KB of text
