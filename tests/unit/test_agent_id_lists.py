"""get_sub_agent_status and wait_for_sub_agents take each id once and at most as many
ids as a conversation can have (issue 31, item 11): ``[1]*1000`` was 1,000 rows
(476 KB). In-process: the tools' argument rules and wait_for over a small manager."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentkit.settings import Settings
from agentkit.subagent.control_tools import make_control_tools
from agentkit.subagent.inputs import AGENT_ID_MAX
from agentkit.subagent.seed_tools import make_main_tools
from agentkit.subagent.state import STATUS_KEYS
from agentkit.subagent.table import SubAgentTable
from agentkit.subagent.waits import wait_for
from agentkit.tools.base import ToolContext
from agentkit.tools.registry import ToolRegistry


def _row(agent_id: int) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(STATUS_KEYS, 0)
    row.update(agent_id=agent_id, summary=f"agent {agent_id}", status="completed")
    row.update(last_action="done", deliverables_dir=f"out/{agent_id}")
    return row


@dataclass
class EarlierRun:
    """A manager whose sub-agents all ended in an earlier run of the conversation
    (what wait_for and the tools read of a SubAgentManager)."""

    settings: Settings
    language: str = "en"
    table: SubAgentTable = field(default_factory=SubAgentTable)
    asked: list[list[int]] = field(default_factory=list)

    def status(self, agent_ids: list[int]) -> dict[str, Any]:
        self.asked.append(list(agent_ids))
        return self.table.status(agent_ids, self.settings)


@pytest.fixture
def manager() -> EarlierRun:
    settings = Settings(model="m", api_key="k", subagent_control=True, language="en")
    return EarlierRun(settings, table=SubAgentTable({1: _row(1), 2: _row(2), 3: _row(3)}))


def _registry(manager: EarlierRun) -> tuple[ToolRegistry, ToolContext]:
    tools = [*make_control_tools(lambda: manager), *make_main_tools(lambda: manager)]  # type: ignore[arg-type,return-value]
    wanted = {"wait_for_sub_agents", "get_sub_agent_status"}
    registry = ToolRegistry([t for t in tools if t.name in wanted])
    return registry, ToolContext(workspace=Path.cwd(), settings=manager.settings)


@pytest.mark.parametrize("tool", ["wait_for_sub_agents", "get_sub_agent_status"])
def test_an_id_named_many_times_gives_one_row_in_first_seen_order(
    manager: EarlierRun, tool: str
) -> None:
    registry, ctx = _registry(manager)
    result = registry.execute(tool, {"agent_ids": [3, 1] * 500 + [2]}, ctx)
    data = json.loads(result.output)
    assert data["success"] is True
    assert [row["agent_id"] for row in data["agents"]] == [3, 1, 2]
    assert len(result.output) < 2_000
    if tool == "wait_for_sub_agents":
        assert data["timed_out"] is False


@pytest.mark.parametrize("tool", ["wait_for_sub_agents", "get_sub_agent_status"])
def test_more_different_ids_than_a_conversation_can_have_is_refused(
    manager: EarlierRun, tool: str
) -> None:
    registry, ctx = _registry(manager)
    ids = list(range(1, AGENT_ID_MAX + 2))
    data = json.loads(registry.execute(tool, {"agent_ids": ids}, ctx).output)
    assert data["success"] is False
    assert f"{AGENT_ID_MAX + 1} different sub-agent ids" in data["error"]
    assert f"({AGENT_ID_MAX})" in data["error"]
    assert manager.asked == []  # refused before any status was read
    # the limit itself is accepted
    data = json.loads(registry.execute(tool, {"agent_ids": ids[:-1]}, ctx).output)
    assert data["success"] is True and len(data["agents"]) == AGENT_ID_MAX


def test_wait_for_called_directly_gives_one_row_per_agent(manager: EarlierRun) -> None:
    result = wait_for(manager, [2] * 1000, "all", 1)  # type: ignore[arg-type]
    assert [row["agent_id"] for row in result["agents"]] == [2]
