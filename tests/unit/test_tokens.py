"""Token counting: sane without tiktoken's tables (offline), bounded when the download
hangs, OpenAI's per-message rules, and caching that notices replaced content."""

from __future__ import annotations

import pathlib
import time

import pytest

from agentkit import tokens


def test_estimate_rules() -> None:
    assert tokens.estimate_text("") == 0
    assert tokens.estimate_text("abcd") == 1
    assert tokens.estimate_text("abcde") == 2
    assert tokens.estimate_text("日本語のテキスト") == 8
    assert tokens.estimate_text("한국어") == 3
    assert tokens.estimate_text("Привет") == 3  # 12 UTF-8 bytes
    assert tokens.estimate_text("中文 and English") == 2 + 3  # " and English": 12 bytes


def test_count_text_is_sane_whatever_the_backend() -> None:
    english = "The quick brown fox jumps over the lazy dog. " * 20
    assert 150 <= tokens.count_text(english) <= 300
    assert tokens.count_text(english) == tokens.count_text(english)  # cached, same value
    assert tokens.count_text("\ud800 lone surrogate") > 0  # never raises


def test_count_messages_follows_openai_overheads() -> None:
    base = tokens.count_messages([])
    assert base == 3
    one = tokens.count_messages([{"role": "user", "content": "hello there"}])
    named = tokens.count_messages([{"role": "user", "content": "hello there", "name": "bob"}])
    assert one == base + 3 + tokens.count_text("hello there")
    assert named == one + 1 + tokens.count_text("bob")
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path":"a.txt"}'},
    }
    with_call = tokens.count_messages(
        [{"role": "assistant", "content": None, "tool_calls": [call]}]
    )
    assert with_call > base + 3 + tokens.count_text('{"path":"a.txt"}')
    tools = [
        {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}
    ]
    assert tokens.count_messages([], tools) > base


def test_content_parts_and_odd_values_never_raise() -> None:
    parts = [
        {"type": "text", "text": "look at this"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]
    count = tokens.count_messages([{"role": "user", "content": parts}])
    assert count > 500  # the image counts like a high-detail tile set
    odd = [
        {"role": "user", "content": None},
        {"role": "tool", "content": 42, "tool_call_id": "x"},
        "junk",
    ]
    assert tokens.count_messages(odd) > 3  # type: ignore[arg-type]


def test_cached_message_counts_follow_replaced_content() -> None:
    message = {"role": "tool", "tool_call_id": "call_1", "content": "short"}
    transcript = [message]
    first = tokens.count_messages(transcript)
    message["content"] = "a much longer tool output " * 50  # replaced, as the engine does
    second = tokens.count_messages(transcript)
    assert second > first + 100
    tokens.clear_cache()
    assert tokens.count_messages(transcript) == second


def test_many_messages_are_counted_quickly() -> None:
    transcript = [{"role": "user", "content": f"message number {i} " * 30} for i in range(500)]
    tokens.count_messages(transcript)
    started = time.monotonic()
    for _ in range(20):
        tokens.count_messages(transcript)
    assert time.monotonic() - started < 10  # generous: a guard against a hang, not a benchmark


def test_doctors_line_says_a_remembered_failure_is_an_earlier_runs(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh user read "did not load on this machine: ConnectionError: …" in
    doctor's output as doctor reaching the internet; the line says it is remembered."""
    monkeypatch.delenv("AGENTKIT_TOKENIZER", raising=False)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    (tmp_path / tokens.FAILURE_FILE).write_text("ConnectionError: no route\n")
    state = tokens.offline_state()  # tiktoken is a dependency: installed
    assert state.startswith("estimate (an earlier run could not download tiktoken's tables")
    assert "ConnectionError: no route" in state and "nothing is tried now" in state
