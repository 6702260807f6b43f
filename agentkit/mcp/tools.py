"""MCP servers' tools as agentkit tools: names, schemas and results.

Names are ``mcp__<server>__<tool>`` (characters outside ``[A-Za-z0-9_-]`` become ``_``,
cut to 64, the OpenAI limit). Schemas pass through as the server gives them, made
acceptable to strict providers (:func:`portable_schema`: an object at the top with
``properties``, no ``$schema``/``$id``, local ``$ref`` inlined). Results become text:
text blocks as they are, structured content as JSON when there is no text, images,
audio and binary resources saved under ``<workspace>/.agentkit/mcp-files/`` and
mentioned by path in a short note, resource links as their URI; capped at
``Settings.mcp_max_output_chars``. An error result, a server that cannot start, a
crash or a timeout give an ``Error:`` tool result; the loop goes on, and the user
gets one log line per server that cannot start.

Sub-agent workers open their sessions lazily: the parent lists each server's tools
once per conversation (:func:`listing_for_subagents`, sent in the worker spec), and
a worker builds its tools from that listing, starting a server only at the first
call of one of its tools. A sub-agent that never calls an MCP tool starts no server.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from agentkit.conversation import hide_runtime_folder, state_path
from agentkit.mcp.client import Connection, MCPFailure
from agentkit.mcp.config import MCPServer, load_servers
from agentkit.process.redact import scrub_error
from agentkit.settings import Settings
from agentkit.tools.base import Tool, ToolContext, ToolResult

log = logging.getLogger("agentkit")

__all__ = [
    "MCPTools",
    "Listing",
    "listing_for_subagents",
    "portable_schema",
    "render_result",
    "tool_name",
]

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

Listing = dict[str, list[dict[str, Any]] | None]
"""Server name → its tools as ``{"name", "description", "input_schema"}`` dicts (JSON,
to travel in a WorkerSpec), or None for a server that could not start."""


class MCPArguments(BaseModel):
    """Any JSON object: the server validates its own arguments."""

    model_config = ConfigDict(extra="allow")


def tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, made of ``[A-Za-z0-9_-]``, at most 64 characters."""
    return _UNSAFE.sub("_", f"mcp__{server}__{tool}")[:64]


def _inline(node: Any, defs: dict[str, Any], depth: int = 0) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")) and depth < 8:
            target = defs.get(ref.rsplit("/", 1)[-1])
            if isinstance(target, dict):
                merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
                return _inline(merged, defs, depth + 1)
        return {
            k: _inline(v, defs, depth)
            for k, v in node.items()
            if k not in ("$defs", "definitions", "$schema", "$id")
        }
    if isinstance(node, list):
        return [_inline(v, defs, depth) for v in node]
    return node


def portable_schema(schema: Any) -> dict[str, Any]:
    """Return a copy of an MCP ``inputSchema`` that strict providers accept: type
    ``object`` with a ``properties`` object, ``required`` naming only those, local
    ``$ref`` inlined (8 levels), no ``$schema``/``$id``/top-level ``title``."""
    if not isinstance(schema, dict):
        schema = {}
    defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    result = _inline(schema, defs)
    result.pop("title", None)
    result["type"] = "object"
    if not isinstance(result.get("properties"), dict):
        result["properties"] = {}
    required = result.get("required")
    if isinstance(required, list):
        result["required"] = [r for r in required if r in result["properties"]]
    else:
        result.pop("required", None)
    return result


def _save(workspace: Path, server: str, data: str, mime: str) -> str:
    """Save base64 ``data`` under .agentkit/mcp-files/; returns the workspace-relative path."""
    extension = (mime.split("/")[-1] or "bin").split(";")[0][:8] or "bin"
    folder = state_path(workspace, "mcp-files", server)
    path = folder / f"{uuid.uuid4().hex[:12]}.{_UNSAFE.sub('', extension) or 'bin'}"
    try:
        raw = base64.b64decode(data, validate=False)
        from agentkit.confined import write_bytes_atomic

        hide_runtime_folder(workspace, folder)  # not in the user's git status
        write_bytes_atomic(workspace, path, raw)  # through no link below the workspace
    except (OSError, binascii.Error, ValueError) as exc:
        return f"(not saved: {exc})"
    return f"{path.relative_to(workspace)} ({mime}, {len(raw)} bytes)"


def _block(block: Any, workspace: Path, server: str) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(getattr(block, "text", ""))
    mime = str(getattr(block, "mime_type", None) or getattr(block, "mimeType", None) or "")
    if kind in ("image", "audio"):
        where = _save(workspace, server, str(getattr(block, "data", "")), mime)
        return f"[{kind} saved to {where}; not shown here]"
    if kind == "resource_link":
        return f"[resource link: {getattr(block, 'uri', '')} ({getattr(block, 'name', '')})]"
    if kind == "resource":
        resource = getattr(block, "resource", None)
        uri = getattr(resource, "uri", "")
        text = getattr(resource, "text", None)
        if text is not None:
            return f"[resource {uri}]\n{text}"
        mime = str(getattr(resource, "mime_type", None) or "application/octet-stream")
        where = _save(workspace, server, str(getattr(resource, "blob", "")), mime)
        return f"[resource {uri} saved to {where}; not shown here]"
    return f"[{kind or 'unknown'} content not shown]"


def render_result(result: Any, workspace: Path, server: str, max_chars: int) -> ToolResult:
    """Turn a ``CallToolResult`` into a ToolResult (module docstring); an error result
    gives ``Error: mcp_tool_error: <its text>``."""
    parts = [_block(b, workspace, server) for b in getattr(result, "content", None) or []]
    structured = getattr(result, "structured_content", None)
    if structured is not None and not any(getattr(b, "type", "") == "text" for b in result.content):
        parts.append(json.dumps(structured, ensure_ascii=False, indent=2, default=str))
    text = "\n".join(p for p in parts if p)
    failed = bool(getattr(result, "is_error", False) or getattr(result, "isError", False))
    if failed:  # an error text is scrubbed of known secrets, as every error is (redact)
        text = scrub_error(text)
    truncated = len(text) > max_chars
    if truncated:
        note = (
            f"\n[... cut: the result has {len(text)} characters, "
            f"{max_chars} are shown (Settings.mcp_max_output_chars)]"
        )
        text = text[: max_chars - len(note)] + note
    if failed:
        return ToolResult.error("mcp_tool_error", text or "the MCP tool reported an error")
    return ToolResult(output=text or "(the tool returned no content)", truncated=truncated)


class MCPTools:
    """The MCP connections of one agent process and the tools they offer.

    Args:
        workspace: the agent's workspace (stdio servers' default folder, saved files).
        settings: the agent's Settings (servers, timeouts, caps).
        agent: ``main`` or ``subagents``: servers configured for the other only are skipped.
        mark: the agent's process mark (sub-agent workers).
        servers: use these servers instead of :func:`agentkit.mcp.config.load_servers`.
        listed: tools already listed (:data:`Listing`): a server found there is not
            started until one of its tools is called; one listed as None offers none.
    """

    def __init__(
        self,
        workspace: Path,
        settings: Settings,
        agent: Literal["main", "subagents"],
        mark: str | None = None,
        servers: dict[str, MCPServer] | None = None,
        listed: Listing | None = None,
    ) -> None:
        self.workspace = workspace
        self.listed = dict(listed or {})
        self.settings = settings
        if servers is None:
            servers, problems = load_servers(workspace, settings)
            for problem in problems:
                log.warning("agentkit: MCP configuration: %s", problem)
        chosen = [s for s in servers.values() if s.agents in (agent, "both")]
        self.connections = {s.name: Connection(s, workspace, settings, mark) for s in chosen}

    def tools(self) -> list[Tool]:
        """Start every server (in parallel) and return their tools; a server that
        cannot start is logged in one line and offers none."""
        listing = self.listing()
        return [
            self._tool(self.connections[name], entry)
            for name, entries in listing.items()
            for entry in entries or []
        ]

    def listing(self) -> Listing:
        """Each server's tools (:data:`Listing`): taken from ``listed`` when given
        there, else listed by starting the server (in parallel); a server that cannot
        start is logged in one line and listed as None."""
        unknown = [c for name, c in self.connections.items() if name not in self.listed]
        if unknown:
            with ThreadPoolExecutor(max_workers=min(8, len(unknown))) as pool:
                found = list(pool.map(_list, unknown))
            self.listed.update({c.server.name: f for c, f in zip(unknown, found, strict=True)})
        return {name: self.listed[name] for name in self.connections}

    def _tool(self, connection: Connection, entry: dict[str, Any]) -> Tool:
        server = connection.server.name
        remote = str(entry["name"])
        schema = entry.get("input_schema")
        description = str(entry.get("description") or "").strip()

        def call(params: MCPArguments, ctx: ToolContext) -> ToolResult:
            arguments = params.model_dump()
            try:
                result = connection.call(remote, arguments)
            except MCPFailure as exc:
                log.warning("agentkit: %s", exc)
                return ToolResult.error("mcp_error", str(exc))
            return render_result(result, self.workspace, server, self.settings.mcp_max_output_chars)

        return Tool(
            name=tool_name(server, remote),
            params=MCPArguments,
            func=call,
            description=f"{description}\n(MCP server {server}, tool {remote})".strip(),
            agents="both",
            json_schema=portable_schema(schema),
        )

    def close(self) -> None:
        """Close every session (stdio servers end); idempotent."""
        for connection in self.connections.values():
            connection.close()


def _list(connection: Connection) -> list[dict[str, Any]] | None:
    try:
        found = connection.list_tools()
    except MCPFailure as exc:
        log.warning("agentkit: %s; its tools are not offered", exc)
        return None
    return [
        {
            "name": str(t.name),
            "description": str(getattr(t, "description", None) or ""),
            "input_schema": getattr(t, "input_schema", None) or getattr(t, "inputSchema", None),
        }
        for t in found
    ]


def listing_for_subagents(workspace: Path, settings: Settings) -> Listing:
    """List, in this process, the tools of every MCP server offered to sub-agents, and
    close those sessions again (a server for both agents is started once more here:
    the main agent's sessions stay its own). Returns {} when none is configured or
    the ``mcp`` package is missing; never raises for a server that cannot start."""
    from agentkit.mcp import available

    servers, _ = load_servers(workspace, settings)  # problems: logged by the agents
    servers = {n: s for n, s in servers.items() if s.agents in ("subagents", "both")}
    if not servers or not available():
        return {}
    mcp = MCPTools(workspace, settings, "subagents", servers=servers)
    try:
        return mcp.listing()
    finally:
        mcp.close()
