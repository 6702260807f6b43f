"""The MCP client against real servers: the test server (stdio and streamable HTTP),
the reference servers mcp-server-time and mcp-server-git, and the conformance server
@modelcontextprotocol/server-everything (npm; .ci/run installs it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from agentkit.mcp.config import load_servers, parse_servers
from agentkit.mcp.tools import portable_schema, tool_name
from agentkit.settings import Settings


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


def settings(**values: Any) -> Settings:
    base: dict[str, Any] = {"model": "m", "api_key": "k", "language": "en"}
    return Settings(**{**base, **values})


# ------------------------------------------------------------------ configuration
def test_config_sources_precedence_variables_and_bad_entries(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = tmp_path / "xdg" / "agentkit"
    user.mkdir(parents=True)
    (user / "mcp.json").write_text(json.dumps({"mcpServers": {
        "a": {"command": "user-a"}, "b": {"command": "user-b"}}}))  # fmt: skip
    (workspace / ".agentkit").mkdir()
    (workspace / ".agentkit" / "mcp.json").write_text(json.dumps({"mcpServers": {
        "b": {"command": "ws-b", "env": {"TOKEN": "${MY_MCP_SECRET}"}},
        "c": {"url": "ftp://nope"}, "d": {"command": "x", "disabled": True}}}))  # fmt: skip
    monkeypatch.setenv("MY_MCP_SECRET", "s3cret")
    servers, problems = load_servers(
        workspace, settings(mcp_servers={"e": {"url": "http://127.0.0.1:1/mcp", "agents": "main"}})
    )
    assert sorted(servers) == ["a", "b", "e"]
    assert servers["a"].command == "user-a" and servers["b"].command == "ws-b"
    assert servers["b"].env == {"TOKEN": "s3cret"}
    assert servers["e"].transport == "http" and servers["e"].agents == "main"
    assert len(problems) == 1 and "'c'" in problems[0] and "url" in problems[0]
    off, _ = load_servers(workspace, settings(mcp_config_files=False))
    assert off == {}
    _, bad = parse_servers({"x": {"type": "sse", "url": "http://h"}}, "here")
    assert "not supported" in bad[0]
    assert parse_servers("nonsense", "f")[1] == ['f: expected {"mcpServers": {...}}']


def test_names_and_schemas_made_portable() -> None:
    assert tool_name("git", "git.status") == "mcp__git__git_status"
    assert len(tool_name("s", "x" * 100)) == 64
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Args",
        "type": "object",
        "properties": {"where": {"$ref": "#/$defs/Place"}},
        "required": ["where", "ghost"],
        "$defs": {"Place": {"type": "object", "properties": {"city": {"type": "string"}}}},
    }
    out = portable_schema(schema)
    assert out == {
        "type": "object",
        "properties": {"where": {"type": "object", "properties": {"city": {"type": "string"}}}},
        "required": ["where"],
    }
    assert portable_schema(None) == {"type": "object", "properties": {}}
