"""The sub-agent events' typed fields over a real run (worker processes, FakeOpenAIServer):
SubAgentStarted, SubAgentProgress and SubAgentFinished say in fields what ``info`` says,
and SubAgentFinished.output carries the typed result of a profile's output_schema; and
RunResult.raise_for_status over a real failed run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from subagent_helpers import Router, call, calls, finish, scripted_settings

from agentkit import Agent, AgentProfile, RunFailed
from agentkit import events as ev
from agentkit.testing import ErrorReply, FakeOpenAIServer

pytestmark = pytest.mark.slow

SCHEMA = {
    "type": "object",
    "properties": {"count": {"type": "integer"}},
    "required": ["count"],
}
RECORD = "sub_agent_results/agent_{}/.subagent/conversations.json"


def typed(result: Any) -> dict[str, Any]:
    return calls(call("finish_task", success=True, summary="Counted three.", result=result))


def test_sub_agent_events_carry_typed_fields_and_the_typed_output(workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\n", encoding="utf-8")
    router = Router(
        main=[
            calls(
                call("create_sub_agent", agent_id=1, summary="Count", task="t", profile="counter"),
                call("create_sub_agent", agent_id=2, summary="Read", task="t"),
            ),
            "Both done.",
        ],
        subs={
            1: [typed({"count": 3})],
            2: [calls(call("read_file", path="a.txt")), finish("Read a.txt.")],
        },
    )
    events: list[ev.SubAgentEvent] = []
    with FakeOpenAIServer(router) as server:
        profile = AgentProfile(name="counter", description="counts", output_schema=SCHEMA)
        settings = scripted_settings(server, "en", agent_profiles=[profile])
        with Agent(workspace=workspace, settings=settings) as agent:
            result = agent.run(
                "count",
                on_event=lambda e: events.append(e) if isinstance(e, ev.SubAgentEvent) else None,
            ).raise_for_status()
    assert result.final_text == "Both done."
    for event in events:  # one truth: every field says what info says
        assert event.agent_id == event.info["agent_id"]
        assert event.status == event.info["status"]
        assert event.summary == event.info["summary"]
        assert event.deliverables_dir == event.info["deliverables_dir"]
        assert event.stats == {k: event.info[k] for k in event.stats}
        assert set(event.stats) == {
            "runtime_seconds", "files_read", "searches", "web_pages", "commands"
        }  # fmt: skip
    started = {e.agent_id: e for e in events if isinstance(e, ev.SubAgentStarted)}
    finished = {e.agent_id: e for e in events if isinstance(e, ev.SubAgentFinished)}
    assert set(started) == set(finished) == {1, 2}
    for agent_id, summary in ((1, "Count"), (2, "Read")):
        assert started[agent_id].status == "running"
        assert started[agent_id].summary == summary
        assert started[agent_id].deliverables_dir == f"sub_agent_results/agent_{agent_id}"
        assert started[agent_id].result_summary is None and started[agent_id].output is None
        assert finished[agent_id].status == "completed"
    assert all(e.output is None for e in events if isinstance(e, ev.SubAgentProgress))
    # The typed result, parsed, in this process; the record says the same.
    assert finished[1].output == {"count": 3}
    assert finished[1].result_summary == "Counted three."
    record = json.loads((workspace / RECORD.format(1)).read_text(encoding="utf-8"))
    assert record["result"] == finished[1].output
    # No output schema: no output; the stats are the record's.
    assert finished[2].output is None
    assert finished[2].result_summary == "Read a.txt."
    assert finished[2].stats["files_read"] == 1
    record = json.loads((workspace / RECORD.format(2)).read_text(encoding="utf-8"))
    assert finished[2].stats["files_read"] == record["stats"]["files_read"]


def test_raise_for_status_over_a_real_failed_run(workspace: Path) -> None:
    with FakeOpenAIServer([ErrorReply(401)]) as server:
        settings = scripted_settings(server, "en")
        with Agent(workspace=workspace, settings=settings) as agent:
            result = agent.run("hello")
    with pytest.raises(RunFailed) as caught:
        result.raise_for_status()
    assert result.status == "failed"  # reading the status works as before
    assert caught.value.kind == "authentication" == result.error_kind
    assert caught.value.message == result.error and result.error
    assert caught.value.result is result
