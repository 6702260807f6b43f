"""``agentkit acp``: agentkit in an editor, over the Agent Client Protocol (needs the ``acp`` extra).

Editors (Zed, JetBrains IDEs, Neovim plugins...) start an ACP agent as a subprocess
and speak JSON-RPC 2.0 over its stdin and stdout. This package is that agent: a
front end over agentkit's session API and events, like ``agentkit chat`` and
``agentkit serve``; it owns no agent logic (docs/architecture.md §10). Built on the
official Python library (``agent-client-protocol``, imported as ``acp``), protocol
version 1. The mapping of events to updates is in docs/acp.md.

The map:

* ``stdio``: the protocol channel (fds 0 and 1 kept for it alone; malformed input
  answered with JSON-RPC errors; lines out always valid UTF-8);
* ``server``: :class:`~agentkit.acp.server.AcpServer`, the event loop until the
  editor leaves, then every conversation closed;
* ``agent``: :class:`~agentkit.acp.agent.AcpAgent`, the protocol's methods over
  :class:`agentkit.chat.Workspace`;
* ``session``: one ACP session = one conversation (events pumped to the editor,
  prompts, cancel);
* ``updates``: agentkit events → ACP updates; ``toolcalls``: a tool call's title,
  kind, locations, diff and output; ``history``: a saved conversation replayed;
* ``content``: the editor's prompt blocks → the user message;
* ``options``: the editor's MCP servers and the sandbox modes;
* ``children``: sub-agents as child sessions (for editors that opt in);
* ``permissions``: an approval request as ``session/request_permission`` and the
  editor's answer back; ``approvals``: the editor as the conversation's answerer
  (each ``ask`` asked once, in order, its choice given to ``Session.approve``).

Only ``require_acp_extra`` is defined here; the modules import ``acp`` (0.85 s), so
``agentkit --help`` never loads them.
"""

from __future__ import annotations

__all__ = ["require_acp_extra"]


def require_acp_extra() -> None:
    """Raise ConfigurationError when the ``acp`` extra is not installed (the message
    says how to install it)."""
    from agentkit.errors import ConfigurationError
    from agentkit.extras import install_hint

    try:
        import acp  # noqa: F401
    except ImportError:
        raise ConfigurationError(
            f"agentkit acp needs the Agent Client Protocol library: {install_hint('acp')}"
        ) from None
