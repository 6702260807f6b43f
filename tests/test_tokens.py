"""Token counting: sane without tiktoken's tables (offline), bounded when the download
hangs, OpenAI's per-message rules, and caching that notices replaced content."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from agentkit import tokens

PROBE = """
import json, time
from agentkit import tokens
start = time.monotonic()
backend = tokens.backend()
print(json.dumps({
    "backend": backend,
    "describe": tokens.describe(),
    "seconds": time.monotonic() - start,
    "hello": tokens.count_text("Hello, world! How are you today?"),
    "cjk": tokens.count_text("你好世界，今天天气很好"),
    "empty": tokens.count_text(""),
    "messages": tokens.count_messages([{"role": "user", "content": "hi"}]),
}))
"""


def run_probe(tmp_path: Path, **env: str) -> dict:
    """Count in a fresh interpreter whose tiktoken cache is an empty folder."""
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir(exist_ok=True)
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTKIT_")}
    child_env.update(
        TIKTOKEN_CACHE_DIR=str(cache),
        # No network even on a connected machine: the proxy port refuses connections.
        HTTPS_PROXY="http://127.0.0.1:9",
        HTTP_PROXY="http://127.0.0.1:9",
        NO_PROXY="",
        PYTHONPATH=str(Path(__file__).resolve().parents[1]),
    )
    child_env.update(env)
    result = subprocess.run(
        [sys.executable, "-c", PROBE], env=child_env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_counts_without_tiktoken_tables(tmp_path: Path) -> None:
    started = time.monotonic()
    out = run_probe(tmp_path)
    assert time.monotonic() - started < 30
    assert out["backend"] == "estimate"
    assert 6 <= out["hello"] <= 12  # 32 ASCII chars: ~4 chars per token
    assert out["cjk"] == 11  # one token per CJK character (full-width comma included)
    assert out["empty"] == 0
    assert out["messages"] == 3 + 1 + 3  # per-message 3, "hi", reply priming 3


def test_a_hanging_download_falls_back_within_the_timeout(tmp_path: Path) -> None:
    # A proxy that accepts connections and never answers: tiktoken's requests.get has
    # no timeout, so only agentkit's load timeout ends the wait.
    with socket.socket() as blackhole:
        blackhole.bind(("127.0.0.1", 0))
        blackhole.listen(8)
        proxy = f"http://127.0.0.1:{blackhole.getsockname()[1]}"
        started = time.monotonic()
        out = run_probe(tmp_path, HTTPS_PROXY=proxy, AGENTKIT_TIKTOKEN_TIMEOUT="0.5")
        assert time.monotonic() - started < 30
    assert out["backend"] == "estimate"
    assert out["seconds"] >= 0.4  # it did wait for the helper thread, then gave up
    assert out["hello"] > 0


class Slammer:
    """A proxy that accepts each connection and closes it at once (the download fails
    fast); counts the connections, so a test sees whether a process tried."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.count = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed
                return
            self.count += 1
            conn.close()

    def connections(self) -> int:
        return self.count

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join(5)


def test_a_failed_load_is_tried_once_per_machine_and_remembered(tmp_path: Path) -> None:
    hole = Slammer()
    try:
        env = {"HTTPS_PROXY": hole.url, "AGENTKIT_TIKTOKEN_TIMEOUT": "30"}
        first = run_probe(tmp_path, **env)
        tried = hole.connections()
        marker = tmp_path / "tiktoken-cache" / tokens.FAILURE_FILE
        second = run_probe(tmp_path, **env)
        after_second = hole.connections()
        forced = run_probe(tmp_path, AGENTKIT_TOKENIZER="tiktoken", **env)
        after_forced = hole.connections()
    finally:
        hole.close()
    assert first["backend"] == second["backend"] == forced["backend"] == "estimate"
    assert tried >= 1 and marker.is_file()  # the first process tried, and wrote it down
    assert after_second == tried  # the second did not try at all
    assert str(marker) in second["describe"] and "did not load" in second["describe"]
    assert after_forced > after_second  # AGENTKIT_TOKENIZER=tiktoken tries anyway


def test_a_table_in_the_cache_or_an_old_marker_makes_the_next_process_try(
    tmp_path: Path,
) -> None:
    import hashlib

    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    marker = cache / tokens.FAILURE_FILE
    hole = Slammer()
    try:
        env = {"HTTPS_PROXY": hole.url, "AGENTKIT_TIKTOKEN_TIMEOUT": "30"}
        marker.write_text("offline\n")
        table = hashlib.sha1(tokens._TABLE_URLS[0].encode()).hexdigest()
        (cache / table).write_bytes(b"not a real table")  # tiktoken checks, then fetches
        run_probe(tmp_path, **env)
        with_table = hole.connections()
        (cache / table).unlink(missing_ok=True)
        old = time.time() - tokens.RETRY_SECONDS - 60
        os.utime(marker, (old, old))
        run_probe(tmp_path, **env)
        with_old_marker = hole.connections()
        marker.unlink()
        os.mkfifo(marker)  # anyone may put anything there (/tmp): no hang, no crash
        fifo = run_probe(tmp_path, **env)
        with_fifo = hole.connections()
    finally:
        hole.close()
    assert with_table >= 1
    assert with_old_marker > with_table
    assert with_fifo > with_old_marker and fifo["backend"] == "estimate"
    assert marker.is_file()  # the FIFO was replaced by a fresh marker


def test_estimate_can_be_forced(tmp_path: Path) -> None:
    out = run_probe(tmp_path, AGENTKIT_TOKENIZER="estimate")
    assert (
        out["backend"] == "estimate" and out["describe"] == "estimate (AGENTKIT_TOKENIZER=estimate)"
    )


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
