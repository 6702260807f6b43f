"""``agentkit run`` with a one-turn answer: time to exit, time until every process it
started is gone, and the CPU of them all (issue 27, item 4).

A zero-latency FakeOpenAIServer runs in this process; each run is a fresh
``python -m agentkit run`` process. This process makes itself a child subreaper
(Linux ``PR_SET_CHILD_SUBREAPER``), so whatever the command leaves behind (the
sub-agent worker process server) becomes its child when the command exits: "gone"
is when the last of them has been reaped, and their CPU is counted.

tiktoken's cache folder is a fresh one shared by all the runs of one variant, so
offline (this machine) the first run of a variant pays for a failed download and
the others show whether the failure was remembered.

``--before PATH`` also runs the agentkit found at PATH (``git archive <commit>
agentkit | tar -x -C PATH``), alternating with this checkout.

Run: python benchmarks/cli_run.py [--repeat 7] [--before /tmp/before]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Loopback only: tiktoken would download its tables from the internet.
os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")

ROOT = Path(__file__).resolve().parents[1]
PR_SET_CHILD_SUBREAPER = 36


def children_cpu() -> float:
    """User + system CPU seconds of this process's reaped children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(package: Path, base_url: str, workspace: Path, cache: Path) -> tuple[float, ...]:
    """One ``agentkit run``: (seconds to exit, seconds until its tree is gone, CPU s)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTKIT_"))}
    env.update(
        PYTHONPATH=str(package),
        OPENAI_BASE_URL=base_url,
        OPENAI_API_KEY="k",
        AGENTKIT_MODEL="bench",
        AGENTKIT_LANGUAGE="en",
        TIKTOKEN_CACHE_DIR=str(cache),
    )
    cpu0 = children_cpu()
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentkit", "run", "Say hello.", "-w", str(workspace)],
        env=env,
        cwd=workspace,  # not this checkout: ``-m`` puts the working folder first on sys.path
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, stderr = proc.communicate(timeout=120)
    exited = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"agentkit run failed ({proc.returncode}): {stderr.decode()[-2000:]}")
    while True:  # orphans of the command are ours now: wait for the last of them
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    gone = time.perf_counter() - started
    return exited, gone, children_cpu() - cpu0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--before", type=Path, help="another agentkit checkout to compare")
    args = parser.parse_args()
    if sys.platform != "linux":
        sys.exit("needs Linux (PR_SET_CHILD_SUBREAPER)")
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("prctl(PR_SET_CHILD_SUBREAPER) failed")
    from agentkit.testing import FakeOpenAIServer

    variants = [("after", ROOT)] + ([("before", args.before.resolve())] if args.before else [])
    rows: dict[str, list[tuple[float, ...]]] = {name: [] for name, _ in variants}
    loads = [os.getloadavg()[0]]
    with (
        tempfile.TemporaryDirectory(prefix="akcli") as tmp,
        FakeOpenAIServer(lambda request: "Hello.") as server,
    ):
        for name, _ in variants:
            (Path(tmp) / name / "ws").mkdir(parents=True)
        for _ in range(args.repeat):
            for name, package in variants:  # alternating: the same load for both
                folder = Path(tmp) / name
                rows[name].append(run_once(package, server.base_url, folder / "ws", folder / "tk"))
                loads.append(os.getloadavg()[0])
    print(f"agentkit run, one turn: median of {args.repeat} runs (min-max)")
    print(f"{'variant':>8} | {'exit s':>16} | {'tree gone s':>16} | {'CPU s (tree)':>16}")
    for name, _ in variants:
        cells = []
        for column in zip(*rows[name], strict=True):
            cells.append(f"{statistics.median(column):5.2f} ({min(column):.2f}-{max(column):.2f})")
        print(f"{name:>8} | " + " | ".join(f"{c:>16}" for c in cells))
    print(f"load average (1 min) {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
