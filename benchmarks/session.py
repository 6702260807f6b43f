"""Living conversations: how fast the session reacts (issue "Living conversations").

Prints, on loopback with a zero-latency scripted model (FakeOpenAIServer):
- from a background sub-agent's finish_task to the main agent's next request (the
  notification round starting by itself). Goal: median at most 50 ms.
- from a user message sent between rounds (Session.post) to the model's request.
  Goal: at most 20 ms.
- memory of an idle conversation with no sub-agents (RSS growth per open Session).
- the first sub-agent of a fresh process, created one second after its session
  opened (the worker server is started in the background at open): create to the
  worker's first request. Goal: at most 300 ms.

Run: python benchmarks/session.py [--runs 30]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import psutil

# Loopback only: tiktoken would download its tables from the internet.
os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "tests"))

from subagent_helpers import call, calls, finish, who  # noqa: E402

from agentkit.chat import Session  # noqa: E402
from agentkit.settings import Settings  # noqa: E402
from agentkit.testing import FakeOpenAIServer  # noqa: E402


def settings_for(server: FakeOpenAIServer) -> Settings:
    return Settings(
        model="m",
        base_url=server.base_url,
        api_key="k",
        language="zh",
        max_retries=0,
        retry_total_seconds=0,
        subagent_timeout_min=1,
    )


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def show(name: str, values: list[float], goal: str) -> None:
    ms = [v * 1000 for v in values]
    print(
        f"{name}: median {statistics.median(ms):.1f} ms, p90 {pct(ms, 90):.1f} ms, "
        f"min {min(ms):.1f} ms, n={len(ms)} ({goal})"
    )


def notification_latency(runs: int) -> list[float]:
    """finish_task reply sent → the main agent's next request arrives."""
    marks: dict[str, float] = {}
    gate = threading.Event()

    def handler(request: dict[str, Any]) -> Any:
        if who(request) is not None:
            gate.wait(30)
            marks["finish"] = time.perf_counter()
            return finish("完成了。")
        messages = request["messages"]
        last = messages[-1]
        if last["role"] == "user" and "已完成任务" in (last.get("content") or ""):
            marks["next"] = time.perf_counter()
            return "收到。"
        if last["role"] == "user":
            return calls(
                call(
                    "create_sub_agent", agent_id=1, summary="基准", task="t", run_in_background=True
                )
            )
        return "等待中。"

    found: list[float] = []
    with FakeOpenAIServer(handler) as server:
        for _ in range(runs):
            with tempfile.TemporaryDirectory() as tmp:
                gate.clear()
                marks.clear()
                with Session(Path(tmp), settings_for(server)) as session:
                    session.send("开始")
                    gate.set()
                    session.wait_idle(30)
                found.append(marks["next"] - marks["finish"])
    return found


def message_latency(runs: int) -> list[float]:
    """Session.post between rounds → the model's request arrives."""
    marks: dict[str, float] = {}

    def handler(request: dict[str, Any]) -> Any:
        marks["request"] = time.perf_counter()
        return "好。"

    found: list[float] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeOpenAIServer(handler) as server,
        Session(Path(tmp), settings_for(server)) as session,
    ):
        session.send("热身")
        for _ in range(runs):
            sent = time.perf_counter()
            session.post("你好").result(10)
            found.append(marks["request"] - sent)
    return found


def idle_memory(count: int = 50) -> float:
    """RSS growth per idle open Session (MiB), with no sub-agents."""
    proc = psutil.Process()
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAIServer(["好。"] * 1000) as server:
        settings = settings_for(server)
        warm = Session(Path(tmp), settings, prewarm=False)
        warm.send("热身")
        gc.collect()
        before = proc.memory_info().rss
        sessions = [Session(Path(tmp), settings, prewarm=False) for _ in range(count)]
        for s in sessions:
            s.send("你好")
        gc.collect()
        after = proc.memory_info().rss
        for s in [warm, *sessions]:
            s.close()
    return (after - before) / count / 2**20


FIRST_SUBAGENT = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[2])
    from subagent_helpers import call, calls, finish, who
    from agentkit import events as ev
    from agentkit.chat import Session
    from agentkit.settings import Settings
    from agentkit.testing import FakeOpenAIServer

    marks = {}
    def handler(request):
        if who(request) is not None:
            marks.setdefault("first", time.perf_counter())
            return finish("完成。")
        last = request["messages"][-1]
        if last["role"] == "user" and last["content"] == "开始":
            return calls(call("create_sub_agent", agent_id=1, summary="首个", task="t"))
        return "好。"

    def on_event(event):
        if isinstance(event, ev.ToolCallStarted) and event.name == "create_sub_agent":
            marks["create"] = time.perf_counter()

    with FakeOpenAIServer(handler) as server:
        settings = Settings(model="m", base_url=server.base_url, api_key="k",
                            subagent_timeout_min=1, max_retries=0)
        with Session(Path(sys.argv[1]), settings) as session:
            session.subscribe(on_event)
            time.sleep(1.0)  # the session has been open a second
            session.send("开始")
    print(json.dumps(marks["first"] - marks["create"]))
    """
)


def first_subagent(runs: int) -> list[float]:
    """A fresh process: session open 1 s, then create → the worker's first request."""
    found: list[float] = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            out = subprocess.run(
                [sys.executable, "-c", FIRST_SUBAGENT, tmp, str(HERE / "tests")],
                capture_output=True,
                text=True,
                check=True,
                timeout=120,
            )
            found.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    show("finish_task -> next main request", notification_latency(args.runs), "goal <= 50 ms")
    show("user message -> request", message_latency(args.runs), "goal <= 20 ms")
    print(f"idle conversation: {idle_memory():.2f} MiB RSS each (50 open, no sub-agents)")
    show(
        "first sub-agent, session open 1 s: create -> first request",
        first_subagent(max(3, args.runs // 6)),
        "goal <= 300 ms",
    )


if __name__ == "__main__":
    main()
