"""The control plane through the real CLI: ``agentkit chat --jsonl --subagent-control``
(a question printed, /answer, /msg, /continue, /status with tokens and cost) and
``agentkit run --subagent-control`` against FakeOpenAIServer, real workers."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import agentkit, cli_env
from subagent_helpers import Router, call, calls, finish, wait_until, who
from test_chat_cli_servers import JsonlChat, of_type

from agentkit import prompts
from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow


def test_chat_jsonl_shows_the_question_and_takes_answer_msg_and_continue(workspace: Path) -> None:
    delivered, answered_seen = threading.Event(), threading.Event()

    def after_the_message(request: dict[str, Any]) -> Any:
        # The request that carries the answer is in flight: a message sent now must wait
        # for the request after it (otherwise it could ride along with the answer).
        answered_seen.set()
        delivered.wait(30)
        return calls(call("read_file", path="notes.txt"))

    (workspace / "notes.txt").write_text("n\n")
    router = Router(
        main=[
            calls(
                call(
                    "create_sub_agent",
                    agent_id=1,
                    summary="year report",
                    task="t",
                    run_in_background=True,
                )
            ),
            "Started.",
            "The user will answer it.",
            "Noted.",
            "All done.",
        ],  # fmt: skip
        subs={
            1: [
                calls(call("ask_parent", question="Which year?")),
                after_the_message,
                finish("Report for 2024 written."),
                finish("More done."),
            ]
        },
    )
    with FakeOpenAIServer(router) as server:
        chat = JsonlChat(workspace, cli_env(server.base_url), "--subagent-control")
        try:
            chat.send("start")
            chat.round_end()
            asked = chat.take("SubAgentQuestion")
            assert (asked["agent_id"], asked["question"]) == (1, "Which year?")
            status = chat.command("/status")
            assert "asks: Which year?" in status["text"] and "tokens" in status["text"]
            answered = chat.command("/answer 1 Use 2024")
            assert answered["ok"] is True and answered["result"]["status"] == "answered"
            assert answered_seen.wait(30)
            sent = chat.command("/msg 1 Keep it short")
            assert sent["ok"] is True and sent["result"]["status"] == "delivered"
            delivered.set()
            chat.take("SubAgentFinished")
            chat.round_end()  # the completion's round
            late = chat.command("/msg 1 One more thing")  # it has ended
            assert late["ok"] is False and late["result"]["status"] == "completed"
            # The person is told the command to type, not the model's tool (issue 35).
            assert "/continue 1 TASK" in late["text"], late["text"]
            assert "continue_sub_agent" not in late["text"]
            again = chat.command("/continue 1 Add a summary")
            assert again["ok"] is True and again["result"]["status"] == "running"
            # The new task is shown, not the summary it was created with (issue 35).
            assert again["text"].endswith("on: Add a summary")
            ended = chat.take("SubAgentFinished")
            assert (ended["info"]["task"], ended["info"]["runs"]) == ("Add a summary", 2)
            chat.round_end()
            rows = chat.command("/status")["text"]
            assert "in total over 2 runs  Add a summary" in rows, rows
            bad = chat.command("/msg one hello")
            assert bad["type"] == "Error" and "usage: /msg N TEXT" in bad["message"]
            code, err = chat.finish()
        finally:
            chat.kill()
        subs = [r for r in server.requests if who(r) == 1]
        mains = [r for r in server.requests if who(r) is None]
    assert code == 0, err
    answers = [
        json.loads(m["content"])
        for m in subs[1]["messages"]
        if m["role"] == "tool" and m.get("name") == "ask_parent"
    ]
    assert answers == [{"success": True, "answer": "Use 2024"}]
    steer = prompts.render("en", "subagent/steer.txt", message="Keep it short")
    assert subs[2]["messages"][-1] == {"role": "user", "content": steer}
    assert "Add a summary" in subs[3]["messages"][-1]["content"]
    said = of_type(chat.seen, "SubAgentAnswered")
    assert [(e["outcome"], e["by"]) for e in said] == [("answered", "user")]
    # The main agent is told what the user did, at its next round.
    notes = [m["content"] for m in mains[3]["messages"] if m["role"] == "system"]
    assert prompts.phrase("en", "user_answered", agent_id=1, answer="Use 2024") in notes
    assert prompts.phrase("en", "user_messaged", agent_id=1, message="Keep it short") in notes


def test_run_with_the_flag_offers_the_tools_and_without_it_does_not(workspace: Path) -> None:
    router = Router(main=["Nothing to delegate."])
    with FakeOpenAIServer(router) as server:
        on = agentkit("run", "hello", "--json", "--subagent-control", "-w", str(workspace),
                      env=cli_env(server.base_url))  # fmt: skip
        off = agentkit("run", "hello", "--json", "-w", str(workspace), env=cli_env(server.base_url))
        names = [[t["function"]["name"] for t in r["tools"]] for r in server.requests]
    assert on.returncode == 0 and off.returncode == 0, on.stderr + off.stderr
    assert "wait_for_sub_agents" in names[0] and "wait_for_sub_agents" not in names[1]
    result = json.loads(on.stdout)
    assert result["status"] == "done" and "cost_usd" in result["stats"]


@pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)"
)
def test_the_terminal_chat_prints_the_question_and_takes_the_answer(
    workspace: Path, tmp_path: Path
) -> None:
    """In the terminal (tmux), a sub-agent's question is printed where the user sees
    it, /answer answers it, and /status shows the sub-agent's tokens and cost."""
    socket_path = str(tmp_path / "tmux.sock")
    tmux = ["tmux", "-S", socket_path]

    def screen() -> str:
        return subprocess.run(
            [*tmux, "capture-pane", "-p", "-S", "-200"], capture_output=True, text=True, check=False
        ).stdout

    def keys(text: str) -> None:
        subprocess.run([*tmux, "send-keys", text, "Enter"], check=True)

    started = call("create_sub_agent", agent_id=1, summary="year report", task="t",
                   run_in_background=True)  # fmt: skip
    router = Router(
        main=[calls(started), "Started.", "The user will answer it.", "Noted."],
        subs={1: [calls(call("ask_parent", question="Which year?")), finish("Report for 2024.")]},
    )
    with FakeOpenAIServer(router) as server:
        env = cli_env(server.base_url, TERM="xterm-256color")
        command = f"{sys.executable} -m agentkit chat --subagent-control -w {workspace}; sleep 60"
        subprocess.run(
            [*tmux, "new-session", "-d", "-x", "160", "-y", "50", command], env=env, check=True
        )
        try:
            assert wait_until(lambda: "/help lists the commands" in screen(), 30), screen()
            keys("start")
            asks = "sub-agent #1 asks: Which year? (answer with /answer 1 TEXT)"
            assert wait_until(lambda: asks in screen(), 30), screen()
            keys("/answer 1 Use 2024")
            assert wait_until(lambda: "sub-agent #1 done" in screen(), 30), screen()
            keys("/status")
            assert wait_until(lambda: "tokens" in screen().split("/status")[-1], 30), screen()
            keys("/quit")
            assert wait_until(lambda: "left: conversation conv_" in screen(), 30), screen()
        finally:
            subprocess.run([*tmux, "kill-server"], check=False, capture_output=True)
        subs = [r for r in server.requests if who(r) == 1]
    answers = [
        json.loads(m["content"])
        for m in subs[1]["messages"]
        if m["role"] == "tool" and m.get("name") == "ask_parent"
    ]
    assert answers == [{"success": True, "answer": "Use 2024"}]
