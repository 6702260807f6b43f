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
        PYTHONPATH=str(Path(__file__).resolve().parents[2]),
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


def test_the_demo_never_tries_to_download_tiktokens_tables(tmp_path: Path) -> None:
    """Regression (a fresh user's trial): `chat --demo` says "no network", yet its
    first count fetched tiktoken's tables from openaipublic.blob.core.windows.net
    (through the proxy, caught here by a listener standing in for it)."""
    from cli_helpers import REPO, cli_env

    trap = socket.socket()
    trap.bind(("127.0.0.1", 0))
    trap.listen(8)
    trap.settimeout(0.2)
    reached: list[str] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            try:
                conn, _ = trap.accept()
            except OSError:
                continue
            reached.append(conn.recv(200).decode(errors="replace"))
            conn.close()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    proxy = f"http://127.0.0.1:{trap.getsockname()[1]}"
    env = cli_env(AGENTKIT_DEMO_LATENCY="0", TMPDIR=str(tmp_path), TIKTOKEN_CACHE_DIR=str(cache))
    env.pop("AGENTKIT_TOKENIZER")
    env.update(HTTPS_PROXY=proxy, HTTP_PROXY=proxy, NO_PROXY="127.0.0.1,localhost")
    try:
        for command, given in ((["chat", "--jsonl"], "hello\n"), (["run", "hello"], "")):
            proc = subprocess.run(
                [sys.executable, "-m", "agentkit", *command, "--demo"],
                env=env, cwd=REPO, input=given, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr
    finally:
        done.set()
        watcher.join(5)
        trap.close()
    assert reached == []
    assert list(cache.iterdir()) == []  # no table, and no failure remembered
