"""Shared by the wire tests (unit and servers): ``whole``, a request body encoded whole as
the client sent it before messages were encoded once, and the tools of their long runs
(big, a large output; echo, the text's length)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from agentkit.tools.registry import ToolRegistry

_whole = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def whole(body: dict[str, Any]) -> bytes:
    """What the client sent before messages were encoded once."""
    return _whole(body).encode("utf-8", "replace")


class TextParams(BaseModel):
    text: str


def registry() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool
    def big(p: TextParams) -> str:
        """Returns a large output."""
        return p.text * 300

    @tools.tool
    def echo(p: TextParams) -> str:
        """Echoes the text's length."""
        return f"echo of {len(p.text)} characters"

    return tools
