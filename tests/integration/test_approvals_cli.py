"""Approvals and hooks through the real command line: ``agentkit chat --jsonl`` as a
subprocess (the lines a script writes and reads) and ``agentkit run`` on a
pseudo-terminal and without one, against FakeOpenAIServer; sub-agents are real worker
processes (docs/approvals.md §2, §4; issue 22)."""

from __future__ import annotations

import json
import os
import pty
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import REPO, cli_env
from subagent_helpers import call, calls, finish, script, wait_until, who
from switch_fixtures import (
    model_fixture,  # noqa: F401  (the model fixture)
    server_fixture,  # noqa: F401  (the server fixture)
)
from test_chat_cli_servers import JsonlChat, of_type

from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow

RULES = json.dumps({"write_file": "ask", "run_command:git push*": "ask"})
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def env_for(server: FakeOpenAIServer, tmp_path: Path, **extra: str) -> dict[str, str]:
    values = {
        "AGENTKIT_APPROVALS": RULES,
        "AGENTKIT_SUBAGENT_TIMEOUT_MIN": "1",
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        **extra,
    }
    return cli_env(server.base_url, **values)


def write(name: str) -> dict[str, Any]:
    return {
        "name": "write_file",
        "id": f"call_{name}",
        "arguments": {"path": name, "content": "x\n"},
    }


def results(request: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in request["messages"] if m["role"] == "tool"}


def asked(chat: JsonlChat) -> dict[str, Any]:
    return chat.take("ApprovalRequested")


def answer(chat: JsonlChat, line: str, then: str = "RoundFinished") -> tuple[Any, Any]:
    """Send an answer command; return its result and the first ``then`` event.
    The answer lets the waiting call go on at once, so on a loaded machine ``then``
    may be printed before the command's result: it is looked for among the lines
    read on the way too."""
    chat.send(line)
    read = chat.until(lambda e: e["type"] in ("CommandResult", "Error"))
    early = [e for e in read if e["type"] == then]
    return read[-1], early[0] if early else chat.until(lambda e: e["type"] == then)[-1]


def test_jsonl_ask_allow_deny_and_always(
    workspace: Path, tmp_path: Path, model: Any, server: FakeOpenAIServer
) -> None:
    script(
        model,
        [{"tool_calls": [write("one.txt")]}, "one", {"tool_calls": [write("two.txt")]}, "two",
         {"tool_calls": [write("three.txt")]}, "three"],
    )  # fmt: skip
    chat = JsonlChat(workspace, env_for(server, tmp_path))
    try:
        chat.send("write one")
        request = asked(chat)
        assert {k: request[k] for k in ("type", "agent_id", "tool", "arguments")} == {
            "type": "ApprovalRequested", "agent_id": None, "tool": "write_file",
            "arguments": {"path": "one.txt", "content": "x\n"},
        }  # fmt: skip
        done, ended = answer(chat, f"/approve {request['request_id']}")
        assert done["type"] == "CommandResult" and done["ok"] and done["decision"] == "allow"
        assert ended["final_text"] == "one"
        chat.send("write two")
        request = asked(chat)
        done, _ = answer(chat, f"/deny {request['request_id']} not in this folder")
        assert done["decision"] == "deny" and done["note"] == "not in this folder"
        chat.send("write three")
        request = asked(chat)
        # "Always" remembers what was asked (docs/approvals.md): here the rule, and the
        # line says so before anyone chooses it (what it then allows is
        # tests/unit/test_approval_logic.py's).
        assert request["key"] == "write_file"
        assert request["always"] == "every call the approvals rule 'write_file' asks about"
        done, _ = answer(chat, f"/approve-always {request['request_id']}")
        assert done["decision"] == "allow_always"
        again = chat.command(f"/approve {request['request_id']}")
        assert again["type"] == "Error" and "already answered" in again["message"]
        assert chat.command("/approve ap_unknown")["type"] == "Error"
        assert chat.command("/deny")["message"] == "usage: /deny ID [reason]"
        code, _ = chat.finish()
    finally:
        chat.kill()
    assert code == 0
    assert [p.name for p in sorted(workspace.glob("*.txt"))] == ["one.txt", "three.txt"]


def test_jsonl_a_background_sub_agent_is_answered_while_the_main_agent_is_idle(
    workspace: Path, tmp_path: Path, model: Any, server: FakeOpenAIServer
) -> None:
    background = call(
        "create_sub_agent", agent_id=1, summary="writer", task="t", run_in_background=True
    )
    sub = [calls(call("write_file", path="sub_agent_results/agent_1/n.txt", content="n")), finish()]
    script(model, [calls(background), "started", "heard"], {1: sub})
    chat = JsonlChat(workspace, env_for(server, tmp_path))
    try:
        chat.send("start it")
        assert chat.round_end()["background"] == [1]
        request = asked(chat)
        assert request["agent_id"] == 1
        status = chat.command("/status")
        assert [r["request_id"] for r in status["approvals"]] == [request["request_id"]]
        done, finished = answer(chat, f"/approve {request['request_id']}", "SubAgentFinished")
        assert done["ok"]
        assert finished["info"]["status"] == "completed"
        after = chat.seen[next(i for i, e in enumerate(chat.seen) if e is finished) :]
        if not of_type(after, "RoundFinished"):  # the completion's own round, unless read
            chat.round_end()
        code, _ = chat.finish()
    finally:
        chat.kill()
    assert code == 0 and (workspace / "sub_agent_results/agent_1/n.txt").exists()


def test_jsonl_switch_withdraws_and_end_of_input_leaves_no_one_to_ask(
    workspace: Path, tmp_path: Path, model: Any, server: FakeOpenAIServer
) -> None:
    background = call(
        "create_sub_agent", agent_id=2, summary="writer", task="t", run_in_background=True
    )
    sub = [calls(call("write_file", path="sub_agent_results/agent_2/n.txt", content="n")), finish()]
    script(
        model, [calls(background), "started", {"tool_calls": [write("late.txt")]}, "done"], {2: sub}
    )
    chat = JsonlChat(workspace, env_for(server, tmp_path))
    try:
        chat.send("start it")
        first = chat.round_end()["conversation_id"]
        request = asked(chat)
        switched = chat.command("/new")
        assert switched["ok"] and switched["subagents_ended"] == [2]
        [withdrawn] = of_type(chat.seen, "ApprovalWithdrawn")  # before the command's result
        assert (
            withdrawn["request_id"] == request["request_id"]
            and "sub-agent 2 has ended" in withdrawn["reason"]
        )
        refused = chat.command(f"/approve {request['request_id']}")
        assert refused["type"] == "Error"
        back = chat.command(f"/switch {first}")
        assert back["ok"] and back["approvals"] == []
        chat.send("write late")  # asks, and then the input ends with it unanswered
        late = asked(chat)
        code, _ = chat.finish()
    finally:
        chat.kill()
    assert code == 0
    answered = [
        e for e in of_type(chat.seen, "ApprovalAnswered") if e["request_id"] == late["request_id"]
    ]
    assert [(a["decision"], a["note"]) for a in answered] == [("deny", "no one to ask")]
    assert not (workspace / "late.txt").exists()


def test_jsonl_hooks_block_see_results_time_out_and_see_the_sub_agent(
    workspace: Path, tmp_path: Path, model: Any, server: FakeOpenAIServer
) -> None:
    log = tmp_path / "hooks.jsonl"
    writer = tmp_path / "record.py"
    writer.write_text("import sys\nopen(sys.argv[1], 'a').write(sys.stdin.read() + '\\n')\n")
    record = " ".join(shlex.quote(p) for p in (sys.executable, str(writer), str(log)))
    hooks = {
        "PreToolUse": [
            {
                "matcher": "run_command",
                "hooks": [{"type": "command", "command": "echo no commands today >&2; exit 2"}],
            },
            {
                "matcher": "read_file",
                "hooks": [{"type": "command", "command": "sleep 30", "timeout": 0.5}],
            },
        ],
        "PostToolUse": [
            {"matcher": "write_file", "hooks": [{"type": "command", "command": record}]}
        ],
        "SubagentStop": [{"hooks": [{"type": "command", "command": record}]}],
    }
    (workspace / "r.txt").write_text("r\n")
    blocking = call("create_sub_agent", agent_id=3, summary="reader", task="t")
    main = [
        calls(call("run_command", command="ls"), call("read_file", path="r.txt")),
        calls(call("write_file", path="w.txt", content="w")),
        calls(blocking),
        "done",
    ]
    script(model, main, {3: [finish()]})
    env = env_for(
        server, tmp_path, AGENTKIT_HOOKS=json.dumps({"hooks": hooks}), AGENTKIT_APPROVALS="{}"
    )
    chat = JsonlChat(workspace, env)
    try:
        chat.send("go")
        chat.round_end()
        code, _ = chat.finish()
    finally:
        chat.kill()
    assert code == 0
    first = [r for r in server.requests if who(r) is None][1]
    blocked = next(m for m in first["messages"] if m.get("name") == "run_command")
    assert (
        blocked["content"]
        == "Error: blocked_by_hook: a PreToolUse hook blocked this run_command call: no commands today"
    )
    [failed] = of_type(chat.seen, "HookFailed")
    assert (
        failed["hook_event_name"] == "PreToolUse" and "timed out after 0.5 s" in failed["problem"]
    )
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    post = next(r for r in runs if r["hook_event_name"] == "PostToolUse")
    assert post["tool_input"]["path"] == "w.txt" and post["tool_response"].startswith(
        "Created w.txt"
    )
    stop = next(r for r in runs if r["hook_event_name"] == "SubagentStop")
    assert stop["agent_id"] == 3 and stop["status"] == "completed"


# ------------------------------------------------------------- the chat terminal
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_terminal_chat_shows_requests_and_takes_y_a_and_n_with_a_reason(
    workspace: Path, tmp_path: Path, model: Any, server: FakeOpenAIServer
) -> None:
    tmux = ["tmux", "-S", str(tmp_path / "tmux.sock")]
    status_file = tmp_path / "status"

    def screen() -> str:
        done = subprocess.run([*tmux, "capture-pane", "-p", "-J", "-S", "-200"],
                              capture_output=True, text=True, check=False)  # fmt: skip
        return done.stdout

    def keys(*typed: str) -> None:
        subprocess.run([*tmux, "send-keys", *typed], check=True)

    def shown(*texts: str) -> bool:  # the prompt may be redrawn before the lines above it
        # Long lines wrap at word boundaries (real line breaks): compare with white space
        # made one space.
        def flat(text: str) -> str:
            return " ".join(text.split())

        return wait_until(lambda: all(flat(t) in flat(screen()) for t in texts), 30)

    def answered(text: str) -> bool:  # a line of its own: "first" is in "asks the user first"
        return wait_until(lambda: text in [line.strip() for line in screen().splitlines()], 30)

    push = {"name": "run_command", "id": "call_p", "arguments": {"command": "git push origin"}}
    script(
        model,
        [{"tool_calls": [write("c1.txt"), push]}, "first", {"tool_calls": [write("c2.txt")]},
         "second", {"tool_calls": [write("c3.txt")]}, "third"],
    )  # fmt: skip
    env = {**env_for(server, tmp_path, AGENTKIT_TOOL_WORKERS="1"), "TERM": "xterm-256color"}
    command = f"{sys.executable} -m agentkit chat -w {workspace}; echo $? > {status_file}"
    subprocess.run([*tmux, "new-session", "-d", "-x", "160", "-y", "50", command],
                   env=env, cwd=REPO, check=True)  # fmt: skip
    try:
        assert wait_until(lambda: "/help lists the commands" in screen(), 30), screen()
        keys("write and push", "Enter")
        assert shown("approve write_file? y/a/n", "the main agent wants to call write_file",
                     '"path": "c1.txt"'), screen()  # fmt: skip
        keys("y", "Enter")
        assert shown("approve run_command? y/a/n", "git push origin"), screen()
        keys("n not on main", "Enter")
        assert answered("first"), screen()  # a plain answer: no "all done" (issue 26)
        keys("once more", "Enter")
        assert shown("approve write_file? y/a/n", '"path": "c2.txt"'), screen()
        keys("a", "Enter")
        assert answered("second"), screen()
        keys("and again", "Enter")  # always allowed now: no question
        assert wait_until(lambda: (workspace / "c3.txt").exists(), 30), screen()
        assert answered("third"), screen()
        final = screen()
        keys("/quit", "Enter")
        assert wait_until(status_file.is_file, 30), screen()
    finally:
        subprocess.run([*tmux, "kill-server"], check=False, capture_output=True)
    assert status_file.read_text().strip() == "0"
    assert (workspace / "c1.txt").exists() and (workspace / "c2.txt").exists()
    denied = [results(r).get("call_p") for r in server.requests if "call_p" in results(r)]
    assert denied and '"not on main"' in denied[-1]
    questions = [m for m in final.splitlines() if m.startswith("approval needed (ap_")]
    assert len(questions) == 3  # c1.txt, the push and c2.txt; none for c3.txt


# ------------------------------------------------------------------- agentkit run
def run_on_terminal(
    args: list[str], env: dict[str, str], answers: list[tuple[str, str]], timeout: float = 60
) -> tuple[int, str]:
    """``python -m agentkit ARGS`` with stdin, stdout and stderr on a pseudo-terminal; each
    ``(expected, typed)`` of ``answers`` types ``typed`` once ``expected`` appeared."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentkit", *args],
        env={**env, "TERM": "xterm-256color", "COLUMNS": "200"},
        cwd=REPO, stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
    )  # fmt: skip
    os.close(slave)
    seen, at = "", 0
    deadline = time.monotonic() + timeout
    pending = list(answers)
    try:
        while time.monotonic() < deadline:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not data:
                break
            seen += ANSI.sub("", data.decode("utf-8", "replace"))
            while pending and pending[0][0] in seen[at:]:
                at = seen.index(pending[0][0], at) + len(pending[0][0])
                os.write(master, pending.pop(0)[1].encode() + b"\n")
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return code, seen


def test_run_on_a_terminal_asks_inline(
    workspace: Path, tmp_path: Path, model: Any, server: FakeOpenAIServer
) -> None:
    push = {"name": "run_command", "id": "call_p", "arguments": {"command": "git push origin main"}}
    script(model, [{"tool_calls": [write("t1.txt"), push]}, "finished"])
    env = env_for(server, tmp_path, AGENTKIT_TOOL_WORKERS="1")  # one question after the other
    code, seen = run_on_terminal(
        ["run", "write and push", "-w", str(workspace)],
        env,
        [("wants to call write_file", "y"), ("wants to call run_command", "n  not on main")],
    )
    assert code == 0, seen
    assert "approval needed (ap_" in seen and "answer (y = allow" in seen
    assert (workspace / "t1.txt").exists()
    assert '"not on main"' in results(server.requests[-1])["call_p"]
    assert "finished" in seen


def test_run_without_a_terminal_denies_unless_yes(
    workspace: Path, tmp_path: Path, model: Any, server: FakeOpenAIServer
) -> None:
    script(
        model,
        [{"tool_calls": [write("t2.txt")]}, "ok"],  # each run: a new conversation
    )
    env = env_for(server, tmp_path)
    argv = [sys.executable, "-m", "agentkit", "run", "write", "-w", str(workspace), "--json"]

    def run_cli(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*argv, *extra],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )

    done = run_cli()
    assert done.returncode == 0, done.stderr
    assert '"no one to ask"' in results(server.requests[-1])["call_t2.txt"]
    assert not (workspace / "t2.txt").exists()
    done = run_cli("--yes")
    assert done.returncode == 0, done.stderr
    assert (workspace / "t2.txt").exists()
