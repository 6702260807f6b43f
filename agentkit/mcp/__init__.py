"""MCP (Model Context Protocol) client: servers' tools for the main agent and sub-agents.

Needs the ``mcp`` extra (agentkit.extras.install_hint: ``pip install 'agentkit-subagents[mcp]'``). :mod:`agentkit.mcp.config`
reads the ``mcpServers`` configuration, :mod:`agentkit.mcp.client` owns the sessions on
one background event loop per process, :mod:`agentkit.mcp.tools` turns the servers'
tools into agentkit tools (``mcp__<server>__<tool>``).
"""

from __future__ import annotations

from agentkit.mcp.config import MCPServer, load_servers, parse_servers

__all__ = ["MCPServer", "load_servers", "parse_servers", "available"]


def available() -> bool:
    """True when the ``mcp`` package is installed."""
    import importlib.util

    return importlib.util.find_spec("mcp") is not None
