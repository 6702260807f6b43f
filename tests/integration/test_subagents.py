"""Sub-agents over real worker processes and FakeOpenAIServer (issue 5, docs/specification.md §1-8)."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from subagent_helpers import (
    Gate,
    Router,
    call,
    calls,
    finish,
    no_process_left,
    wait_until,
    who,
)

from agentkit import Agent, Settings
from agentkit import events as ev
from agentkit.process.tree import process_alive, processes_with_mark
from agentkit.subagent.record import load_record
from agentkit.testing import FakeOpenAIServer, Reply

pytestmark = pytest.mark.slow

SEED_BLOCKING_KEYS = [
    "success",
    "agent_id",
    "status",
    "summary",
    "message",
    "deliverables_dir",
    "deliverables_files",
    "result_summary",
    "sub_conversation_id",
    "stats",
]
SEED_STATS_KEYS = ["runtime_seconds", "files_read", "searches", "web_pages", "commands"]


def make_agent(server: FakeOpenAIServer, workspace: Path, **overrides: Any) -> Agent:
    values: dict[str, Any] = {
        "model": "fake-model",
        "base_url": server.base_url,
        "api_key": "k",
        "language": "zh",
        "retry_base_delay": 0.01,
        "max_retries": 0,
        "subagent_timeout_min": 1,
    }
    values.update(overrides)
    return Agent(workspace=workspace, settings=Settings(**values))


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def last_json(request: dict[str, Any]) -> dict[str, Any]:
    return json.loads(tool_results(request)[-1])


def main_requests(server: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [r for r in server.requests if who(r) is None]


def sub_requests(server: FakeOpenAIServer, agent_id: int) -> list[dict[str, Any]]:
    return [r for r in server.requests if who(r) == agent_id]


@pytest.fixture(params=["local", pytest.param("ray", marks=pytest.mark.ray)])
def launcher(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """Settings overrides choosing where workers run: local processes, or the
    two-node Ray test cluster (tests/ray_cluster.py; skipped outside a private
    network namespace), after which no sub-agent host actor may be alive."""
    if request.param == "local":
        yield {}
        return
    cluster = request.getfixturevalue("ray_cluster")
    # A quarter CPU each: five running sub-agents fit the cluster's four CPUs.
    yield {"subagent_launcher": "ray", "ray_address": cluster.address, "ray_num_cpus": 0.25}
    assert cluster.wait_no_hosts() == [], "a sub-agent host actor outlived its test"


@contextlib.contextmanager
def warm_pool(launcher: dict[str, Any]) -> Iterator[None]:
    """With the Ray launcher: the pool the test's agent joins (same actor options) is
    started and warm before the agent starts its sub-agent, and kept until the agent
    closed. A sub-agent's timeout runs from its creation, waiting for an actor
    included; a cold actor start (seconds of CPU on a loaded machine) would spend a
    short one before the worker's first step. Nothing with the local launcher."""
    if launcher.get("subagent_launcher") != "ray":
        yield
        return
    from agentkit.subagent.launchers.ray import RayLauncher

    warm = RayLauncher(Settings(**launcher))
    try:
        assert warm.prewarm(wait=120) >= 1, "no Ray host actor became warm"
        yield
    finally:
        warm.close()


def pid_of(handle: Any) -> int:
    """The worker's pid (a Ray worker's is on its node; test nodes share this host)."""
    return int(handle.pid or handle.remote_pid)


def test_blocking_run_returns_seed_json_and_writes_record(
    workspace: Path, launcher: dict[str, Any]
) -> None:
    (workspace / "notes.txt").write_text("alpha\nbeta\n")
    router = Router(
        main=[
            calls(
                call(
                    "create_sub_agent",
                    agent_id=1,
                    summary="生成笔记报告",
                    task="读取 notes.txt 并写报告",
                )
            ),
            "主任务完成",
        ],
        subs={
            1: [
                calls(
                    call("read_file", path="notes.txt"), call("search_workspace", pattern="beta")
                ),
                calls(
                    call(
                        "write_file",
                        path="sub_agent_results/agent_1/report.md",
                        content="# 报告\nalpha beta\n",
                    )
                ),
                calls(call("run_command", command="echo hi")),
                finish("已生成报告 report.md，包含 notes.txt 的两行内容。"),
            ]
        },
    )
    with FakeOpenAIServer(router) as server, make_agent(server, workspace, **launcher) as agent:
        result = agent.run("请用子智能体处理 notes.txt")
        main = main_requests(server)
        subs = sub_requests(server, 1)
    assert result.status == "done" and result.final_text == "主任务完成"
    data = last_json(main[1])
    assert list(data) == SEED_BLOCKING_KEYS
    assert data["success"] is True and data["agent_id"] == 1 and data["status"] == "completed"
    assert data["summary"] == "生成笔记报告"
    assert data["message"] == "子智能体1 已完成任务"
    assert data["deliverables_dir"] == "sub_agent_results/agent_1"
    assert data["deliverables_files"] == ["report.md"]
    assert data["result_summary"] == "已生成报告 report.md，包含 notes.txt 的两行内容。"
    assert data["sub_conversation_id"].startswith("conv_")
    assert list(data["stats"]) == SEED_STATS_KEYS
    assert {k: data["stats"][k] for k in SEED_STATS_KEYS[1:]} == {
        "files_read": 1,
        "searches": 1,
        "web_pages": 0,
        "commands": 1,
    }
    # The worker's first messages: docs/specification.md §5 system prompt and §3.1 initial message.
    first = subs[0]["messages"]
    assert first[0]["content"].startswith("你是一个专注的子智能体，负责独立完成分配的任务。")
    assert f"- 工作区路径: {workspace}" in first[0]["content"]
    assert first[1]["content"] == (
        "你是子智能体 1，负责以下任务：\n\n【任务摘要】\n生成笔记报告\n\n【任务详情】\n读取 notes.txt 并写报告\n\n"
        "【交付目录】\nsub_agent_results/agent_1\n\n【要求】\n1. 完成任务后，将所有结果文件放到交付目录\n"
        "2. 使用 finish_task 工具提交任务完成报告\n3. 任务超时时间：600 秒\n\n现在开始执行任务。"
    )
    # Sub-agents get the base tools and finish_task, never the sub-agent tools.
    names = {t["function"]["name"] for t in subs[0]["tools"]}
    assert "finish_task" in names and "create_sub_agent" not in names
    assert {t["function"]["name"] for t in main[0]["tools"]} >= {
        "create_sub_agent",
        "terminate_sub_agent",
        "get_sub_agent_status",
    }
    # finish_task's own result is recorded (docs/specification.md §1 JSON), then the worker exits.
    record = json.loads(
        (workspace / "sub_agent_results/agent_1/.subagent/conversations.json").read_text()
    )
    assert (
        record["status"] == "completed"
        and record["agent_id"] == 1
        and record["summary"] == "生成笔记报告"
    )
    assert record["created_at"].endswith("Z") and record["completed_at"].endswith("Z")
    assert json.loads(record["messages"][-1]["content"]) == {
        "success": True,
        "message": "任务已完成，子智能体即将退出",
        "will_terminate": True,
    }
    assert record["stats"]["token_usage"]["total"] > 0
    # Counters match the tool calls in the transcript.
    called = [
        c["function"]["name"]
        for m in record["messages"]
        if m["role"] == "assistant"
        for c in m.get("tool_calls") or []
    ]
    assert record["stats"]["files_read"] == called.count("read_file")
    assert record["stats"]["commands"] == called.count("run_command")


def test_background_run_and_system_notification(workspace: Path, launcher: dict[str, Any]) -> None:
    holder: dict[str, Agent] = {}

    def after_finished(request: dict[str, Any]) -> Any:
        holder["agent"].manager.agents[1].done.wait(20)
        return calls(call("search_workspace", pattern="x"))

    router = Router(
        main=[
            calls(
                call(
                    "create_sub_agent",
                    agent_id=1,
                    summary="后台统计",
                    task="统计",
                    run_in_background=True,
                )
            ),
            after_finished,
            "完成",
        ],
        subs={
            1: [
                calls(call("write_file", path="sub_agent_results/agent_1/count.txt", content="3")),
                finish("统计完成，结果在 count.txt。"),
            ]
        },
    )
    with FakeOpenAIServer(router) as server, make_agent(server, workspace, **launcher) as agent:
        holder["agent"] = agent
        result = agent.run("后台统计")
        main = main_requests(server)
        runtime = agent.manager.agents[1].runtime()
    assert result.status == "done"
    started = last_json(main[1])
    assert started == {
        "success": True,
        "agent_id": 1,
        "status": "running",
        "summary": "后台统计",
        "message": "子智能体1 已启动，正在后台运行",
        "deliverables_dir": "sub_agent_results/agent_1",
        "sub_conversation_id": started["sub_conversation_id"],
        "background": True,
    }
    notice = main[2]["messages"][-1]
    assert notice["role"] == "system"
    assert notice["content"] == (
        f"子智能体1 (后台统计) 已完成。\n\n运行时间：{runtime}秒\n阅读了 0 个文件\n搜索了 0 次\n查看了 0 个网页\n"
        "运行了 0 个指令\n\n交付目录：sub_agent_results/agent_1\n结果摘要：统计完成，结果在 count.txt。"
    )
    # Announced exactly once.
    texts = [m["content"] for m in main[2]["messages"] if m["role"] in ("system", "user")]
    assert sum("已完成。" in t for t in texts) == 1


def test_idle_main_waits_then_gets_user_notification_for_agents_finishing_together(
    workspace: Path,
    launcher: dict[str, Any],
) -> None:
    holder: dict[str, Agent] = {}
    gate = threading.Event()

    def sub_last(request: dict[str, Any]) -> Any:
        gate.wait(20)
        return finish(f"子任务{who(request)}完成。")

    def idle(request: dict[str, Any]) -> Any:
        return "我先等待子智能体完成。"

    router = Router(
        main=[
            calls(
                call(
                    "create_sub_agent",
                    agent_id=1,
                    summary="甲任务",
                    task="甲",
                    run_in_background=True,
                ),
                call(
                    "create_sub_agent",
                    agent_id=2,
                    summary="乙任务",
                    task="乙",
                    deliverables_dir="out/b",
                    run_in_background=True,
                ),
            ),
            idle,
            "全部完成",
        ],
        subs={1: [sub_last], 2: [sub_last]},
    )
    states: list[str] = []

    def on_event(event: ev.Event) -> None:
        if isinstance(event, ev.StateChanged):
            states.append(event.state)
            if event.state == "waiting_for_subagents":
                gate.set()  # both finish while the main agent waits

    with FakeOpenAIServer(router) as server, make_agent(server, workspace, **launcher) as agent:
        holder["agent"] = agent
        # Hold the announcement until both are done, so they are "finishing together".
        original = agent.manager.take_finished

        def take_both() -> Any:
            agents = list(agent.manager.agents.values())
            if any(a.status != "running" for a in agents):
                for a in agents:
                    a.done.wait(20)
            return original()

        agent.manager.take_finished = take_both  # type: ignore[method-assign]
        result = agent.run("并行两个任务", on_event=on_event)
        main = main_requests(server)
    assert result.status == "done" and result.final_text == "全部完成"
    assert "waiting_for_subagents" in states and states[-1] == "idle"
    notice = main[2]["messages"][-1]
    assert notice["role"] == "user"
    assert notice["content"] == (
        "子智能体1 (甲任务) 已完成任务。\n\n子任务1完成。\n\n交付目录：sub_agent_results/agent_1"
        "\n\n"
        "子智能体2 (乙任务) 已完成任务。\n\n子任务2完成。\n\n交付目录：out/b"
    )
    assert len(main) == 3  # each completion announced once, no extra round


def test_nudge_when_subagent_answers_without_finish_task(workspace: Path) -> None:
    router = Router(
        main=[calls(call("create_sub_agent", agent_id=3, summary="写总结", task="写")), "好"],
        subs={3: ["我做完了。", finish("总结写好了。")]},
    )
    with FakeOpenAIServer(router) as server, make_agent(server, workspace) as agent:
        agent.run("t")
        subs = sub_requests(server, 3)
    assert subs[1]["messages"][-1] == {
        "role": "user",
        "content": "如果你已经完成了任务，请调用 finish_task 工具提交完成报告。如果还没有完成，请继续执行任务。",
    }


def test_subagent_that_never_finishes_fails_after_the_nudges(workspace: Path) -> None:
    router = Router(
        main=[calls(call("create_sub_agent", agent_id=4, summary="不听话", task="t")), "好"],
        subs={4: ["我不调用工具。"]},
    )
    with (
        FakeOpenAIServer(router) as server,
        make_agent(server, workspace, subagent_max_nudges=2) as agent,
    ):
        agent.run("t")
        data = last_json(main_requests(server)[1])
        subs = sub_requests(server, 4)
    assert data["success"] is False and data["status"] == "failed"
    assert len(subs) == 3  # first answer + two nudged retries
    record = json.loads(
        (workspace / "sub_agent_results/agent_4/.subagent/conversations.json").read_text()
    )
    assert record["status"] == "failed"


def test_sixth_agent_refused_naming_the_five_running(
    workspace: Path, launcher: dict[str, Any]
) -> None:
    gate = Gate()
    hold, release_after = gate.hold(finish()), gate.release("ok")

    five = [
        call("create_sub_agent", agent_id=i, summary=f"任务{i}", task="t", run_in_background=True)
        for i in range(1, 6)
    ]
    router = Router(
        main=[
            calls(*five),
            calls(
                call(
                    "create_sub_agent",
                    agent_id=6,
                    summary="第六个",
                    task="t",
                    run_in_background=True,
                )
            ),
            release_after,
            "done",
        ],
        subs={i: [hold] for i in range(1, 7)},
    )
    with FakeOpenAIServer(router) as server, make_agent(server, workspace, **launcher) as agent:
        result = agent.run("t")
        refusal = last_json(main_requests(server)[2])
    assert result.status == "done"
    assert refusal["success"] is False
    for i in range(1, 6):
        assert f"{i} (任务{i})" in refusal["error"]
    assert "5" in refusal["error"]


def test_duplicate_id_and_bad_limits_refused(workspace: Path) -> None:
    router = Router(
        main=[
            calls(call("create_sub_agent", agent_id=7, summary="第一个", task="t")),
            calls(
                call("create_sub_agent", agent_id=7, summary="重复", task="t"),
                call("create_sub_agent", agent_id=100, summary="越界", task="t"),
                call(
                    "create_sub_agent",
                    agent_id=8,
                    summary="超时太长",
                    task="t",
                    timeout_seconds=99999,
                ),
                call(
                    "create_sub_agent",
                    agent_id=9,
                    summary="目录越界",
                    task="t",
                    deliverables_dir="../x",
                ),
                call(
                    "create_sub_agent",
                    agent_id=10,
                    summary="绝对路径",
                    task="t",
                    deliverables_dir="/tmp/x",
                ),
            ),
            "ok",
        ],
        subs={7: [finish()]},
    )
    with FakeOpenAIServer(router) as server, make_agent(server, workspace) as agent:
        agent.run("t")
        results = [json.loads(t) for t in tool_results(main_requests(server)[2])[1:]]
    assert all(r["success"] is False for r in results)
    assert "第一个" in results[0]["error"]
    assert "1-99" in results[1]["error"]
    assert "3600" in results[2]["error"]
    assert "deliverables_dir" in results[3]["error"] and "deliverables_dir" in results[4]["error"]


def test_two_agents_cannot_write_one_file(workspace: Path, launcher: dict[str, Any]) -> None:
    gate = threading.Event()

    def hold_then_finish(request: dict[str, Any]) -> Any:
        gate.wait(30)
        return finish()

    def agent2_done(request: dict[str, Any]) -> Any:
        gate.set()
        return finish("冲突已记录。")

    def status_after_write(request: dict[str, Any]) -> Any:
        # Agent 1 holds its claim before agent 2 tries.
        wait_until(lambda: (workspace / "shared/notes.txt").exists())
        return calls(call("get_sub_agent_status", agent_ids=[1]))

    router = Router(
        main=[
            calls(
                call(
                    "create_sub_agent",
                    agent_id=1,
                    summary="写共享文件",
                    task="t",
                    run_in_background=True,
                )
            ),
            status_after_write,
            calls(call("create_sub_agent", agent_id=2, summary="也写共享文件", task="t")),
            "ok",
        ],
        subs={
            1: [
                calls(call("write_file", path="shared/notes.txt", content="one")),
                hold_then_finish,
            ],
            2: [calls(call("write_file", path="shared/notes.txt", content="two")), agent2_done],
        },
    )
    holder: dict[str, Agent] = {}

    with FakeOpenAIServer(router) as server, make_agent(server, workspace, **launcher) as agent:
        holder["agent"] = agent
        result = agent.run("t")
        sub2 = sub_requests(server, 2)
    assert result.status == "done"
    conflict = tool_results(sub2[1])[-1]
    assert conflict.startswith("Error: write_conflict:")
    assert "shared/notes.txt" in conflict and "子智能体1" in conflict
    assert (workspace / "shared/notes.txt").read_text() == "one"


def test_timeout_kills_worker_and_commands_keeps_partial_files(
    workspace: Path, launcher: dict[str, Any]
) -> None:
    router = Router(
        main=[
            calls(
                call("create_sub_agent", agent_id=1, summary="会超时", task="t", timeout_seconds=3)
            ),
            "ok",
        ],
        subs={
            1: [
                calls(
                    call("write_file", path="sub_agent_results/agent_1/partial.md", content="half")
                ),
                calls(
                    call(
                        "run_command", command="setsid sleep 1000 & sleep 1000", timeout_seconds=600
                    )
                ),
            ]
        },
    )
    with (
        warm_pool(launcher),
        FakeOpenAIServer(router) as server,
        make_agent(server, workspace, **launcher) as agent,
    ):
        agent.run("t")
        data = last_json(main_requests(server)[1])
        mark = agent.manager.agents[1].spec.process_mark
        pid = pid_of(agent.manager.agents[1].handle)
    assert data["status"] == "timeout" and data["success"] is False
    assert data["deliverables_files"] == ["partial.md"]
    assert "partial.md" in data["result_summary"]
    assert data["message"] == "子智能体1 超时（3 秒），已被终止，已生成的部分结果保留"
    assert (workspace / "sub_agent_results/agent_1/partial.md").read_text() == "half"
    assert no_process_left(mark)
    assert not process_alive(pid)
    record = json.loads(
        (workspace / "sub_agent_results/agent_1/.subagent/conversations.json").read_text()
    )
    assert record["status"] == "timeout" and record["completed_at"]


def test_wrapup_message_sent_before_the_timeout(workspace: Path, launcher: dict[str, Any]) -> None:
    def finish_if_told(request: dict[str, Any]) -> Any:
        last = request["messages"][-1]
        assert last["role"] == "user" and "finish_task" in last["content"]
        return finish("按要求收尾。")

    router = Router(
        main=[
            calls(
                call(
                    "create_sub_agent", agent_id=1, summary="收尾测试", task="t", timeout_seconds=8
                )
            ),
            "ok",
        ],
        subs={1: [calls(call("run_command", command="sleep 2.5")), finish_if_told]},
    )
    with (
        warm_pool(launcher),
        FakeOpenAIServer(router) as server,
        make_agent(server, workspace, **launcher, subagent_wrapup_at=0.2) as agent,
    ):
        agent.run("t")
        data = last_json(main_requests(server)[1])
        wrap = sub_requests(server, 1)[1]["messages"][-1]["content"]
    assert data["status"] == "completed"
    assert wrap.startswith("时间即将用完") and "sub_agent_results/agent_1" in wrap


def test_terminate_returns_seed_json_and_ends_processes(
    workspace: Path, launcher: dict[str, Any]
) -> None:
    holder: dict[str, Agent] = {}

    def terminate_when_busy(request: dict[str, Any]) -> Any:
        wait_until(lambda: holder["agent"].manager.agents[1].last_action.startswith("正在运行"))
        return calls(call("terminate_sub_agent", agent_id=1))

    router = Router(
        main=[
            calls(
                call(
                    "create_sub_agent",
                    agent_id=1,
                    summary="长任务",
                    task="t",
                    run_in_background=True,
                )
            ),
            terminate_when_busy,
            calls(
                call("terminate_sub_agent", agent_id=1), call("terminate_sub_agent", agent_id=42)
            ),
            "ok",
        ],
        subs={
            1: [
                calls(call("write_file", path="sub_agent_results/agent_1/a.txt", content="x")),
                calls(call("run_command", command="sleep 1000")),
            ]
        },
    )
    with FakeOpenAIServer(router) as server, make_agent(server, workspace, **launcher) as agent:
        holder["agent"] = agent
        result = agent.run("t")
        main = main_requests(server)
        mark = agent.manager.agents[1].spec.process_mark
    assert result.status == "done"
    assert last_json(main[2]) == {
        "success": True,
        "agent_id": 1,
        "status": "terminated",
        "message": "子智能体1 已被终止",
        "partial_results": True,
        "deliverables_dir": "sub_agent_results/agent_1",
    }
    again, unknown = (json.loads(t) for t in tool_results(main[3])[-2:])
    assert again["success"] is False and "terminated" in again["error"]
    assert unknown["success"] is False and "42" in unknown["error"]
    assert no_process_left(mark)
    # A terminated agent is not announced as finished.
    assert not any(
        "已完成" in (m.get("content") or "") for m in main[3]["messages"] if m["role"] == "system"
    )


def test_status_rows_have_seed_fields(workspace: Path) -> None:
    holder: dict[str, Agent] = {}

    def status_when_busy(request: dict[str, Any]) -> Any:
        wait_until(lambda: holder["agent"].manager.agents[1].counters["files_read"] >= 1)
        return calls(call("get_sub_agent_status", agent_ids=[1, 2]))

    gate = Gate()
    held, release = gate.hold(finish()), gate.release("ok")

    router = Router(
        main=[
            calls(
                call(
                    "create_sub_agent",
                    agent_id=1,
                    summary="读取文件",
                    task="t",
                    run_in_background=True,
                )
            ),
            status_when_busy,
            release,
            "done",
        ],
        subs={
            1: [
                calls(call("read_file", path="notes.txt"), call("read_file", path="missing.txt")),
                held,
            ]
        },
    )
    (workspace / "notes.txt").write_text("x\n")
    with FakeOpenAIServer(router) as server, make_agent(server, workspace) as agent:
        holder["agent"] = agent
        agent.run("t")
        status = last_json(main_requests(server)[2])
    row, missing = status["agents"]
    assert status["success"] is True
    assert list(row) == [
        "agent_id",
        "summary",
        "status",
        "runtime_seconds",
        "files_read",
        "searches",
        "web_pages",
        "commands",
        "last_action",
        "deliverables_dir",
    ]
    assert row["status"] == "running" and row["files_read"] == 1
    assert row["last_action"] == "正在读取 missing.txt"  # the last call; only notes.txt was read
    assert missing["status"] == "not_found"


def test_failing_subagent_does_not_disturb_its_sibling(
    workspace: Path, launcher: dict[str, Any]
) -> None:
    from agentkit.testing import ErrorReply

    router = Router(
        main=[
            calls(
                call("create_sub_agent", agent_id=1, summary="会失败", task="t"),
                call("create_sub_agent", agent_id=2, summary="会成功", task="t"),
            ),
            "ok",
        ],
        subs={
            1: [
                ErrorReply(
                    400,
                    {
                        "error": {
                            "message": "bad request from model",
                            "type": "invalid_request_error",
                        }
                    },
                )
            ],
            2: [finish("成功。")],
        },
    )
    events: list[ev.Event] = []
    with FakeOpenAIServer(router) as server, make_agent(server, workspace, **launcher) as agent:
        result = agent.run("t", on_event=events.append)
        first, second = (json.loads(t) for t in tool_results(main_requests(server)[1]))
    assert result.status == "done"
    assert first["status"] == "failed" and "bad request from model" in first["message"]
    assert second["status"] == "completed"
    finished = [e.info["agent_id"] for e in events if isinstance(e, ev.SubAgentFinished)]
    assert sorted(finished) == [1, 2]
    assert any(isinstance(e, ev.SubAgentStarted) for e in events)
    assert any(isinstance(e, ev.SubAgentProgress) for e in events)


def test_result_summary_is_capped(workspace: Path) -> None:
    long = "很长的摘要。" * 500
    router = Router(
        main=[calls(call("create_sub_agent", agent_id=1, summary="长摘要", task="t")), "ok"],
        subs={1: [finish(long)]},
    )
    with (
        FakeOpenAIServer(router) as server,
        make_agent(server, workspace, result_summary_max_chars=100) as agent,
    ):
        agent.run("t")
        data = last_json(main_requests(server)[1])
    assert data["result_summary"].startswith(long[:100])
    assert len(data["result_summary"]) < 200
    assert "sub_agent_results/agent_1/.subagent/conversations.json" in data["result_summary"]


@pytest.mark.serial  # checks for leftovers at once: a loaded machine delays exits by moments
def test_new_conversation_and_close_end_every_worker(workspace: Path) -> None:
    router = Router(
        main=["unused"],
        subs={
            1: [calls(call("run_command", command="sleep 1000"))],
            2: [calls(call("run_command", command="sleep 1000"))],
        },
    )
    with FakeOpenAIServer(router) as server:
        agent = make_agent(server, workspace)
        manager = agent.manager
        manager.create(agent_id=1, summary="a", task="t", run_in_background=True)
        marks = [manager.agents[1].spec.process_mark]
        wait_until(lambda: manager.agents[1].last_action.startswith("正在运行"))
        agent.new_conversation()
        assert manager.agents[1].status == "terminated"
        assert no_process_left(marks[0])
        manager2 = agent.manager
        assert manager2 is not manager
        manager2.create(agent_id=2, summary="b", task="t", run_in_background=True)
        marks.append(manager2.agents[2].spec.process_mark)
        agent.close()
        assert manager2.agents[2].status == "terminated"
        assert no_process_left(marks[1])


def _sleeps(mark: str) -> int:
    """How many live ``sleep`` processes carry ``mark``; one that ends during the scan
    is passed over."""
    count = 0
    for proc in processes_with_mark(mark):
        try:
            count += proc.name() == "sleep"
        except psutil.Error:
            continue
    return count


PARENT_SCRIPT = r"""
import sys, time
from agentkit import Agent, Settings
settings = Settings(model="fake-model", base_url=sys.argv[1], api_key="k", language="en")
agent = Agent(workspace=sys.argv[2], settings=settings)
agent.manager.create(agent_id=1, summary="orphan test", task="t", run_in_background=True)
handle = agent.manager.agents[1].handle
print(agent.manager.agents[1].spec.process_mark, handle.pid or handle.remote_pid, flush=True)
time.sleep(1000)
"""


def test_sigkill_of_the_parent_leaves_no_worker_or_command(
    workspace: Path, launcher: dict[str, Any], tmp_path: Path
) -> None:
    import signal
    import subprocess
    import sys
    import time

    router = Router(
        main=["unused"],
        subs={1: [calls(call("run_command", command="setsid sleep 1000 & sleep 1000"))]},
    )
    with FakeOpenAIServer(router) as server:
        parent = subprocess.Popen(
            [sys.executable, "-c", PARENT_SCRIPT, server.base_url, str(workspace)],
            env={**os.environ, **{f"AGENTKIT_{k.upper()}": str(v) for k, v in launcher.items()}},
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            mark, worker_pid = parent.stdout.readline().split()  # type: ignore[union-attr]
            deadline = time.monotonic() + 60  # a bound: a Ray actor starts slowly when loaded
            # The two sleeps by name: the sandbox's probe, a moment earlier, starts short
            # processes with the same mark (CI: three of them counted, then gone).
            while time.monotonic() < deadline and _sleeps(mark) < 2:
                time.sleep(0.05)
            assert _sleeps(mark) >= 2, "the command and its setsid daemon should be running"
            parent.send_signal(signal.SIGKILL)
            parent.wait(5)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and not (
                no_process_left(mark) and not psutil.pid_exists(int(worker_pid))
            ):
                time.sleep(0.1)
            assert no_process_left(mark)
            assert not process_alive(int(worker_pid))
            # The orphaned worker recorded how it ended, with the call it was running.
            path = workspace / "sub_agent_results/agent_1/.subagent/conversations.json"
            record = json.loads(path.read_text())
            assert record["status"] == "terminated" and record["completed_at"]
            called = [
                c["function"]["name"] for m in record["messages"] for c in m.get("tool_calls") or []
            ]
            assert called and called[-1] == "run_command"
        finally:
            if parent.poll() is None:
                parent.kill()
                parent.wait(5)


def test_record_is_valid_json_at_every_instant_and_after_a_kill(
    workspace: Path, launcher: dict[str, Any]
) -> None:
    import time

    body = "x" * 20000
    (workspace / "big.txt").write_text("\n".join(body for _ in range(20)))
    router = Router(
        main=["unused"],
        subs={
            1: [
                Reply(
                    **calls(
                        call("read_file", path="big.txt"),
                        call(
                            "write_file", path=f"sub_agent_results/agent_1/f{i}.txt", content=body
                        ),
                    ),
                    latency=0.02,  # busy but far from its turn limit when terminated
                )
                for i in range(400)
            ]
        },
    )
    with FakeOpenAIServer(router) as server:
        agent = make_agent(server, workspace, **launcher)
        manager = agent.manager
        manager.create(agent_id=1, summary="many turns", task="t", run_in_background=True)
        path = workspace / "sub_agent_results/agent_1/.subagent/conversations.json"
        turns_seen: set[int] = set()
        # A bound, left as soon as 8 turns are seen: a loaded machine took over 20 s to
        # start the Ray actor (CI saw only the empty record).
        deadline = time.monotonic() + 90
        while (
            len(turns_seen) < 8
            and time.monotonic() < deadline
            and manager.agents[1].status == "running"
        ):
            if path.exists():
                data = json.loads(path.read_text())  # never a half-written file
                # The file is written whole now and then; its journal holds the turns
                # since (agentkit.subagent.journal): a reader sees every turn.
                turns_seen.add(len(load_record(path)["messages"]))
            time.sleep(0.005)  # reading without a pause took a core from the sub-agent
        manager.terminate(1)
        data = json.loads(path.read_text())
        agent.close()
    assert data["status"] == "terminated"
    assert len(turns_seen) > 3  # it was rewritten turn after turn while read
    assert not list(path.parent.glob("*.tmp"))


def test_parallel_creates_on_first_use_share_one_manager(workspace: Path) -> None:
    """Regression: two create_sub_agent calls in the very first message raced to
    create the manager, and one agent was lost (never announced, not in records)."""
    ids = list(range(1, 6))
    router = Router(
        main=[
            calls(
                *(
                    call(
                        "create_sub_agent",
                        agent_id=i,
                        summary=f"并行{i}",
                        task="t",
                        run_in_background=True,
                    )
                    for i in ids
                )
            ),
            "等待",
            "等待",
            "等待",
            "等待",
            "等待",
            "完成",
        ],
        subs={i: [finish(f"第{i}个完成。")] for i in ids},
    )
    with FakeOpenAIServer(router) as server, make_agent(server, workspace) as agent:
        result = agent.run("t")
        main = main_requests(server)
        records = agent.conversation.subagents
    assert result.status == "done"
    assert [r["agent_id"] for r in records] == ids
    announced = " ".join(
        m["content"] for m in main[-1]["messages"] if m["role"] in ("system", "user")
    )
    for i in ids:
        assert announced.count(f"子智能体{i} (并行{i})") == 1


UNGUARDED_SCRIPT = r"""
import json, sys, tempfile, pathlib
sys.path.insert(0, sys.argv[1])
from subagent_helpers import Router, call, calls, finish
from agentkit import Agent, Settings
from agentkit.testing import FakeOpenAIServer
print("SCRIPT BODY RUNS", flush=True)
ws = pathlib.Path(tempfile.mkdtemp())
router = Router(main=[calls(call("create_sub_agent", agent_id=1, summary="s", task="t")), "done"], subs={1: [finish("ok")]})
with FakeOpenAIServer(router) as server, Agent(ws, Settings(model="m", base_url=server.base_url, api_key="k")) as agent:
    agent.run("go")
    tool = [m for m in agent.conversation.messages if m["role"] == "tool"][0]
    print("SUB-AGENT", json.loads(tool["content"])["status"], flush=True)
"""


def test_a_script_without_main_guard_runs_once(tmp_path: Path) -> None:
    """Regression: workers re-imported the caller's script (spawn/forkserver), so a
    script without `if __name__ == "__main__":` ran twice and its sub-agent failed."""
    import subprocess
    import sys

    script = tmp_path / "user_script.py"
    script.write_text(UNGUARDED_SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script), str(Path(__file__).resolve().parents[1])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.stdout.count("SCRIPT BODY RUNS") == 1, proc.stdout + proc.stderr
    assert "SUB-AGENT completed" in proc.stdout, proc.stdout + proc.stderr


def test_continued_conversation_remembers_its_sub_agents(workspace: Path) -> None:
    """Regression: after Agent(conversation_id=...) the earlier sub-agents were unknown
    to get_sub_agent_status/terminate_sub_agent and vanished from the record."""
    first = Router(
        main=[calls(call("create_sub_agent", agent_id=1, summary="第一轮", task="t")), "一轮完"],
        subs={1: [finish("第一轮完成。")]},
    )
    with FakeOpenAIServer(first) as server, make_agent(server, workspace) as agent:
        conversation_id = agent.run("t").conversation_id
    second = Router(
        main=[
            "unused",  # the first run's two assistant turns are in the history
            "unused",
            calls(
                call("get_sub_agent_status", agent_ids=[1]),
                call("terminate_sub_agent", agent_id=1),
                call("create_sub_agent", agent_id=1, summary="重复", task="t"),
                call("create_sub_agent", agent_id=3, summary="第二轮", task="t"),
            ),
            "二轮完",
        ],
        subs={3: [finish("第二轮完成。")]},
    )
    with FakeOpenAIServer(second) as server:
        settings = make_agent(server, workspace).settings
        with Agent(workspace, settings, conversation_id=conversation_id) as agent:
            agent.run("继续")
            status, terminate, duplicate, created = (
                json.loads(t) for t in tool_results(main_requests(server)[1])[-4:]
            )
            records = agent.conversation.subagents
    assert status["success"] and status["agents"][0]["status"] == "completed"
    assert status["agents"][0]["summary"] == "第一轮"
    assert terminate["success"] is False and "completed" in terminate["error"]
    assert duplicate["success"] is False and "第一轮" in duplicate["error"]
    assert created["status"] == "completed"
    assert [r["agent_id"] for r in records] == [1, 3]


def test_a_reused_deliverables_folder_keeps_the_earlier_record(workspace: Path) -> None:
    """Regression: a second run's agent 1 overwrote the first run's transcript."""
    ids = []
    for text in ("第一次", "第二次"):
        router = Router(
            main=[calls(call("create_sub_agent", agent_id=1, summary=text, task="t")), "完"],
            subs={1: [finish(f"{text}完成。")]},
        )
        with FakeOpenAIServer(router) as server, make_agent(server, workspace) as agent:
            agent.run("t")
            ids.append(agent.conversation.subagents[0]["sub_conversation_id"])
    folder = workspace / "sub_agent_results/agent_1/.subagent"
    current = json.loads((folder / "conversations.json").read_text())
    earlier = json.loads((folder / f"conversations.{ids[0]}.json").read_text())
    assert current["sub_conversation_id"] == ids[1] and current["summary"] == "第二次"
    assert earlier["sub_conversation_id"] == ids[0] and earlier["summary"] == "第一次"


def test_background_failure_is_announced_as_a_failure(workspace: Path) -> None:
    router = Router(
        main=[
            calls(
                call(
                    "create_sub_agent",
                    agent_id=1,
                    summary="会失败",
                    task="t",
                    run_in_background=True,
                )
            ),
            "等待",
            "好",
        ],
        subs={1: ["我不调用 finish_task。"]},
    )
    with (
        FakeOpenAIServer(router) as server,
        make_agent(server, workspace, subagent_max_nudges=1) as agent,
    ):
        agent.run("t")
        notice = main_requests(server)[-1]["messages"][-1]["content"]
    assert notice.startswith("子智能体1 (会失败) 已完成任务。")
    assert "【状态：failed】" in notice and "finish_task" in notice


def test_after_a_cancelled_run_the_model_hears_of_its_stopped_sub_agents(workspace: Path) -> None:
    holder: dict[str, Any] = {}

    def cancel_when_running(request: dict[str, Any]) -> Any:
        if holder.get("cancelled"):
            return "知道了"  # the second run: the cancelled request left no answer
        manager = holder["agent"].manager
        wait_until(lambda: manager.agents[1].last_action.startswith("正在运行"))
        holder["cancelled"] = True
        holder["agent"].cancel()
        return "等待子智能体"

    router = Router(
        main=[
            calls(
                call(
                    "create_sub_agent",
                    agent_id=1,
                    summary="长任务",
                    task="t",
                    run_in_background=True,
                )
            ),
            cancel_when_running,
            "知道了",
        ],
        subs={1: [calls(call("run_command", command="sleep 1000"))]},
    )
    with FakeOpenAIServer(router) as server, make_agent(server, workspace) as agent:
        holder["agent"] = agent
        first = agent.run("开始")
        state = json.loads(first.transcript_path.read_text())["state"]
        second = agent.run("继续")
        sent = main_requests(server)[-1]["messages"]
    assert first.status == "cancelled" and state == "idle"
    assert second.status == "done" and second.final_text == "知道了"
    note = sent[-2]
    assert note["role"] == "system" and note["content"].startswith("子智能体1 (长任务) 已完成。")
    assert "【状态：terminated】" in note["content"] and "中断" in note["content"]
    assert sent[-1] == {"role": "user", "content": "继续"}
    with pytest.raises(Exception, match="关闭"):
        agent.run("again")


def test_sigterm_to_a_worker_ends_its_commands_and_is_recorded(workspace: Path) -> None:
    """Regression: SIGTERM to the whole process group (a supervisor, `timeout`) killed
    workers without their commands, which lived on as orphans."""
    import os
    import signal

    router = Router(main=["unused"], subs={1: [calls(call("run_command", command="sleep 1000"))]})
    with FakeOpenAIServer(router) as server:
        agent = make_agent(server, workspace)
        manager = agent.manager
        manager.create(agent_id=1, summary="被终止", task="t", run_in_background=True)
        mark = manager.agents[1].spec.process_mark
        wait_until(lambda: len(processes_with_mark(mark)) >= 1)
        os.kill(manager.agents[1].handle.pid, signal.SIGTERM)
        assert wait_until(lambda: no_process_left(mark))
        assert manager.agents[1].done.wait(10)
        record = json.loads(
            (workspace / "sub_agent_results/agent_1/.subagent/conversations.json").read_text()
        )
        agent.close()
    assert record["status"] in ("terminated", "failed")
    assert record["completed_at"]


def test_a_terminate_message_alone_ends_a_worker_and_its_commands(
    workspace: Path, launcher: dict[str, Any]
) -> None:
    """The contract's Terminate is enough to stop a worker (a launcher that cannot
    signal its worker, such as a remote one, relies on it): no signal is sent here."""
    from agentkit.subagent.contract import Terminate

    router = Router(main=["unused"], subs={1: [calls(call("run_command", command="sleep 1000"))]})
    with FakeOpenAIServer(router) as server:
        agent = make_agent(server, workspace, **launcher)
        manager = agent.manager
        manager.create(agent_id=1, summary="被终止", task="t", run_in_background=True)
        sub = manager.agents[1]
        wait_until(lambda: sub.last_action.startswith("正在运行"))
        assert sub.handle is not None and sub.handle.channel.send(Terminate("terminated"))
        assert wait_until(lambda: not sub.handle.is_alive(), timeout=10)
        assert wait_until(lambda: no_process_left(sub.spec.process_mark))
        assert sub.done.wait(10)
        agent.close()
    assert sub.status == "failed" and "exit code 3" in (sub.error or "")


def test_two_agents_on_one_workspace_do_not_share_a_running_folder(workspace: Path) -> None:
    """Regression: two Agents on one workspace both ran sub_agent_results/agent_1,
    and one transcript was lost. The default folder now gives way (issue 33 item 8):
    the second conversation's sub-agent 1 runs in a folder of its own while the
    first's runs on, each folder's record naming its own sub-agent; the held
    default, asked for by name, is still refused, naming its holder."""
    from agentkit.subagent.placement import default_folder, own_folder
    from agentkit.subagent.record import read_record

    router = Router(main=["unused"], subs={1: [calls(call("run_command", command="sleep 1000"))]})
    with FakeOpenAIServer(router) as server:
        first, second = make_agent(server, workspace), make_agent(server, workspace)
        try:
            started = first.manager.create(
                agent_id=1, summary="甲", task="t", run_in_background=True
            )
            assert wait_until(
                lambda: first.manager.agents[1].last_action.startswith("正在运行"), 60
            )
            other = second.manager.create(
                agent_id=1, summary="乙", task="t", run_in_background=True
            )
            assert other["success"] is True, other  # the default gave way, not refused
            assert wait_until(
                lambda: second.manager.agents[1].last_action.startswith("正在运行"), 60
            )
            both_running = (
                first.manager.agents[1].status == "running" == second.manager.agents[1].status
            )
            named = second.manager.create(
                agent_id=2,
                summary="丙",
                task="t",
                deliverables_dir=default_folder(1),
                run_in_background=True,
            )
            conversation = second.conversation.id
        finally:
            first.close()
            second.close()
    assert started["success"] is True, started
    assert started["deliverables_dir"] == default_folder(1)
    assert other["deliverables_dir"] == own_folder(conversation, 1)
    assert both_running
    for result in (started, other):  # each folder holds its own sub-agent's record
        record = read_record(workspace / result["deliverables_dir"])
        assert record is not None and record["sub_conversation_id"] == result["sub_conversation_id"]
    assert named["success"] is False and started["sub_conversation_id"] in named["error"]


def test_a_sub_agent_stopped_while_it_launches_a_command_leaves_nothing(
    workspace: Path,
) -> None:
    """Regression (CI): a worker told to stop while its spawner was launching a command
    could die before the command's launcher set its parent-death signal, and the
    command lived on. The worker now waits for a launch in flight and kills it."""
    import random

    rng = random.Random(7)
    router = Router(main=["unused"], subs={1: [calls(call("run_command", command="sleep 977"))]})
    with FakeOpenAIServer(router) as server:
        for attempt in range(12):
            (workspace / f"w{attempt}").mkdir()
            agent = make_agent(server, workspace / f"w{attempt}")
            manager = agent.manager
            manager.create(agent_id=1, summary="很快停止", task="t", run_in_background=True)
            mark = manager.agents[1].spec.process_mark
            wait_until(lambda: bool(server.requests), 10)
            time.sleep(rng.uniform(0, 0.08))  # somewhere around the command's launch
            agent.close()
            assert wait_until(lambda mark=mark: no_process_left(mark), 10), f"attempt {attempt}"
            server.clear()


def test_local_caps_bound_its_sub_agents(workspace: Path) -> None:
    """Issue 20: under --local the toy model started a blocking sub-agent with the
    default 600 s timeout, which ran the same failing command 17 times. --local's
    sub-agents get 12 turns and 120 s by default, and the 3rd identical failure says
    so in its result."""
    from agentkit.local import LocalModelServer

    caps = {
        key: value
        for key, value in LocalModelServer(workspace).settings_overrides().items()
        if key.startswith("subagent_")
    }
    stuck = calls(call("read_file", path="missing.txt"))
    router = Router(
        main=[
            calls(
                call("create_sub_agent", agent_id=1, summary="太久", task="t", timeout_seconds=900)
            ),
            calls(call("create_sub_agent", agent_id=1, summary="读文件", task="读 missing.txt")),
            "好",
        ],
        subs={1: [stuck]},
    )
    with FakeOpenAIServer(router) as server, make_agent(server, workspace, **caps) as agent:
        agent.run("t")
        refused, result = (last_json(r) for r in main_requests(server)[1:3])
        subs = sub_requests(server, 1)
        timeout = agent.manager.agents[1].spec.timeout_seconds
    assert refused["success"] is False and "300" in refused["error"]
    assert timeout == 120 and "任务超时时间：120 秒" in subs[0]["messages"][1]["content"]
    assert len(subs) == 12  # subagent_max_turns: the worker stops there
    assert result["status"] == "failed" and "max_turns (12)" in result["result_summary"]
    notes = [i for i, text in enumerate(tool_results(subs[-1])) if "已连续失败 3 次" in text]
    assert notes == [2]


def test_the_manager_calls_back_when_a_sub_agent_starts_and_ends(workspace: Path) -> None:
    """The chat session's wake-up and save ride on these callbacks, not on the events
    (which are for observers): each is called once, after its event."""
    from agentkit.subagent.manager import SubAgentManager

    seen: list[tuple[str, int, str]] = []
    router = Router(main=["unused"], subs={1: [finish()], 2: [finish()]})
    with FakeOpenAIServer(router) as server:
        manager = SubAgentManager(
            workspace=workspace,
            settings=Settings(
                model="fake-model", base_url=server.base_url, api_key="k", max_retries=0
            ),
            emit=lambda e: (
                seen.append((type(e).__name__, e.info["agent_id"], e.info["status"]))
                if isinstance(e, (ev.SubAgentStarted, ev.SubAgentFinished))
                else None
            ),
            on_started=lambda a: seen.append(("on_started", a.spec.agent_id, a.status)),
            on_finished=lambda a: seen.append(("on_finished", a.spec.agent_id, a.status)),
        )
        blocking = manager.create(agent_id=1, summary="阻塞", task="t")
        manager.create(agent_id=2, summary="后台", task="t", run_in_background=True)
        assert manager.agents[2].done.wait(20)
        manager.shutdown()
    assert blocking["status"] == "completed"
    for agent_id in (1, 2):
        assert [s for s in seen if s[1] == agent_id] == [
            ("SubAgentStarted", agent_id, "running"),
            ("on_started", agent_id, "running"),
            ("SubAgentFinished", agent_id, "completed"),
            ("on_finished", agent_id, "completed"),
        ]
