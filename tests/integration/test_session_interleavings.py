"""A seeded property test of the session: random interleavings of user messages, tool
batches and sub-agent completions, over real workers. Whatever the timing, every
completion is announced exactly once and every user message reaches the model
exactly once, in the order it was sent (docs/architecture.md §9)."""

from __future__ import annotations

import os
import random
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import pytest
from subagent_helpers import call, calls, finish, scripted_settings, who

from agentkit.chat import Session
from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow

RUNS = int(os.environ.get("AGENTKIT_INTERLEAVINGS", "200"))
AT_ONCE = 4  # sessions run side by side, each in its own thread
ANNOUNCED = re.compile(r"子智能体(\d+) \([^)]*\) 已完成")


class Plan:
    """One interleaving: how many sub-agents, when each ends, what the main agent does
    at each request, when the user speaks. Drawn from ``seed``."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.agents = self.rng.randint(1, 3)
        self.delays = {i: self.rng.uniform(0, 0.08) for i in range(1, self.agents + 1)}
        self.messages = [f"用户消息{seed}-{n}" for n in range(self.rng.randint(1, 4))]
        self.gaps = [self.rng.uniform(0, 0.06) for _ in self.messages]

    def choice(self, weights: list[float]) -> int:
        with self.lock:
            return self.rng.choices(range(len(weights)), weights)[0]

    def main(self, request: dict[str, Any]) -> Any:
        messages = request["messages"]
        if not any(m["role"] == "assistant" for m in messages):
            return calls(
                *(
                    call(
                        "create_sub_agent",
                        agent_id=i,
                        summary=f"任务{i}",
                        task="t",
                        run_in_background=True,
                    )
                    for i in range(1, self.agents + 1)
                )
            )
        # Afterwards: a tool batch now and then (a turn boundary), else an answer.
        if self.choice([0.45, 0.55]) == 0:
            time.sleep(self.rng.uniform(0, 0.02))
            return calls(call("read_file", path="a.txt"))
        return "好的。"

    def sub(self, request: dict[str, Any]) -> Any:
        agent = who(request) or 0
        time.sleep(self.delays.get(agent, 0))
        return finish(f"任务{agent}完成。")


def run_one(seed: int, workspace: Path, server: FakeOpenAIServer, plan: Plan) -> None:
    # The model's name tells the server's handler whose plan a request is for.
    settings = scripted_settings(server, model=model_of(seed))
    with Session(workspace, settings, prewarm=False) as session:
        futures = []
        for text, gap in zip(plan.messages, plan.gaps, strict=True):
            futures.append(session.post(text))
            time.sleep(gap)
        assert session.wait_idle(60), f"seed {seed}: never idle"
        results = [f.result(5) for f in futures]
        messages = session.conversation.messages
    assert all(r.status == "done" for r in results), f"seed {seed}: {results}"
    announced = [
        int(n)
        for m in messages
        if m["role"] in ("system", "user")
        for n in ANNOUNCED.findall(m.get("content") or "")
    ]
    assert sorted(announced) == list(range(1, plan.agents + 1)), (
        f"seed {seed}: announcements {announced} for {plan.agents} sub-agents"
    )
    said = [m["content"] for m in messages if m["role"] == "user" and "用户消息" in m["content"]]
    assert said == plan.messages, f"seed {seed}: user messages {said} != {plan.messages}"


def model_of(seed: int) -> str:
    """The model name of seed ``seed``'s session and sub-agents."""
    return f"fake-model-{seed}"


def test_random_interleavings_lose_and_double_nothing(tmp_path: Path) -> None:
    """RUNS seeded sessions, AT_ONCE at a time (each its own Session, workspace and
    plan; one server answers all, by model name): most of a run is waiting for its
    workers and the plan's pauses, so several share the wall time."""
    plans = {model_of(seed): Plan(seed) for seed in range(RUNS)}

    def handler(request: dict[str, Any]) -> Any:
        plan = plans[request["model"]]
        return plan.main(request) if who(request) is None else plan.sub(request)

    def run(seed: int) -> None:
        workspace = tmp_path / f"ws{seed}"
        workspace.mkdir()
        (workspace / "a.txt").write_text("a\n")
        run_one(seed, workspace, server, plans[model_of(seed)])

    with FakeOpenAIServer(handler) as server, ThreadPoolExecutor(AT_ONCE) as pool:
        futures = [pool.submit(run, seed) for seed in range(RUNS)]
        try:
            for future in as_completed(futures):
                future.result()
        finally:  # a failure stops the runs not started yet
            pool.shutdown(cancel_futures=True)
