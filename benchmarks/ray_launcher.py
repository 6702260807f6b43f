"""Sub-agents through Ray beside the local forkserver (issues 19 and 27).

Starts its own two-node Ray cluster on loopback (tests/ray_cluster.py), so it runs
only inside a private network namespace:

    unshare -n bash -c 'ip link set lo up && python benchmarks/ray_launcher.py'

Each measurement is a child process (the driver) joining that cluster; with
``--before PATH`` a child importing the agentkit found at PATH (``git archive
<commit> agentkit | tar -x -C PATH``) runs too, alternating with this checkout, and
its Ray workers import the same code (the job's runtime environment). Prints, for
each launcher (local forkserver, Ray):

- create_sub_agent -> the worker's first model request: cold (the first of the
  process: the forkserver, or the Ray pool's first actor, starts) and warm (the
  median of the next five, one at a time; with the pool once it is warm);
- two batches of five background sub-agents (the seed's concurrency limit, one turn
  each) with the default pool settings, the second once the first one's actors are
  back: each batch's wall time, create -> first request (median and slowest) and
  the actors started for it (the pool's counter; the second batch should start none);
- 20 conversations x 3 background sub-agents (5 turns at 100 ms per reply), five
  conversations at a time: wall time, sub-agents per second, the nodes used, and
  the main process's CPU per sub-agent (the manager's and channel's overhead).

One manager stays open for the whole run (as a chat server keeps sessions open),
so the Ray pool of ``--pool-size`` warm actors serves every conversation; the
conversations' own managers come and go.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

# Loopback only: tiktoken would download its tables from the internet.
os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT / "tests")]


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(launcher: dict[str, Any], workspace: Path, conversations: int) -> dict[str, Any]:
    """Start-up and fan-out for one launcher's Settings overrides (in the child)."""
    from subagents import Bench

    from agentkit.settings import Settings
    from agentkit.subagent.manager import SubAgentManager
    from agentkit.testing import FakeOpenAIServer

    known = {k: v for k, v in launcher.items() if k in Settings.model_fields}
    bench = Bench()
    with FakeOpenAIServer(bench) as server:
        settings = Settings(
            model="bench", base_url=server.base_url, api_key="k", language="en", **known
        )
        owner = SubAgentManager(workspace=workspace, settings=settings)
        bench.turns = 1

        def startup(agent_id: int) -> float:
            t0 = time.perf_counter()
            owner.create(agent_id=agent_id, summary="startup", task="t", run_in_background=True)
            while agent_id not in bench.first_request:
                if owner.agents[agent_id].done.is_set():  # it failed before asking
                    raise RuntimeError(
                        f"sub-agent {agent_id}: {owner.agents[agent_id].status_row()}"
                    )
                time.sleep(0.0005)
            owner.agents[agent_id].done.wait(60)
            return (bench.first_request[agent_id] - t0) * 1000

        cold = startup(1)
        # (the first batch competes with the --pool-size actors warming up meanwhile)
        batches = measure_batches(bench, workspace, settings, launcher)
        prewarm = getattr(owner.launcher, "prewarm", None)
        warm_hosts = prewarm(wait=600) if prewarm is not None else None
        time.sleep(1)  # the first agent's actor is back in the pool
        warm = [startup(agent_id) for agent_id in range(2, 7)]

        bench.turns, bench.latency = 5, 0.1
        nodes: set[str] = set()

        def conversation(index: int) -> list[str]:
            own = SubAgentManager(workspace=workspace, settings=settings)
            ids = [10 + 3 * index + k for k in range(3)]
            for agent_id in ids:
                own.create(agent_id=agent_id, summary="fan-out", task="t", run_in_background=True)
            for agent_id in ids:
                own.agents[agent_id].done.wait(600)
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
        owner.shutdown()
    return {
        **batches,
        "cold_ms": cold,
        "warm_ms": statistics.median(warm),
        "warm_hosts": warm_hosts,
        "wall_s": wall,
        "count": len(statuses),
        "nodes": len(nodes - {""}),
        "statuses": sorted(set(statuses)),
        "cpu_ms": cpu / len(statuses) * 1000,
    }


def measure_batches(
    bench: Any, workspace: Path, settings: Any, launcher: dict[str, Any]
) -> dict[str, Any]:
    """Two batches of five background sub-agents (the seed's concurrency limit, one
    turn each) through a manager with the default pool settings (``ray_pool_size``
    and ``ray_pool_idle_seconds`` unset), the second once the first one's actors are
    back in the pool: each batch's wall time (first create to last end), the
    median and slowest create -> first request, and the actors started for it."""
    from agentkit.subagent.manager import SubAgentManager

    defaults = settings.model_copy(
        update={
            "ray_pool_size": type(settings).model_fields["ray_pool_size"].default,
            "ray_pool_idle_seconds": type(settings).model_fields["ray_pool_idle_seconds"].default,
        }
    )
    manager = SubAgentManager(workspace=workspace, settings=defaults)
    out: dict[str, Any] = {}
    for name, first in (("batch1", 80), ("batch2", 90)):  # ids 1-99; 1-6 are taken
        started = _started(manager)
        begun: dict[int, float] = {}
        t0 = time.perf_counter()
        for agent_id in range(first, first + 5):
            begun[agent_id] = time.perf_counter()
            manager.create(
                agent_id=agent_id,
                summary=name,
                task="t",
                deliverables_dir=f"{name}/{agent_id}",
                run_in_background=True,
            )
        for agent_id in begun:
            manager.agents[agent_id].done.wait(600)
        wall = time.perf_counter() - t0
        firsts = [(bench.first_request[a] - begun[a]) * 1000 for a in begun]
        after = _started(manager)
        pool = getattr(manager.launcher, "_pool", None)
        out[name] = {
            "wall_ms": wall * 1000,
            "first_median_ms": statistics.median(firsts),
            "first_max_ms": max(firsts),
            "cold_starts": None if after is None else after - (started or 0),
            "statuses": sorted({manager.agents[a].status for a in begun}),
        }
        deadline = time.monotonic() + 60
        while pool is not None and time.monotonic() < deadline:  # warm, back in the pool
            if all(h.is_warm() and not h.busy for h in pool.hosts()):
                break
            time.sleep(0.05)
        time.sleep(0.5)
    manager.shutdown()
    return out


def _started(manager: Any) -> int | None:
    """Actors the manager's Ray pool started so far (0 before it has a pool; None
    for a launcher without one, or a pool without the counter)."""
    if not hasattr(manager.launcher, "prewarm"):
        return None
    pool = getattr(manager.launcher, "_pool", None)
    return 0 if pool is None else getattr(pool, "started", None)


def child(address: str, conversations: int, pool_size: int, package: str) -> None:
    """One driver process: both launchers, results as one JSON line."""
    import ray

    # Before agentkit joins: the actors this driver starts import the same agentkit.
    ray.init(
        address=address,
        namespace="agentkit",
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": package}},
    )
    ray_settings = {
        "subagent_launcher": "ray",
        "ray_address": address,
        "ray_num_cpus": 0.1,
        "ray_pool_size": pool_size,
    }
    out = {}
    with tempfile.TemporaryDirectory(prefix="akbench") as tmp:
        for name, overrides in (("local", {}), ("ray", ray_settings)):
            workspace = Path(tmp) / f"ws-{name}"
            workspace.mkdir()
            (workspace / "small.txt").write_text("hello\n")
            out[name] = measure(overrides, workspace.resolve(), conversations)
    print(json.dumps(out), flush=True)


def report(results: dict[str, list[dict[str, Any]]], conversations: int) -> None:
    """Print the medians of each variant's runs."""

    def med(runs: list[dict[str, Any]], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    print(
        f"{'variant':>8} {'launcher':>8} | {'cold ms':>8} | {'warm ms':>8} | "
        f"{conversations}x3 fan-out s | sub-agents/s | nodes | main CPU ms/agent"
    )
    for variant, runs in results.items():
        for name in ("local", "ray"):
            rows = [r[name] for r in runs]
            wall = med(rows, "wall_s")
            print(
                f"{variant:>8} {name:>8} | {med(rows, 'cold_ms'):8.0f} | {med(rows, 'warm_ms'):8.0f} | "
                f"{wall:17.1f} | {rows[0]['count'] / wall:12.2f} | {rows[0]['nodes']:5d} | "
                f"{med(rows, 'cpu_ms'):8.0f}   {rows[0]['statuses']}"
            )


def report_batches(results: dict[str, list[dict[str, Any]]]) -> None:
    """Print the medians of the two batches of five, default pool settings."""
    print(
        f"{'variant':>8} {'launcher':>8} {'batch':>6} | {'wall ms':>8} | "
        f"{'first req median ms':>19} | {'first req max ms':>16} | cold starts"
    )
    for variant, runs in results.items():
        for name in ("local", "ray"):
            for batch in ("batch1", "batch2"):
                rows = [r[name][batch] for r in runs]
                cold = [r["cold_starts"] for r in rows]
                print(
                    f"{variant:>8} {name:>8} {batch:>6} | "
                    f"{statistics.median(r['wall_ms'] for r in rows):8.0f} | "
                    f"{statistics.median(r['first_median_ms'] for r in rows):19.0f} | "
                    f"{statistics.median(r['first_max_ms'] for r in rows):16.0f} | "
                    f"{cold}   {rows[0]['statuses']}"
                )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--pool-size", type=int, default=16)
    parser.add_argument("--before", type=Path, help="another agentkit checkout to compare")
    parser.add_argument("--child", nargs=2, metavar=("ADDRESS", "PACKAGE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.conversations, args.pool_size, args.child[1])
        return
    from ray_cluster import RayTestCluster, skip_reason

    reason = skip_reason()
    if reason:
        sys.exit(reason)
    variants = [("after", ROOT)] + ([("before", args.before.resolve())] if args.before else [])
    results: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in variants}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="akbench") as tmp:
        cluster = RayTestCluster(Path(tmp) / "ray")
        cluster.temp_dir.mkdir()
        try:
            cluster.start()
            for _ in range(args.repeat):
                for name, package in variants:  # alternating: the same load for both
                    command = [
                        sys.executable,
                        __file__,
                        "--conversations",
                        str(args.conversations),
                        "--pool-size",
                        str(args.pool_size),
                        "--child",
                        cluster.address,
                        str(package),
                    ]
                    env = {**os.environ, "PYTHONPATH": str(package)}
                    # cwd: Ray puts the driver's working directory first on its
                    # workers' path, which would shadow the variant's agentkit.
                    done = subprocess.run(
                        command, env=env, cwd=package, capture_output=True, text=True, timeout=3600
                    )
                    # Its figures count even when Ray's exit aborted it afterwards (a
                    # daemon thread asking Ray after its shutdown ends it non-zero).
                    lines = done.stdout.strip().splitlines()
                    if not lines or not lines[-1].startswith("{"):
                        raise RuntimeError(f"{name} failed:\n{done.stderr[-4000:]}")
                    results[name].append(json.loads(lines[-1]))
                    loads.append(os.getloadavg()[0])
        finally:
            cluster.stop()
    report(results, args.conversations)
    report_batches(results)
    print(
        f"Python {sys.version.split()[0]}, 2 Ray nodes on one host (loopback), pool size "
        f"{args.pool_size}; load average (1 min) {min(loads):.1f}-{max(loads):.1f} "
        f"on {os.cpu_count()} CPUs"
    )


if __name__ == "__main__":
    main()
