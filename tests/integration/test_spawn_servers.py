"""Delegating from code (agentkit.spawn): agent.spawn / agent.aspawn over real workers
and FakeOpenAIServer: the typed result against the record on disk, cancel, a steering
message, the sub-agent's own event stream (replayed), the limits and the main agent's
notification."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from subagent_helpers import Router, call, calls, finish, scripted_settings, who
from switch_fixtures import (
    handled_model_fixture,  # noqa: F401  (the model fixture)
    handled_server_fixture,  # noqa: F401  (the server fixture)
)

from agentkit import (
    Agent,
    AsyncSubAgentHandle,
    SubAgentHandle,
    SubAgentRefused,
    SubAgentResult,
    prompts,
)
from agentkit import events as ev
from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow

TASK = "Write a short report on the project into your deliverables folder."


def make_agent(workspace: Path, model: FakeOpenAIServer, **overrides: Any) -> Agent:
    return Agent(workspace, scripted_settings(model, "en", **overrides))


def main_requests(model: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [r for r in model.requests if who(r) is None]


def sub_requests(model: FakeOpenAIServer, agent_id: int) -> list[dict[str, Any]]:
    return [r for r in model.requests if who(r) == agent_id]


def held(release: threading.Event, reply: Any, asked: threading.Event | None = None) -> Any:
    """A reply given once ``release`` is set (``asked`` set when the request came)."""

    def handler(request: dict[str, Any]) -> Any:
        if asked is not None:
            asked.set()
        release.wait(30)
        return reply

    return handler


def report() -> dict[str, Any]:
    path = "sub_agent_results/agent_1/report.md"
    return calls(call("write_file", path=path, content="# Report\n\nAll good.\n"))


def test_spawn_result_is_typed_and_matches_the_record_and_the_main_agent_is_told(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    model.handler = Router(
        main=["Noted: sub-agent 1 finished."],
        subs={1: [report(), finish("Wrote report.md with the findings of the project.")]},
    )
    with make_agent(workspace, model) as agent:
        handle = agent.spawn(TASK, summary="Project report")
        assert isinstance(handle, SubAgentHandle) and handle.agent_id == 1
        result = handle.result(timeout=60)
        assert agent.session.wait_idle(30)  # the notification round ran
        rows = agent.session.subagents()
    assert isinstance(result, SubAgentResult)
    record = json.loads(
        (workspace / "sub_agent_results/agent_1/.subagent/conversations.json").read_text()
    )
    assert result.status == record["status"] == "completed" and result.success
    assert result.agent_id == record["agent_id"] == 1
    assert result.summary == record["summary"] == "Project report"
    assert result.result_summary == record["result_summary"]
    assert result.sub_conversation_id == record["sub_conversation_id"]
    assert result.deliverables_dir == "sub_agent_results/agent_1"
    assert result.deliverables_files == ("report.md",)
    for key in ("files_read", "searches", "web_pages", "commands"):
        assert result.stats[key] == record["stats"][key]
    # The parent's clock (the tool's result) counts from the start it asked for.
    assert result.stats["runtime_seconds"] >= record["stats"]["runtime_seconds"]
    assert result.output is None
    with pytest.raises(AttributeError):
        result.status = "failed"  # type: ignore[misc]  # frozen
    assert [r["agent_id"] for r in rows] == [1]  # in the conversation's rows
    # Waiting from code took nothing from the main agent: told of the start and the end.
    told = main_requests(model)[-1]["messages"]
    text = "\n".join(str(m.get("content")) for m in told if m["role"] != "assistant")
    assert "the application started sub-agent 1 (Project report)" in text
    assert "Wrote report.md with the findings of the project." in text


def test_cancel_terminates_it_and_leaves_its_record(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    release, asked = threading.Event(), threading.Event()
    model.handler = Router(
        main=["Noted."],
        subs={1: [held(release, finish("never"), asked)]},
    )
    try:
        with make_agent(workspace, model) as agent:
            handle = agent.spawn(TASK)
            assert asked.wait(30)
            # Started outside a round, it still keeps the conversation busy.
            assert not agent.session.wait_idle(0)
            assert agent.session.state == "waiting_for_subagents"
            answer = handle.cancel()
            assert answer["success"] is True and answer["status"] == "terminated"
            result = handle.result(timeout=30)
            assert result.status == "terminated" and handle.status == "terminated"
            again = handle.cancel()  # ended: refused, saying how it ended
            assert again["success"] is False and again["status"] == "terminated"
    finally:
        release.set()
    record = json.loads(
        (workspace / "sub_agent_results/agent_1/.subagent/conversations.json").read_text()
    )
    assert record["status"] == "terminated"
    assert record["sub_conversation_id"] == result.sub_conversation_id


def test_message_reaches_its_next_request(workspace: Path, model: FakeOpenAIServer) -> None:
    (workspace / "a.txt").write_text("x\n")
    release, asked = threading.Event(), threading.Event()
    model.handler = Router(
        main=["Noted."],
        subs={1: [held(release, calls(call("read_file", path="a.txt")), asked), finish()]},
    )
    try:
        with make_agent(workspace, model, subagent_control=True) as agent:
            handle = agent.spawn(TASK)
            assert asked.wait(30)
            said = handle.message("Write the report in French, please.")
            assert said["success"] is True and said["status"] == "delivered"
            release.set()
            assert handle.result(timeout=60).status == "completed"
    finally:
        release.set()
    second = sub_requests(model, 1)[1]["messages"]
    assert "Write the report in French, please." in second[-1]["content"]
    assert second[-1]["role"] == "user"


def test_message_is_refused_with_control_off(workspace: Path, model: FakeOpenAIServer) -> None:
    model.handler = Router(main=["Noted."], subs={1: [finish()]})
    with make_agent(workspace, model) as agent:
        handle = agent.spawn(TASK)
        said = handle.message("hello")
        handle.result(timeout=60)
    assert said["success"] is False
    assert said["error"] == prompts.phrase("en", "control_off")


class NoDefaultExecutor(ThreadPoolExecutor):
    """A default executor that refuses work: nothing may borrow it."""

    def submit(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the event loop's default executor was used")


async def collect(handle: AsyncSubAgentHandle) -> list[ev.Event]:
    return [event async for event in handle.events()]


def test_aspawn_events_run_from_start_to_end_and_replay(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    model.handler = Router(main=["Noted."], subs={1: [report(), finish()]})

    async def main() -> tuple[list[ev.Event], list[ev.Event], SubAgentResult]:
        asyncio.get_running_loop().set_default_executor(NoDefaultExecutor())
        agent = await Agent.open(workspace, scripted_settings(model, "en"))
        async with agent:
            handle = await agent.aspawn(TASK, summary="Project report")
            assert isinstance(handle, AsyncSubAgentHandle)
            live = [event async for event in handle.events()]
            result = await handle.result()
            assert (await handle.message("late"))["success"] is False  # control off
            assert (await handle.cancel())["status"] == "completed"  # ended: refused
            # After its end: replayed from the conversation's kept events.
            late = await asyncio.wait_for(collect(handle), 30)
        return live, late, result

    live, late, result = asyncio.run(main())
    assert isinstance(live[0], ev.SubAgentStarted) and isinstance(live[-1], ev.SubAgentFinished)
    assert all(e.agent_id == 1 for e in live)  # type: ignore[attr-defined]
    assert [type(e) for e in late] == [type(e) for e in live]
    assert live[-1].status == result.status == "completed"  # type: ignore[attr-defined]
    assert result.deliverables_files == ("report.md",)


def test_the_running_limit_refuses_as_the_tool_does(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    release, asked = threading.Event(), threading.Event()
    tool_call = call("create_sub_agent", agent_id=5, summary="Second one", task="Do more.")
    model.handler = Router(
        main=[calls(tool_call), "Refused, fine.", "Noted."],
        subs={1: [held(release, finish(), asked)]},
    )
    try:
        with make_agent(workspace, model, max_concurrent_subagents=1) as agent:
            first = agent.spawn(TASK, summary="First one")
            assert asked.wait(30)
            with pytest.raises(SubAgentRefused) as refused:
                agent.spawn("Do more.", summary="Second one")
            agent.session.send("Start another one")  # the model's create_sub_agent
            release.set()
            assert first.result(timeout=60).status == "completed"
    finally:
        release.set()
    results = [
        json.loads(m["content"]) for m in main_requests(model)[1]["messages"] if m["role"] == "tool"
    ]
    assert results[0]["success"] is False
    assert refused.value.error == results[0]["error"]
    assert refused.value.result["success"] is False
    assert "1 (First one)" in refused.value.error


def test_bad_arguments_are_refused_by_the_tool_rules(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    model.handler = Router(main=["Noted."])
    with make_agent(workspace, model) as agent:
        for kwargs in ({"timeout_seconds": 99999}, {"summary": "x" * 300}):
            with pytest.raises(SubAgentRefused):
                agent.spawn(TASK, **kwargs)
        with pytest.raises(SubAgentRefused):
            agent.spawn("   ")
        assert agent.session.subagents() == []


def documented_example() -> str:
    """The python block after the "Delegating from code" heading, in the README or,
    once moved there, the user guide's pages."""
    root = Path(__file__).resolve().parents[2]
    pages = [root / "README.md", *sorted((root / "docs" / "guide").glob("*.md"))]
    for page in pages:
        text = page.read_text(encoding="utf-8") if page.is_file() else ""
        match = re.search(r"#+ Delegating from code\n.*?```python\n(.*?)```", text, flags=re.S)
        if match:
            return match.group(1)
    raise AssertionError("no 'Delegating from code' example in the README or the guide")


def test_the_documented_example_runs_as_written(tmp_path: Path) -> None:
    (tmp_path / "my_project").mkdir()
    script = tmp_path / "spawn_example.py"
    script.write_text(documented_example())
    router = Router(main=["Noted."], subs={1: [finish("Wrote the notes into notes.md.")]})
    env: dict[str, Any] = {**os.environ, "AGENTKIT_MODEL": "fake-model", "OPENAI_API_KEY": "k"}
    with FakeOpenAIServer(router) as server:
        env["OPENAI_BASE_URL"] = server.base_url
        proc = subprocess.run(
            [sys.executable, str(script)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "1 completed sub_agent_results/agent_1 ()"
    assert lines[1].startswith("Wrote the notes into notes.md. ")
    assert lines[2].startswith("refused: ") and "60" in lines[2]
    assert lines[3] == "SubAgentStarted" and lines[-2] == "SubAgentFinished"
    assert lines[-1] == "completed"


def test_the_delegate_example_program_runs(tmp_path: Path) -> None:
    """examples/delegate.py needs no key: FakeOpenAIServer plays every agent."""
    example = Path(__file__).resolve().parents[2] / "examples" / "delegate.py"
    proc = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("refused: timeout_seconds must be between 60 and 3600")
    assert (
        lines[1] == "1 completed sub_agent_results/agent_1 Listed the notes; nothing was missing."
    )
    assert lines[2] == "completed"
    assert lines[3].startswith("['SubAgentStarted'") and lines[3].endswith("'SubAgentFinished']")


def test_a_first_text_from_code_settles_the_language_and_a_profile_applies(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    from agentkit import AgentProfile

    model.handler = Router(main=["好的。"], subs={1: [finish("已写完报告，见 report.md。")]})
    haiku = AgentProfile(name="poet", prompt="Answer in haiku only.", timeout_seconds=120)
    with Agent(workspace, scripted_settings(model, "auto")) as agent:
        handle = agent.spawn("请把项目的情况写成一份简短的报告。", profile=haiku)
        assert handle.result(timeout=60).status == "completed"
        assert agent.session.settings.language == "zh"
    first = sub_requests(model, 1)[0]["messages"]
    assert first[0]["content"].startswith("你是一个专注的子智能体")
    assert "Answer in haiku only." in first[0]["content"]
    assert "120" in first[1]["content"]  # the profile's timeout, in the seed's task message
