"""The ``agentkit`` command as a real subprocess against FakeOpenAIServer (docs/architecture.md §3 CLI).

Each test runs ``python -m agentkit ...`` with the endpoint in the environment and
checks exit codes, stdout/stderr and the files left in the workspace.
"""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from agentkit import events as ev
from agentkit.cli.progress import LiveDisplay, PlainPrinter


# --------------------------------------------------------------------- display
def sub_info(status: str, **extra: Any) -> dict[str, Any]:
    return {
        "agent_id": 2,
        "summary": "Collect figures",
        "status": status,
        "runtime_seconds": 5,
        "files_read": 3,
        "searches": 1,
        "web_pages": 0,
        "commands": 2,
        "last_action": "Reading data.csv",
        "deliverables_dir": "out/b",
        **extra,
    }


def test_live_display_renders_status_and_subagent_table() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=160, color_system=None)
    view = LiveDisplay(console, tokens=lambda: 1234)
    view.start()
    view(ev.AssistantMessage(content=None, tool_calls=[{}], turn=3))
    view(
        ev.ToolCallStarted(
            call_id="c", name="read_file", arguments={"path": "a.txt"}, last_action="Reading a.txt"
        )
    )
    view(ev.SubAgentStarted(info=sub_info("running")))
    view(ev.SubAgentFinished(info=sub_info("completed", runtime_seconds=65)))
    view(ev.SubAgentStarted(info=sub_info("running", agent_id=3)))
    view(ev.StateChanged(state="waiting_for_subagents"))
    view.stop()
    out = buffer.getvalue()
    assert "main [waiting for 1 sub-agent]" in out and "waiting_for_subagents" not in out
    assert "turn 3 · 1,234 tokens" in out and "Reading a.txt" in out
    assert "tool read_file" in out and "sub-agent #2 done after 1m05s" in out
    last = out[out.rindex("sub-agents") :]
    assert (
        "Collect figures" in last
        and "done" in last
        and "completed" not in last
        and "1m05s" in last
        and "Reading data.csv" in last
    )


def test_plain_printer_lines() -> None:
    buffer = io.StringIO()
    printer = PlainPrinter(buffer)
    printer(ev.TextDelta(text="ignored"))
    printer(ev.SubAgentStarted(info=sub_info("running")))
    printer(ev.RetryScheduled(kind="rate_limit", attempt=1, delay_seconds=2.0, message="slow down"))
    printer(ev.SubAgentFinished(info=sub_info("timeout")))
    assert buffer.getvalue().splitlines() == [
        "sub-agent #2 started: Collect figures (deliverables: out/b)",
        "retry: rate_limit (attempt 1) in 2.0s: slow down",
        "sub-agent #2 timed out after 5s: 3 files read, 1 search, 0 web pages, 2 commands",
    ]
