"""The four seed tools (docs/specification.md §1): create_sub_agent, terminate_sub_agent and
get_sub_agent_status for the main agent, finish_task for sub-agents.

Names, parameters and defaults are the seed's. What each argument accepts
(whole numbers, flags, non-empty text, summary length) is defined in
agentkit.subagent.inputs; an argument that breaks it gets the tool's seed-shaped
JSON refusal (``"success": false``, ``agent_id`` when usable, an ``error`` saying
what to do), never the generic ``Error: invalid_argument`` text. Range checks
(agent_id 1-99, timeout 60-3600 s) and the deliverables folder are admission's
(agentkit.subagent.admission), with the same JSON shape.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, Field, ValidationError

from agentkit.settings import Settings
from agentkit.subagent import inputs
from agentkit.tools.base import InvalidArgumentsHook, Tool, ToolContext

if TYPE_CHECKING:
    from agentkit.subagent.manager import SubAgentManager


class CreateSubAgentParams(BaseModel):
    """Parameters of create_sub_agent (docs/specification.md §1)."""

    agent_id: inputs.AgentId
    summary: inputs.CreateSummary
    task: inputs.Task
    deliverables_dir: inputs.OptionalText = None
    run_in_background: Annotated[bool, inputs.or_default(inputs.flag, False)] = False
    timeout_seconds: Annotated[int, inputs.or_default(inputs.whole_number, 600)] = 600


class CreateWithProfileParams(CreateSubAgentParams):
    """create_sub_agent's parameters when agent profiles exist: the seed's plus ``profile``."""

    profile: inputs.OptionalText = Field(
        default=None,
        description="Optional: the name of an agent profile listed in the system prompt "
        "(its instructions, tools and model); its timeout_seconds is the default.",
    )


class TerminateSubAgentParams(BaseModel):
    """Parameters of terminate_sub_agent (docs/specification.md §1)."""

    agent_id: inputs.AgentId


class GetSubAgentStatusParams(BaseModel):
    """Parameters of get_sub_agent_status (docs/specification.md §1); a bare id means a list of one."""

    agent_ids: inputs.IdList = Field(min_length=1)


class FinishTaskParams(BaseModel):
    """Parameters of finish_task (docs/specification.md §1)."""

    success: inputs.Flag
    summary: inputs.FinishSummary


def _refuse_with(tool: str, **extra: Any) -> InvalidArgumentsHook:
    """The Tool.on_invalid_arguments hook answering ``tool``'s seed-shaped refusal."""
    build = inputs.refusal(tool, extra)

    def hook(exc: ValidationError, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return build(exc, arguments, ctx.language)

    return hook


def make_main_tools(
    get_manager: Callable[[], SubAgentManager],
    profiles_from: tuple[Path, Settings] | None = None,
) -> list[Tool]:
    """Return the main agent's three sub-agent tools, bound to ``get_manager()``
    (called at each use, so a new conversation gets a new manager).

    ``profiles_from`` (workspace, Settings): when agent profiles exist there,
    create_sub_agent gains the optional ``profile`` parameter (profiles are re-read at
    each call); with none, its schema is exactly the seed's."""
    from agentkit.profiles import load_profiles

    with_profiles = profiles_from is not None and bool(load_profiles(*profiles_from)[0])

    def create(p: CreateSubAgentParams, ctx: ToolContext) -> dict[str, Any]:
        profile: dict[str, Any] | None = None
        timeout = p.timeout_seconds
        name = getattr(p, "profile", None)
        if name and profiles_from is not None:
            usable, refused = load_profiles(*profiles_from)
            chosen = usable.get(name)
            if chosen is None:
                why = refused.get(name) or (
                    f"there is no agent profile named {name!r}; profiles: "
                    + (", ".join(usable) or "(none)")
                )
                return {
                    "success": False,
                    "agent_id": p.agent_id,
                    "error": f"profile {name!r} cannot be used: {why}",
                }
            profile = chosen.to_dict()
            if "timeout_seconds" not in p.model_fields_set and chosen.timeout_seconds:
                timeout = chosen.timeout_seconds
        return get_manager().create(
            agent_id=p.agent_id,
            summary=p.summary,
            task=p.task,
            deliverables_dir=p.deliverables_dir,
            run_in_background=p.run_in_background,
            timeout_seconds=timeout,
            cancel=ctx.cancel,
            profile=profile,
        )

    def terminate(p: TerminateSubAgentParams, ctx: ToolContext) -> dict[str, Any]:
        return get_manager().terminate(p.agent_id)

    def status(p: GetSubAgentStatusParams, ctx: ToolContext) -> dict[str, Any]:
        return get_manager().status(p.agent_ids)

    return [
        Tool(
            "create_sub_agent",
            CreateWithProfileParams if with_profiles else CreateSubAgentParams,
            create,
            on_invalid_arguments=_refuse_with("create_sub_agent"),
        ),
        Tool(
            "terminate_sub_agent",
            TerminateSubAgentParams,
            terminate,
            on_invalid_arguments=_refuse_with("terminate_sub_agent"),
        ),
        Tool(
            "get_sub_agent_status",
            GetSubAgentStatusParams,
            status,
            on_invalid_arguments=_refuse_with("get_sub_agent_status", agents=[]),
        ),
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

    return Tool(
        "finish_task",
        FinishTaskParams,
        finish,
        on_invalid_arguments=_refuse_with("finish_task", will_terminate=False),
    )
