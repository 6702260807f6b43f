"""MCP tools and agent profiles end to end: a real main agent, real sub-agent workers,
a real MCP server process per agent, and no process left after a timeout."""

from __future__ import annotations

import json
import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from subagent_helpers import Router, call, calls, finish, wait_until, who

pytest.importorskip("mcp")

from test_mcp_processes import SERVER, alive_with

from agentkit import Agent, Settings
from agentkit.profiles import AgentProfile
from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


def names(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def make_settings(server: FakeOpenAIServer, **values: Any) -> Settings:
    base: dict[str, Any] = {
        "model": "main-model",
        "base_url": server.base_url,
        "api_key": "k",
        "language": "en",
        "max_retries": 0,
        "subagent_timeout_min": 1,
    }
    return Settings(**{**base, **values})


def test_main_and_subagent_call_an_mcp_tool_and_a_timeout_leaves_no_server(
    workspace: Path,
) -> None:
    token = f"tok-{uuid.uuid4().hex}"
    servers = {"t": {"command": sys.executable, "args": [SERVER, "stdio", token]}}
    router = Router(
        main=[
            calls(call("mcp__t__echo", text="from main")),
            calls(call("create_sub_agent", agent_id=1, summary="use mcp", task="echo")),
            calls(
                call(
                    "create_sub_agent", agent_id=2, summary="hangs", task="slow", timeout_seconds=4
                )
            ),
            "done",
        ],
        subs={
            1: [calls(call("mcp__t__echo", text="from sub")), finish("Echoed through MCP.")],
            2: [calls(call("mcp__t__slow", seconds=1000))],
        },
    )
    with FakeOpenAIServer(router) as server:
        settings = make_settings(server, mcp_servers=servers, mcp_call_timeout=3600)
        with Agent(workspace=workspace, settings=settings) as agent:
            result = agent.run("go")
            marks = {i: a.spec.process_mark for i, a in agent.manager.agents.items()}
        main = [r for r in server.requests if who(r) is None]
        sub1 = [r for r in server.requests if who(r) == 1]
    assert result.status == "done"
    assert "mcp__t__echo" in names(main[0]) and "mcp__t__echo" in names(sub1[0])
    assert tool_results(main[1])[-1] == "echo: from main"
    assert tool_results(sub1[1])[-1] == "echo: from sub"
    first = json.loads(tool_results(main[2])[-1])
    assert first["status"] == "completed"
    timed_out = json.loads(tool_results(main[3])[-1])
    assert timed_out["status"] == "timeout"
    assert result.stats["tool_calls"]["mcp__t__echo"] == 1
    record = json.loads(
        (workspace / "sub_agent_results/agent_1/.subagent/conversations.json").read_text()
    )
    assert record["status"] == "completed"
    # The timed-out worker's server, the finished worker's and the main agent's: all gone.
    assert wait_until(lambda: alive_with(token) == [], timeout=10), alive_with(token)
    assert marks[2].startswith("agentkit-")


def test_worker_killed_by_sigkill_takes_its_mcp_server_with_it(workspace: Path) -> None:
    import psutil

    token = f"tok-{uuid.uuid4().hex}"
    servers = {
        "t": {"command": sys.executable, "args": [SERVER, "stdio", token], "agents": "subagents"}
    }
    router = Router(
        main=[
            calls(
                call("create_sub_agent", agent_id=1, summary="s", task="t", run_in_background=True)
            ),
            "started",
        ],
        subs={1: [calls(call("mcp__t__sleeper", token=token))]},
    )
    with (
        FakeOpenAIServer(router) as server,
        Agent(workspace=workspace, settings=make_settings(server, mcp_servers=servers)) as agent,
    ):
        agent.session.send("go")
        # The server and the detached child it started (its token is in argv).
        assert wait_until(lambda: len(alive_with(token)) >= 2, timeout=30)
        worker = agent.manager.agents[1].handle
        assert worker is not None
        psutil.Process(worker.pid).kill()  # SIGKILL: no handler runs in the worker
        assert wait_until(lambda: alive_with(token) == [], timeout=10), alive_with(token)
        main = [r for r in server.requests if who(r) is None]
        assert "mcp__t__slow" not in names(main[0])  # configured for sub-agents only


def test_no_profiles_keeps_the_seed_schema_exactly(workspace: Path) -> None:
    from agentkit.subagent.seed_tools import make_main_tools

    seed = make_main_tools(lambda: None)[0].schema("en")  # type: ignore[arg-type,return-value]
    with (
        FakeOpenAIServer(["ok"]) as server,
        Agent(workspace=workspace, settings=make_settings(server)) as agent,
    ):
        agent.run("hi")
    sent = next(
        t for t in server.requests[0]["tools"] if t["function"]["name"] == "create_sub_agent"
    )
    assert sent == seed and "profile" not in json.dumps(sent)
    assert "Agent profiles" not in server.requests[0]["messages"][0]["content"]


def test_profile_file_sets_prompt_tools_model_and_timeout(workspace: Path) -> None:
    folder = workspace / ".agentkit" / "agents"
    folder.mkdir(parents=True)
    (folder / "reader.md").write_text(
        "---\nname: reader\ndescription: Reads files only; cheap model.\n"
        "tools: [read_file, shout]\nmodel: cheap-model\ntemperature: 0.1\n"
        "max_turns: 5\ntimeout_seconds: 77\n---\nRead carefully and quote exactly.\n"
    )
    (folder / "broken.md").write_text("---\nname: broken\ntools: 5\n---\nbody\n")
    (workspace / "a.txt").write_text("alpha\n")
    router = Router(
        main=[
            calls(
                call(
                    "create_sub_agent", agent_id=1, summary="read", task="read a", profile="reader"
                )
            ),
            calls(call("create_sub_agent", agent_id=2, summary="x", task="x", profile="nope")),
            calls(call("create_sub_agent", agent_id=3, summary="x", task="x", profile="broken")),
            "done",
        ],
        subs={1: [calls(call("read_file", path="a.txt")), finish("Read a.txt: alpha.")]},
    )
    with FakeOpenAIServer(router) as server:
        settings = make_settings(server, tools=["user_tools_sample"])
        with Agent(workspace=workspace, settings=settings) as agent:
            result = agent.run("go")
            spec = agent.manager.agents[1].spec
        main = [r for r in server.requests if who(r) is None]
        sub = [r for r in server.requests if who(r) == 1]
    assert result.status == "done"
    system = main[0]["messages"][0]["content"]
    assert "- reader: Reads files only; cheap model. (timeout_seconds 77)" in system
    create = next(t for t in main[0]["tools"] if t["function"]["name"] == "create_sub_agent")
    assert "profile" in create["function"]["parameters"]["properties"]
    assert spec.timeout_seconds == 77
    assert sub[0]["model"] == "cheap-model" and sub[0]["temperature"] == 0.1
    from agentkit import prompts
    from agentkit.prompts import prompt_values

    # The prompt holds the time to the second: take it from the request, not from a second clock read.
    sent = sub[0]["messages"][0]["content"]
    stamp = re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4}", sent)
    assert stamp is not None
    values = {**prompt_values(workspace), "current_time": stamp.group(0)}
    seed_prompt = prompts.render("en", "subagent/system.txt", **values)
    assert sent == seed_prompt + "\n\nRead carefully and quote exactly."
    assert sorted(names(sub[0])) == ["finish_task", "read_file", "shout"]
    unknown = json.loads(tool_results(main[2])[-1])
    assert unknown["success"] is False and unknown["agent_id"] == 2
    assert "no agent profile named 'nope'" in unknown["error"] and "reader" in unknown["error"]
    broken = json.loads(tool_results(main[3])[-1])
    assert broken["success"] is False and "tools must be a list" in broken["error"]


def test_python_profile_object(workspace: Path) -> None:
    profile = AgentProfile(name="quick", description="d", tools=("read_file",), max_turns=3)
    router = Router(
        main=[
            calls(call("create_sub_agent", agent_id=1, summary="q", task="q", profile="quick")),
            "done",
        ],
        subs={1: [finish("Finished quickly with nothing to report.")]},
    )
    with FakeOpenAIServer(router) as server:
        settings = make_settings(server, agent_profiles=[profile])
        with Agent(workspace=workspace, settings=settings) as agent:
            assert agent.run("go").status == "done"
        sub = [r for r in server.requests if who(r) == 1]
    assert sorted(names(sub[0])) == ["finish_task", "read_file"]
    time.sleep(0)


def test_cli_profiles_lists_and_checks(workspace: Path) -> None:
    import os
    import subprocess

    folder = workspace / ".agentkit" / "agents"
    folder.mkdir(parents=True)
    (folder / "ok.md").write_text("---\ndescription: Fine.\ntools: read_file, mcp__x__*\n---\nB\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    done = subprocess.run(
        [sys.executable, "-m", "agentkit", "profiles", "-w", str(workspace)],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok: Fine.") and "tools: read_file, mcp__x__*" in done.stdout
    (folder / "typo.md").write_text("---\ntools: [raed_file]\n---\n")
    (folder / "bad.md").write_text("no header\n")
    done = subprocess.run(
        [sys.executable, "-m", "agentkit", "profiles", "-w", str(workspace)],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert "problem: 'raed_file' names no known tool" in done.stdout
    assert "bad: refused: " in done.stdout and "must start with a --- line" in done.stdout


RELEASED = "timeout 60 sh -c 'until [ -e release ]; do sleep 0.05; done'"
"""A command that ends once the test creates ``release`` in the workspace."""


def test_a_worker_starts_its_mcp_server_only_at_the_first_call(workspace: Path) -> None:
    token = f"tok-{uuid.uuid4().hex}"
    servers = {
        "t": {"command": sys.executable, "args": [SERVER, "stdio", token], "agents": "subagents"}
    }
    router = Router(
        main=[
            calls(
                call("create_sub_agent", agent_id=1, summary="s", task="t", run_in_background=True)
            ),
            "started",
            "done",
        ],
        subs={
            1: [
                # Held until the test has seen that no server runs (bounded: 60 s).
                calls(call("run_command", command=RELEASED)),
                calls(call("mcp__t__echo", text="late")),
                finish("Echoed through MCP after a while."),
            ]
        },
    )
    with (
        FakeOpenAIServer(router) as server,
        Agent(workspace=workspace, settings=make_settings(server, mcp_servers=servers)) as agent,
    ):
        agent.session.send("go")
        assert wait_until(lambda: any(who(r) == 1 for r in server.requests), timeout=30)
        first = next(r for r in server.requests if who(r) == 1)
        assert "mcp__t__echo" in names(first)  # offered from the parent's listing...
        # ...while no server runs: the parent's listing session is closed, and the
        # worker (in its command, held until released) has not called an MCP tool yet.
        assert wait_until(lambda: alive_with(token) == [], timeout=10), alive_with(token)
        (workspace / "release").touch()
        assert agent.session.wait_idle(timeout=60)
        sub = [r for r in server.requests if who(r) == 1]
    assert tool_results(sub[-1])[-1] == "echo: late"
    assert agent.manager.agents[1].status == "completed"
    assert wait_until(lambda: alive_with(token) == [], timeout=10), alive_with(token)


def test_an_isolated_sub_agents_mcp_servers_work_in_its_copy(workspace: Path) -> None:
    """Regression: an isolated sub-agent's stdio servers started in the real workspace,
    and the files they returned were saved there, out of its read_file's reach."""
    token = f"tok-{uuid.uuid4().hex}"
    servers = {"t": {"command": sys.executable, "args": [SERVER, "stdio", token]}}

    def read_saved(request: dict[str, Any]) -> Any:
        saved = re.search(r"(\.agentkit/mcp-files/\S+)", tool_results(request)[1])
        return calls(call("read_file", path=saved.group(1) if saved else "missing"))

    look = calls(call("mcp__t__cwd"), call("mcp__t__picture"), call("run_command", command="pwd"))
    router = Router(
        main=[calls(call("create_sub_agent", agent_id=1, summary="where", task="t")), "done"],
        subs={1: [look, read_saved, finish("Looked at where the MCP server works, in the copy.")]},
    )
    (workspace / "data.txt").write_text("one\n")
    with FakeOpenAIServer(router) as server:
        settings = make_settings(server, mcp_servers=servers, subagent_isolation="always")
        with Agent(workspace=workspace, settings=settings) as agent:
            assert agent.run("go").status == "done"
        requests = [r for r in server.requests if who(r) == 1]
    cwd, picture, pwd = tool_results(requests[1])[-3:]
    assert Path(cwd).resolve() != workspace.resolve()
    assert cwd in pwd  # the folder its commands run in: its copy
    assert (Path(cwd) / "data.txt").read_text() == "one\n"
    read = tool_results(requests[2])[-1]
    assert "is a binary file (PNG image, 70 bytes)" in read, (picture, read)  # found there
    assert len(list((Path(cwd) / ".agentkit/mcp-files/t").glob("*.png"))) == 1
    assert not (workspace / ".agentkit" / "mcp-files").exists()
