"""The tools the engine tests give the loop (unit and servers): echo, boom (raises),
refuse (a ToolError), rendezvous (returns only when another call meets it at the
barrier) and big (a large output)."""

from __future__ import annotations

import threading

from pydantic import BaseModel

from agentkit.errors import ToolError
from agentkit.tools.registry import ToolRegistry


class EchoParams(BaseModel):
    text: str


class WaitParams(BaseModel):
    name: str


def make_registry(barrier: threading.Barrier | None = None) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def echo(p: EchoParams) -> str:
        """Echo text back."""
        return f"echo:{p.text}"

    @registry.tool
    def boom(p: EchoParams) -> str:
        """Always raises."""
        raise RuntimeError("kaboom")

    @registry.tool
    def refuse(p: EchoParams) -> str:
        """Raises a ToolError."""
        raise ToolError("not_found", "nothing here")

    @registry.tool
    def rendezvous(p: WaitParams) -> str:
        """Returns only if another call runs at the same time."""
        assert barrier is not None
        barrier.wait(timeout=5)
        return f"met:{p.name}"

    @registry.tool
    def big(p: EchoParams) -> str:
        """Returns a large output."""
        return p.text * 3000

    return registry
