"""Benchmark: what the command sandbox costs per run_command call.

Usage: ``python benchmarks/sandbox.py [--reps N]``

* ``true``: a whole run_command call of ``true`` with ``command_sandbox = bwrap`` and
  ``none`` (the pid-namespace launch without bubblewrap), repetitions interleaved;
  medians and the difference (goal: under 10 ms added, median).
* ``true`` with ``command_network = loopback`` against ``none`` (both sandboxed): what
  the loopback bridge and the command's own relay add per command (the bridge's Python
  start and port binds, the relay's socket and thread; 20 repetitions
  by default, interleaved), with the number of host loopback ports it bound.
* ``true`` with the default limits (``command_max_processes`` 2048; a cgroup where
  the agent may create one, else ``prlimit``) against none (``0``), both unsandboxed
  (interleaved): what the limits add per command, and by what they are enforced.
* The number of socket folders (``pymp-*``, ``agentkit-loopback-*``) in the temporary
  folder, which every launch checks: run it with ``TMPDIR`` set to an empty folder to
  compare a clean machine with a busy one.
* A small test suite: ``python -m pytest -q`` of 20 tiny tests in the workspace, in and
  out of the sandbox (medians of fewer repetitions).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

# Loopback only: tiktoken would download its tables from the internet.
os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentkit.process.limits import prepare  # noqa: E402
from agentkit.process.loopback.ports import listening_ports  # noqa: E402
from agentkit.process.sandbox import bwrap_works  # noqa: E402
from agentkit.process.sandbox_folders import socket_folders  # noqa: E402
from agentkit.process.spawn import user_namespace  # noqa: E402
from agentkit.settings import Settings  # noqa: E402
from agentkit.tools.base import ToolContext  # noqa: E402
from agentkit.tools.registry import ToolRegistry  # noqa: E402
from agentkit.tools.shell import SHELL_TOOLS  # noqa: E402

REGISTRY = ToolRegistry(SHELL_TOOLS)


def timed(ctx: ToolContext, command: str) -> float:
    """Seconds of one run_command call; raises when the command failed."""
    started = time.perf_counter()
    result = REGISTRY.execute("run_command", {"command": command}, ctx)
    elapsed = time.perf_counter() - started
    if result.meta.get("exit_code") != 0:
        raise RuntimeError(result.output)
    return elapsed


SANDBOX = {"bwrap": {"command_sandbox": "bwrap"}, "none": {"command_sandbox": "none"}}
LIMITS = {
    "limits": {"command_sandbox": "none"},
    "off": {"command_sandbox": "none", "command_max_processes": 0, "command_max_memory_mb": 0},
}
NETWORK = {
    "loopback": {"command_sandbox": "bwrap", "command_network": "loopback"},
    "none": {"command_sandbox": "bwrap", "command_network": "none"},
}


def compare(
    workspace: Path, command: str, reps: int, variants: dict[str, dict[str, str]] = SANDBOX
) -> dict[str, float]:
    """Median seconds per call of ``command`` for each variant (Settings overrides by
    name), repetitions interleaved."""
    ctxs = {
        name: ToolContext(workspace=workspace, settings=Settings(model="m", api_key="k", **extra))
        for name, extra in variants.items()
    }
    for ctx in ctxs.values():
        timed(ctx, command)  # warm up: probes, imports, page cache
    times: dict[str, list[float]] = {name: [] for name in ctxs}
    for _ in range(reps):
        for name, ctx in ctxs.items():
            times[name].append(timed(ctx, command))
    return {name: statistics.median(values) for name, values in times.items()}


def _enforced() -> str:
    """By what the default limits bind here (agentkit.process.limits)."""
    settings = Settings(model="m", api_key="k")
    bounds = prepare(settings, user_namespace())
    if bounds is None:
        return "no limit binds here"
    bounds.close()
    how = [f"processes: {bounds.processes[1]}"] if bounds.processes else []
    how += [f"memory: {bounds.memory_mb[1]}"] if bounds.memory_mb else []
    return ", ".join(how) or "no limit binds here"


def main() -> None:
    """Print the two tables (milliseconds)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--loopback-reps", type=int, default=20)
    args = parser.parse_args()
    if bwrap_works("bwrap") is None:
        sys.exit("bubblewrap cannot run here")
    # Each is checked at every launch; killed Python programs leave theirs behind.
    print(f"socket folders in the temporary folder: {len(socket_folders())}")
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp).resolve()
        small = compare(workspace, "true", args.reps)
        loop = compare(workspace, "true", args.loopback_reps, NETWORK)
        bounded = compare(workspace, "true", args.reps, LIMITS)
        for i in range(20):
            (workspace / f"test_t{i}.py").write_text(f"def test_{i}():\n    assert {i} == {i}\n")
        suite = compare(workspace, f"{sys.executable} -m pytest -q -p no:cacheprovider", 10)
    for label, figures in (("true", small), ("pytest, 20 tests", suite)):
        added = (figures["bwrap"] - figures["none"]) * 1000
        print(
            f"{label:18} sandbox {figures['bwrap'] * 1000:8.1f} ms   "
            f"none {figures['none'] * 1000:8.1f} ms   added {added:+.1f} ms (median)"
        )
    added = (bounded["limits"] - bounded["off"]) * 1000
    print(
        f"{'true, limits':18} limits {bounded['limits'] * 1000:9.1f} ms   "
        f"off {bounded['off'] * 1000:9.1f} ms   added {added:+.1f} ms (median, {_enforced()})"
    )
    added = (loop["loopback"] - loop["none"]) * 1000
    print(
        f"{'true, network':18} loopback {loop['loopback'] * 1000:7.1f} ms   "
        f"none {loop['none'] * 1000:8.1f} ms   added {added:+.1f} ms (median, "
        f"{len(listening_ports())} host ports bridged)"
    )


if __name__ == "__main__":
    main()
