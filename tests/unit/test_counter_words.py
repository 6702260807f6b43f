"""One wording of an agent's counters, from agentkit.chat.explain.counter_words, in the
chat's lines, ``agentkit show`` and ACP's sub-agent card (issue 35: three wordings)."""

from __future__ import annotations

from agentkit.acp.toolcalls import subagent_progress
from agentkit.chat.explain import counter_words
from agentkit.cli.progress import counters_text
from agentkit.cli.show import render_overview, stats_line

ROW = {"agent_id": 1, "summary": "s", "status": "running", "files_read": 2, "searches": 1,
       "web_pages": 0, "commands": 4}  # fmt: skip
WORDS = "2 files read, 1 search, 0 web pages, 4 commands"


def test_the_words() -> None:
    assert counter_words(ROW) == WORDS
    assert counter_words({**ROW, "tool_calls": {"read_file": 2, "run_command": 1}}) == (
        "3 tool calls, " + WORDS
    )
    assert counter_words({"tool_calls": 1, "files_read": 1}).startswith("1 tool call, 1 file read")


def test_chat_show_and_acp_say_the_same() -> None:
    assert counters_text(ROW) == WORDS
    assert WORDS in stats_line(ROW)
    assert "3 tool calls, " + WORDS in stats_line({**ROW, "tool_calls": {"a": 1, "b": 2}})
    overview = {"conversation_id": "c", "path": "c.json", "subagents": [ROW], "stats": {}}
    assert WORDS in render_overview(overview)
    assert subagent_progress(ROW).splitlines()[-1] == WORDS
