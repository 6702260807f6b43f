"""A real MCP server for the tests, written with the ``mcp`` package.

Run as ``python tests/mcp_test_server.py stdio`` or ``... http PORT`` (streamable
HTTP on 127.0.0.1:PORT, path /mcp). Tools: echo, add (structured output), slow
(sleeps), crash (the process dies), huge (a long text), picture (an image),
broken (raises: an MCP error result), env (one variable of its environment),
cwd (its working folder), pid (its process id), trace_context (the traceparent the call's ``_meta`` carried).
"""

from __future__ import annotations

import base64
import os
import sys
import time

from mcp.server.mcpserver import Context, Image, MCPServer
from pydantic import BaseModel

server = MCPServer("agentkit-test")


class Sum(BaseModel):
    """A structured result."""

    total: int


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return f"echo: {text}"


@server.tool()
def add(a: int, b: int) -> Sum:
    """Add two whole numbers."""
    return Sum(total=a + b)


@server.tool()
def slow(seconds: float) -> str:
    """Sleep this many seconds, then answer."""
    time.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def crash() -> str:
    """End the server process at once."""
    os._exit(3)


@server.tool()
def huge(chars: int) -> str:
    """Return a text of this many characters."""
    return "x" * chars


# A 1x1 PNG.
_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


@server.tool()
def picture() -> Image:
    """Return a tiny PNG image."""
    return Image(data=_PNG, format="png")


@server.tool()
def broken() -> str:
    """Always fail."""
    raise ValueError("the broken tool failed on purpose")


@server.tool()
def env(name: str) -> str:
    """Return the value of one environment variable, or (unset)."""
    return os.environ.get(name, "(unset)")


@server.tool()
def cwd() -> str:
    """Return the server's working folder."""
    return os.getcwd()


@server.tool()
def trace_context(ctx: Context) -> str:
    """Return the traceparent the call's _meta carried (MCP SEP-414), or (none)."""
    meta = ctx.request_context.meta or {}
    return str(meta.get("traceparent") or "(none)")


@server.tool()
def sleeper(token: str) -> str:
    """Start a detached child (its own session) that sleeps, then sleep too."""
    import subprocess

    subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(1000)", token], start_new_session=True
    )
    time.sleep(1000)
    return "woke"


if __name__ == "__main__":
    if os.environ.get("AGENTKIT_TEST_SERVER_HANG"):
        time.sleep(3600)  # a server that never answers the handshake
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
