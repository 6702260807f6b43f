"""What an editor sets per ACP session: its MCP servers and the sandbox mode.

One job: turn the editor's choices into agentkit Settings.

* :func:`session_settings`: ``session/new`` and ``session/load`` carry the editor's
  ``mcpServers`` (stdio: ``{name, command, args, env: [{name, value}]}``; HTTP:
  ``{type: "http", name, url, headers: [{name, value}]}``). They join the agent's own
  servers (``Settings.mcp_servers`` and the mcp.json files, agentkit.mcp.config) for
  that session; on a name clash the editor's entry wins. Names are made to fit
  agentkit's rule (letters, digits, ``_``, ``-``; at most 40). SSE servers (and MCP
  over ACP) are refused: agentkit speaks stdio and streamable HTTP, and says so in
  ``initialize`` (``mcpCapabilities.sse`` false).
* :data:`MODES`, :func:`mode_state`, :func:`with_mode`: the session modes are the
  command sandbox's (``Settings.command_sandbox_mode``, agentkit.process.sandbox):
  ``read-only``, ``workspace-write`` (the default) and ``full``. They decide what
  ``run_command``'s commands may write; agentkit's own file tools always stay inside
  the workspace. A change applies from the next round on (the round that runs
  keeps the sandbox it started with) and to sub-agents created after it. Where no
  sandbox can run (bubblewrap missing, ``command_sandbox = none``) the descriptions
  say what each mode does then, and how to install bubblewrap
  (:func:`available_modes`).
"""

from __future__ import annotations

import re
from typing import Any

from acp.schema import SessionMode, SessionModeState

from agentkit.mcp.config import parse_servers
from agentkit.settings import Settings

__all__ = ["MODES", "available_modes", "mode_state", "session_settings", "with_mode"]

MODES = (
    SessionMode(
        id="read-only",
        name="Read only",
        description="Commands run in the sandbox and cannot change files; agentkit's own "
        "file tools still edit the workspace.",
    ),
    SessionMode(
        id="workspace-write",
        name="Workspace",
        description="Commands run in the sandbox and may write the workspace only, "
        "without network (the default).",
    ),
    SessionMode(
        id="full",
        name="Full access",
        description="Commands run unconfined, with your rights and network: at your risk.",
    ),
)
"""The session modes: the command sandbox's modes (agentkit.process.sandbox.MODES)."""

_BAD_NAME = re.compile(r"[^A-Za-z0-9_-]+")


def mode_state(settings: Settings) -> SessionModeState:
    """The modes offered and the current one (``settings.command_sandbox_mode``); where
    no sandbox can run (:func:`available_modes`) their descriptions say so."""
    return SessionModeState(
        current_mode_id=settings.command_sandbox_mode, available_modes=available_modes(settings)
    )


def available_modes(settings: Settings) -> list[SessionMode]:
    """:data:`MODES`, described as they behave here: without a working bubblewrap
    (or with ``command_sandbox = none``) ``read-only`` refuses commands and
    ``workspace-write`` runs them unconfined (``auto``, ``none``) or refuses them
    (``bwrap``), with how to install bubblewrap. Probes bubblewrap (cached)."""
    from agentkit.process.sandbox import bwrap_works
    from agentkit.process.sandbox_notes import INSTALL_SHORT

    chosen = settings.command_sandbox
    if chosen != "none" and bwrap_works(settings.command_bwrap_path) is not None:
        return list(MODES)
    if chosen == "none":
        why, fix = "command_sandbox = none", "set command_sandbox = auto"
    else:
        why = f"bubblewrap ({settings.command_bwrap_path}) is missing or cannot run here"
        fix = INSTALL_SHORT
    refused = f"No sandbox: {why}, so commands are refused in this mode; {fix}."
    unconfined = (
        f"No sandbox: {why}, so commands run unconfined, with your rights and network, "
        f"not limited to the workspace; {fix}."
    )
    described = {
        "read-only": refused + " agentkit's own file tools still edit the workspace.",
        "workspace-write": refused if chosen == "bwrap" else unconfined,
    }
    return [
        SessionMode(id=m.id, name=m.name, description=described.get(m.id, m.description))
        for m in MODES
    ]


def with_mode(settings: Settings, mode_id: str) -> Settings:
    """``settings`` with the sandbox mode ``mode_id``.

    Raises:
        ValueError: ``mode_id`` is not one of :data:`MODES` (the message lists them).
    """
    ids = [m.id for m in MODES]
    if mode_id not in ids:
        raise ValueError(f"unknown mode {mode_id!r}: the modes are {', '.join(ids)}")
    return settings.model_copy(update={"command_sandbox_mode": mode_id})


def _name(raw: str, taken: set[str]) -> str:
    base = _BAD_NAME.sub("_", raw.strip()).strip("_")[:40] or "server"
    name, n = base, 2
    while name in taken:
        suffix = f"_{n}"
        name, n = base[: 40 - len(suffix)] + suffix, n + 1
    taken.add(name)
    return name


def _pairs(items: Any) -> dict[str, str]:
    return {str(getattr(i, "name", "")): str(getattr(i, "value", "")) for i in items or []}


def _entry(server: Any) -> dict[str, Any]:
    kind = getattr(server, "type", None)
    if kind in (None, "stdio"):
        return {
            "command": server.command,
            "args": list(server.args or []),
            "env": _pairs(server.env),
        }
    if kind == "http":
        return {"type": "http", "url": server.url, "headers": _pairs(server.headers)}
    raise ValueError(
        f"MCP server {getattr(server, 'name', '?')!r}: the {kind} transport is not supported "
        "(agentkit speaks stdio and streamable HTTP)"
    )


def session_settings(base: Settings, mcp_servers: list[Any] | None) -> Settings:
    """Settings for one session: ``base`` with the editor's ``mcp_servers`` (the
    library's McpServerStdio / HttpMcpServer models) joined to ``base.mcp_servers``.

    Raises:
        ValueError: an SSE (or ACP) server, or an entry agentkit cannot use (the
            message names it).
    """
    if not mcp_servers:
        return base
    taken: set[str] = set()
    given: dict[str, Any] = {}
    for server in mcp_servers:
        given[_name(str(getattr(server, "name", "") or "server"), taken)] = _entry(server)
    _, problems = parse_servers(given, "the editor's mcpServers")
    if problems:
        raise ValueError("; ".join(problems))
    return base.model_copy(update={"mcp_servers": {**base.mcp_servers, **given}})
