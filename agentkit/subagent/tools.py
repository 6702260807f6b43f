"""The four seed tools (seed §1): create_sub_agent, terminate_sub_agent and
get_sub_agent_status for the main agent, finish_task for sub-agents.

Names, parameters and defaults are the seed's. Range checks (agent_id 1-99,
timeout 60-3600 s) are done by the manager, so a bad value gets the seed's JSON
with ``"success": false`` and a reason, not a schema error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, field_validator

from agentkit.tools.base import Tool, ToolContext

if TYPE_CHECKING:
    from agentkit.subagent.manager import SubAgentManager


class CreateSubAgentParams(BaseModel):
    """Parameters of create_sub_agent (seed §1)."""

    agent_id: int
    summary: str
    task: str
    deliverables_dir: str | None = None
    run_in_background: bool = False
    timeout_seconds: int = 600


class TerminateSubAgentParams(BaseModel):
    """Parameters of terminate_sub_agent (seed §1)."""

    agent_id: int


class GetSubAgentStatusParams(BaseModel):
    """Parameters of get_sub_agent_status (seed §1)."""

    agent_ids: list[int] = Field(min_length=1)

    @field_validator("agent_ids", mode="before")
    @classmethod
    def _one_id(cls, value: Any) -> Any:
        # Models often send a bare number for a one-element list.
        return [value] if isinstance(value, int) else value


class FinishTaskParams(BaseModel):
    """Parameters of finish_task (seed §1)."""

    success: bool
    summary: str


def make_main_tools(get_manager: Callable[[], SubAgentManager]) -> list[Tool]:
    """Return the main agent's three sub-agent tools, bound to ``get_manager()``
    (called at each use, so a new conversation gets a new manager)."""

    def create(p: CreateSubAgentParams, ctx: ToolContext) -> dict[str, Any]:
        return get_manager().create(
            agent_id=p.agent_id,
            summary=p.summary,
            task=p.task,
            deliverables_dir=p.deliverables_dir,
            run_in_background=p.run_in_background,
            timeout_seconds=p.timeout_seconds,
            cancel=ctx.cancel,
        )

    def terminate(p: TerminateSubAgentParams, ctx: ToolContext) -> dict[str, Any]:
        return get_manager().terminate(p.agent_id)

    def status(p: GetSubAgentStatusParams, ctx: ToolContext) -> dict[str, Any]:
        return get_manager().status(p.agent_ids)

    return [
        Tool("create_sub_agent", CreateSubAgentParams, create),
        Tool("terminate_sub_agent", TerminateSubAgentParams, terminate),
        Tool("get_sub_agent_status", GetSubAgentStatusParams, status),
    ]


def make_finish_tool(on_finish: Callable[[bool, str], str | None], language: str) -> Tool:
    """Return finish_task; ``on_finish(success, summary)`` records the end (the
    worker stops after this batch of tool results) and may return a warning to
    add (commands still running). The result is the seed's JSON."""
    from agentkit import prompts

    def finish(p: FinishTaskParams, ctx: ToolContext) -> dict[str, Any]:
        warning = on_finish(p.success, p.summary)
        result: dict[str, Any] = {
            "success": True,
            "message": prompts.phrase(language, "finish_ok"),
            "will_terminate": True,
        }
        if warning:
            result["warning"] = warning
        return result

    return Tool("finish_task", FinishTaskParams, finish)
