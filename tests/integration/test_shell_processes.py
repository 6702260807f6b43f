"""run_command with real processes: output capture, cleaning, limits and process-tree kills."""

from __future__ import annotations

import os
import re
import threading
import time
import tracemalloc
from pathlib import Path

import pytest
from shell_helpers import (
    ctx_fixture,  # noqa: F401  (the ctx fixture)
    make_ctx,
    run,
    running_with,
)

from agentkit.process import tree as proctree
from agentkit.tools.base import ToolContext, ToolResult
from agentkit.tools.shell import is_secret_var

# Every test twice: in the command sandbox and without it (conftest.command_sandbox).
pytestmark = pytest.mark.usefixtures("command_sandbox")


def test_output_exit_code_and_trailer(ctx: ToolContext) -> None:
    result = run(ctx, "echo out; echo err >&2; echo again; exit 3")
    assert result.ok  # a non-zero exit is a result, not a tool failure
    assert result.meta["exit_code"] == 3
    body, trailer = result.output.rsplit("\n", 1)
    assert body == "out\nerr\nagain"  # stdout and stderr interleaved as produced
    assert re.fullmatch(r"\[exit 3 · \d+\.\d s\]", trailer)
    assert run(ctx, "true").output.startswith("(no output)\n[exit 0 · ")


def test_stdin_is_closed(ctx: ToolContext) -> None:
    started = time.monotonic()
    result = run(ctx, 'cat; read -r line; echo "got:[$line] $?"')
    assert time.monotonic() - started < 10
    assert result.output.startswith("got:[] 1\n[exit 0")


def test_ansi_codes_and_carriage_returns_cleaned(ctx: ToolContext) -> None:
    command = (
        r"printf '\033[1;31mred\033[0m plain\n'; printf '\033]0;window title\007titled\n'; "
        r"printf 'progress 10%%\rprogress 55%%\rprogress 100%%\n'; printf 'crlf line\r\n'; "
        r"printf 'bad \377 byte\n'"
    )
    body = run(ctx, command).output.rsplit("\n", 1)[0]
    assert body == "red plain\ntitled\nprogress 100%\ncrlf line\nbad \ufffd byte"


def test_large_output_keeps_head_and_tail_with_bounded_memory(ctx: ToolContext) -> None:
    # 10 MB: 1,250,000 lines of 7 digits + newline.
    tracemalloc.start()
    try:
        result = run(ctx, "seq -w 1 1250000")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024  # the 10 MB never sit in memory at once
    out = result.output
    assert result.ok and result.truncated
    assert out.startswith("0000001\n0000002\n")
    assert "\n[... 9,970,000 characters omitted ...]\n" in out
    head, tail = out.split("\n[... 9,970,000 characters omitted ...]\n")
    assert len(head) == 7_500 and tail.rsplit("\n", 1)[0].endswith("1249999\n1250000")
    assert "output truncated: 9,970,000 characters omitted" in out
    log = re.search(r"full log: (\S+\.log)\]", out)
    assert log is not None
    assert (ctx.workspace / log.group(1)).stat().st_size == 10_000_000


def test_timeout_kills_background_and_setsid_daemons(workspace: Path) -> None:
    ctx = make_ctx(workspace, command_timeout_max=1.0)  # caps the 120 s asked for below
    command = (
        "echo before; sleep 971001 & setsid sleep 971002 & "
        "(setsid sh -c 'exec sleep 971003' &); "
        "sleep 971000"
    )
    started = time.monotonic()
    result = run(ctx, command, timeout_seconds=120)
    assert time.monotonic() - started < 10
    assert not result.ok and result.error_code == "timeout"
    assert result.output.startswith("Error: timeout: the command did not finish within 1 s")
    assert "before" in result.output
    assert re.search(r"\[killed after 1\.\d s \(timeout\) · \d+ processes killed\]", result.output)
    assert len(result.meta["killed_pids"]) >= 4  # type: ignore[arg-type]
    assert running_with("sleep 97100") == []  # 971000 to 971003, whatever pid namespace they saw
    assert ctx.process_mark and proctree.processes_with_mark(ctx.process_mark) == []


def test_leftover_background_processes_are_killed_and_listed(ctx: ToolContext) -> None:
    started = time.monotonic()
    result = run(ctx, "sleep 972000 & nohup sleep 972001 >/dev/null 2>&1 & echo done")
    assert time.monotonic() - started < 10  # the pipe held by `sleep &` does not stall the call
    assert result.ok and result.output.startswith("done\n[exit 0 · ")
    # A child may still be the forked shell (not yet exec'd sleep) when it is killed.
    assert re.search(r"killed 2 leftover background processes: (sleep|bash) \(pid", result.output)
    assert len(result.meta["killed_pids"]) == 2  # type: ignore[arg-type]
    assert running_with("sleep 97200") == []


def test_cancel_kills_the_command(ctx: ToolContext) -> None:
    threading.Timer(0.5, ctx.cancel.set).start()
    started = time.monotonic()
    result = run(ctx, "echo started; sleep 1000")
    assert time.monotonic() - started < 10
    assert result.error_code == "killed" and "started" in result.output


def test_concurrent_commands_do_not_kill_each_other(ctx: ToolContext) -> None:
    slow: list[ToolResult] = []
    thread = threading.Thread(target=lambda: slow.append(run(ctx, "sleep 1.5; echo slow-done")))
    thread.start()
    time.sleep(0.3)
    assert run(ctx, "echo quick").output.startswith("quick\n[exit 0")
    thread.join(20)
    assert slow and slow[0].output.startswith("slow-done\n[exit 0")


def test_environment_has_no_secrets_and_fixed_values(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = {
        "OPENAI_API_KEY": "sk-live-1",
        "AGENTKIT_API_KEY": "ak-2",
        "ANTHROPIC_API_KEY": "x-3",
        "GITHUB_TOKEN": "ghp-4",
        "DB_PASSWORD": "pw-5",
        "AWS_SECRET_ACCESS_KEY": "aws-6",
        "SIGNING_SECRET": "s-7",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("KEEP_ME", "visible")
    output = run(ctx, "env").output
    for name, value in secrets.items():
        assert name not in output and value not in output
    lines = set(output.splitlines())
    for pair in ("KEEP_ME=visible", "CI=1", "PAGER=cat", "GIT_PAGER=cat", "GIT_TERMINAL_PROMPT=0",
                 "NO_COLOR=1", "TERM=dumb", "PYTHONUNBUFFERED=1", "DEBIAN_FRONTEND=noninteractive",
                 f"AGENTKIT_PROCESS_MARK={ctx.process_mark}"):  # fmt: skip
        assert pair in lines
    assert is_secret_var("my_api_key") and not is_secret_var("KEYBOARD")


def test_fresh_mark_without_process_mark(workspace: Path) -> None:
    ctx = ToolContext(workspace=workspace, settings=make_ctx(workspace).settings)
    marks = {run(ctx, "echo $AGENTKIT_PROCESS_MARK").output.split("\n")[0] for _ in range(2)}
    assert len(marks) == 2 and all(re.fullmatch(r"[0-9a-f]{32}", m) for m in marks)


def test_cwd_resolution(ctx: ToolContext, tmp_path: Path) -> None:
    (ctx.workspace / "sub").mkdir()
    (ctx.workspace / "file.txt").write_text("x")
    os.symlink(tmp_path, ctx.workspace / "escape")
    assert run(ctx, "pwd", cwd="sub").output.startswith(f"{ctx.workspace / 'sub'}\n")
    for cwd in ("..", "/tmp", "escape", "sub/../.."):
        result = run(ctx, "pwd", cwd=cwd)
        assert result.error_code == "outside_workspace", cwd
    assert run(ctx, "pwd", cwd="missing").error_code == "not_found"
    assert run(ctx, "pwd", cwd="file.txt").error_code == "invalid_argument"


def test_allow_and_deny_lists(workspace: Path) -> None:
    deny = make_ctx(workspace, command_deny=["rm", "git push"])
    for command in ("rm -rf x", "ls; /bin/rm x", "echo $(rm x)", "echo `rm x`", "git push -f origin",
                    "FOO=1 rm x", "ls && rm x"):  # fmt: skip
        result = run(deny, command)
        assert result.error_code == "blocked_command", command
    assert run(deny, "echo rm is fine as an argument").ok
    assert run(deny, "git --version").ok
    allow = make_ctx(workspace, command_allow=["echo", "ls"])
    assert run(allow, "echo hi | /bin/ls -d .").ok
    result = run(allow, "echo hi && cat /etc/hostname")
    assert result.error_code == "blocked_command" and "allow list" in result.output


def test_runs_in_the_chosen_sandbox(ctx: ToolContext, command_sandbox: str) -> None:
    # A sandbox mounts a /proc of its own: pid 1 there is the command's init.
    output = run(ctx, "tr '\\0' ' ' </proc/1/cmdline").output
    assert ("agentkit-init" in output) == (command_sandbox == "bwrap"), output


def test_a_command_too_long_to_start_says_so(ctx: ToolContext) -> None:
    # Past the kernel's limit on one argument (E2BIG), the old error read
    # "not_found: could not start bash: Argument list too long".
    result = run(ctx, "echo " + "x" * 300_000)
    assert result.error_code == "too_large", result.output
    assert "too long to start" in result.output and "write_file" in result.output
