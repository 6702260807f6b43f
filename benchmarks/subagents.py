"""Sub-agent start-up, fan-out and memory (issue 5; targets in docs/architecture.md §8).

Prints:
- time from create_sub_agent to the worker's first model request (cold = first
  worker of the process, which also starts the forkserver; warm = the median of
  the following ones). Target: under 150 ms.
- wall time of 5 background sub-agents x 10 turns at 200 ms model latency,
  against the ideal 2.0 s. Target: at most 2.16 s.
- private memory (USS) per worker and the main process's peak RSS.
  Targets: under 30 MB per worker; main under 80 MB.

Run: python benchmarks/subagents.py [--start-method forkserver|spawn]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

# Loopback only: tiktoken would download its tables from the internet.
os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from subagent_helpers import call, calls, finish, step, who  # noqa: E402

from agentkit.settings import Settings  # noqa: E402
from agentkit.subagent.manager import SubAgentManager  # noqa: E402
from agentkit.testing import FakeOpenAIServer, Reply  # noqa: E402


class Bench:
    """Scripted model: records each sub-agent's first request time; sub-agents run
    ``turns`` turns (read a small file) then finish_task, each reply after ``latency``."""

    def __init__(self) -> None:
        self.first_request: dict[int, float] = {}
        self.turns = 10
        self.latency = 0.0
        self.uss: list[int] = []

    def __call__(self, request: dict[str, Any]) -> Any:
        agent = who(request) or 0
        n = step(request)
        if n == 0:
            self.first_request.setdefault(agent, time.perf_counter())
        if n + 1 >= self.turns:
            return Reply(**finish("Benchmark task finished."), latency=self.latency)
        return Reply(**calls(call("read_file", path="small.txt")), latency=self.latency)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--start-method", default="forkserver", choices=["forkserver", "spawn"])
    args = parser.parse_args()
    bench = Bench()
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAIServer(bench) as server:
        workspace = Path(tmp).resolve()
        (workspace / "small.txt").write_text("hello\n")
        settings = Settings(
            model="bench",
            base_url=server.base_url,
            api_key="k",
            language="en",
            subagent_start_method=args.start_method,
        )
        manager = SubAgentManager(workspace=workspace, settings=settings)

        # 1. start-up latency, one agent at a time (1 turn each).
        bench.turns = 1
        startup: list[float] = []
        for agent_id in range(1, 9):
            t0 = time.perf_counter()
            manager.create(agent_id=agent_id, summary="startup", task="t", run_in_background=True)
            while agent_id not in bench.first_request:
                time.sleep(0.0005)
            startup.append((bench.first_request[agent_id] - t0) * 1000)
            manager.agents[agent_id].done.wait(30)
        cold, warm = startup[0], statistics.median(startup[1:])

        # 2. fan-out: 5 agents x 10 turns at 200 ms per reply.
        bench.turns, bench.latency = 10, 0.2
        uss: list[float] = []

        def sample() -> None:
            time.sleep(1.0)
            for agent in manager.running():
                if agent.handle is not None and agent.handle.pid:
                    try:
                        uss.append(psutil.Process(agent.handle.pid).memory_full_info().uss / 2**20)
                    except psutil.Error:
                        pass

        sampler = threading.Thread(target=sample)
        t0 = time.perf_counter()
        for agent_id in range(11, 16):
            manager.create(agent_id=agent_id, summary="fan-out", task="t", run_in_background=True)
        sampler.start()
        for agent_id in range(11, 16):
            manager.agents[agent_id].done.wait(60)
        wall = time.perf_counter() - t0
        sampler.join()
        statuses = {manager.agents[i].status for i in range(11, 16)}
        manager.shutdown()

    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"start method: {args.start_method}  (Python {sys.version.split()[0]})")
    print(
        f"create_sub_agent -> first request: cold {cold:.0f} ms, warm median {warm:.0f} ms (target < 150 ms)"
    )
    print(
        f"5 sub-agents x 10 turns @ 200 ms: {wall:.2f} s (ideal 2.00 s, target <= 2.16 s), statuses {sorted(statuses)}"
    )
    if uss:
        print(
            f"worker USS: mean {statistics.mean(uss):.1f} MB, max {max(uss):.1f} MB (target < 30 MB)"
        )
    print(f"main process peak RSS: {peak_rss:.1f} MB (target < 80 MB)")


if __name__ == "__main__":
    main()
