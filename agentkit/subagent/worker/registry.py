"""A sub-agent's tools and profile: what the worker adds to the built-in tools.

One job: build the worker's registry from the built-in tools, the user's tools given
by import reference (``Settings.tools``, those offered to sub-agents), the MCP
servers' tools (servers for sub-agents, listed by the parent; sessions opened at the
first call, owned by this worker process and closed with it; started in the folder
the sub-agent works in, an isolated one's copy) and finish_task,
filtered by the agent profile's allow-list when the sub-agent was created with one
(``WorkerSpec.extra["profile"]``), and load_skill when its parent listed skills for it
(``WorkerSpec.extra["conventions"]``, agentkit.conventions).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentkit.settings import Settings
from agentkit.subagent.contract import WorkerSpec
from agentkit.tools.base import Tool
from agentkit.tools.registry import ToolRegistry

log = logging.getLogger("agentkit")

__all__ = ["WorkerTools", "worker_profile", "worker_tools"]


def worker_profile(spec: WorkerSpec) -> Any:
    """The AgentProfile the sub-agent was created with, or None."""
    data = spec.extra.get("profile")
    if not data:
        return None
    from agentkit.profiles import AgentProfile

    return AgentProfile.from_dict(dict(data), str(data.get("source") or "python"))


@dataclass
class WorkerTools:
    """The worker's registry and what must be closed when it ends (MCP sessions)."""

    registry: ToolRegistry
    closers: list[Any] = field(default_factory=list)

    def close(self) -> None:
        """Close the MCP sessions (their stdio servers end); never raises."""
        for closer in self.closers:
            try:
                closer()
            except Exception as exc:  # closing must not change how the worker ended
                log.info("agentkit: closing MCP sessions failed: %s", exc)


def worker_tools(
    spec: WorkerSpec, settings: Settings, base: list[Tool], finish: Tool, workspace: Path
) -> WorkerTools:
    """Return the worker's tools: ``base``, imported, MCP, ``finish`` (see the module
    docstring); a profile's allow-list keeps only the tools it names. ``workspace``: the
    folder the sub-agent works in (an isolated one's copy), where its MCP stdio servers
    start and their saved files go; their configuration is the real workspace's."""
    from agentkit.tools.imported import tools_for

    tools = [*base, *tools_for(settings.tools, "subagents")]
    closers: list[Any] = []
    if settings.mcp_servers or settings.mcp_config_files:
        mcp = _mcp_tools(spec, settings, workspace)
        if mcp is not None:
            tools.extend(mcp[0])
            closers.append(mcp[1])
    profile = worker_profile(spec)
    if profile is not None:
        tools = [t for t in tools if profile.allows(t.name)]
    from agentkit.conventions.tool import subagent_tools

    # load_skill whenever skills are listed: a profile narrows them with `skills`, not `tools`.
    tools += subagent_tools(spec.extra)
    return WorkerTools(ToolRegistry([*tools, finish]), closers)


def _mcp_tools(
    spec: WorkerSpec, settings: Settings, workspace: Path
) -> tuple[list[Tool], Any] | None:
    from agentkit.mcp.config import load_servers

    servers, problems = load_servers(Path(spec.workspace), settings)
    servers = {n: s for n, s in servers.items() if s.agents in ("subagents", "both")}
    profile = worker_profile(spec)
    if profile is not None and profile.tools is not None:  # start only servers it may use
        servers = {
            n: s
            for n, s in servers.items()
            if any(p.startswith(f"mcp__{n}__") or p in ("*", "mcp__*") for p in profile.tools)
        }
    if not servers:
        return None
    from agentkit.mcp import available

    if not available():
        from agentkit.extras import install_hint

        log.warning("agentkit: MCP servers are configured but the mcp package is missing "
                    "(%s)", install_hint("mcp"))  # fmt: skip
        return None
    from agentkit.mcp.tools import MCPTools

    for problem in problems:
        log.warning("agentkit: MCP configuration: %s", problem)
    # The parent's listing (SubAgentManager): servers start at their first call.
    listed = spec.extra.get("mcp_tools")
    mcp = MCPTools(
        workspace,
        settings,
        "subagents",
        spec.process_mark,
        servers=servers,
        listed=listed if isinstance(listed, dict) else None,
    )
    return mcp.tools(), mcp.close
