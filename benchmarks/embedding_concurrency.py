"""Concurrent runs in one event loop: agentkit against pydantic-ai, side by side.

N runs at once in one asyncio loop (agentkit: each run its own ``Agent``, opened
with ``await Agent.open``; pydantic-ai: an ``Agent`` per run over one model), all
against the same FakeOpenAIServer on loopback, whose every reply takes a fixed
latency; each run is three model turns (a tool call, a tool call, the answer).
Prints, per framework, the wall time of the runs (best and median of the rounds),
the ideal (turns x latency) and the most requests the server had in flight at once,
then agentkit's time over pydantic-ai's. Goal: at most 1.25x.

pydantic-ai is a benchmark-only dependency (``pip install 'pydantic-ai-slim[openai]'``);
without it the script measures agentkit alone and says so.

Run: python benchmarks/embedding_concurrency.py [--runs 30] [--latency 0.2] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel

from agentkit import Agent, Settings
from agentkit.testing import FakeOpenAIServer, Reply

# Loopback only: tiktoken would download its tables from the internet.
os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")

TURNS = 3


class InFlight:
    """Counts the chat requests the server is answering at once (and the most)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0

    def reset(self) -> None:
        with self.lock:
            self.now = self.most = 0


def make_handler(latency: float, flight: InFlight) -> Callable[[dict[str, Any]], Any]:
    """Two tool calls of ``word_count``, then an answer; every reply ``latency`` s."""

    def handler(request: dict[str, Any]) -> Any:
        with flight.lock:
            flight.now += 1
            flight.most = max(flight.most, flight.now)
        try:
            time.sleep(latency)  # the latency inside the count: requests overlap here
            turn = sum(1 for m in request["messages"] if m["role"] == "assistant")
            if turn < TURNS - 1:
                call = {"name": "word_count", "arguments": {"text": f"turn {turn} of a run"}}
                return Reply(tool_calls=[call])
            return Reply(content="All counted.")
        finally:
            with flight.lock:
                flight.now -= 1

    return handler


class CountParams(BaseModel):
    text: str


def word_count(params: CountParams) -> str:
    """Count the words of a text."""
    return str(len(params.text.split()))


async def agentkit_round(base_url: str, runs: int) -> tuple[float, float]:
    """Open ``runs`` Agents, then run them all at once; returns (open s, runs s)."""
    settings = Settings(model="fake", base_url=base_url, api_key="x", language="en")
    folder = tempfile.mkdtemp(prefix="agentkit-bench-")
    started = time.perf_counter()
    agents = await asyncio.gather(
        *(Agent.open(folder, settings, tools=[word_count]) for _ in range(runs))
    )
    opened = time.perf_counter() - started
    try:
        started = time.perf_counter()
        results = await asyncio.gather(*(a.arun(f"count job {n}") for n, a in enumerate(agents)))
        elapsed = time.perf_counter() - started
    finally:
        await asyncio.gather(*(a.aclose() for a in agents))
    bad = [r.error for r in results if r.status != "done"]
    if bad:
        raise SystemExit(f"agentkit runs failed: {bad[:3]}")
    return opened, elapsed


def pydantic_ai_round_maker(base_url: str) -> Callable[[int], Awaitable[tuple[float, float]]]:
    from pydantic_ai import Agent as PAgent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("fake", provider=OpenAIProvider(base_url=base_url, api_key="x"))

    async def word_count(text: str) -> str:  # the same tool, pydantic-ai's fastest form
        """Count the words of a text."""
        return str(len(text.split()))

    async def one_round(runs: int) -> tuple[float, float]:
        started = time.perf_counter()
        agents = [
            PAgent(model, instructions="Count words.", tools=[word_count]) for _ in range(runs)
        ]
        opened = time.perf_counter() - started
        started = time.perf_counter()
        results = await asyncio.gather(*(a.run(f"count job {n}") for n, a in enumerate(agents)))
        elapsed = time.perf_counter() - started
        assert all(r.output == "All counted." for r in results)
        return opened, elapsed

    return one_round


async def measure(
    name: str,
    one_round: Callable[[int], Awaitable[tuple[float, float]]],
    runs: int,
    rounds: int,
    flight: InFlight,
) -> list[float]:
    await one_round(1)  # warm-up: imports, first connections
    times: list[float] = []
    for _ in range(rounds):
        flight.reset()
        opened, elapsed = await one_round(runs)
        times.append(elapsed)
        print(
            f"  {name:12s} {runs} runs: {elapsed:.2f} s (opening the agents: {opened:.2f} s;"
            f" most requests in flight: {flight.most})",
            flush=True,
        )
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    flight = InFlight()
    with FakeOpenAIServer(make_handler(args.latency, flight)) as server:
        base = server.base_url
        ideal = TURNS * args.latency
        print(f"{args.runs} concurrent runs x {TURNS} turns at {args.latency} s a reply")
        print(f"(ideal {ideal:.2f} s; load average {_load()})")
        ours = asyncio.run(
            measure("agentkit", lambda n: agentkit_round(base, n), args.runs, args.rounds, flight)
        )
        try:
            peer_round = pydantic_ai_round_maker(base)
        except ImportError:
            print("pydantic-ai is not installed: pip install 'pydantic-ai-slim[openai]'")
            print(f"agentkit best {min(ours):.2f} s, median {statistics.median(ours):.2f} s")
            return
        theirs = asyncio.run(measure("pydantic-ai", peer_round, args.runs, args.rounds, flight))
    for name, times in (("agentkit", ours), ("pydantic-ai", theirs)):
        print(f"{name:12s} best {min(times):.2f} s, median {statistics.median(times):.2f} s")
    print(
        f"agentkit / pydantic-ai: best {min(ours) / min(theirs):.2f}x,"
        f" median {statistics.median(ours) / statistics.median(theirs):.2f}x (goal <= 1.25x)"
    )


def _load() -> str:
    try:
        with open("/proc/loadavg") as f:
            return f.read().split()[0]
    except OSError:
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
