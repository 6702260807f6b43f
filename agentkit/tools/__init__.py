"""The agents' tools: files, search, shell and web, plus the registry they live in.

``base_tools()`` returns the tools every agent gets (docs/architecture.md §3). Sub-agents add
finish_task; the main agent adds the three sub-agent tools (agentkit.subagent).

Map: ``base.py`` (Tool, ToolContext, ToolResult), ``registry.py`` (ToolRegistry:
validation, execution), ``gate.py`` (approval rules and hooks around one call), ``paths.py`` (the workspace
guard), ``lanes.py`` (which calls of one message run side by side), ``repeats.py``
and ``_ignored.py`` (notes on repeated failures and ignored arguments),
``imported.py`` (user tools by import reference), ``os_errors.py``; one package per
tool family: ``files/``, ``search/``, ``shell/``, ``web/``.
"""

from __future__ import annotations

from agentkit.tools.base import Tool, ToolContext, ToolResult
from agentkit.tools.registry import ToolRegistry

__all__ = ["Tool", "ToolContext", "ToolRegistry", "ToolResult", "base_tools"]


def base_tools() -> list[Tool]:
    """Return read_file, write_file, edit_file, search_workspace, run_command,
    web_search and extract_webpage, in that order (new Tool objects each call)."""
    from agentkit.tools.files import FILE_TOOLS
    from agentkit.tools.search import SEARCH_TOOLS
    from agentkit.tools.shell import SHELL_TOOLS
    from agentkit.tools.web import WEB_TOOLS

    return [*FILE_TOOLS, *SEARCH_TOOLS, *SHELL_TOOLS, *WEB_TOOLS]
