"""The shared loop, driven through the real LLMClient over HTTP against FakeOpenAIServer."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_tools import make_registry

from agentkit.settings import Settings
from agentkit.tools.base import ToolContext


@pytest.mark.parametrize("language", ["zh", "en"])
def test_last_action_in_conversation_language(workspace: Path, language: str) -> None:
    from agentkit.prompts import last_action

    text = last_action(language, "read_file", {"path": "src/api/routes.py"})
    assert text == (
        "正在读取 src/api/routes.py" if language == "zh" else "Reading src/api/routes.py"
    )


def test_the_registry_runs_a_tool_call_as_the_model_sent_it(workspace: Path) -> None:
    from agentkit.llm.turns import ToolCall

    registry = make_registry()
    ctx = ToolContext(workspace=workspace, settings=Settings(model="m", api_key="k"))
    ran = registry.run(ToolCall(id="c1", name="echo", arguments={"text": "x"}), ctx)
    unknown = registry.run(ToolCall(id="c2", name="", arguments={}), ctx)
    cut = ToolCall(id="c3", name="echo", arguments=None, error="truncated JSON")
    unusable = registry.run(cut, ctx)
    assert ran.ok and ran.output == "echo:x"
    assert unknown.error_code == "unknown_tool"
    assert unusable.error_code == "invalid_argument" and "truncated JSON" in unusable.output


@pytest.mark.parametrize("language", ["zh", "en"])
def test_a_last_action_never_shows_a_placeholder_for_a_missing_argument(language: str) -> None:
    """A model's call without an argument its phrase names (create_sub_agent without
    agent_id, seen on an editor's tool card as "Creating sub-agent {agent_id}: worker")
    gets the generic phrase instead, for every tool."""
    from agentkit.prompts import last_action, table

    for tool, template in table(language, "actions.txt").items():
        text = last_action(language, tool, {})
        assert "{" not in text and "}" not in text, (tool, template, text)
    generic = "正在调用 create_sub_agent" if language == "zh" else "Calling create_sub_agent"
    assert last_action(language, "create_sub_agent", {"summary": "worker"}) == generic
