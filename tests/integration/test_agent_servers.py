"""The public Python API: Agent, RunResult, events, custom tools, persistence (issue 2)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

from agent_settings import settings_for
from pydantic import BaseModel

from agentkit import Agent, Tool, ToolContext
from agentkit import events as ev
from agentkit.testing import FakeOpenAIServer, Reply


class CityParams(BaseModel):
    city: str


def test_run_returns_result_events_and_saves_the_conversation(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    script = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
        "It says alpha.",
    ]
    events: list[ev.Event] = []
    with FakeOpenAIServer(script) as server, Agent(workspace, settings_for(server)) as agent:
        result = agent.run("What does a.txt say?", on_event=events.append)
        first = server.requests[0]
    assert result.status == "done" and result.final_text == "It says alpha."
    assert result.stats["turns"] == 2 and result.stats["files_read"] == 1
    assert result.stats["token_usage"]["total"] > 0
    assert (
        result.transcript_path
        == workspace / ".agentkit" / "conversations" / f"{result.conversation_id}.json"
    )
    saved = json.loads(result.transcript_path.read_text())
    assert saved["state"] == "idle" and saved["messages"][-1]["content"] == "It says alpha."
    # The main system prompt describes the workspace; every tool is offered.
    assert str(workspace) in first["messages"][0]["content"]
    names = {t["function"]["name"] for t in first["tools"]}
    assert {
        "read_file",
        "write_file",
        "edit_file",
        "search_workspace",
        "run_command",
        "web_search",
        "extract_webpage",
    } <= names
    assert {"create_sub_agent", "terminate_sub_agent", "get_sub_agent_status"} <= names
    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "RunStarted" and kinds[-1] == "RunFinished"
    assert (
        "ToolCallStarted" in kinds and "ToolCallFinished" in kinds and "AssistantMessage" in kinds
    )
    started = next(e for e in events if isinstance(e, ev.ToolCallStarted))
    assert started.last_action == "Reading a.txt"
    assert all(isinstance(e.to_dict(), dict) for e in events)


def test_a_saved_conversation_can_be_loaded_and_continued(workspace: Path) -> None:
    with FakeOpenAIServer(["first answer", "second answer"]) as server:
        with Agent(workspace, settings_for(server)) as agent:
            first = agent.run("question one")
        with Agent(workspace, settings_for(server), conversation_id=first.conversation_id) as again:
            second = again.run("question two")
        sent = server.requests[1]["messages"]
    assert second.conversation_id == first.conversation_id and second.final_text == "second answer"
    assert [m["content"] for m in sent if m["role"] in ("user", "assistant")] == [
        "question one",
        "first answer",
        "question two",
    ]
    assert second.stats["turns"] == 2


def test_custom_tools_by_decorator_and_by_class(workspace: Path) -> None:
    script = [
        {
            "tool_calls": [
                {"name": "weather", "arguments": {"city": "Paris"}},
                {"name": "shout", "arguments": {"city": "Oslo"}},
            ]
        },
        "ok",
    ]
    shout = Tool(
        "shout", CityParams, lambda p, ctx: p.city.upper(), description="Shout a city name."
    )
    with (
        FakeOpenAIServer(script) as server,
        Agent(workspace, settings_for(server), tools=[shout]) as agent,
    ):

        @agent.tool
        def weather(params: CityParams, ctx: ToolContext) -> str:
            """Return the weather in a city."""
            return f"sunny in {params.city}"

        agent.run("weather?")
        offered = {t["function"]["name"]: t["function"] for t in server.requests[0]["tools"]}
        results = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert offered["weather"]["description"] == "Return the weather in a city."
    assert offered["weather"]["parameters"]["properties"]["city"]["type"] == "string"
    assert results == ["sunny in Paris", "OSLO"]


def test_arun_for_asyncio_callers(workspace: Path) -> None:
    with (
        FakeOpenAIServer(["async answer"]) as server,
        Agent(workspace, settings_for(server)) as agent,
    ):
        result = asyncio.run(agent.arun("hi"))
    assert result.final_text == "async answer"


def test_cancel_from_another_thread(workspace: Path) -> None:
    def script(request: dict) -> object:
        if request["messages"][-1]["content"] == "slow":
            return Reply(content="late", latency=30)
        return "here now"

    with FakeOpenAIServer(script) as server, Agent(workspace, settings_for(server)) as agent:
        threading.Timer(0.3, agent.cancel).start()
        started = time.monotonic()
        result = agent.run("slow")
        elapsed = time.monotonic() - started
        saved = json.loads(result.transcript_path.read_text())
        again = agent.run("are you there?")
        sent = server.requests[-1]["messages"]
    assert result.status == "cancelled"
    assert elapsed < 10  # the in-flight request is abandoned, not awaited for 30 s
    assert saved["messages"][-1]["content"] == "slow" and saved["state"] == "idle"
    # The next run is told that the previous message got no answer.
    assert again.final_text == "here now"
    assert sent[-2]["role"] == "system" and "interrupted" in sent[-2]["content"]
    assert sent[-1] == {"role": "user", "content": "are you there?"}


def test_on_event_is_called_one_event_at_a_time(workspace: Path) -> None:
    from subagent_helpers import Router, call, calls, finish

    inside = {"now": 0, "most": 0}

    def slow_ui(event: ev.Event) -> None:
        inside["now"] += 1
        inside["most"] = max(inside["most"], inside["now"])
        time.sleep(0.005)
        inside["now"] -= 1

    creates = [
        call("create_sub_agent", agent_id=i, summary=f"s{i}", task="t", run_in_background=True)
        for i in (1, 2, 3)
    ]
    router = Router(
        main=[calls(*creates), "wait", "wait", "wait", "done"],
        subs={i: [calls(call("search_workspace", pattern="x")), finish()] for i in (1, 2, 3)},
    )
    with (
        FakeOpenAIServer(router) as server,
        Agent(workspace, settings_for(server, subagent_timeout_min=1)) as agent,
    ):
        result = agent.run("go", on_event=slow_ui)
    assert result.status == "done"
    assert inside["most"] == 1


def test_a_refused_mid_conversation_system_message_is_remembered_across_runs(
    workspace: Path,
) -> None:
    from agentkit.testing import ErrorReply

    def handler(request: dict) -> object:
        if "system" in [m["role"] for m in request["messages"][1:]]:
            return ErrorReply(400, {"error": {"message": "System message must be first."}})
        return "ok"

    with FakeOpenAIServer(handler) as server, Agent(workspace, settings_for(server)) as agent:
        assert agent.run("one").status == "done"
        agent.conversation.messages.append({"role": "system", "content": "NOTICE"})
        assert agent.run("two").status == "done"
        assert len(server.requests) == 3  # the refusal once, then the user-role resend
        assert agent.run("three").status == "done"
        assert len(server.requests) == 4  # remembered: no second refusal
        last = server.requests[-1]["messages"]
    assert {"role": "user", "content": "NOTICE"} in last
    assert [m["role"] for m in agent.conversation.messages].count("system") == 2  # record kept
