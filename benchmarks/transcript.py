"""The sub-agent transcript's cost: bytes written and the worker's CPU (issue 27 part 2).

One sub-agent runs ``--turns`` turns (500), each a read_file of a 4 KB file (a 4 KB
tool result), then finish_task, against the fake model server (``--latency``
seconds per reply, 0 by default: a fast model; 0.25 s shows a real model's pace,
where a coalescing writer writes every save). Its worker is a real process, forked
by this script's launcher so that it can report, as it ends:

- bytes written by the worker process (``/proc/self/io`` ``wchar``: its file and
  pipe writes; the model's HTTP requests go through ``send`` and are not counted),
  against the size of the final ``conversations.json``. Goal: within 3x.
- the worker's CPU time, and the share spent saving its transcript (thread CPU
  inside ``Worker._save``, ``Worker._write_final`` and, where it exists, the
  background JSON writer's ``_write``). Goal: under 5 %.

Run: python benchmarks/transcript.py [--turns 500] [--result-bytes 4096] [--latency 0]
Same script before and after a change: put the other tree first on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# Loopback only: tiktoken would download its tables from the internet.
os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from subagent_helpers import call, calls, finish, step  # noqa: E402

from agentkit.settings import Settings  # noqa: E402
from agentkit.subagent.launchers.local import LocalWorker  # noqa: E402
from agentkit.subagent.manager import SubAgentManager  # noqa: E402
from agentkit.testing import FakeOpenAIServer, Reply  # noqa: E402


class Model:
    """``turns`` read_file calls, then finish_task, each after ``latency`` seconds."""

    def __init__(self, turns: int, latency: float) -> None:
        self.turns = turns
        self.latency = latency

    def __call__(self, request: dict[str, Any]) -> Any:
        if step(request) >= self.turns:
            return Reply(**finish("Benchmark task finished."), latency=self.latency)
        return Reply(**calls(call("read_file", path="result.txt")), latency=self.latency)


_spent = threading.local()


def _timed(fn: Any, totals: dict[str, float]) -> Any:
    """Wrap ``fn`` to add its thread CPU time to ``totals["cpu"]`` (outermost call only)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        depth = getattr(_spent, "depth", 0)
        _spent.depth = depth + 1
        started = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            _spent.depth = depth
            if depth == 0:
                with _lock:
                    totals["cpu"] += time.thread_time() - started

    return wrapper


_lock = threading.Lock()


def bench_worker(spec: Any, conn: Any, report: str) -> None:
    """The worker process: agentkit's worker_main, with the transcript's work timed;
    writes ``{cpu, transcript_cpu, wchar}`` to ``report`` when it returns."""
    import agentkit.jsonfile as jsonfile
    from agentkit.subagent import worker as worker_module

    totals = {"cpu": 0.0}
    cls = worker_module.Worker
    for name in ("_save", "_write_final"):
        setattr(cls, name, _timed(getattr(cls, name), totals))
    if hasattr(jsonfile.JsonFileWriter, "_write"):  # the coalescing writer's thread
        jsonfile.JsonFileWriter._write = _timed(jsonfile.JsonFileWriter._write, totals)  # type: ignore[method-assign]
    worker_module.worker_main(spec, conn)
    times = os.times()
    io = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    Path(report).write_text(
        json.dumps(
            {
                "cpu": times.user + times.system,
                "transcript_cpu": totals["cpu"],
                "wchar": int(io["wchar"]),
            }
        )
    )


class BenchLauncher:
    """Starts the worker by fork with :func:`bench_worker` as its target."""

    def __init__(self, report: str) -> None:
        self.report = report
        self.ctx = multiprocessing.get_context("fork")

    def start(self, spec: Any) -> LocalWorker:
        from agentkit.subagent.contract import Channel

        parent, child = self.ctx.Pipe(duplex=True)
        process = self.ctx.Process(target=bench_worker, args=(spec, child, self.report))
        process.start()
        child.close()
        return LocalWorker(process=process, channel=Channel(parent), mark=spec.process_mark)


def run_once(turns: int, result_bytes: int, latency: float) -> dict[str, Any]:
    """Run one sub-agent; returns the worker's report plus the record's size and status."""
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAIServer(Model(turns, latency)) as server:
        workspace = Path(tmp).resolve()
        line = "x" * 63 + "\n"
        (workspace / "result.txt").write_text(line * (result_bytes // len(line)))
        settings = Settings(
            model="bench",
            base_url=server.base_url,
            api_key="k",
            language="en",
            subagent_max_turns=turns + 5,
            max_retries=0,
        )
        report = workspace / "report.json"
        manager = SubAgentManager(
            workspace=workspace, settings=settings, launcher=BenchLauncher(str(report))
        )
        started = time.perf_counter()
        result = manager.create(agent_id=1, summary="bench", task="t", timeout_seconds=3600)
        wall = time.perf_counter() - started
        deadline = time.monotonic() + 30
        while not report.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        manager.shutdown()
        data = json.loads(report.read_text())
        record_file = workspace / "sub_agent_results/agent_1/.subagent/conversations.json"
        record = json.loads(record_file.read_text())
        data.update(
            status=result["status"],
            wall=wall,
            record_bytes=record_file.stat().st_size,
            messages=len(record["messages"]),
            archive=len(record.get("archive") or []),
        )
        return data


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--result-bytes", type=int, default=4096)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    import agentkit

    print(f"agentkit from {Path(agentkit.__file__).parent}")
    print(
        f"{args.turns} turns, {args.result_bytes} B tool results, {args.latency} s a reply, "
        f"{args.runs} run(s)"
    )
    print("| run | status | wall s | record MiB | written MiB | written / record | worker CPU s "
          "| transcript CPU s | share |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for run in range(args.runs):
        d = run_once(args.turns, args.result_bytes, args.latency)
        mib = 2**20
        print(
            f"| {run + 1} | {d['status']} | {d['wall']:.1f} | {d['record_bytes'] / mib:.2f} "
            f"| {d['wchar'] / mib:.1f} | {d['wchar'] / d['record_bytes']:.1f}x | {d['cpu']:.2f} "
            f"| {d['transcript_cpu']:.3f} | {100 * d['transcript_cpu'] / d['cpu']:.1f} % |"
        )
        print(f"  (record: {d['messages']} messages, {d['archive']} archived originals)")


if __name__ == "__main__":
    main()
