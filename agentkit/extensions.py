"""The main agent's share of the user's extensions: imported tools, MCP tools, profiles.

One job: what :func:`agentkit.chat.session.build_registry` adds to the built-in tools
when it knows the workspace and Settings. Sub-agents get theirs in
agentkit.subagent.worker_tools.
"""

from __future__ import annotations

import logging
from pathlib import Path

from agentkit.settings import Settings
from agentkit.tools.base import Tool, ToolRegistry

log = logging.getLogger("agentkit")

__all__ = ["add_main_extensions"]


def add_main_extensions(registry: ToolRegistry, workspace: Path, settings: Settings) -> None:
    """Register the tools of ``Settings.tools`` offered to the main agent and the tools
    of the MCP servers configured for it (their sessions close with ``registry.close()``).

    A server that cannot start is logged in one line and offers no tools; a missing
    ``mcp`` package is logged once when servers are configured."""
    from agentkit.tools.imported import tools_for

    for tool in tools_for(settings.tools, "main"):
        registry.register(tool)
    for tool in _mcp_tools(registry, workspace, settings):
        registry.register(tool)


def _mcp_tools(registry: ToolRegistry, workspace: Path, settings: Settings) -> list[Tool]:
    from agentkit.mcp.config import load_servers

    servers, problems = load_servers(workspace, settings)
    for problem in problems:
        log.warning("agentkit: MCP configuration: %s", problem)
    servers = {n: s for n, s in servers.items() if s.agents in ("main", "both")}
    if not servers:
        return []
    from agentkit.mcp import available

    if not available():
        log.warning("agentkit: MCP servers are configured but the mcp package is missing "
                    "(pip install 'agentkit[mcp]')")  # fmt: skip
        return []
    from agentkit.mcp.tools import MCPTools

    mcp = MCPTools(workspace, settings, "main", servers=servers)
    registry.on_close(mcp.close)
    return mcp.tools()
