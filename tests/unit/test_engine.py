"""The shared loop, driven through the real LLMClient over HTTP against FakeOpenAIServer."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from pydantic import BaseModel

from agentkit.errors import ToolError
from agentkit.settings import Settings
from agentkit.tools.base import ToolContext
from agentkit.tools.registry import ToolRegistry


class EchoParams(BaseModel):
    text: str


class WaitParams(BaseModel):
    name: str


def make_registry(barrier: threading.Barrier | None = None) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def echo(p: EchoParams) -> str:
        """Echo text back."""
        return f"echo:{p.text}"

    @registry.tool
    def boom(p: EchoParams) -> str:
        """Always raises."""
        raise RuntimeError("kaboom")

    @registry.tool
    def refuse(p: EchoParams) -> str:
        """Raises a ToolError."""
        raise ToolError("not_found", "nothing here")

    @registry.tool
    def rendezvous(p: WaitParams) -> str:
        """Returns only if another call runs at the same time."""
        assert barrier is not None
        barrier.wait(timeout=5)
        return f"met:{p.name}"

    @registry.tool
    def big(p: EchoParams) -> str:
        """Returns a large output."""
        return p.text * 3000

    return registry


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
