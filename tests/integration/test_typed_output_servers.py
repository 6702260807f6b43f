"""Typed results (issue 33, item 5): ``agent.run(task, output_type=Model)`` and its
``final_result`` tool, against the real client over HTTP (FakeOpenAIServer)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agentkit import Agent, ConfigurationError, Settings
from agentkit import events as ev
from agentkit.testing import FakeOpenAIServer


class Verdict(BaseModel):
    """A checked answer."""

    city: str
    score: int


def settings_for(server: FakeOpenAIServer, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "model": "m",
        "base_url": server.base_url,
        "api_key": "k",
        "language": "en",
        "retry_base_delay": 0.01,
    }
    values.update(overrides)
    return Settings(**values)


def final(**arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": "final_result", "arguments": arguments}]}


def same_but_clock(first: str, second: str) -> bool:
    clock = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
    return clock.sub("T", first) == clock.sub("T", second)


def tool_names(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


def tool_answers(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def test_a_valid_final_result_gives_the_instance(workspace: Path) -> None:
    with FakeOpenAIServer([final(city="Paris", score=3)]) as server:
        with Agent(workspace, settings_for(server)) as agent:
            result = agent.run("Rate Paris.", output_type=Verdict)
        offered = server.requests[0]["tools"]
    assert result.status == "done", result.error
    assert result.output == Verdict(city="Paris", score=3)
    assert isinstance(result.output, Verdict)
    assert json.loads(result.final_text or "") == {"city": "Paris", "score": 3}
    assert result.to_dict()["output"] == {"city": "Paris", "score": 3}
    tool = next(t["function"] for t in offered if t["function"]["name"] == "final_result")
    schema = Verdict.model_json_schema()
    assert tool["parameters"]["properties"] == schema["properties"]
    assert tool["parameters"]["required"] == ["city", "score"]


def test_a_wrong_final_result_is_refused_naming_the_field_then_a_valid_one_wins(
    workspace: Path,
) -> None:
    script = [final(city="Paris", score="very high"), final(city="Paris", score=4)]
    with FakeOpenAIServer(script) as server:
        with Agent(workspace, settings_for(server)) as agent:
            result = agent.run("Rate Paris.", output_type=Verdict)
        second = server.requests[1]
    assert result.status == "done" and result.output == Verdict(city="Paris", score=4)
    refusal = tool_answers(second)[-1]
    assert refusal.startswith("Error: invalid_output:")
    assert "score" in refusal and "valid integer" in refusal and "2 more tries" in refusal
    assert "city" not in refusal.split("refused:")[1].split(".")[0]  # only the failing field


def test_wrong_results_beyond_output_retries_fail_with_output_invalid(workspace: Path) -> None:
    script = [final(city="Paris")] * 3 + ["unused"]
    with FakeOpenAIServer(script) as server, Agent(workspace, settings_for(server)) as agent:
        result = agent.run("Rate Paris.", output_type=Verdict)
        asked = len(server.requests)
    assert asked == 3  # the first try and output_retries (2) more
    assert result.status == "failed" and result.error_kind == "output_invalid"
    assert result.output is None
    assert "score" in (result.error or "") and "3 tries" in (result.error or "")
    assert result.to_dict()["error_kind"] == "output_invalid"


def test_output_retries_comes_from_the_run_or_the_settings(workspace: Path) -> None:
    settings = Settings(model="m", api_key="k", language="en", output_retries=0)
    with FakeOpenAIServer([final(city="Paris")] * 5) as server:
        settings = settings.model_copy(update={"base_url": server.base_url})
        with Agent(workspace, settings) as agent:
            by_settings = agent.run("Rate Paris.", output_type=Verdict)
            asked = len(server.requests)
            by_run = agent.run("Again.", output_type=Verdict, output_retries=1)
    assert by_settings.error_kind == "output_invalid" and asked == 1
    assert by_run.error_kind == "output_invalid" and len(server.requests) == asked + 2


def test_a_plain_text_answer_is_told_to_call_final_result(workspace: Path) -> None:
    script = ["Paris is lovely.", final(city="Paris", score=5)]
    with FakeOpenAIServer(script) as server:
        with Agent(workspace, settings_for(server)) as agent:
            result = agent.run("Rate Paris.", output_type=Verdict)
        second = server.requests[1]
    assert result.status == "done" and result.output == Verdict(city="Paris", score=5)
    told = second["messages"][-1]
    assert told["role"] in ("system", "user") and "final_result" in told["content"]
    assert "2 more tries" in told["content"]  # it counts as a retry


def test_text_answers_count_as_retries_too(workspace: Path) -> None:
    with FakeOpenAIServer(["one", "two"]) as server:
        agent = Agent(workspace, settings_for(server, output_retries=1))
        with agent:
            result = agent.run("Rate Paris.", output_type=Verdict)
    assert result.status == "failed" and result.error_kind == "output_invalid"
    assert "plain text" in (result.error or "")


def test_without_output_type_no_final_result_is_offered_and_requests_are_unchanged(
    workspace: Path,
) -> None:
    with FakeOpenAIServer(["Fine.", "Fine.", final(city="P", score=1)]) as server:
        with Agent(workspace, settings_for(server)) as agent:
            plain = agent.run("Hello.")
            agent.new_conversation()
            again = agent.run("Hello.")
            typed = agent.run("Rate.", output_type=Verdict)
        first, second, third = server.requests
    assert plain.output is None and again.output is None and "output" not in plain.to_dict()
    assert "final_result" not in tool_names(first)
    assert first["tools"] == second["tools"]  # byte for byte the same list
    # The same request twice but for the clock in the system prompt (to the second).
    assert same_but_clock(json.dumps(first), json.dumps(second))
    assert tool_names(third) == [*tool_names(first), "final_result"]
    assert typed.output == Verdict(city="P", score=1)


def test_arun_and_stream_pass_output_type(workspace: Path) -> None:
    script = [final(city="A", score=1), final(city="B", score=2)]

    async def main(agent: Agent) -> tuple[Verdict | None, Verdict | None, list[str]]:
        by_arun = await agent.arun("Rate A.", output_type=Verdict)
        async with agent.stream("Rate B.", output_type=Verdict) as run:
            seen = [event.type async for event in run]
        by_stream = await run.result()
        return by_arun.output, by_stream.output, seen

    with FakeOpenAIServer(script) as server, Agent(workspace, settings_for(server)) as agent:
        first, second, seen = asyncio.run(main(agent))
    assert first == Verdict(city="A", score=1) and second == Verdict(city="B", score=2)
    assert "ToolCallFinished" in seen and seen[-1] == "RunFinished"


def test_a_bad_output_type_is_refused_before_anything_is_sent(workspace: Path) -> None:
    with FakeOpenAIServer(["unused"]) as server:
        with Agent(workspace, settings_for(server)) as agent:
            with pytest.raises(TypeError, match="BaseModel"):
                agent.run("x", output_type=dict)  # type: ignore[call-overload]
            with pytest.raises(ValueError, match="output_retries"):
                agent.run("x", output_type=Verdict, output_retries=-1)
        assert server.requests == []


def test_events_show_the_refusal_and_the_acceptance(workspace: Path) -> None:
    events: list[ev.Event] = []
    script = [final(city=1, score=2), final(city="C", score=2)]
    with FakeOpenAIServer(script) as server, Agent(workspace, settings_for(server)) as agent:
        agent.run("Rate C.", output_type=Verdict, on_event=events.append)
    finished = [e for e in events if isinstance(e, ev.ToolCallFinished)]
    assert [(e.name, e.ok) for e in finished] == [("final_result", False), ("final_result", True)]
    assert "city" in finished[0].output


class Count(BaseModel):
    count: int
    words: list[str] = []


def test_a_profile_output_type_gives_the_instance_in_sub_agent_finished(workspace: Path) -> None:
    from subagent_helpers import Router, call, calls, scripted_settings

    from agentkit import AgentProfile

    router = Router(
        main=[
            calls(call("create_sub_agent", agent_id=1, summary="Count", task="t", profile="ct")),
            "Done.",
        ],
        subs={
            1: [
                calls(call("finish_task", success=True, summary="Bad.", result={"count": "x"})),
                calls(call("finish_task", success=True, summary="Two.", result={"count": 2})),
            ]
        },
    )
    finished: list[ev.SubAgentFinished] = []
    with FakeOpenAIServer(router) as server:
        profile = AgentProfile(name="ct", description="counts", output_type=Count)
        assert profile.output_schema is not None
        assert profile.output_schema["properties"] == Count.model_json_schema()["properties"]
        settings = scripted_settings(server, "en", agent_profiles=[profile])
        with Agent(workspace, settings) as agent:
            result = agent.run(
                "count",
                on_event=lambda e: (
                    finished.append(e) if isinstance(e, ev.SubAgentFinished) else None
                ),
            )
        sub_requests = [r for r in server.requests if r["messages"][0]["role"] == "system"]
    assert result.status == "done", result.error
    assert [e.output for e in finished] == [Count(count=2)]
    assert isinstance(finished[0].output, Count)
    # The worker checked the schema (the first result was refused naming the field) ...
    refusals = [
        m["content"]
        for r in sub_requests
        for m in r["messages"]
        if m["role"] == "tool" and "does not match" in m["content"]
    ]
    assert refusals and "count" in refusals[0]
    # ... and the event is still plain JSON.
    data = finished[0].to_dict()
    assert data["output"] == {"count": 2, "words": []}
    json.dumps(data)


def test_a_profile_file_cannot_name_an_output_type(workspace: Path) -> None:
    from agentkit.profiles import ProfileError, parse_profile

    with pytest.raises(ProfileError, match="output_type"):
        parse_profile("---\nname: x\noutput_type: a.b:C\n---\nbody\n", "x.md", "x")
    with pytest.raises(TypeError, match="BaseModel"):
        from agentkit import AgentProfile

        AgentProfile(name="x", output_type=dict)  # type: ignore[arg-type]


def test_a_spawned_sub_agent_of_a_typed_profile_gives_the_instance(workspace: Path) -> None:
    from subagent_helpers import Router, call, calls, scripted_settings

    from agentkit import AgentProfile

    router = Router(
        main=["Noted."],
        subs={1: [calls(call("finish_task", success=True, summary="Two.", result={"count": 2}))]},
    )
    with FakeOpenAIServer(router) as server:
        profile = AgentProfile(name="ct", description="counts", output_type=Count)
        settings = scripted_settings(server, "en", agent_profiles=[profile])
        with Agent(workspace, settings) as agent:
            handle = agent.spawn("count the words", profile="ct")
            ended = handle.result(timeout=60)
    assert ended.status == "completed" and ended.output == Count(count=2)
    assert isinstance(ended.output, Count)


def test_a_tool_of_the_same_name_is_refused_with_output_type(workspace: Path) -> None:
    with FakeOpenAIServer(["Fine."]) as server, Agent(workspace, settings_for(server)) as agent:

        @agent.tool(name="final_result")
        def mine(params: Verdict) -> str:
            """A tool of the application's that happens to have the name."""
            return "ok"

        with pytest.raises(ConfigurationError, match="final_result"):
            agent.run("Rate.", output_type=Verdict)
        assert server.requests == []
        assert agent.run("Hello.").status == "done"  # without output_type it is a tool


def test_a_stop_hook_sees_the_typed_answer_and_may_send_the_agent_back(workspace: Path) -> None:
    seen: list[Any] = []

    def stop(payload: dict[str, Any]) -> dict[str, Any] | None:
        seen.append(payload["last_assistant_message"])
        return {"decision": "block", "reason": "check the score"} if len(seen) == 1 else None

    script = [final(city="P", score=1), final(city="P", score=2)]
    with FakeOpenAIServer(script) as server:
        with Agent(workspace, settings_for(server), hooks={"Stop": stop}) as agent:
            result = agent.run("Rate P.", output_type=Verdict)
        second = server.requests[1]
    assert [json.loads(text) for text in seen] == [
        {"city": "P", "score": 1},
        {"city": "P", "score": 2},
    ]
    assert "check the score" in second["messages"][-1]["content"]
    assert result.status == "done" and result.output == Verdict(city="P", score=2)
