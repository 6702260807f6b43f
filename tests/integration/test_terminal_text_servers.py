"""No model, tool, file or sub-agent text can drive the user's terminal.

A unit test of agentkit.cli.safe_text over every code point from U+0000 to U+009F,
then ``agentkit run`` (plain lines on a pipe, the live view on a pseudo-terminal,
``--json``) and ``agentkit chat`` on a pseudo-terminal, as real processes against
FakeOpenAIServer. The scripted model answers with escape sequences (window title,
OSC 52 clipboard write, erase line, colour, the 8-bit CSI), reads a file whose name
and content carry them, runs a command printing them, and starts a sub-agent whose
summary and result carry them; none may reach the terminal as a control, while the
visible text (Chinese included) does.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import REPO, cli_env
from fork_runner import ForkRunner
from subagent_helpers import Router, call, calls, finish, wait_until
from terminal_cases import ANSWER, CONTROLS, TITLE

from agentkit.cli.safe_text import terminal_safe
from agentkit.testing import ErrorReply, FakeOpenAIServer

FILE_NAME = "evil\x1b[7mname\x9b.txt"
FILE_TEXT = "file-says \x1b]0;FILE-TITLE\x07 \x1b[2K 文件内容 \x9b31m done\n"
# printf's octal escapes: OSC 52, erase line and the 8-bit CSI (UTF-8 C2 9B).
COMMAND = r"printf 'cmd-out \033]52;c;Q01E\033\\ \033[2K \302\2332J 命令输出\n'"
SUMMARY = "Sub \x1b]0;SUB-TITLE\x07 job \x9b2J 子任务"
PLAN = "Plan \x1b]0;PLAN-TITLE\x07 \x1b[2K 计划"  # text beside tool calls (chat shows it)
REASONING = "think \x1b]52;c;UkVB\x07 \x9b2J"
SUB_RESULT = "Sub done \x1b]52;c;U1VC\x1b\\ \x1b[2K 完成"


# ------------------------------------------------------------ the scripted model
def _tool_results(request: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content")) for m in request["messages"] if m.get("role") == "tool")


def evil_router() -> Router:
    """Main: with PLAN and REASONING, read the evil file, run the evil command and
    start a sub-agent with an evil summary; then answer ANSWER followed by the tool
    results it got."""
    return Router(
        main=[
            {
                **calls(
                    call("read_file", path=FILE_NAME),
                    call("run_command", command=COMMAND),
                    call("create_sub_agent", agent_id=1, summary=SUMMARY, task="Say done."),
                ),
                "content": PLAN,
                "reasoning_content": REASONING,
            },
            lambda req: f"{ANSWER}\n\n```\n{_tool_results(req)}\n```",
        ],
        subs={1: [finish(SUB_RESULT)]},
    )


def evil_workspace(workspace: Path) -> Path:
    (workspace / FILE_NAME).write_text(FILE_TEXT, encoding="utf-8")
    return workspace


def assert_no_controls_but_visible(text: str) -> None:
    """Plain output: not one control character, and the visible text is all there."""
    assert not CONTROLS.search(text), repr(CONTROLS.findall(text))
    for visible in ("PWNED-TITLE", "ZXZpbA==", "中文答案", "文件内容", "命令输出", "子任务"):
        assert visible in text, (visible, text)


def assert_terminal_output_safe(raw: bytes) -> str:
    """Terminal output: our own styling escapes only. No OSC (title, clipboard), no
    8-bit CSI, none of the injected sequences; their visible forms are shown."""
    text = raw.decode("utf-8", "replace")
    assert "\x1b]" not in text, "an OSC sequence (title, clipboard) reached the terminal"
    assert not re.search(r"[\x80-\x9f]", text), "a C1 control reached the terminal"
    for injected in ("L\x1b[2KR", "C\x1b[31mD", "\x1b[7mname"):
        assert injected not in text
    for visible in ("PWNED-TITLE", "ZXZpbA==", "L\u241b[2KR", "C\u241b[31mD", "中文答案"):
        assert visible in text, (visible, text)
    return text


# ------------------------------------------------------------------- agentkit run
@pytest.mark.slow
def test_run_plain_json_and_transcript_show_no_controls(
    workspace: Path, agentkit_forks: ForkRunner
) -> None:
    evil_workspace(workspace)
    with FakeOpenAIServer(evil_router()) as server:
        env = cli_env(server.base_url)
        # Output read as UTF-8 (not valid UTF-8 fails): an ESC byte is the "\x1b" character.
        plain = agentkit_forks.agentkit("run", "go", "-w", str(workspace), env=env, timeout=90)
        as_json = agentkit_forks.agentkit(
            "run", "go", "-w", str(workspace), "--json", env=env, timeout=90
        )
    assert plain.returncode == 0, plain.stderr
    assert "\x1b" not in plain.stdout + plain.stderr
    out = plain.stdout
    assert_no_controls_but_visible(out)
    assert "sub-agent #1 started: Sub ␛]0;SUB-TITLE␇ job" in out
    assert terminal_safe(ANSWER) in out

    # --json keeps the exact text; every control is a JSON escape.
    assert as_json.returncode == 0, as_json.stderr
    assert not CONTROLS.search(as_json.stdout.rstrip("\n"))
    assert json.loads(as_json.stdout)["final_text"].startswith(ANSWER)

    shown = agentkit_forks.agentkit("transcript", "1", "-w", str(workspace), "--full", env=env)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert not CONTROLS.search(text) and "子任务" in text and "SUB-TITLE" in text


def test_warning_and_error_lines_quoting_the_endpoint_show_no_controls(
    workspace: Path, agentkit_forks: ForkRunner
) -> None:
    bad = {"error": {"message": f"bad {TITLE} \x9b2J 参数错误", "type": "invalid_request_error"}}
    with FakeOpenAIServer(lambda req: ErrorReply(400, bad)) as server:
        # auto: the refusal also logs a warning quoting it, before the error line.
        env = cli_env(server.base_url, AGENTKIT_TOOL_CALLING="auto")
        proc = agentkit_forks.agentkit("run", "hi", "-w", str(workspace), env=env, timeout=60)
    assert proc.returncode == 1
    warning, error = proc.stderr.splitlines()
    assert warning.startswith("agentkit: native tool calls do not work") and "参数错误" in warning
    assert error.startswith("agentkit: run failed: ") and "参数错误" in error
    for line in (warning, error):
        assert not CONTROLS.search(line) and "PWNED-TITLE" in line, line


class PtyProcess:
    """``python -m agentkit ARGS`` with stdin, stdout and stderr on a pseudo-terminal
    (120x40); every byte it writes is kept."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agentkit", *args],
            env={**env, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"},
            cwd=REPO,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        os.close(slave)
        self.master = master
        self.output = bytearray()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # EIO: the terminal's last writer closed it
                return
            if not data:
                return
            self.output += data

    def seen(self, text: str) -> bool:
        return text.encode() in bytes(self.output)

    def write(self, data: bytes) -> None:
        os.write(self.master, data)

    def finish(self, timeout: float = 60) -> tuple[int, bytes]:
        """Wait for the exit; return (exit code, everything written)."""
        try:
            code = self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._reader.join(10)
            os.close(self.master)
        return code, bytes(self.output)


@pytest.mark.slow
def test_run_live_view_and_markdown_answer_in_a_terminal(workspace: Path) -> None:
    evil_workspace(workspace)
    with FakeOpenAIServer(evil_router()) as server:
        run = PtyProcess(["run", "go", "-w", str(workspace)], cli_env(server.base_url))
        code, raw = run.finish(90)
    text = assert_terminal_output_safe(raw)
    assert code == 0, text
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)  # our own styling removed
    assert "main [" in plain and "sub-agents" in plain  # the live view and its table
    for visible in ("文件内容", "命令输出", "子任务", "SUB-TITLE"):
        assert visible in text, visible


# ------------------------------------------------------------------ agentkit chat
@pytest.mark.slow
def test_chat_in_a_terminal_shows_no_controls(workspace: Path) -> None:
    evil_workspace(workspace)
    with FakeOpenAIServer(evil_router()) as server:
        env = cli_env(server.base_url, PROMPT_TOOLKIT_NO_CPR="1")
        chat = PtyProcess(["chat", "-w", str(workspace)], env)
        try:
            assert wait_until(lambda: chat.seen("/help lists the commands"), 30), chat.output
            chat.write(b"go\r")
            # The round's answer (its sub-agent was a blocking one: no "all done" follows).
            assert wait_until(lambda: chat.seen("中文答案"), 60), chat.output
            # /show of the sub-agent: its transcript quotes the evil summary and result.
            chat.write(b"/show 1\r")
            assert wait_until(lambda: chat.seen("U1VC"), 30), chat.output
            time.sleep(0.3)
            chat.write(b"/quit\r")
        finally:
            code, raw = chat.finish(60)
    text = assert_terminal_output_safe(raw)
    assert code == 0, text
    for visible in (
        "文件内容",
        "命令输出",
        "子任务",
        "SUB-TITLE",
        "PLAN-TITLE",
        "left: conversation",
    ):
        assert visible in text, visible
    assert "all done" not in text
