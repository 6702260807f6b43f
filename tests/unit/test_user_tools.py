"""Custom Python tools reach sub-agents by import reference (agentkit.tools.imported)."""

from __future__ import annotations

from typing import Any

import pytest
import user_tools_sample as sample
from pydantic import BaseModel

from agentkit import Agent, Settings
from agentkit.errors import ConfigurationError
from agentkit.tools.base import Tool, tool_from_function
from agentkit.tools.imported import ToolNotImportable, load_reference, reference_of


class P(BaseModel):
    text: str


def test_reference_of_module_level_tool_and_function() -> None:
    assert reference_of(sample.SHOUT) == "user_tools_sample:SHOUT"
    assert reference_of(tool_from_function(sample.whisper)) == "user_tools_sample:whisper"


def test_closure_lambda_and_main_are_refused_at_registration_with_the_fix() -> None:
    def inner(p: P) -> str:
        return p.text

    closure = tool_from_function(inner, agents="both")
    with pytest.raises(
        ToolNotImportable, match="inside a function.*module-level|closure.*importable"
    ):
        reference_of(closure)
    lam = Tool("lam", P, lambda p, ctx: "x", agents="both")
    with pytest.raises(ToolNotImportable, match="lambda"):
        reference_of(lam)

    def in_main(p: P, ctx: Any) -> str:
        return p.text

    in_main.__module__ = "__main__"
    in_main.__qualname__ = "in_main"
    with pytest.raises(ToolNotImportable, match="__main__.*importable module"):
        reference_of(Tool("m", P, in_main, agents="subagents"))
    # The Agent refuses it when it is given, not at the first call.
    with pytest.raises(ToolNotImportable, match="closure"):
        Agent(settings=Settings(model="m", api_key="k"), tools=[closure], subagents=False)
    # A main-only closure is fine: it never leaves this process.
    Agent(settings=Settings(model="m", api_key="k"), tools=[tool_from_function(inner)]).close()


def test_load_reference_shapes_and_errors() -> None:
    assert [t.name for t in load_reference("user_tools_sample")] == [
        "shout",
        "explode",
        "main_only",
    ]
    assert [t.name for t in load_reference("user_tools_sample:TOOLS")][0] == "shout"
    whisper = load_reference("user_tools_sample:whisper")[0]
    assert whisper.name == "whisper" and whisper.agents == "both"
    with pytest.raises(ConfigurationError, match="no_such_module_xyz"):
        load_reference("no_such_module_xyz:thing")
    with pytest.raises(ConfigurationError, match="not a Tool or function"):
        load_reference("user_tools_sample:__doc__")
