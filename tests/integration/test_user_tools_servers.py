"""Custom Python tools reach sub-agents by import reference (agentkit.tools.imported)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import user_tools_sample as sample
from pydantic import BaseModel
from subagent_helpers import Router, call, calls, finish, who

from agentkit import Agent, Settings
from agentkit.testing import FakeOpenAIServer
from agentkit.tools.base import Tool
from agentkit.tools.imported import ToolNotImportable


class P(BaseModel):
    text: str


def _tool_names(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


@pytest.mark.slow
def test_subagent_calls_custom_tools_by_reference(workspace: Path) -> None:
    router = Router(
        main=[
            calls(call("create_sub_agent", agent_id=1, summary="custom tools", task="use them")),
            "done",
        ],
        subs={
            1: [
                calls(
                    call("shout", text="hello"),
                    call("whisper", text="QUIET"),
                    call("explode", text="boom"),
                ),
                finish("Used the custom tools: shout, whisper and explode (which failed)."),
            ]
        },
    )
    settings = Settings(
        model="m",
        base_url="",
        api_key="k",
        language="en",
        max_retries=0,
        tools=["user_tools_sample:whisper"],
    )
    with FakeOpenAIServer(router) as server:
        settings.base_url = server.base_url
        with Agent(workspace=workspace, settings=settings, tools=sample.TOOLS) as agent:
            result = agent.run("go")
            stats = agent.manager.agents[1]
        main = [r for r in server.requests if who(r) is None]
        sub = [r for r in server.requests if who(r) == 1]
    assert result.status == "done"
    assert {"shout", "main_only", "whisper"} <= set(_tool_names(main[0]))
    assert "explode" not in _tool_names(main[0])  # for sub-agents only
    sub_tools = _tool_names(sub[0])
    assert {"shout", "whisper", "explode", "finish_task"} <= set(sub_tools)
    assert "main_only" not in sub_tools
    results = [m["content"] for m in sub[1]["messages"] if m["role"] == "tool"]
    assert results[0].startswith("HELLO! (from pid ") and str(os.getpid()) not in results[0]
    assert results[1] == "quiet"
    assert results[2].startswith("Error: internal_error: explode failed: RuntimeError")
    data = json.loads([m for m in main[1]["messages"] if m["role"] == "tool"][-1]["content"])
    assert data["status"] == "completed"
    record = json.loads(
        (workspace / "sub_agent_results/agent_1/.subagent/conversations.json").read_text()
    )
    assert record["status"] == "completed"
    assert stats.status == "completed"


def test_agent_tool_decorator_reaches_the_agents_it_names(workspace: Path) -> None:
    router = Router(
        main=[
            calls(call("create_sub_agent", agent_id=1, summary="late tools", task="use them")),
            "done",
        ],
        subs={
            1: [
                calls(call("count_words", text="one two three"), call("whisper", text="HI")),
                finish("Counted the words and whispered, with the tools added after start."),
            ]
        },
    )
    with FakeOpenAIServer(router) as server:
        settings = Settings(model="m", base_url=server.base_url, api_key="k", language="en")
        with Agent(workspace=workspace, settings=settings) as agent:
            agent.tool(sample.count_words, agents="subagents")
            agent.tool(agents="both")(sample.whisper)

            def local(p: P) -> str:
                return p.text

            with pytest.raises(ToolNotImportable):  # a closure cannot reach a worker
                agent.tool(local, agents="both")
            result = agent.run("go")
        main = [r for r in server.requests if who(r) is None]
        sub = [r for r in server.requests if who(r) == 1]
    assert result.status == "done"
    assert "whisper" in _tool_names(main[0])
    assert not {"count_words", "local"} & set(_tool_names(main[0]))
    assert {"count_words", "whisper"} <= set(_tool_names(sub[0]))
    results = [m["content"] for m in sub[1]["messages"] if m["role"] == "tool"]
    assert results == ["3 words", "hi"]


def test_a_tool_calling_sys_exit_is_an_error_result_in_both_agents(workspace: Path) -> None:
    router = Router(
        main=[
            calls(call("quit_now", text="x")),
            calls(call("create_sub_agent", agent_id=1, summary="exit tool", task="use it")),
            "after",
        ],
        subs={
            1: [calls(call("quit_now", text="y")), finish("Called the exiting tool and went on.")]
        },
    )
    with FakeOpenAIServer(router) as server:
        settings = Settings(model="m", base_url=server.base_url, api_key="k", language="en")
        with Agent(workspace=workspace, settings=settings) as agent:
            agent.tool(sample.quit_now, agents="both")
            result = agent.run("go")
        main = [r for r in server.requests if who(r) is None]
        sub = [r for r in server.requests if who(r) == 1]
    assert result.status == "done" and result.final_text == "after"
    expected = "Error: internal_error: quit_now failed: SystemExit: 3"
    assert [m["content"] for m in main[1]["messages"] if m["role"] == "tool"] == [expected]
    assert [m["content"] for m in sub[1]["messages"] if m["role"] == "tool"] == [expected]
    assert (
        json.loads([m for m in main[2]["messages"] if m["role"] == "tool"][-1]["content"])["status"]
        == "completed"
    )


def test_plain_functions_tool_objects_and_bad_agents_values(workspace: Path) -> None:
    script = [calls(call("whisper", text="LOUD"), call("shout", text="hi")), "done"]
    with FakeOpenAIServer(script) as server:
        settings = Settings(model="m", base_url=server.base_url, api_key="k", language="en")
        # A plain function in tools= is a main-agent tool, as with agent.tool.
        with Agent(workspace=workspace, settings=settings, tools=[sample.whisper]) as agent:
            agent.tool(sample.SHOUT)  # a Tool given to the decorator: registered as it is
            with pytest.raises(TypeError, match="takes no options"):
                agent.tool(sample.SHOUT, agents="main")
            with pytest.raises(ValueError, match="agents must be 'main', 'subagents' or 'both'"):
                agent.tool(sample.count_words, agents="bogus")
            with pytest.raises(TypeError, match="not a tool"):
                Agent(workspace=workspace, settings=settings, tools=["whisper"])  # type: ignore[list-item]
            result = agent.run("go")
    assert result.status == "done"
    assert "count_words" not in _tool_names(server.requests[0])
    results = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert results[0] == "loud" and results[1].startswith("HI! (from pid ")
    with pytest.raises(ValueError, match="not 'weird'"):
        Tool("t", P, lambda p, ctx: "x", agents="weird")  # type: ignore[arg-type]
