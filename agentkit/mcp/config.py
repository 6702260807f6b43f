"""MCP server configuration: the widespread ``mcpServers`` JSON shape, from files and Settings.

A server is either a local program (stdio)::

    {"mcpServers": {"time": {"command": "mcp-server-time", "args": [], "env": {"TZ": "UTC"}}}}

or a remote one over streamable HTTP::

    {"mcpServers": {"docs": {"url": "http://127.0.0.1:8000/mcp", "headers": {"X-Team": "a"}}}}

Sources, later ones winning by server name: ``$XDG_CONFIG_HOME/agentkit/mcp.json``
(default ``~/.config/agentkit/mcp.json``), ``<workspace>/.agentkit/mcp.json`` (both unless
``Settings.mcp_config_files`` is off), then ``Settings.mcp_servers`` (which the Python
API fills, and which every sub-agent worker receives). ``${NAME}`` in ``env`` and
``headers`` values is replaced by the variable of the agent's environment, so a file
need not hold a secret. Extra keys: ``agents`` (``main``, ``subagents``, ``both``: which
agents get the server's tools; default both), ``disabled`` (true: ignored),
``type`` (``stdio``, ``http``/``streamable-http``; guessed from command/url).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ValidationError

from agentkit.configfile import StrictModel, field_error
from agentkit.conversation import state_path
from agentkit.errors import ConfigFileError
from agentkit.settings import Settings

__all__ = ["MCPServer", "config_files", "load_servers", "parse_servers"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class MCPServer:
    """One configured MCP server.

    Attributes:
        name: the key in ``mcpServers`` (letters, digits, ``_``, ``-``; it prefixes the
            tool names ``mcp__<name>__<tool>``).
        command, args, env, cwd: a stdio server's program, arguments, the variables
            given to it explicitly (kept although they may look secret), its folder
            (default: the workspace).
        url, headers: a streamable HTTP server's endpoint and request headers.
        agents: which agents get its tools.
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    agents: Literal["main", "subagents", "both"] = "both"

    @property
    def transport(self) -> Literal["stdio", "http"]:
        """``stdio`` (a command) or ``http`` (a URL)."""
        return "stdio" if self.command else "http"

    def to_dict(self) -> dict[str, Any]:
        """The ``mcpServers`` entry (JSON-able) for this server."""
        data = asdict(self)
        data.pop("name")
        data["args"] = list(self.args)
        return {k: v for k, v in data.items() if v not in (None, {}, [])}


def _text(value: Any) -> str:
    """One scalar of ``args``, ``env`` or ``headers`` as text (a number or a boolean is
    written as Python does, as before); NaN, Infinity, lists and objects are refused."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("must be text or a finite number")  # else the text "nan"
    if isinstance(value, (dict, list)) or value is None:
        raise ValueError("must be text")
    return str(value)


Text = Annotated[str, BeforeValidator(_text)]


class _Entry(StrictModel):
    """One ``mcpServers`` entry as written (module docstring); unknown keys refused."""

    type: Text | None = None
    command: Any = None
    args: list[Text] | None = None
    env: dict[str, Text] | None = None
    cwd: Text | None = None
    url: Any = None
    headers: dict[str, Text] | None = None
    agents: Literal["main", "subagents", "both"] = "both"
    disabled: Any = None


def _expand(text: str) -> str:
    return _VARIABLE.sub(lambda m: os.environ.get(m.group(1), ""), text)


def parse_server(name: str, entry: Any) -> MCPServer:
    """Return the MCPServer for one ``mcpServers`` entry.

    Raises:
        ConfigFileError: (a ValueError; its path empty: :func:`parse_servers` names the
            file) the field ``mcpServers.<name>.<key>`` and what is wrong: an unknown
            key, an unknown transport, a missing command or url, a bad type, NaN.
    """
    if not _NAME.match(name):
        raise ConfigFileError(
            "", f"mcpServers.{name}", "use 1-40 letters, digits, _ or - in a server name"
        )
    where = f"mcpServers.{name}"
    if not isinstance(entry, dict):
        raise ConfigFileError("", where, f"server {name!r}: its entry must be an object")
    try:
        spec = _Entry.model_validate(entry)
    except ValidationError as exc:
        error = field_error(exc, "", model=_Entry)
        raise ConfigFileError(
            "", f"{where}.{error.field}", f"server {name!r}: {error.message}"
        ) from None
    kind = spec.type or ("stdio" if spec.command else "http")
    if kind not in ("stdio", "http", "streamable-http", "streamableHttp"):
        raise ConfigFileError(
            "",
            f"{where}.type",
            f"server {name!r}: transport {kind!r} is not supported (stdio or http)",
        )
    if kind == "stdio":
        if not isinstance(spec.command, str) or not spec.command.strip():
            raise ConfigFileError(
                "", f"{where}.command", f"server {name!r}: a stdio server needs a command"
            )
        return MCPServer(
            name,
            command=spec.command,
            args=tuple(spec.args or ()),
            env={k: _expand(v) for k, v in (spec.env or {}).items()},
            cwd=spec.cwd or None,
            agents=spec.agents,
        )
    url = spec.url
    if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
        raise ConfigFileError(
            "",
            f"{where}.url",
            f"server {name!r}: an http server needs a url starting with http(s)://",
        )
    headers = {k: _expand(v) for k, v in (spec.headers or {}).items()}
    return MCPServer(name, url=url, headers=headers, agents=spec.agents)


def parse_servers(data: Any, origin: str) -> tuple[dict[str, MCPServer], list[str]]:
    """Parse ``{"mcpServers": {...}}`` (or the inner mapping alone).

    Returns ``(servers by name, problems)``: each problem is one line naming
    ``origin`` and the server; a bad entry is skipped, the others kept.
    """
    if isinstance(data, dict) and isinstance(data.get("mcpServers"), dict):
        data = data["mcpServers"]
    if not isinstance(data, dict):
        return {}, [f'{origin}: expected {{"mcpServers": {{...}}}}']
    servers: dict[str, MCPServer] = {}
    problems: list[str] = []
    for name, entry in data.items():
        if isinstance(entry, dict) and entry.get("disabled"):
            continue
        try:
            servers[name] = parse_server(str(name), entry)
        except ConfigFileError as exc:
            problems.append(str(exc.at(origin)))
    return servers, problems


def config_files(workspace: Path, *, user: bool = True) -> list[Path]:
    """The mcp.json files read, lowest priority first: the user's (unless ``user`` is
    off: ``Settings.user_files``), then the workspace's."""
    if not user:
        return [state_path(workspace, "mcp.json")]
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return [Path(base) / "agentkit" / "mcp.json", state_path(workspace, "mcp.json")]


def load_servers(workspace: Path, settings: Settings) -> tuple[dict[str, MCPServer], list[str]]:
    """Return ``(servers by name, problems)`` from every source (module docstring).

    A missing file is no problem; an unreadable or invalid one is (one line each), and
    the agent goes on without it.
    """
    servers: dict[str, MCPServer] = {}
    problems: list[str] = []
    sources: list[tuple[Any, str]] = []
    if settings.mcp_config_files:
        for path in config_files(workspace, user=settings.user_files):
            if not path.is_file():
                continue
            try:
                sources.append((json.loads(path.read_text(encoding="utf-8")), str(path)))
            except (OSError, ValueError) as exc:
                problems.append(f"{path}: cannot be read as JSON: {exc}")
    if settings.mcp_servers:
        sources.append((settings.mcp_servers, "Settings.mcp_servers"))
    for data, origin in sources:
        found, bad = parse_servers(data, origin)
        servers.update(found)
        problems.extend(bad)
    return servers, problems
