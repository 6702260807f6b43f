"""The cost of MCP in an agent process: opening a stdio session, one call, beside a built-in tool.

Measured in this process as a sub-agent worker does it (agentkit.mcp.tools.MCPTools):
the time from nothing to the first tool list (the server started under pid-namespace
ownership, the MCP handshake, tools/list), then the median of one ``tools/call``
round trip through the tool registry, and the median of a built-in read_file call
through the same registry, and the time a sub-agent worker takes to build its MCP
tools from the parent's listing (what it does now: the server starts at the first
call instead). Servers: the tests' server (tests/mcp_test_server.py,
the mcp package's MCPServer) and the reference server mcp-server-time when installed.

Run: python benchmarks/mcp_cost.py (not mcp.py: a script of that name would shadow the
mcp package, its folder being first on sys.path).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentkit.mcp.config import parse_server
from agentkit.mcp.tools import MCPTools
from agentkit.settings import Settings
from agentkit.tools import base_tools
from agentkit.tools.base import ToolContext
from agentkit.tools.registry import ToolRegistry

# Loopback only: tiktoken would download its tables from the internet.
os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")

ROOT = Path(__file__).resolve().parents[1]
CALLS = 200


def median_ms(registry: ToolRegistry, ctx: ToolContext, name: str, args: dict[str, Any]) -> float:
    times = []
    for _ in range(CALLS):
        started = time.perf_counter()
        result = registry.execute(name, args, ctx)
        times.append(time.perf_counter() - started)
        assert result.ok, result.output
    return statistics.median(times) * 1000


def measure(label: str, entry: dict[str, Any], tool: str, args: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder)
        (workspace / "a.txt").write_text("hello\n" * 50)
        settings = Settings(model="m", api_key="k", language="en", mcp_config_files=False)
        ctx = ToolContext(workspace=workspace, settings=settings)
        mcp = MCPTools(workspace, settings, "subagents", servers={"s": parse_server("s", entry)})
        started = time.perf_counter()
        tools = mcp.tools()
        opened = (time.perf_counter() - started) * 1000
        listed = mcp.listing()
        worker = MCPTools(
            workspace, settings, "subagents", servers={"s": parse_server("s", entry)}, listed=listed
        )
        started = time.perf_counter()
        worker.tools()
        from_listing = (time.perf_counter() - started) * 1000
        worker.close()
        registry = ToolRegistry([*base_tools(), *tools])
        try:
            call = median_ms(registry, ctx, f"mcp__s__{tool}", args)
            builtin = median_ms(registry, ctx, "read_file", {"path": "a.txt"})
        finally:
            mcp.close()
    print(
        f"{label:<28} first tool list {opened:7.0f} ms | MCP call {call:6.2f} ms | "
        f"read_file {builtin:5.2f} ms (medians of {CALLS}) | "
        f"worker tools from the listing {from_listing:5.2f} ms"
    )


def main() -> None:
    server = str(ROOT / "tests" / "mcp_test_server.py")
    measure(
        "test server (stdio)", {"command": sys.executable, "args": [server]}, "echo", {"text": "x"}
    )
    try:
        import mcp_server_time  # noqa: F401
    except ImportError:
        print("mcp-server-time not installed: skipped")
        return
    entry = {
        "command": sys.executable,
        "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
    }
    measure("mcp-server-time (stdio)", entry, "get_current_time", {"timezone": "UTC"})


if __name__ == "__main__":
    main()
