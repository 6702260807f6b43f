"""The main agent's control-plane tools (docs/control-plane.md §1), offered with
``subagent_control`` on: message_sub_agent, continue_sub_agent, wait_for_sub_agents and
answer_sub_agent.

Results are JSON in the seed's style, ``success`` first; a refusal is ``success:
false`` with the reason in ``error``. Arguments follow the seed tools' rules
(agentkit.subagent.inputs: whole numbers, flags, non-empty text) plus a cap on text
(``CONTROL_TEXT_MAX`` characters, refused naming it), and a bad one gets the tool's
seed-shaped refusal through ``on_invalid_arguments``. What each does is
agentkit.subagent.control's, agentkit.subagent.waits' and agentkit.subagent.continuation's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, Field

from agentkit.subagent import inputs
from agentkit.tools.base import Tool, ToolContext

if TYPE_CHECKING:
    from agentkit.subagent.manager import SubAgentManager

__all__ = ["WAIT_MAX_SECONDS", "make_control_tools"]

WAIT_MAX_SECONDS = 3600
"""The longest wait_for_sub_agents timeout (seconds); 1 is the shortest."""


class MessageSubAgentParams(BaseModel):
    """Parameters of message_sub_agent."""

    agent_id: inputs.AgentId
    message: inputs.ControlText


class ContinueSubAgentParams(BaseModel):
    """Parameters of continue_sub_agent (create_sub_agent's run_in_background and
    timeout_seconds, with their defaults)."""

    agent_id: inputs.AgentId
    task: inputs.ControlText
    run_in_background: Annotated[bool, inputs.or_default(inputs.flag, False)] = False
    timeout_seconds: Annotated[int, inputs.or_default(inputs.whole_number, 600)] = 600


class WaitForSubAgentsParams(BaseModel):
    """Parameters of wait_for_sub_agents; a bare id means a list of one."""

    agent_ids: inputs.IdList = Field(min_length=1)
    mode: Annotated[str, inputs.or_default(inputs.wait_mode, "all")] = Field(
        default="all", json_schema_extra={"enum": ["all", "any"]}
    )
    timeout_seconds: Annotated[int, inputs.or_default(inputs.whole_number, 300)] = Field(
        default=300, json_schema_extra={"minimum": 1, "maximum": WAIT_MAX_SECONDS}
    )


class AnswerSubAgentParams(BaseModel):
    """Parameters of answer_sub_agent."""

    agent_id: inputs.AgentId
    answer: inputs.ControlText


def make_control_tools(get_manager: Callable[[], SubAgentManager]) -> list[Tool]:
    """Return the four tools, bound to ``get_manager()`` (called at each use)."""

    def message(p: MessageSubAgentParams, ctx: ToolContext) -> dict[str, Any]:
        return get_manager().control.message(p.agent_id, p.message)

    def continue_(p: ContinueSubAgentParams, ctx: ToolContext) -> dict[str, Any]:
        from agentkit.subagent.continuation import continue_subagent

        return continue_subagent(
            get_manager(),
            p.agent_id,
            p.task,
            run_in_background=p.run_in_background,
            timeout_seconds=p.timeout_seconds,
            cancel=ctx.cancel,
        )

    def wait(p: WaitForSubAgentsParams, ctx: ToolContext) -> dict[str, Any]:
        if not 1 <= p.timeout_seconds <= WAIT_MAX_SECONDS:
            from agentkit import prompts

            error = prompts.phrase(
                ctx.language, "bad_wait_timeout", max=WAIT_MAX_SECONDS, value=p.timeout_seconds
            )
            return {"success": False, "agents": [], "error": error}
        from agentkit.subagent.waits import wait_for

        return wait_for(get_manager(), p.agent_ids, p.mode, p.timeout_seconds, ctx.cancel)

    def answer(p: AnswerSubAgentParams, ctx: ToolContext) -> dict[str, Any]:
        return get_manager().control.answer(p.agent_id, p.answer)

    def tool(name: str, params: type[BaseModel], func: Any, **extra: Any) -> Tool:
        return Tool(name, params, func, on_invalid_arguments=inputs.refusal_hook(name, **extra))

    return [
        tool("message_sub_agent", MessageSubAgentParams, message),
        tool("continue_sub_agent", ContinueSubAgentParams, continue_),
        tool("wait_for_sub_agents", WaitForSubAgentsParams, wait, agents=[]),
        tool("answer_sub_agent", AnswerSubAgentParams, answer),
    ]
