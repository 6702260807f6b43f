"""Sub-agents through Ray beside the local forkserver (the Ray launcher's issue).

Starts its own two-node Ray cluster on loopback (tests/ray_cluster.py), so it runs
only inside a private network namespace:

    unshare -n bash -c 'ip link set lo up && python benchmarks/ray_launcher.py'

Prints, for each launcher (local forkserver, Ray on the warm cluster):
- create_sub_agent -> the worker's first model request (cold: the first one;
  warm: the median of the next ones);
- 20 conversations x 3 background sub-agents (5 turns at 100 ms per reply), five
  conversations at a time: wall time, sub-agents per second, the nodes used, and
  the main process's CPU per sub-agent (the manager's and channel's overhead).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

from ray_cluster import RayTestCluster, skip_reason  # noqa: E402
from subagents import Bench  # noqa: E402

from agentkit.settings import Settings  # noqa: E402
from agentkit.subagent.manager import SubAgentManager  # noqa: E402
from agentkit.testing import FakeOpenAIServer  # noqa: E402


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run(launcher: dict[str, Any], workspace: Path, conversations: int) -> None:
    """Measure start-up and fan-out for one launcher's Settings overrides."""
    bench = Bench()
    with FakeOpenAIServer(bench) as server:
        settings = Settings(
            model="bench", base_url=server.base_url, api_key="k", language="en", **launcher
        )
        manager = SubAgentManager(workspace=workspace, settings=settings)
        bench.turns = 1
        startup: list[float] = []
        for agent_id in range(1, 7):
            t0 = time.perf_counter()
            manager.create(agent_id=agent_id, summary="startup", task="t", run_in_background=True)
            while agent_id not in bench.first_request:
                time.sleep(0.0005)
            startup.append((bench.first_request[agent_id] - t0) * 1000)
            manager.agents[agent_id].done.wait(60)
        manager.shutdown()

        bench.turns, bench.latency = 5, 0.1
        nodes: set[str] = set()

        def conversation(index: int) -> list[str]:
            own = SubAgentManager(workspace=workspace, settings=settings)
            ids = [10 + 3 * index + k for k in range(3)]
            for agent_id in ids:
                own.create(agent_id=agent_id, summary="fan-out", task="t", run_in_background=True)
            for agent_id in ids:
                own.agents[agent_id].done.wait(120)
            nodes.update(getattr(own.agents[i].handle, "node_id", "local") for i in ids)
            statuses = [own.agents[i].status for i in ids]
            own.shutdown()
            return statuses

        cpu0, t0 = cpu_seconds(), time.perf_counter()
        with ThreadPoolExecutor(5) as pool:
            statuses = [
                s for result in pool.map(conversation, range(conversations)) for s in result
            ]
        wall, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    count = len(statuses)
    name = launcher.get("subagent_launcher", "local")
    print(f"[{name}]")
    print(
        f"  create_sub_agent -> first request: cold {startup[0]:.0f} ms, "
        f"warm median {statistics.median(startup[1:]):.0f} ms"
    )
    print(
        f"  {conversations} conversations x 3 sub-agents x 5 turns @ 100 ms (5 at a time): "
        f"{wall:.1f} s, {count / wall:.2f} sub-agents/s, nodes used {len(nodes)}, "
        f"statuses {sorted(set(statuses))}"
    )
    print(f"  main process CPU per sub-agent: {cpu / count * 1000:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", type=int, default=20)
    args = parser.parse_args()
    reason = skip_reason()
    if reason:
        sys.exit(reason)
    with tempfile.TemporaryDirectory(prefix="akbench") as tmp:
        cluster = RayTestCluster(Path(tmp) / "ray")
        cluster.temp_dir.mkdir()
        try:
            cluster.start()
            for overrides in (
                {},
                {"subagent_launcher": "ray", "ray_address": cluster.address, "ray_num_cpus": 0.1},
            ):
                workspace = Path(tmp) / f"ws-{overrides.get('subagent_launcher', 'local')}"
                workspace.mkdir()
                (workspace / "small.txt").write_text("hello\n")
                run(overrides, workspace.resolve(), args.conversations)
        finally:
            cluster.stop()
    print(f"Python {sys.version.split()[0]}, 2 Ray nodes on one host (loopback)")


if __name__ == "__main__":
    main()
