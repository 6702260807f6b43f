"""The seed tools over a real manager, for the seed-input tests (unit and servers): a
manager that counts worker starts, the ``setup`` fixture (the four seed tools in one
registry, once per language) and ``run``, which executes a call expected to be refused
and returns the refusal's JSON.

Import ``setup_fixture`` into a test module to use the ``setup`` fixture.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentkit import Settings
from agentkit.subagent.manager import SubAgentManager
from agentkit.subagent.seed_tools import make_main_tools
from agentkit.subagent.worker.hooks import make_finish_tool
from agentkit.tools.base import ToolContext
from agentkit.tools.registry import ToolRegistry


class CountingManager(SubAgentManager):
    """A real manager that counts worker starts (its launcher's only caller)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.starts = 0
        real = self.launcher.start

        def start(spec: Any) -> Any:
            self.starts += 1
            return real(spec)

        self.launcher.start = start  # type: ignore[method-assign]


@dataclass
class Setup:
    """The four seed tools in one registry, over a real manager."""

    registry: ToolRegistry
    ctx: ToolContext
    manager: CountingManager
    finished: list[tuple[bool, str]]


@pytest.fixture(params=["zh", "en"], name="setup")
def setup_fixture(request: pytest.FixtureRequest, workspace: Path) -> Setup:
    settings = Settings(language=request.param)
    manager = CountingManager(workspace=workspace, settings=settings)
    finished: list[tuple[bool, str]] = []

    def on_finish(success: bool, summary: str) -> None:
        finished.append((success, summary))

    registry = ToolRegistry(
        [*make_main_tools(lambda: manager), make_finish_tool(on_finish, request.param)]
    )
    ctx = ToolContext(workspace=workspace, settings=settings)
    return Setup(registry, ctx, manager, finished)


def run(setup: Setup, tool: str, text: str) -> dict[str, Any]:
    result = setup.registry.execute(tool, json.loads(text), setup.ctx)  # as the engine parses it
    assert not result.ok
    assert not result.output.startswith("Error:"), result.output
    return json.loads(result.output)
