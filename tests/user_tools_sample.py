"""Custom tools importable by workers (tests/integration/test_user_tools_servers.py): a module of tools."""

from __future__ import annotations

import os

from pydantic import BaseModel

from agentkit.tools.base import Tool, ToolContext


class TextParams(BaseModel):
    """A text."""

    text: str


def _shout(p: TextParams, ctx: ToolContext) -> str:
    return f"{p.text.upper()}! (from pid {os.getpid()})"


def _explode(p: TextParams, ctx: ToolContext) -> str:
    raise RuntimeError(f"exploded on purpose: {p.text}")


SHOUT = Tool("shout", TextParams, _shout, description="Upper-case a text.", agents="both")
EXPLODE = Tool("explode", TextParams, _explode, description="Always fails.", agents="subagents")
MAIN_ONLY = Tool("main_only", TextParams, _shout, description="For the main agent.")


def whisper(p: TextParams) -> str:
    """Lower-case a text (a plain function: offered to both agents)."""
    return p.text.lower()


TOOLS = [SHOUT, EXPLODE, MAIN_ONLY]


def count_words(p: TextParams) -> str:
    """Count the words of a text (registered later with Agent.tool, for sub-agents)."""
    return f"{len(p.text.split())} words"


def quit_now(p: TextParams) -> str:
    """Call sys.exit, as a tool wrapping argparse or click may do."""
    raise SystemExit(3)
