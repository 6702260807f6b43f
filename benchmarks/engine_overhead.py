"""Client + engine time per turn, model and tool time excluded (issue 2, docs/architecture.md §8).

The FakeOpenAIServer runs in a separate process with zero latency, so this
process's CPU time (time.process_time, all threads) is what agentkit spends:
building the request, the HTTP client, parsing and assembling the reply, the
loop, token budgeting and saving the transcript. Side by side: a bare
``client.chat.completions.create()`` loop and a bare httpx loop sending the
same requests. Targets: under 2 ms per turn at 100 messages; under 1.5 ms on
average over a 50-turn run.

Run: python benchmarks/engine_overhead.py
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Loopback only: tiktoken would download its tables from the internet.
os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")

SERVER = r"""
import sys, time
from agentkit.testing import FakeOpenAIServer
def handler(request):
    return {"tool_calls": [{"name": "noop", "arguments": {"note": "x"}}]}
with FakeOpenAIServer(handler) as server:
    print(server.base_url, flush=True)
    sys.stdin.read()
"""

TURNS = 20


def history(n: int) -> list[dict[str, Any]]:
    """A realistic conversation of ``n`` messages: tool calls and ~600-char results."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a helpful agent. " * 40},
        {"role": "user", "content": "Please analyse the project and write a report."},
    ]
    i = 0
    while len(messages) < n:
        call_id = f"call_{i}"
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": "noop",
                            "arguments": json.dumps({"note": f"step {i}"}),
                        },
                    }
                ],
            }
        )
        messages.append(
            {"role": "tool", "tool_call_id": call_id, "name": "noop", "content": f"line {i} " * 75}
        )
        i += 1
    return messages[:n]


def measure(fn: Any, repeat: int) -> tuple[float, float]:
    """Return the median (CPU ms, wall ms) of one call of fn over ``repeat`` calls
    (medians: this machine's load varies, and the other helpers' too)."""
    fn()  # warm up connections and caches
    cpus, walls = [], []
    for _ in range(repeat):
        cpu, wall = time.process_time(), time.perf_counter()
        fn()
        cpus.append((time.process_time() - cpu) * 1000)
        walls.append((time.perf_counter() - wall) * 1000)
    return statistics.median(cpus), statistics.median(walls)


def main() -> None:
    import httpx
    import openai
    from pydantic import BaseModel

    from agentkit.conversation import Conversation
    from agentkit.engine import Engine
    from agentkit.jsonfile import JsonFileWriter
    from agentkit.llm import LLMClient
    from agentkit.llm.turns import AssistantTurn, ToolCall, Usage
    from agentkit.settings import Settings
    from agentkit.tools.base import Tool, ToolContext
    from agentkit.tools.registry import ToolRegistry

    class NoopParams(BaseModel):
        note: str = ""

    registry = ToolRegistry(
        [Tool("noop", NoopParams, lambda p, ctx: "ok", description="Does nothing.")]
    )
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        base_url = server.stdout.readline().strip()  # type: ignore[union-attr]
        settings = Settings(
            model="bench", base_url=base_url, api_key="k", language="en", stream=True
        )
        tools = registry.schemas("en")
        sdk = openai.OpenAI(api_key="k", base_url=base_url, max_retries=0)
        raw = httpx.Client(base_url=base_url, headers={"Authorization": "Bearer k"})
        client = LLMClient(settings)
        rows = []
        with tempfile.TemporaryDirectory() as tmp:
            workspace = Path(tmp)

            def run(messages: list[dict[str, Any]], turns: int, name: str) -> None:
                """Run the engine ``turns`` turns on a copy of ``messages``, saving each turn."""
                conv = Conversation(messages=[dict(m) for m in messages])
                writer = JsonFileWriter(workspace / name)
                engine = Engine(
                    model=client,
                    registry=registry,
                    conversation=conv,
                    ctx=ToolContext(workspace=workspace, settings=settings),
                    save=lambda c: writer.submit(c.to_dict()),
                    max_turns=turns,
                )
                engine.run()
                writer.flush()

            for n in (10, 100, 500):
                base = history(n)

                def engine_turns(base: list[dict[str, Any]] = base) -> None:
                    run(base, TURNS, "conv.json")

                cpu, wall = measure(engine_turns, 7)
                body = {"model": "bench", "messages": base, "tools": tools, "stream": True}

                def sdk_create(body: dict[str, Any] = body) -> None:
                    stream = sdk.chat.completions.create(**body)
                    for _ in stream:
                        pass

                def bare_httpx(body: dict[str, Any] = body) -> None:
                    with raw.stream("POST", "/chat/completions", json=body) as response:
                        for _ in response.iter_lines():
                            pass

                sdk_cpu, sdk_wall = measure(sdk_create, TURNS)
                hx_cpu, hx_wall = measure(bare_httpx, TURNS)
                rows.append((n, cpu / TURNS, wall / TURNS, sdk_cpu, sdk_wall, hx_cpu, hx_wall))

            # A 50-turn run from a fresh conversation.
            def fifty() -> None:
                run(history(2), 50, "conv50.json")

            run_cpu, run_wall = measure(fifty, 7)

            # The engine alone: a canned model answers at once, no HTTP at all.
            class Canned:
                def complete(self, messages: Any, tools: Any, **_: Any) -> AssistantTurn:
                    call = ToolCall(id=f"c{len(messages)}", name="noop", arguments={"note": "x"})
                    return AssistantTurn(content=None, tool_calls=[call], usage=Usage(10, 5, 15))

            def canned() -> None:
                conv = Conversation(messages=history(100))
                writer = JsonFileWriter(workspace / "canned.json")
                Engine(
                    model=Canned(),
                    registry=registry,
                    conversation=conv,
                    ctx=ToolContext(workspace=workspace, settings=settings),
                    save=lambda c: writer.submit(c.to_dict()),
                    max_turns=TURNS,
                ).run()
                writer.flush()

            alone_cpu, _ = measure(canned, 7)
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        server.wait(10)

    print(
        "CPU ms per turn in this process (wall ms in brackets); the server runs in another process"
    )
    print(f"{'messages':>8} | {'agentkit engine':>18} | {'SDK create()':>18} | {'bare httpx':>18}")
    for n, cpu, wall, sdk_cpu, sdk_wall, hx_cpu, hx_wall in rows:
        print(
            f"{n:>8} | {cpu:7.2f} ({wall:6.2f}) | {sdk_cpu:7.2f} ({sdk_wall:6.2f}) | {hx_cpu:7.2f} ({hx_wall:6.2f})"
        )
    print(
        f"50-turn run: {run_cpu / 50:.2f} ms CPU per turn on average ({run_wall / 50:.2f} ms wall)"
    )
    print(
        f"engine alone at 100 messages (canned model, no HTTP): {alone_cpu / TURNS:.2f} ms per turn"
    )
    print("targets: < 2 ms per turn at 100 messages; < 1.5 ms average over 50 turns")


if __name__ == "__main__":
    main()
