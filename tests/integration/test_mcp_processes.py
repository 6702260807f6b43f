"""The MCP client against real servers: the test server (stdio and streamable HTTP),
the reference servers mcp-server-time and mcp-server-git, and the conformance server
@modelcontextprotocol/server-everything (npm; .ci/run installs it)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from subagent_helpers import wait_until

pytest.importorskip("mcp")

from agentkit.mcp.client import Connection, MCPFailure
from agentkit.mcp.config import parse_server
from agentkit.mcp.tools import MCPTools
from agentkit.settings import Settings
from agentkit.tools.base import ToolContext

SERVER = str(Path(__file__).resolve().parents[1].joinpath("mcp_test_server.py"))
EVERYTHING_DIR = os.environ.get(
    "AGENTKIT_TEST_NODE_MODULES", str(Path(__file__).parents[2] / ".ci" / "node" / "node_modules")
)


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


def stdio_entry(token: str, **env: str) -> dict[str, Any]:
    """The test server over stdio; ``token`` marks its command line for ps."""
    return {"command": sys.executable, "args": [SERVER, "stdio", token], "env": env}


def alive_with(token: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if (
                token in (proc.info["cmdline"] or [])
                and proc.info["status"] != psutil.STATUS_ZOMBIE
            ):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def settings(**values: Any) -> Settings:
    base: dict[str, Any] = {"model": "m", "api_key": "k", "language": "en"}
    return Settings(**{**base, **values})


_registries: dict[int, Any] = {}


def run(tools: MCPTools, tool: str, workspace: Path, **arguments: Any) -> Any:
    """Execute one tool call through a registry of ``tools`` (listed once)."""
    from agentkit.tools.registry import ToolRegistry

    if id(tools) not in _registries:
        _registries[id(tools)] = (tools, ToolRegistry(tools.tools()))
    registry = _registries[id(tools)][1]
    return registry.execute(
        tool, arguments, ToolContext(workspace=workspace, settings=tools.settings)
    )


# ------------------------------------------------------------------ the test server
def test_stdio_server_tools_results_errors_and_caps(workspace: Path) -> None:
    token = f"tok-{uuid.uuid4().hex}"
    servers = {"t": parse_server("t", stdio_entry(token))}
    tools = MCPTools(workspace, settings(mcp_max_output_chars=5000), "main", servers=servers)
    try:
        listed = {t.name: t for t in tools.tools()}
        assert "mcp__t__echo" in listed and "mcp__t__add" in listed
        add_schema = listed["mcp__t__add"].schema("en")["function"]
        assert add_schema["parameters"]["required"] == ["a", "b"]
        assert "Add two whole numbers" in add_schema["description"]
        assert run(tools, "mcp__t__echo", workspace, text="hi").output == "echo: hi"
        assert json.loads(run(tools, "mcp__t__add", workspace, a=2, b=3).output) == {"total": 5}
        picture = run(tools, "mcp__t__picture", workspace)
        assert picture.ok and "image saved to .agentkit/mcp-files/t/" in picture.output
        saved = picture.output.split("saved to ")[1].split(" (")[0]
        assert (workspace / saved).read_bytes().startswith(b"\x89PNG")
        broken = run(tools, "mcp__t__broken", workspace)
        assert not broken.ok and broken.output.startswith("Error: mcp_tool_error:")
        huge = run(tools, "mcp__t__huge", workspace, chars=200_000)
        assert huge.ok and huge.truncated and len(huge.output) == 5000
        assert "200000 characters" in huge.output and "mcp_max_output_chars" in huge.output
        assert alive_with(token)  # the server (and its unshare wrapper) runs
    finally:
        tools.close()
    assert alive_with(token) == []


def test_secrets_scrubbed_from_server_env_but_configured_env_kept(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-abcdef-should-not-leak")
    monkeypatch.setenv("PLAIN_SETTING", "visible")
    token = f"tok-{uuid.uuid4().hex}"
    servers = {"t": parse_server("t", stdio_entry(token, GIVEN_API_KEY="explicit"))}
    tools = MCPTools(workspace, settings(), "main", servers=servers)
    try:
        assert run(tools, "mcp__t__env", workspace, name="MY_SERVICE_TOKEN").output == "(unset)"
        assert run(tools, "mcp__t__env", workspace, name="PLAIN_SETTING").output == "visible"
        assert run(tools, "mcp__t__env", workspace, name="GIVEN_API_KEY").output == "explicit"
    finally:
        tools.close()


def test_slow_call_times_out_crash_restarts_once(workspace: Path) -> None:
    token = f"tok-{uuid.uuid4().hex}"
    servers = {"t": parse_server("t", stdio_entry(token))}
    # 3 s: the quick calls must fit in it on a loaded machine; the slow one never does.
    tools = MCPTools(workspace, settings(mcp_call_timeout=3), "main", servers=servers)
    try:
        slow = run(tools, "mcp__t__slow", workspace, seconds=30)
        assert not slow.ok and "timed out" in slow.output and "mcp_call_timeout" in slow.output
        assert run(tools, "mcp__t__echo", workspace, text="still").output == "echo: still"
        first = alive_with(token)
        crash = run(tools, "mcp__t__crash", workspace)
        assert not crash.ok and "restarted at the next call" in crash.output
        assert run(tools, "mcp__t__echo", workspace, text="again").output == "echo: again"
        assert [p.pid for p in alive_with(token)] != [p.pid for p in first]
        run(tools, "mcp__t__crash", workspace)
        gone = run(tools, "mcp__t__echo", workspace, text="x")
        assert not gone.ok and "stopped again after a restart" in gone.output
    finally:
        tools.close()
    assert alive_with(token) == []


def test_server_that_fails_to_start_or_hangs_gives_a_clear_error(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    missing = Connection(
        parse_server("gone", {"command": "no-such-mcp-program"}), workspace, settings()
    )
    with pytest.raises(MCPFailure, match="'gone' could not start.*no-such-mcp-program"):
        missing.list_tools()
    token = f"tok-{uuid.uuid4().hex}"
    entry = stdio_entry(token, AGENTKIT_TEST_SERVER_HANG="1")
    servers = {"hang": parse_server("hang", entry)}
    tools = MCPTools(workspace, settings(mcp_start_timeout=1.5), "main", servers=servers)
    with caplog.at_level("WARNING", logger="agentkit"):
        assert tools.tools() == []
    assert any("'hang' did not start within 1.5 s" in r.getMessage() for r in caplog.records)
    tools.close()
    assert wait_until(lambda: alive_with(token) == [], timeout=10), alive_with(token)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server() -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, SERVER, "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait(10)


def test_streamable_http_server(workspace: Path, http_server: str) -> None:
    servers = {"web": parse_server("web", {"url": http_server, "headers": {"X-Test": "1"}})}
    # 3 s: the quick calls must fit in it on a loaded machine; the slow one never does.
    tools = MCPTools(workspace, settings(mcp_call_timeout=3), "main", servers=servers)
    try:
        assert run(tools, "mcp__web__echo", workspace, text="over http").output == "echo: over http"
        assert json.loads(run(tools, "mcp__web__add", workspace, a=1, b=1).output) == {"total": 2}
        assert "mcp_call_timeout" in run(tools, "mcp__web__slow", workspace, seconds=20).output
        assert run(tools, "mcp__web__echo", workspace, text="after").output == "echo: after"
    finally:
        tools.close()
    down = MCPTools(workspace, settings(mcp_start_timeout=3), "main",
                    servers={"d": parse_server("d", {"url": f"http://127.0.0.1:{_free_port()}/mcp"})})  # fmt: skip
    assert down.tools() == []
    down.close()


# ------------------------------------------------------------------ reference servers
def test_reference_server_time(workspace: Path) -> None:
    pytest.importorskip("mcp_server_time")
    entry = {
        "command": sys.executable,
        "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
    }
    tools = MCPTools(workspace, settings(), "main", servers={"time": parse_server("time", entry)})
    try:
        out = run(tools, "mcp__time__get_current_time", workspace, timezone="Europe/Paris")
        assert out.ok and json.loads(out.output)["timezone"] == "Europe/Paris"
    finally:
        tools.close()


def test_reference_server_git(workspace: Path) -> None:
    pytest.importorskip("mcp_server_git")
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / "new.txt").write_text("x")
    entry = {
        "command": sys.executable,
        "args": ["-m", "mcp_server_git", "--repository", str(workspace)],
    }
    tools = MCPTools(workspace, settings(), "main", servers={"git": parse_server("git", entry)})
    try:
        out = run(tools, "mcp__git__git_status", workspace, repo_path=str(workspace))
        assert out.ok and "new.txt" in out.output
    finally:
        tools.close()


def test_conformance_server_everything(workspace: Path) -> None:
    script = (
        Path(EVERYTHING_DIR) / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    )
    if not script.is_file():
        pytest.skip(
            f"{script} is absent: npm install --prefix .ci/node @modelcontextprotocol/server-everything"
        )
    entry = {"command": "node", "args": [str(script), "stdio"]}
    tools = MCPTools(workspace, settings(), "main", servers={"ev": parse_server("ev", entry)})
    try:
        names = {t.name for t in tools.tools()}
        assert "mcp__ev__echo" in names
        assert "hello" in run(tools, "mcp__ev__echo", workspace, message="hello").output
        for name in sorted(names):
            # Every tool's schema was made acceptable: an object with properties.
            schema = next(t for t in tools.tools() if t.name == name).schema("en")["function"]
            assert schema["parameters"]["type"] == "object"
    finally:
        tools.close()
