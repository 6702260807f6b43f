"""The start notices where people look (issue 31, items 11 and 12): without
bubblewrap the command sandbox is off (said once, at the start, with the install
command), and a cost cap on a model with no known price can never trip. Each front
end as a real process against FakeOpenAIServer: the terminal chat's banner (tmux),
``chat --jsonl`` and ``run`` (standard error), ``serve`` (its console and the page's
``GET /api/info``), and ``acp`` (its modes, and the first prompt's answer).

bubblewrap's absence is forced by the setting ``command_bwrap_path`` (a program that
does not exist), so these hold whether or not this machine has it. The model
``fake-model`` has no price."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import REPO, cli_env
from subagent_helpers import Router, call, calls, finish
from test_chat_terminal import Tmux, needs_tmux

from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow

NO_BWRAP = "/nonexistent/agentkit-test/bwrap"
FORCED = {"AGENTKIT_COMMAND_BWRAP_PATH": NO_BWRAP, "AGENTKIT_SESSION_MAX_COST_USD": "1"}
SANDBOX_OFF = "The command sandbox is off"
INSTALL = "sudo apt-get install bubblewrap"
UNPRICED = "can never be reached"


def _one_command() -> Router:
    return Router(main=[calls(call("run_command", command="echo from-the-command")), "ran it"])


def _unwrapped(text: str) -> str:
    return text.replace("\n", "")


@needs_tmux
def test_the_terminal_banner_says_it_once_before_the_first_prompt(
    workspace: Path, tmp_path: Path
) -> None:
    tmux = Tmux(tmp_path)
    with FakeOpenAIServer(_one_command()) as server:
        env = cli_env(server.base_url, TERM="xterm-256color", **FORCED)
        tmux.start(f"{sys.executable} -m agentkit chat -w {workspace}", env)
        try:
            banner = _unwrapped(tmux.wait_for("/help lists the commands"))
            tmux.wait_for(UNPRICED)
            before = _unwrapped(tmux.screen())
            assert SANDBOX_OFF in before and INSTALL in before
            assert "session_max_cost_usd = 1 USD" in before
            assert banner.index("/help lists the commands") < before.index(SANDBOX_OFF)
            tmux.keys("run something", "Enter")
            shown = _unwrapped(tmux.wait_for("ran it"))
            tmux.keys("/quit", "Enter")
            tmux.exit_code()
        finally:
            tmux.kill()
    assert "from-the-command" in shown  # the command ran, unconfined
    # said once at the start: not again when the first command runs
    assert shown.lower().count("command sandbox is off") == 1
    assert shown.index(SANDBOX_OFF) < shown.index("run something")


def _cli(args: list[str], env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentkit", *args],
        input=stdin,
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _command_then_sub_agent() -> Router:
    """The main agent runs a command, then a sub-agent (a worker process) runs its own."""
    create = call("create_sub_agent", agent_id=1, summary="Run one command", task="run it")
    return Router(
        main=[calls(call("run_command", command="echo from-the-command")), calls(create), "done"],
        subs={
            1: [
                calls(call("run_command", command="echo from-the-sub-agent")),
                finish("Ran the one command it was asked to run and checked its output."),
            ]
        },
    )


@pytest.mark.parametrize("front", ["chat --jsonl", "run"])
def test_jsonl_chat_and_run_say_it_once_on_standard_error_at_the_start(
    workspace: Path, front: str
) -> None:
    """Under ``run`` a sub-agent's first command comes after the main agent's, and it
    does not say it again either (one process shows both)."""
    router = _command_then_sub_agent() if front == "run" else _one_command()
    with FakeOpenAIServer(router) as server:
        env = cli_env(server.base_url, **FORCED)
        if front == "run":
            done = _cli(["run", "-w", str(workspace), "run something"], env)
        else:
            done = _cli(["chat", "--jsonl", "-w", str(workspace)], env, "run something\n")
        ran = [r for r in server.requests if "from-the-sub-agent" in str(r["messages"][-1])]
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    sandbox = [n for n, line in enumerate(lines) if "command sandbox is off" in line.lower()]
    assert len(sandbox) == 1, done.stderr
    assert INSTALL in lines[sandbox[0]] and lines[sandbox[0]].startswith("agentkit: ")
    assert [line for line in lines if UNPRICED in line], done.stderr
    assert "from-the-command" in done.stdout  # the round ran after it was said
    if front == "run":  # a sub-agent's first command does not say it again
        assert ran, "the sub-agent's command ran"
        assert done.stderr.lower().count("command sandbox is off") == 1, done.stderr


def test_serve_says_it_on_its_console_and_in_the_page_header(workspace: Path) -> None:
    from web_helpers import serve_process

    with (
        FakeOpenAIServer(lambda request: "unused") as server,
        serve_process(workspace, server.base_url, env=FORCED) as web,
    ):
        info = web.client.get("/api/info").json()
        page = web.client.get("/").text
        app = web.client.get("/app.js").text
        console = web.output()
    notices = info["notices"]
    assert len(notices) == 2
    assert SANDBOX_OFF in notices[0] and INSTALL in notices[0]
    assert UNPRICED in notices[1] and "'m' has no known price" in notices[1]
    assert 'data-testid="start-notices"' in page and "showStartNotices" in app
    assert f"agentkit serve: {notices[0]}" in console
    assert console.lower().count("command sandbox is off") == 1


def test_acp_modes_and_first_answer_say_it(workspace: Path) -> None:
    pytest.importorskip("acp")
    from acp import text_block
    from acp_helpers import connect, run

    server_box: dict[str, Any] = {}

    async def scenario() -> None:
        async with connect(server_box["url"], workspace, None, **FORCED) as (conn, _proc, rec):
            created = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            modes = {m.id: m.description for m in created.modes.available_modes}
            server_box["modes"] = modes
            sid = created.session_id
            await conn.prompt(session_id=sid, prompt=[text_block("run something")])
            server_box["first"] = rec.text(session_id=sid)
            await conn.prompt(session_id=sid, prompt=[text_block("again")])
            server_box["both"] = rec.text(session_id=sid)

    router = Router(main=[calls(call("run_command", command="echo hi")), "ran it", "again done"])
    with FakeOpenAIServer(router) as server:
        server_box["url"] = server.base_url
        run(scenario())
    modes = server_box["modes"]
    assert not any("Commands run in the sandbox" in (text or "") for text in modes.values())
    assert "commands run unconfined" in modes["workspace-write"]
    assert INSTALL in modes["workspace-write"] and INSTALL in modes["read-only"]
    first = server_box["first"]
    assert SANDBOX_OFF in first and UNPRICED in first and "ran it" in first
    assert first.index(SANDBOX_OFF) < first.index("ran it")
    assert server_box["both"].count(SANDBOX_OFF) == 1  # once: not in the second answer
