"""The ``agentkit`` command as a real subprocess against FakeOpenAIServer (docs/architecture.md §3 CLI).

Each test runs ``python -m agentkit ...`` with the endpoint in the environment and
checks exit codes, stdout/stderr and the files left in the workspace.
"""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from cli_helpers import REPO, agentkit, cli_env, start_agentkit
from fork_runner import ForkRunner
from subagent_helpers import Router, call, calls, finish, running, wait_until

from agentkit.testing import ErrorReply, FakeOpenAIServer, Reply


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """Assert stderr is exactly one ``agentkit: ...`` line without a traceback; return it."""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("agentkit: "), proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


def read_then_answer() -> list[Any]:
    """Main agent script: read a.txt, then answer with what it read."""
    return [
        calls(call("read_file", path="a.txt")),
        lambda req: (
            f"The file says: {'hello-from-a' if 'hello-from-a' in str(req['messages'][-1]) else '??'}"
        ),
    ]


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ---------------------------------------------------------------- help, version
def test_help_version_and_run_help() -> None:
    env = cli_env()
    top = agentkit("--help", env=env)
    assert top.returncode == 0, top.stderr
    for verb in ("run", "show", "transcript", "demo"):
        assert verb in top.stdout
    run_help = agentkit("run", "--help", env=env)
    assert run_help.returncode == 0
    for flag in (
        "--workspace",
        "--model",
        "--base-url",
        "--api-key",
        "--lang",
        "--json",
        "--continue",
    ):
        assert flag in run_help.stdout
    version = agentkit("--version", env=env)
    assert version.returncode == 0 and version.stdout.startswith("agentkit ")
    # One line: the token counting (which would try to download tiktoken's tables) is
    # agentkit doctor's to say.
    assert version.stdout.count("\n") == 1 and version.stderr == ""


# ------------------------------------------------------------------------ run
@pytest.fixture(scope="module")
def read_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One `run --json` of a two-turn tool-calling task, shared by the tests that read it."""
    workspace = tmp_path_factory.mktemp("read_run").resolve()
    (workspace / "a.txt").write_text("hello-from-a\n")
    with FakeOpenAIServer(read_then_answer()) as server:
        env = cli_env(server.base_url)
        proc = agentkit("run", "What does a.txt say?", "-w", str(workspace), "--json", env=env)
        requests = list(server.requests)
    return {"workspace": workspace, "env": cli_env(), "proc": proc, "requests": requests}


def test_run_json_multi_turn_tool_calls(read_run: dict[str, Any]) -> None:
    proc, workspace, requests = read_run["proc"], read_run["workspace"], read_run["requests"]
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)  # stdout holds one JSON object and nothing else
    assert data["status"] == "done"
    assert data["final_text"] == "The file says: hello-from-a"
    assert data["error"] is None and data["error_kind"] is None
    assert data["conversation_id"].startswith("conv_")
    assert data["stats"]["turns"] == 2
    assert data["stats"]["files_read"] == 1
    usage = data["stats"]["token_usage"]
    assert set(usage) == {"prompt", "completion", "total"} and usage["total"] > 0
    saved = Path(data["transcript_path"])
    assert saved == workspace / ".agentkit" / "conversations" / f"{data['conversation_id']}.json"
    assert json.loads(saved.read_text())["state"] == "idle"
    assert len(requests) == 2
    assert requests[1]["messages"][-1]["role"] == "tool"
    assert requests[0]["model"] == "fake-model"


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One plain-lines `run` with --model over AGENTKIT_MODEL; its conversation is
    then continued in a terminal (test_continue_in_a_terminal_shows_live_view_and_markdown)."""
    workspace = tmp_path_factory.mktemp("plain_run").resolve()
    (workspace / "a.txt").write_text("hello-from-a\n")
    with FakeOpenAIServer(read_then_answer()) as server:
        env = cli_env(server.base_url, AGENTKIT_MODEL="env-model")
        proc = agentkit(
            "run",
            "Read a.txt",
            "-w",
            str(workspace),
            "--model",
            "flag-model",
            "--no-stream",
            env=env,
        )
        requests = list(server.requests)
    return {"workspace": workspace, "proc": proc, "requests": requests}


def test_run_plain_lines_flags_override_env(plain_run: dict[str, Any]) -> None:
    proc, requests = plain_run["proc"], plain_run["requests"]
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("tool read_file") and "a.txt" in lines[0]
    assert lines[-1] == "The file says: hello-from-a"
    assert [r["model"] for r in requests] == ["flag-model", "flag-model"]
    assert not any(r.get("stream") for r in requests)


def in_terminal(args: list[str], env: dict[str, str], timeout: float = 60) -> tuple[int, str]:
    """Run ``python -m agentkit ARGS`` with stdout and stderr on a pseudo-terminal;
    return (exit code, everything it wrote, ANSI escapes removed)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentkit", *args],
        env={**env, "TERM": "xterm-256color", "COLUMNS": "120"},
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = b"".join(chunks).decode("utf-8", "replace")
    return code, re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r", "", text)


@pytest.mark.slow
def test_continue_in_a_terminal_shows_live_view_and_markdown(plain_run: dict[str, Any]) -> None:
    # Continues plain_run's conversation (two turns: read a.txt, then the answer).
    workspace = plain_run["workspace"]
    first = plain_run["proc"]
    assert first.returncode == 0, first.stderr
    (conv_id,) = (p.stem for p in (workspace / ".agentkit" / "conversations").glob("*.json"))
    script = [calls(call("read_file", path="a.txt")), "## Summary\n\n**second** answer"]
    with FakeOpenAIServer(script) as server:
        env = cli_env(server.base_url)
        code, screen = in_terminal(["run", "two", "-w", str(workspace), "--continue", conv_id], env)
        requests = list(server.requests)
    assert code == 0, screen
    contents = [m.get("content") for m in requests[0]["messages"]]
    assert "Read a.txt" in contents and "The file says: hello-from-a" in contents
    assert contents[-1] == "two"
    # The live status line; turns go on from plain_run's two (a fresh count would end at 2).
    assert "main [" in screen and "turn 4" in screen
    assert "tool read_file" in screen
    assert "Summary" in screen and "second answer" in screen and "**" not in screen
    saved = json.loads((workspace / ".agentkit" / "conversations" / f"{conv_id}.json").read_text())
    assert saved["final_text"] == "## Summary\n\n**second** answer"


@pytest.mark.parametrize(
    ("case", "needle"),
    [
        ("no_model", "no model"),
        ("no_key", "no API key"),
        ("no_workspace", "is not a folder"),
        ("empty_task", "task is empty"),
        ("unknown_conversation", "no saved conversation"),
    ],
)
def test_configuration_errors_exit_2_with_one_line(workspace: Path, case: str, needle: str) -> None:
    env = cli_env("http://127.0.0.1:9/v1")
    args = ["run", "do it", "-w", str(workspace)]
    if case == "no_model":
        del env["AGENTKIT_MODEL"]
    elif case == "no_key":
        del env["OPENAI_API_KEY"], env["OPENAI_BASE_URL"]
    elif case == "no_workspace":
        args[3] = str(workspace / "missing")
    elif case == "empty_task":
        args[1] = "  "
    else:
        args += ["--continue", "conv_000000000000"]
    proc = agentkit(*args, env=env)
    assert proc.returncode == 2
    assert needle in one_error_line(proc)
    assert proc.stdout == ""


def test_unreachable_endpoint_exits_2(workspace: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    proc = agentkit("run", "hi", "-w", str(workspace), env=cli_env(url))
    assert proc.returncode == 2
    assert one_error_line(proc).startswith(f"agentkit: cannot reach the model endpoint {url}: ")


def test_rejected_key_exits_2(workspace: Path) -> None:
    with FakeOpenAIServer(lambda req: ErrorReply(401)) as server:
        proc = agentkit("run", "hi", "-w", str(workspace), env=cli_env(server.base_url))
    assert proc.returncode == 2
    assert "refused the request" in one_error_line(proc)


def test_model_error_after_retries_exits_1(workspace: Path) -> None:
    bad = {
        "error": {"message": "bad request: unsupported parameter", "type": "invalid_request_error"}
    }
    with FakeOpenAIServer(lambda req: ErrorReply(400, bad)) as server:
        proc = agentkit("run", "hi", "-w", str(workspace), "--json", env=cli_env(server.base_url))
    assert proc.returncode == 1
    line = one_error_line(proc)
    assert line.startswith("agentkit: run failed: ") and "unsupported parameter" in line
    data = json.loads(proc.stdout)
    assert data["status"] == "failed" and data["error_kind"] == "invalid_request"
    assert Path(data["transcript_path"]).is_file()


def test_unsavable_conversation_is_one_line_exit_1(workspace: Path) -> None:
    # The conversation folder cannot be created: the run fails, saying why, no traceback.
    (workspace / ".agentkit").write_text("not a folder")
    with FakeOpenAIServer(["answer"]) as server:
        proc = agentkit("run", "hi", "-w", str(workspace), env=cli_env(server.base_url))
    assert proc.returncode == 1
    assert "could not be saved" in one_error_line(proc)


@pytest.mark.slow
def test_sigint_cancels_run_and_saves_conversation(workspace: Path) -> None:
    asked = []

    def slow(request: dict[str, Any]) -> Any:
        asked.append(time.monotonic())
        return Reply(content="too late", latency=3.0)

    with FakeOpenAIServer(slow) as server:
        proc = start_agentkit("run", "hi", "-w", str(workspace), env=cli_env(server.base_url))
        try:
            deadline = time.monotonic() + 20
            while not asked and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.05)
            assert asked, "the CLI never asked the model"
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    prefix = "interrupted: sub-agents stopped, conversation saved to "
    lines = [line for line in err.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, err
    saved = Path(lines[0][len(prefix) :])
    assert saved.is_file() and saved.parent == workspace / ".agentkit" / "conversations"
    assert json.loads(saved.read_text())["messages"][-1]["content"] == "hi"
    assert "too late" not in out


@pytest.mark.slow
def test_ctrl_c_to_the_process_group_ends_a_working_subagent(workspace: Path) -> None:
    # A terminal's Ctrl-C reaches the whole foreground group: the CLI and the workers.
    busy: list[float] = []

    def sleepy(request: dict[str, Any]) -> Any:
        busy.append(time.monotonic())
        return calls(call("run_command", command="sleep 30"))

    router = Router(
        main=[calls(call("create_sub_agent", agent_id=1, summary="Slow one", task="wait")), "done"],
        subs={1: [sleepy, finish()]},
    )
    with FakeOpenAIServer(router) as server:
        proc = start_agentkit(
            "run", "hi", "-w", str(workspace), env=cli_env(server.base_url), new_session=True
        )
        try:
            deadline = time.monotonic() + 30
            while not busy and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.05)
            assert busy, "the sub-agent never asked the model"
            # run_command's child starts a moment after the request (later under load).
            assert wait_until(lambda: "sleep" in _names(_family(proc.pid), "sleep"))
            family = _family(proc.pid)
            os.killpg(proc.pid, signal.SIGINT)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "interrupted: sub-agents stopped" in err
    # Gone or a zombie: one whose parent is gone is reaped by PID 1, which may take
    # seconds (psutil.wait_procs waited for that).
    wait_until(lambda: not running(family), 10)
    assert not running(family)
    (saved,) = (workspace / ".agentkit" / "conversations").glob("*.json")
    (row,) = json.loads(saved.read_text())["subagents"]
    assert row["status"] == "terminated", row


def _family(pid: int) -> list[psutil.Process]:
    """The descendants of ``pid`` now (none once it is gone)."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _names(processes: list[psutil.Process], *wanted: str) -> set[str]:
    """Which of ``wanted`` run among ``processes`` (one ending meanwhile is skipped)."""
    names = set()
    for p in processes:
        try:
            names.add(p.name())
        except psutil.NoSuchProcess:
            continue
    return names & set(wanted)


# ------------------------------------------------------------ show, transcript
def test_show_and_transcript_after_a_run(
    read_run: dict[str, Any], agentkit_forks: ForkRunner
) -> None:
    workspace, env = read_run["workspace"], read_run["env"]
    run = json.loads(read_run["proc"].stdout)
    conv_id = run["conversation_id"]

    show = agentkit_forks.agentkit("show", "-w", str(workspace), env=env)
    assert show.returncode == 0, show.stderr
    assert f"conversation {conv_id}" in show.stdout and "state: idle" in show.stdout
    assert "The file says: hello-from-a" in show.stdout and "sub-agents: none" in show.stdout
    shown = json.loads(
        agentkit_forks.agentkit("show", conv_id, "-w", str(workspace), "--json", env=env).stdout
    )
    assert shown["conversation_id"] == conv_id and shown["subagents"] == []
    assert shown["stats"]["token_usage"] == run["stats"]["token_usage"]

    text = agentkit_forks.agentkit("transcript", conv_id, "-w", str(workspace), env=env)
    assert text.returncode == 0, text.stderr
    out = text.stdout
    assert (
        out.index("[user]")
        < out.index('-> read_file({"path": "a.txt"})')
        < out.index("[tool result: read_file]")
    )
    assert "hello-from-a" in out and out.rstrip().splitlines()[-1].startswith("stats: turns 2")
    by_path = agentkit_forks.agentkit(
        "transcript", run["transcript_path"], "-w", str(workspace), "--json", env=env
    )
    assert json.loads(by_path.stdout)["conversation_id"] == conv_id
    # A blank target is refused (a trial saw it print the latest conversation).
    for blank in ("", "  "):
        refused = agentkit_forks.agentkit("transcript", blank, "-w", str(workspace), env=env)
        assert refused.returncode == 2 and "name a transcript" in one_error_line(refused)


def test_show_without_conversation_exits_2(workspace: Path, agentkit_forks: ForkRunner) -> None:
    proc = agentkit_forks.agentkit("show", "-w", str(workspace), env=cli_env())
    assert proc.returncode == 2
    assert "no conversation yet" in one_error_line(proc)
    proc = agentkit_forks.agentkit("transcript", "7", "-w", str(workspace), env=cli_env())
    assert proc.returncode == 2
    one_error_line(proc)


@pytest.mark.slow
def test_run_with_subagent_then_show_and_transcript(
    workspace: Path, agentkit_forks: ForkRunner
) -> None:
    (workspace / "notes.txt").write_text("alpha\n")
    router = Router(
        main=[
            calls(
                call(
                    "create_sub_agent",
                    agent_id=1,
                    summary="Write the notes report",
                    task="Read notes.txt, write report.md",
                )
            ),
            "Main task done.",
        ],
        subs={
            1: [
                calls(call("read_file", path="notes.txt")),
                calls(
                    call(
                        "write_file",
                        path="sub_agent_results/agent_1/report.md",
                        content="# Report\nalpha\n",
                    )
                ),
                finish("Wrote report.md from notes.txt."),
            ]
        },
    )
    with FakeOpenAIServer(router) as server:
        env = cli_env(server.base_url)
        proc = agentkit("run", "Make a report", "-w", str(workspace), env=env, timeout=90)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("sub-agent #1 started: Write the notes report") for line in lines)
    assert any(line.startswith("sub-agent #1 done") and "1 file read," in line for line in lines)
    assert lines[-1] == "Main task done."

    shown = json.loads(
        agentkit_forks.agentkit("show", "-w", str(workspace), "--json", env=env).stdout
    )
    (row,) = shown["subagents"]
    assert row["agent_id"] == 1 and row["status"] == "completed"
    assert row["deliverables_files"] == ["report.md"] and row["files_read"] == 1
    text = agentkit_forks.agentkit("show", "-w", str(workspace), env=env).stdout
    assert "#1  completed" in text and "report.md" in text

    sub = agentkit_forks.agentkit("transcript", "1", "-w", str(workspace), env=env)
    assert sub.returncode == 0, sub.stderr
    assert sub.stdout.startswith("sub-agent #1: Write the notes report")
    assert "-> finish_task(" in sub.stdout and "alpha" in sub.stdout


def test_show_reads_records_written_by_hand(workspace: Path, agentkit_forks: ForkRunner) -> None:
    # The files alone drive `show`/`transcript`: a conversation with one sub-agent row.
    deliver = workspace / "docs" / "api"
    (deliver / ".subagent").mkdir(parents=True)
    (deliver / "api.md").write_text("# API\n")
    record = {
        "agent_id": 3,
        "summary": "生成API文档",
        "status": "timeout",
        "messages": [
            {"role": "user", "content": "写文档"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "路由.py"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "name": "read_file", "content": "x" * 5000},
        ],
        "stats": {
            "runtime_seconds": 61,
            "files_read": 1,
            "searches": 0,
            "web_pages": 0,
            "commands": 0,
            "token_usage": {"prompt": 10, "completion": 5, "total": 15},
        },
    }
    (deliver / ".subagent" / "conversations.json").write_text(
        json.dumps(record, ensure_ascii=False)
    )
    conv = {
        "conversation_id": "conv_handmade0001",
        "state": "done",
        "final_text": "ok",
        "stats": {"turns": 1, "token_usage": {"prompt": 1, "completion": 1, "total": 2}},
        "messages": [],
        "subagents": [
            {
                "agent_id": 3,
                "summary": "生成API文档",
                "status": "timeout",
                "runtime_seconds": 61,
                "files_read": 1,
                "searches": 0,
                "web_pages": 0,
                "commands": 0,
                "deliverables_dir": "docs/api",
                "transcript": "docs/api/.subagent/conversations.json",
                "result_summary": "partial",
            }
        ],
    }
    folder = workspace / ".agentkit" / "conversations"
    folder.mkdir(parents=True)
    (folder / "conv_handmade0001.json").write_text(json.dumps(conv, ensure_ascii=False))
    env = cli_env()

    shown = json.loads(
        agentkit_forks.agentkit("show", "-w", str(workspace), "--json", env=env).stdout
    )
    assert shown["subagents"][0]["deliverables_files"] == ["api.md"]
    text = agentkit_forks.agentkit("show", "-w", str(workspace), env=env).stdout
    assert "#3  timeout  61s  生成API文档" in text and "result: partial" in text

    out = agentkit_forks.agentkit("transcript", "3", "-w", str(workspace), env=env).stdout
    assert '-> read_file({"path": "路由.py"})' in out
    assert "(4200 more chars)" in out  # tool results shortened to 800 chars
    full = agentkit_forks.agentkit(
        "transcript", "3", "-w", str(workspace), "--full", env=env
    ).stdout
    assert "x" * 5000 in full and "more chars" not in full
    assert out.rstrip().splitlines()[-1].startswith("stats: runtime 61s")


def test_a_base_url_without_scheme_is_a_usage_error(workspace: Path) -> None:
    proc = agentkit(
        "run", "hi", "-w", str(workspace), "--model", "m", "--base-url", "not-a-url", env=cli_env()
    )
    assert proc.returncode == 2
    assert "http://" in one_error_line(proc)


def test_task_from_standard_input(workspace: Path) -> None:
    task = "长任务 " * 30000  # beyond what a command line can carry
    with FakeOpenAIServer(["read it"]) as server:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "agentkit",
                "run",
                "-",
                "-w",
                str(workspace),
                "--model",
                "m",
                "--json",
            ],
            input=task,
            capture_output=True,
            text=True,
            timeout=60,
            env=cli_env(server.base_url),
        )
        sent = server.requests[0]["messages"][-1]["content"]
    assert proc.returncode == 0, proc.stderr
    assert sent == task


def test_run_task_is_the_run_command_as_a_function(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentkit.cli.common import UsageError, make_settings
    from agentkit.cli.run import run_task

    for name in list(os.environ):
        if name.startswith(("AGENTKIT_", "OPENAI_")):
            monkeypatch.delenv(name)
    with FakeOpenAIServer(["the answer"]) as server:
        settings = make_settings({"model": "m", "base_url": server.base_url, "api_key": "k"})
        code = run_task("say it", str(tmp_path), settings, json_output=True)
        assert server.requests[0]["messages"][-1] == {"role": "user", "content": "say it"}
    assert code == 0
    assert json.loads(capsys.readouterr().out)["final_text"] == "the answer"
    with pytest.raises(UsageError, match="max_turns"):
        make_settings({"max_turns": 0})
    with pytest.raises(UsageError):
        run_task("x", str(tmp_path / "missing"), settings)
