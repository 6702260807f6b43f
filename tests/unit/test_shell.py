"""run_command with real processes: output capture, cleaning, limits and process-tree kills."""

from __future__ import annotations

import pytest
from shell_helpers import (
    ctx_fixture,  # noqa: F401  (the ctx fixture)
    run,
)

from agentkit.errors import ToolError
from agentkit.tools.base import ToolContext
from agentkit.tools.shell._output import OutputCapture, resolve_cr, strip_ansi
from agentkit.tools.shell._policy import check_interactive, check_policy

# Every test twice: in the command sandbox and without it (conftest.command_sandbox).
pytestmark = pytest.mark.usefixtures("command_sandbox")


def test_interactive_programs_refused_with_a_suggestion(ctx: ToolContext) -> None:
    for command in (
        "vim notes.txt",
        "python3",
        "less README",
        "top",
        "node",
        "ssh example.com",
        "watch ls",
    ):
        result = run(ctx, command)
        assert result.error_code == "blocked_command", command
        assert "interactive" in result.output
    assert "edit_file" in run(ctx, "nano x").output
    for command in ("python3 -c 'print(1)'", "echo 1 | python3", "git log | less", "top -b -n 1",
                    "ssh host ls", "bash script.sh"):  # fmt: skip
        check_interactive(command)  # does not raise
    with pytest.raises(ToolError):
        check_policy("sudo rm -rf /", [], ["sudo"])


def test_invalid_arguments(ctx: ToolContext) -> None:
    assert run(ctx, "   ").error_code == "invalid_argument"
    assert run(ctx, "echo", timeout_seconds=0).error_code == "invalid_argument"


def test_capture_helpers() -> None:
    assert strip_ansi("\x1b[38;5;196mx\x1b[0m\x1b]8;;http://a\x1b\\link\x1b]8;;\x1b\\") == "xlink"
    assert resolve_cr("abcdef\rXY") == "XYcdef"
    capture = OutputCapture(max_chars=20)
    for piece in (b"\xe4\xb8", b"\xad\xe6\x96\x87\n", b"\x1b[3", b"1mred\x1b[0m\n"):
        capture.feed(piece)  # a UTF-8 character and an escape split across reads
    capture.finish()
    assert capture.text() == "中文\nred\n" and capture.omitted == 0
