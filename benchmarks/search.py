"""Benchmark: search_workspace against plain ``rg`` on a large real tree, and read_file memory.

Usage: ``python benchmarks/search.py [--tree DIR] [--reps N]``

* Tree: the live site-packages folder of the running interpreter (read only), used as the
  workspace. Queries are run with ripgrep (``use_ripgrep=True``), without it (the Python
  walker) and as plain ``rg`` with equivalent flags (``--hidden --no-require-git`` so it
  searches the same files; output captured through a pipe, as search_workspace reads it).
  Repetitions are interleaved; the table shows medians and the ratio to plain rg
  (docs/architecture.md §8 target: within 1.5x of plain rg when ripgrep is present).
* Child process cost: the pure-Python engine runs in a child process (killable at the
  deadline, see agentkit/tools/search/_pyscan.py); on a one-file workspace the whole tool call
  is compared with the same scan run in-process, the difference is the cost per search.
* read_file: a 1 GiB sparse file (text at both ends, a hole in the middle) read near its
  end, in a fresh subprocess; peak RSS (``ru_maxrss``) is compared with the baseline after
  imports.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time
from pathlib import Path

# Loopback only: tiktoken would download its tables from the internet.
os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentkit.settings import Settings  # noqa: E402
from agentkit.tools.base import ToolContext  # noqa: E402
from agentkit.tools.registry import ToolRegistry  # noqa: E402
from agentkit.tools.search import SEARCH_TOOLS  # noqa: E402
from agentkit.tools.search._ripgrep import find_rg  # noqa: E402

QUERIES: list[dict[str, object]] = [
    {"pattern": "def __init__"},
    {"pattern": "import re"},
    {"pattern": "levenshtein"},  # rare identifier
    {"pattern": "TCP_NODELAY", "ignore_case": True},
    {"pattern": r"class \w+Error\(", "glob": "*.py"},
]


def plain_rg_args(rg: str, query: dict[str, object]) -> list[str]:
    args = [rg, "--no-config", "--hidden", "--no-require-git", "-n", "--no-heading"]
    if query.get("ignore_case"):
        args.append("-i")
    if query.get("glob"):
        args += ["-g", str(query["glob"])]
    return [*args, "-e", str(query["pattern"]), "."]


def bench_search(tree: Path, reps: int) -> None:
    rg = find_rg()
    registry = ToolRegistry(SEARCH_TOOLS)
    contexts = {
        name: ToolContext(
            workspace=tree,
            settings=Settings(model="bench", api_key="x", language="en", use_ripgrep=use),
        )
        for name, use in (("rg", True), ("python", False))
    }
    print(f"tree: {tree}  ({sum(1 for _ in tree.rglob('*'))} entries)  rg: {rg}")
    print(f"{reps} interleaved repetitions; medians in ms\n")
    header = (
        f"{'query':<34}{'plain rg':>10}{'tool+rg':>10}{'ratio':>8}{'tool/py':>10}{'ratio':>8}  rows"
    )
    print(header)
    print("-" * len(header))
    ratios = []
    for query in QUERIES:
        times: dict[str, list[float]] = {"plain": [], "rg": [], "python": []}
        total = "?"
        for _ in range(reps):
            if rg:
                started = time.perf_counter()
                subprocess.run(plain_rg_args(rg, query), cwd=tree, capture_output=True)
                times["plain"].append(time.perf_counter() - started)
            for name, ctx in contexts.items():
                if name == "rg" and not rg:
                    continue
                started = time.perf_counter()
                result = registry.execute("search_workspace", dict(query), ctx)
                times[name].append(time.perf_counter() - started)
                total = str(result.meta.get("total"))
        med = {k: statistics.median(v) * 1000 if v else float("nan") for k, v in times.items()}
        ratio_rg = med["rg"] / med["plain"] if rg else float("nan")
        ratios.append(ratio_rg)
        label = json.dumps(query, ensure_ascii=False)[:33]
        print(
            f"{label:<34}{med['plain']:>10.0f}{med['rg']:>10.0f}{ratio_rg:>7.2f}x"
            f"{med['python']:>10.0f}{med['python'] / med['plain']:>7.1f}x  {total}"
        )
    if rg:
        print(f"\nworst tool+rg / plain rg ratio: {max(ratios):.2f}x (target <= 1.5x)")


READ_SCRIPT = textwrap.dedent(
    """
    import json, os, resource, sys, time
    sys.path.insert(0, sys.argv[1])
    from agentkit.settings import Settings
    from agentkit.tools.base import ToolContext
    from agentkit.tools.files import FILE_TOOLS

    ws = sys.argv[2]
    tool = next(t for t in FILE_TOOLS if t.name == "read_file")
    ctx = ToolContext(workspace=__import__("pathlib").Path(ws), settings=Settings(
        model="bench", api_key="x", language="en"))
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    result = tool.func(tool.params(path="sparse.txt", offset=int(sys.argv[3]), limit=20), ctx)
    elapsed = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    output = getattr(result, "output", str(result))
    print(json.dumps({"base_kib": base, "peak_kib": peak, "seconds": elapsed,
                      "head": output.splitlines()[0][:160] if output else ""}))
    """
)


def bench_read_file() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sparse.txt"
        # More than read_file's 8 KiB binary sniff of text first, so it is read as text.
        head = "".join(f"start line {i}\n" for i in range(1, 1001))
        tail = "".join(f"end line {i}\n" for i in range(1, 101))
        size = 1 << 30
        with open(path, "wb") as fh:
            fh.write(head.encode())
            fh.truncate(size - len(tail))  # the hole: never written, no disk used
            fh.seek(size - len(tail))
            fh.write(tail.encode())
        offset = 1000 + 1 + 90  # 1000 head lines, the hole (one NUL line), then tail lines
        done = subprocess.run(
            [sys.executable, "-c", READ_SCRIPT, str(ROOT), tmp, str(offset)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            print("read_file benchmark failed:", done.stderr[-2000:])
            return
        info = json.loads(done.stdout.strip().splitlines()[-1])
        grown = (info["peak_kib"] - info["base_kib"]) / 1024
        print(
            f"\nread_file on a 1 GiB sparse file at line {offset}: "
            f"baseline RSS {info['base_kib'] / 1024:.1f} MiB, peak {info['peak_kib'] / 1024:.1f} MiB "
            f"(+{grown:.1f} MiB), {info['seconds']:.2f} s"
        )
        print(f"  first output line: {info['head']}")


def bench_child_cost(reps: int) -> None:
    import io

    from agentkit.tools.search import SearchParams, _make_job, _pyscan

    registry = ToolRegistry(SEARCH_TOOLS)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        (root / "a.py").write_text("def needle():\n    return 1\n" * 50)
        ctx = ToolContext(
            workspace=root,
            settings=Settings(model="bench", api_key="x", language="en", use_ripgrep=False),
        )
        tool_times, inproc_times = [], []
        for _ in range(max(reps, 15)):
            started = time.perf_counter()
            registry.execute("search_workspace", {"pattern": "needle"}, ctx)
            tool_times.append(time.perf_counter() - started)
            job, _ = _make_job(SearchParams(pattern="needle"), ctx)
            started = time.perf_counter()
            emitter = _pyscan._Emitter(io.BytesIO(), 100, job.stats)  # type: ignore[arg-type]
            _pyscan.scan(job, emitter, time.monotonic() + 20)
            inproc_times.append(time.perf_counter() - started)
    tool = statistics.median(tool_times) * 1000
    inproc = statistics.median(inproc_times) * 1000
    print(
        f"\npure-Python search of a one-file workspace: tool call {tool:.0f} ms, the same scan "
        f"in-process {inproc:.1f} ms -> child process cost ~{tool - inproc:.0f} ms per search"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", type=Path, default=Path(sysconfig.get_paths()["purelib"]))
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--skip-read", action="store_true", help="skip the read_file part")
    parser.add_argument("--child-only", action="store_true", help="only the child-process cost")
    args = parser.parse_args()
    bench_child_cost(args.reps)
    if args.child_only:
        return
    bench_search(args.tree.resolve(), args.reps)
    if not args.skip_read:
        bench_read_file()


if __name__ == "__main__":
    main()
