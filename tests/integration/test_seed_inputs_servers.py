"""Seed-tool inputs the specification rules out are refused in the seed's JSON
(hardening item 8; docs/specification.md §1, §8; rules in agentkit/subagent/inputs.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from seed_input_helpers import (
    setup_fixture,  # noqa: F401  (the setup fixture)
)
from subagent_helpers import Gate, Router, call, calls, finish, wait_until, who

from agentkit import Agent, Settings
from agentkit.subagent.manager import SubAgentManager
from agentkit.subagent.record import write_record
from agentkit.testing import FakeOpenAIServer


def make_agent(server: FakeOpenAIServer, workspace: Path) -> Agent:
    settings = Settings(
        model="fake-model",
        base_url=server.base_url,
        api_key="k",
        language="zh",
        retry_base_delay=0.01,
        max_retries=0,
    )
    return Agent(workspace=workspace, settings=settings)


def tool_messages(server: FakeOpenAIServer) -> list[str]:
    last = [r for r in server.requests if who(r) is None][-1]
    return [m["content"] for m in last["messages"] if m["role"] == "tool"]


@pytest.mark.slow
def test_agent_id_true_end_to_end(workspace: Path) -> None:
    router = Router(
        main=[
            calls(call("create_sub_agent", agent_id=True, summary="分析日志文件", task="t")),
            calls({"name": "terminate_sub_agent", "arguments": '{"agent_id": '}),
            "done",
        ]
    )
    with FakeOpenAIServer(router) as server, make_agent(server, workspace) as agent:
        result = agent.run("go")
    assert result.status == "done"
    first, second = (json.loads(text) for text in tool_messages(server))
    assert list(first) == ["success", "error"] and first["success"] is False
    assert "agent_id" in first["error"] and "true" in first["error"]
    assert second["success"] is False and "terminate_sub_agent" in second["error"]
    assert not (workspace / "sub_agent_results").exists()  # nothing started


@pytest.mark.slow
def test_folder_of_own_running_agent_names_it(workspace: Path) -> None:
    gate = Gate()
    second = calls(call("create_sub_agent", agent_id=2, summary="写报告二", task="t", **_bg("out")))

    def when_record_says_running(request: dict[str, Any]) -> dict[str, Any]:
        # The bug showed once agent 1's record (running, live worker_pid) was on disk:
        # the record check came first and blamed "another conversation".
        record = workspace / "out" / ".subagent" / "conversations.json"
        assert wait_until(lambda: record.is_file() and "worker_pid" in record.read_text())
        return second

    router = Router(
        main=[
            calls(call("create_sub_agent", agent_id=1, summary="写报告一", task="t", **_bg("out"))),
            when_record_says_running,
            gate.release("done"),
        ],
        subs={1: [gate.hold(finish())]},
    )
    with FakeOpenAIServer(router) as server, make_agent(server, workspace) as agent:
        agent.run("go")
        refusal = json.loads(tool_messages(server)[-1])
    assert refusal["success"] is False and refusal["agent_id"] == 2
    assert "1（写报告一）" in refusal["error"]  # overlap_dir names the owner
    assert "另一个" not in refusal["error"]


def _bg(folder: str) -> dict[str, Any]:
    return {"deliverables_dir": folder, "run_in_background": True}


def test_folder_of_another_process_says_so(workspace: Path) -> None:
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        record = {"status": "running", "worker_pid": other.pid, "sub_conversation_id": "conv_x"}
        write_record(workspace / "shared", record, root=workspace)
        manager = SubAgentManager(workspace=workspace, settings=Settings(language="en"))
        answer = manager.create(agent_id=1, summary="s", task="t", deliverables_dir="shared")
    finally:
        other.kill()
        other.wait()
    assert answer["success"] is False and answer["agent_id"] == 1
    assert "another Agent or process" in answer["error"] and "conv_x" in answer["error"]
    assert manager.agents == {}
