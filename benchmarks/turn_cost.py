"""Per-turn CPU of the main agent against the conversation's length (issue 27, item 2).

A zero-latency model (agentkit.testing.FakeOpenAIServer in its own process) answers
every request with one small tool call. Each measurement is a whole process:
``Agent`` continues a saved conversation of N messages and runs TURNS turns; its
CPU (all threads: the loop, the HTTP client, the transcript writer) between turn 3
and the last, divided by the turns, is the per-turn cost. The floor, in the same
run: a bare httpx loop sending the same requests (the same growing message list and
tool schemas, compact JSON encoded whole every turn, the SSE reply read and its
chunks parsed).

``--before PATH`` also measures the package found at PATH (for example ``git archive
<commit> agentkit | tar -x -C PATH``), alternating with this checkout in one run, so
both see the same machine load.

Run: python benchmarks/turn_cost.py [--lengths 10 100 1000 3000] [--repeat 3]
     [--before /tmp/before]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

# Loopback only: tiktoken would download its tables from the internet.
os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")

ROOT = Path(__file__).resolve().parents[1]
TURNS = 30
SKIP = 3  # turns left out at the start (connections, caches, the first full encoding)

SERVER = r"""
import sys
from agentkit.testing import FakeOpenAIServer, Reply
USAGE = {"prompt_tokens": 1000000, "completion_tokens": 5, "total_tokens": 1000005}
def handler(request):
    return Reply(tool_calls=[{"name": "noop", "arguments": {"note": "x"}}], usage=USAGE)
with FakeOpenAIServer(handler) as server:
    print(server.base_url, flush=True)
    sys.stdin.read()
"""


def history(n: int) -> list[dict[str, Any]]:
    """A conversation of ``n`` messages: a task, then tool calls with ~600-char results."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Please analyse the project and write a report."}
    ]
    i = 0
    while len(messages) < n:
        call_id = f"call_{i}"
        arguments = json.dumps({"note": f"step {i}"})
        function = {"name": "noop", "arguments": arguments}
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call_id, "type": "function", "function": function}],
            }
        )
        messages.append(
            {"role": "tool", "tool_call_id": call_id, "name": "noop", "content": f"line {i} " * 75}
        )
        i += 1
    return messages[:n]


class Note(BaseModel):
    """The bench tool's parameters."""

    note: str = ""


def noop(params: Note) -> str:
    """Does nothing."""
    return "ok"


def agent_child(base_url: str, length: int, workdir: str) -> float:
    """In a child process: per-turn CPU ms of Agent continuing an ``length``-message
    conversation for TURNS turns."""
    import time

    from agentkit import Agent, Settings
    from agentkit import events as ev
    from agentkit.conversation import Conversation, conversations_dir

    workspace = Path(workdir)
    conversation = Conversation(messages=history(length))
    conversation.save(conversations_dir(workspace) / f"{conversation.id}.json")
    settings = Settings(
        model="bench",
        base_url=base_url,
        api_key="k",
        language="en",
        context_window=100_000_000,  # no compaction: the length stays what is measured
        max_turns=TURNS,
    )
    marks: list[float] = []

    def on_event(event: ev.Event) -> None:
        if isinstance(event, ev.AssistantMessage):
            marks.append(time.process_time())

    with Agent(
        workspace=workspace, settings=settings, conversation_id=conversation.id, tools=[noop]
    ) as agent:
        agent.run("go on", on_event=on_event)
    return (marks[-1] - marks[SKIP]) / (len(marks) - 1 - SKIP) * 1000


def bare_child(base_url: str, length: int) -> float:
    """In a child process: per-turn CPU ms of a bare httpx loop sending the requests
    the agent sends (same messages, same tool schemas)."""
    import time

    import httpx

    from agentkit.tools import base_tools
    from agentkit.tools.registry import ToolRegistry

    tools = ToolRegistry(base_tools()).schemas("en")
    messages = history(length)
    encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    client = httpx.Client(headers={"Authorization": "Bearer k"})
    url = base_url + "/chat/completions"
    marks: list[float] = []
    for _ in range(TURNS):
        body = {
            "model": "bench",
            "messages": messages,
            "tools": tools,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        content = encode(body).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        calls: dict[int, dict[str, Any]] = {}
        with client.stream("POST", url, content=content, headers=headers) as response:
            for line in response.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                for choice in json.loads(line[6:]).get("choices") or []:
                    for call in (choice.get("delta") or {}).get("tool_calls") or []:
                        slot = calls.setdefault(call["index"], {"arguments": ""})
                        slot.update({k: v for k, v in call.items() if k in ("id",)})
                        function = call.get("function") or {}
                        slot["name"] = function.get("name") or slot.get("name")
                        slot["arguments"] += function.get("arguments") or ""
        call = calls[0]
        function = {"name": call["name"], "arguments": call["arguments"]}
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call["id"], "type": "function", "function": function}],
            }
        )
        messages.append(
            {"role": "tool", "tool_call_id": call["id"], "name": "noop", "content": "ok"}
        )
        marks.append(time.process_time())
    return (marks[-1] - marks[SKIP]) / (len(marks) - 1 - SKIP) * 1000


def measure(kind: str, package: Path, base_url: str, length: int) -> float:
    """Run one measurement in a fresh process importing agentkit from ``package``."""
    env = {**os.environ, "PYTHONPATH": str(package), "AGENTKIT_TOKENIZER": "estimate"}
    with tempfile.TemporaryDirectory(prefix="akturn") as tmp:
        code = (
            f"import sys; sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); import turn_cost; "
            f"print(turn_cost.{kind}_child(*sys.argv[1:2], int(sys.argv[2]), *sys.argv[3:]))"
        )
        args = [base_url, str(length)] + ([tmp] if kind == "agent" else [])
        done = subprocess.run(
            [sys.executable, "-c", code, *args],
            env=env,
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=900,
        )
    if done.returncode != 0:
        raise RuntimeError(f"{kind} at {length} messages failed:\n{done.stderr[-3000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", type=int, nargs="+", default=[10, 100, 1000, 3000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before", type=Path, help="another agentkit checkout to compare")
    args = parser.parse_args()
    variants = [("after", ROOT)] + ([("before", args.before.resolve())] if args.before else [])
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "AGENTKIT_TOKENIZER": "estimate"},
    )
    results: dict[tuple[str, int], list[float]] = {}
    load = os.getloadavg()[0]
    try:
        base_url = (server.stdout.readline() if server.stdout else "").strip()
        for _ in range(args.repeat):
            for length in args.lengths:
                # Alternate within one repetition: every variant sees the same load.
                results.setdefault(("bare", length), []).append(
                    measure("bare", ROOT, base_url, length)
                )
                for name, package in variants:
                    results.setdefault((name, length), []).append(
                        measure("agent", package, base_url, length)
                    )
    finally:
        if server.stdin:
            server.stdin.close()
        server.wait(10)
    load = max(load, os.getloadavg()[0])
    names = [name for name, _ in variants]
    print(f"per-turn CPU ms, median of {args.repeat} whole-process runs of {TURNS} turns")
    header = f"{'messages':>8} | {'bare httpx':>10} | " + " | ".join(
        f"{n + ' (x bare)':>18}" for n in names
    )
    print(header)
    for length in args.lengths:
        bare = statistics.median(results[("bare", length)])
        cells = []
        for name in names:
            value = statistics.median(results[(name, length)])
            cells.append(f"{value:8.2f} ({value / bare:4.2f}x)")
        print(f"{length:>8} | {bare:10.2f} | " + " | ".join(f"{c:>18}" for c in cells))
    print(f"load average (1 min, highest seen) {load:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
