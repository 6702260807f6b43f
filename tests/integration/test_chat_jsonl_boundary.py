"""``agentkit chat --jsonl`` as a real subprocess (hardening issue 31, item 9): every
message accepted while a round works is taken at that round's next turn boundary,
in order, however the lines arrive (two lines read together included)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import cli_env
from subagent_helpers import call, calls, who

from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
ROUNDS = 3  # the race showed in 2 runs of 3
Event = dict[str, Any]


class Chat:
    """The chat subprocess: write raw input, read its JSON lines."""

    def __init__(self, workspace: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agentkit", "chat", "--jsonl", "-w", str(workspace)],
            env=env,
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self._items: queue.Queue[Event | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._items.put(json.loads(line))
        self._items.put(None)

    def write(self, data: bytes) -> None:
        """Write ``data`` to the chat's standard input in one write."""
        assert self.proc.stdin is not None
        os.write(self.proc.stdin.fileno(), data)

    def until(self, match: Callable[[Event], bool], timeout: float = 60) -> list[Event]:
        """Read objects until one matches; return those read (the match last)."""
        got: list[Event] = []
        while True:
            try:
                item = self._items.get(timeout=timeout)
            except queue.Empty:
                pytest.fail(f"nothing matched within {timeout} s; read: {got}")
            assert item is not None, f"output ended before a match: {got}"
            got.append(item)
            if match(item):
                return got

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(60)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def model(request: dict[str, Any]) -> Any:
    """The main agent: a message "run N" gets a command that blocks on the fifo; the
    request after its result gets an answer."""
    if who(request) is not None:
        return "no sub-agents here"
    last = request["messages"][-1]
    if last["role"] == "user" and last["content"].startswith("run "):
        return calls(call("run_command", command="read line < gate.fifo; echo got $line"))
    return "answered"


def test_lines_written_together_while_a_command_runs_reach_its_next_boundary_in_order(
    workspace: Path,
) -> None:
    """Regression: two lines written back to back while a command ran: the first reached
    the model after the tool result, the second only after the model answered it (a
    round of its own), because lines read together were posted one round apart."""
    os.mkfifo(workspace / "gate.fifo")
    with FakeOpenAIServer(model) as server:
        chat = Chat(workspace, cli_env(server.base_url, OPENAI_API_KEY="k"))
        try:
            for n in range(ROUNDS):
                chat.write(f"run {n}\n".encode())
                chat.until(lambda e: e["type"] == "ToolCallStarted")
                chat.write(f"first {n}\nsecond {n}\n".encode())  # one write: read together
                # Both accepted while the command still runs (it waits for the fifo).
                accepted = chat.until(
                    lambda e, last=f"second {n}": (
                        e["type"] == "MessageQueued" and e["text"] == last
                    ),
                    20,
                )
                assert [e["text"] for e in accepted if e["type"] == "MessageQueued"] == [
                    f"first {n}",
                    f"second {n}",
                ]
                with open(workspace / "gate.fifo", "w") as gate:  # the command goes on
                    gate.write(f"{n}\n")
                end = chat.until(lambda e: e["type"] == "RoundFinished")[-1]
                assert end["final_text"] == "answered"
            assert chat.close() == 0
        finally:
            chat.kill()
    answered = [r["messages"] for r in server.requests if r["messages"][-1]["role"] == "user"]
    after_tools = [m for m in answered if len(m) > 3 and m[-3]["role"] == "tool"]
    assert len(after_tools) == ROUNDS
    for n, messages in enumerate(after_tools):
        assert f"got {n}" in messages[-3]["content"]
        assert messages[-2:] == [
            {"role": "user", "content": f"first {n}"},
            {"role": "user", "content": f"second {n}"},
        ]
