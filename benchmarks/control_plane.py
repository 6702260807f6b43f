"""The control plane's latencies (issue 21, docs/control-plane.md), on loopback with a
scripted model (FakeOpenAIServer) and a real worker process.

Prints:
- message_sub_agent (Session.message_subagent) to the sub-agent's next request that
  carries it, sent while the sub-agent is between turns (its model's reply just left
  the server; a fast tool call follows). Goal: under 20 ms.
- the same, sent while the sub-agent waits for a 200 ms model reply. Goal: within one
  model turn (the next request carries it).
- ask_parent to the main agent's request when the main agent is idle (the question
  starts a round by itself; a question that came while a round still ran, told after
  its tool batch, is answered but not counted). Goal: under 50 ms, like the
  completion wake-up.

Run: python benchmarks/control_plane.py [--runs 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# Loopback only: tiktoken would download its tables from the internet.
os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "tests"))

from subagent_helpers import call, calls, finish, who  # noqa: E402

from agentkit.chat import Session  # noqa: E402
from agentkit.settings import Settings  # noqa: E402
from agentkit.testing import FakeOpenAIServer, Reply  # noqa: E402

STEER_MARK = "【主智能体发来的消息】"
QUESTION_MARK = "请用 answer_sub_agent 回答"


def settings_for(server: FakeOpenAIServer) -> Settings:
    return Settings(
        model="m",
        base_url=server.base_url,
        api_key="k",
        language="zh",
        max_retries=0,
        retry_total_seconds=0,
        subagent_control=True,
        subagent_max_turns=10_000,
    )


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def show(name: str, values: list[float], goal: str) -> None:
    ms = [v * 1000 for v in values]
    print(
        f"{name}: median {statistics.median(ms):.1f} ms, p90 {pct(ms, 90):.1f} ms, "
        f"min {min(ms):.1f} ms, max {max(ms):.1f} ms, n={len(ms)} ({goal})"
    )


def _steered(request: dict[str, Any]) -> str | None:
    """The text of the newest steering message in a sub-agent's request, if the last
    messages after the tool results hold one."""
    for message in reversed(request["messages"]):
        if message["role"] == "tool":
            return None
        content = message.get("content") or ""
        if message["role"] == "user" and content.startswith(STEER_MARK):
            return content
    return None


def message_latency(runs: int, model_seconds: float) -> tuple[list[float], list[int]]:
    """message_subagent called → the sub-agent's request carrying it arrives. Returns
    the latencies and, for each, how many sub-agent requests later it came (1: the next)."""
    lock = threading.Lock()
    state: dict[str, Any] = {"requests": 0, "sent_at": None, "sent_request": 0}
    cue = threading.Event()
    latencies: list[float] = []
    turns: list[int] = []
    done = threading.Event()

    def sub(request: dict[str, Any]) -> Any:
        now = time.perf_counter()
        with lock:
            state["requests"] += 1
            if _steered(request) and state["sent_at"] is not None:
                latencies.append(now - state["sent_at"])
                turns.append(state["requests"] - state["sent_request"])
                state["sent_at"] = None
            if len(latencies) >= runs:
                done.set()
                return finish("完成。")
        if model_seconds:
            cue.set()  # send while this reply is being "thought about"
            return Reply(tool_calls=[call("read_file", path="a.txt")], latency=model_seconds)
        reply = calls(call("read_file", path="a.txt"))
        cue.set()  # the reply leaves now: the message arrives between turns
        return reply

    def handler(request: dict[str, Any]) -> Any:
        if who(request) is not None:
            return sub(request)
        if sum(1 for m in request["messages"] if m["role"] == "assistant") == 0:
            return calls(call("create_sub_agent", agent_id=1, summary="循环读文件", task="读",
                              run_in_background=True, timeout_seconds=3600))  # fmt: skip
        return "好。"

    with tempfile.TemporaryDirectory() as tmp, FakeOpenAIServer(handler) as server:
        workspace = Path(tmp).resolve()
        (workspace / "a.txt").write_text("x\n")
        with Session(workspace, settings_for(server)) as session:
            session.send("开始")
            for n in range(runs):
                if not cue.wait(30) or done.is_set():
                    break
                cue.clear()
                with lock:
                    state["sent_at"] = time.perf_counter()
                    state["sent_request"] = state["requests"]
                result = session.message_subagent(1, f"第 {n} 条消息")
                assert result["success"], result
                while not done.is_set():  # wait until this one was read
                    with lock:
                        if state["sent_at"] is None:
                            break
                    time.sleep(0.001)
            done.wait(30)
            session.wait_idle(30)
    return latencies, turns


def question_latency(runs: int) -> list[float]:
    """The sub-agent's ask_parent reply sent → the main agent's request (idle: the
    question starts a round)."""
    lock = threading.Lock()
    marks: dict[str, float] = {}
    latencies: list[float] = []

    def handler(request: dict[str, Any]) -> Any:
        messages = request["messages"]
        if who(request) is not None:
            asked = sum(1 for m in messages if m.get("name") == "ask_parent")
            if asked >= runs:
                return finish("问完了。")
            with lock:
                marks["asked"] = time.perf_counter()
            return calls(call("ask_parent", question=f"第 {asked} 个问题？"))
        last = messages[-1]
        if QUESTION_MARK in (last.get("content") or ""):
            if last["role"] == "user":  # idle: the question started this round
                with lock:
                    latencies.append(time.perf_counter() - marks["asked"])
            return calls(call("answer_sub_agent", agent_id=1, answer="好的"))
        if sum(1 for m in messages if m["role"] == "assistant") == 0:
            return calls(call("create_sub_agent", agent_id=1, summary="一直提问", task="问",
                              run_in_background=True, timeout_seconds=3600))  # fmt: skip
        return "好。"

    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeOpenAIServer(handler) as server,
        Session(Path(tmp).resolve(), settings_for(server)) as session,
    ):
        session.send("开始")
        deadline = time.monotonic() + 120
        while len(latencies) < runs and time.monotonic() < deadline:
            time.sleep(0.02)
        session.wait_idle(30)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    between, _ = message_latency(args.runs, 0.0)
    show("message_sub_agent -> next request, between turns", between, "goal < 20 ms")
    slow, turns = message_latency(max(5, args.runs // 3), 0.2)
    show("message_sub_agent -> next request, during a 200 ms model turn", slow, "goal: one turn")
    print(f"  requests later that carried it: {sorted(set(turns))} (1 = the next request)")
    asked = question_latency(args.runs)
    show("ask_parent -> main agent's request (idle)", asked, "goal < 50 ms")


if __name__ == "__main__":
    main()
