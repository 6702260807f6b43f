"""Agent runs under asyncio: agent.stream, arun and their cancellation (issue 33 item 2).

Real FakeOpenAIServer over HTTP, real sub-agent processes; each test runs its own
event loop with ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from agent_settings import settings_for
from subagent_helpers import Router, call, calls, finish

from agentkit import Agent, Settings
from agentkit import events as ev
from agentkit.testing import FakeOpenAIServer, Reply


def slow_on(word: str, answer: str = "quick answer") -> Any:
    """A model that keeps a request with ``word`` as the last message 60 s (the test
    cancels it long before), and answers anything else at once."""

    def handler(request: dict[str, Any]) -> Any:
        if request["messages"][-1].get("content") == word:
            return Reply(content="too late", latency=60)
        return answer

    return handler


async def until(predicate: Any, timeout: float = 20.0) -> None:
    """Await ``predicate()`` becoming true (polled every 20 ms); fail after ``timeout``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


def test_stream_yields_the_runs_events_in_order_then_ends(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    script = [calls(call("read_file", path="a.txt")), "It says alpha."]
    on_stream: list[ev.Event] = []

    async def main(agent: Agent) -> Any:
        async with agent.stream("What does a.txt say?") as run:
            got = [event async for event in run]
        return got, await run.result()

    with FakeOpenAIServer(script) as server, Agent(workspace, settings_for(server)) as agent:
        agent.session.subscribe(on_stream.append)  # the conversation's own stream
        got, result = asyncio.run(main(agent))
    assert got == on_stream  # every event, in the stream's order, nothing more
    assert isinstance(got[0], ev.RunStarted) and isinstance(got[-1], ev.RunFinished)
    types = [e.type for e in got]
    assert types.index("ToolCallStarted") < types.index("ToolCallFinished")
    assert result.status == "done" and result.final_text == "It says alpha."
    assert got[-1].final_text == result.final_text  # type: ignore[attr-defined]


def test_result_can_be_awaited_without_iterating(workspace: Path) -> None:
    async def main(agent: Agent) -> Any:
        async with agent.stream("hi") as run:
            first = await run.result()
        return first, await run.result(), [e async for e in run]

    with FakeOpenAIServer(["hello"]) as server, Agent(workspace, settings_for(server)) as agent:
        first, again, events = asyncio.run(main(agent))
    assert first.final_text == "hello" and again is first
    assert events[0].type == "RunStarted" and events[-1].type == "RunFinished"


def test_run_cancel_during_a_slow_reply_says_cancelled_and_saves(workspace: Path) -> None:
    async def main(agent: Agent, server: FakeOpenAIServer) -> Any:
        async with agent.stream("slow") as run:
            await until(lambda: len(server.requests) == 1)  # the model is answering
            await run.cancel()
            return await run.result()

    with (
        FakeOpenAIServer(slow_on("slow")) as server,
        Agent(workspace, settings_for(server)) as agent,
    ):
        result = asyncio.run(main(agent, server))
        kept = agent.last_result
        saved = json.loads(agent.transcript_path.read_text())
        again = agent.run("still there?")
    assert result.status == "cancelled" and kept is result
    assert saved["state"] == "idle" and saved["messages"][-1]["content"] == "slow"
    assert again.status == "done" and again.final_text == "quick answer"


def test_cancel_before_the_round_starts_is_not_lost(workspace: Path) -> None:
    # Cancelled at once: the run's thread may not have queued the message yet, and
    # a stop before its round starts would be cleared by the round's start.
    async def main(agent: Agent) -> Any:
        async with agent.stream("slow") as run:
            await run.cancel()
        return await run.result()

    with (
        FakeOpenAIServer(slow_on("slow")) as server,
        Agent(workspace, settings_for(server)) as agent,
    ):
        result = asyncio.run(main(agent))
        answers = [m for m in agent.conversation.messages if m["role"] == "assistant"]
    assert result.status == "cancelled"
    assert answers == []  # stopped, not waited for


def test_leaving_the_block_early_stops_the_run(workspace: Path) -> None:
    async def main(agent: Agent) -> Any:
        async with agent.stream("slow") as run:
            async for event in run:
                if isinstance(event, ev.RoundStarted):
                    break  # a web client gone, say
        return await run.result()

    with (
        FakeOpenAIServer(slow_on("slow")) as server,
        Agent(workspace, settings_for(server)) as agent,
    ):
        result = asyncio.run(main(agent))
        assert agent.session.state == "idle"
    assert result.status == "cancelled"


def test_cancelling_the_arun_task_keeps_the_cancelled_result(workspace: Path) -> None:
    async def main(agent: Agent, server: FakeOpenAIServer) -> Any:
        task = asyncio.create_task(agent.arun("slow"))
        await until(lambda: len(server.requests) == 1)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return agent.last_result  # the run has ended by the time the task has
        return "not cancelled"

    with (
        FakeOpenAIServer(slow_on("slow")) as server,
        Agent(workspace, settings_for(server)) as agent,
    ):
        kept = asyncio.run(main(agent, server))
        saved = json.loads(agent.transcript_path.read_text())
    assert kept is not None and kept != "not cancelled" and kept.status == "cancelled"
    assert saved["state"] == "idle" and saved["messages"][-1]["content"] == "slow"


def test_concurrent_runs_do_not_borrow_the_default_executor(workspace: Path) -> None:
    runs = 10
    arrived = threading.Barrier(runs, timeout=30)  # broken if the requests never overlap
    lock = threading.Lock()
    flight = {"now": 0, "most": 0}

    def handler(request: dict[str, Any]) -> Any:
        with lock:
            flight["now"] += 1
            flight["most"] = max(flight["most"], flight["now"])
        try:
            arrived.wait()
            return "answered"
        finally:
            with lock:
                flight["now"] -= 1

    async def main(settings: Settings) -> list[Any]:
        # One thread in the default pool: runs borrowing it would go one at a time.
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(1))
        agents = await asyncio.gather(*(Agent.open(workspace, settings) for _ in range(runs)))
        try:
            return await asyncio.gather(*(a.arun(f"job {n}") for n, a in enumerate(agents)))
        finally:
            await asyncio.gather(*(a.aclose() for a in agents))

    with FakeOpenAIServer(handler) as server:
        results = asyncio.run(main(settings_for(server, max_retries=0)))
    assert flight["most"] == runs
    assert [r.status for r in results] == ["done"] * runs


def test_a_sub_agents_events_are_in_the_stream(workspace: Path) -> None:
    create = call("create_sub_agent", agent_id=1, summary="look", task="look around")
    router = Router(
        main=[calls(create), "all done"],
        subs={1: [calls(call("search_workspace", pattern="x")), finish()]},
    )

    async def main(agent: Agent) -> list[ev.Event]:
        async with agent.stream("delegate") as run:
            return [event async for event in run]

    with (
        FakeOpenAIServer(router) as server,
        Agent(workspace, settings_for(server, subagent_timeout_min=1)) as agent,
    ):
        got = asyncio.run(main(agent))
    types = [e.type for e in got]
    assert "SubAgentStarted" in types and "SubAgentFinished" in types
    assert types.index("SubAgentStarted") < types.index("SubAgentFinished")
    assert types[-1] == "RunFinished" and got[-1].status == "done"  # type: ignore[attr-defined]


def test_cancel_while_background_sub_agents_work_says_cancelled(workspace: Path) -> None:
    # The round ends at once ("done"); the run then waits for the background
    # sub-agent, and a cancel then ends the sub-agent: the run did not finish its work.
    create = call("create_sub_agent", agent_id=1, summary="s", task="t", run_in_background=True)
    router = Router(
        main=[calls(create), "started it"],
        subs={1: [Reply(content="thinking", latency=60)]},
    )

    async def main(agent: Agent) -> Any:
        async with agent.stream("go") as run:
            seen: list[str] = []
            async for event in run:
                seen.append(event.type)
                if "SubAgentStarted" in seen and "RoundFinished" in seen:
                    await run.cancel()
        return await run.result()

    with (
        FakeOpenAIServer(router) as server,
        Agent(workspace, settings_for(server, subagent_timeout_min=1)) as agent,
    ):
        result = asyncio.run(main(agent))
        rows = agent.session.subagents()
    assert result.status == "cancelled"
    assert [r["status"] for r in rows] != ["running"]


def test_a_cancelled_open_closes_the_agent_it_was_building(workspace: Path) -> None:
    async def main(settings: Settings) -> None:
        opening = asyncio.create_task(Agent.open(workspace, settings))
        await asyncio.sleep(0)  # its thread has started building
        opening.cancel()
        try:
            await opening
        except asyncio.CancelledError:
            pass
        folder = workspace / ".agentkit" / "conversations"
        # Built by its thread all the same, then closed: no conversation stays claimed.
        await until(lambda: folder.is_dir() and not list(folder.glob("*.lock")))
        await until(lambda: not any(t.name == "agentkit-close" for t in threading.enumerate()))

    with FakeOpenAIServer(["unused"]) as server:
        asyncio.run(main(settings_for(server)))
