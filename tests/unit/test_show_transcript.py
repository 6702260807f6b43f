"""agentkit.cli.show.render_transcript: a sub-agent's task, status, result and tool
calls come first; its system prompt is one line unless asked for."""

from __future__ import annotations

from agentkit.cli.show import render_transcript

PROMPT = "\n".join(f"rule {i}" for i in range(60))
RECORD = {
    "agent_id": 2,
    "summary": "notes report",
    "task": "Write the notes report",
    "status": "completed",
    "result_summary": "Report written.",
    "messages": [
        {"role": "system", "content": PROMPT},
        {"role": "user", "content": "Write the notes report"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "a", "function": {"name": "read_file", "arguments": '{"path": "a"}'}},
                {"id": "b", "function": {"name": "read_file", "arguments": '{"path": "b"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "name": "read_file", "content": "A"},
        {"role": "tool", "tool_call_id": "b", "name": "read_file", "content": "B"},
        {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "finish_task"}}]},
    ],
    "stats": {},
}


def test_the_head_comes_first_and_the_system_prompt_is_one_line() -> None:
    text = render_transcript(RECORD, system_hint="/show 2 --system")
    lines = text.splitlines()
    assert lines[2:6] == [
        "task: Write the notes report",
        "status: completed",
        "result: Report written.",
        "tool calls: read_file ×2, finish_task",
    ]
    assert "rule 5" not in text
    assert "[system] the system prompt, 60 lines: /show 2 --system shows it" in lines
    assert text.index("tool calls:") < text.index("[user]")


def test_asked_for_the_system_prompt_is_whole() -> None:
    text = render_transcript(RECORD, system=True)
    assert "rule 0" in text and "rule 59" in text
