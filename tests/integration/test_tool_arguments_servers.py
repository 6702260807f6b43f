"""Arguments a tool does not take (issue 20 item 9): still accepted, but the result
says which were ignored and what was probably meant, in the conversation language;
the seed tools' JSON stays valid with its fields unchanged."""

from __future__ import annotations

from pathlib import Path

from agentkit import Agent, Settings
from agentkit.testing import FakeOpenAIServer


def test_the_model_reads_the_note_on_run_command_timeout(workspace: Path) -> None:
    """The reported case: ``timeout`` for ``timeout_seconds`` was ignored without a word."""
    script = [
        {
            "tool_calls": [
                {"name": "run_command", "arguments": {"command": "echo hi", "timeout": 5}}
            ]
        },
        "done",
    ]
    with FakeOpenAIServer(script) as server:
        settings = Settings(
            model="m", base_url=server.base_url, api_key="k", language="en", max_retries=0
        )
        with Agent(workspace=workspace, settings=settings) as agent:
            assert agent.run("t").status == "done"
        (answer,) = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert "hi" in answer["content"]
    assert answer["content"].endswith(
        "\n\nNote: ignored argument(s) that run_command does not have: "
        "timeout (did you mean timeout_seconds?)."
    )
