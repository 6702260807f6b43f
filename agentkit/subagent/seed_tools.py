"""The main agent's three seed tools (docs/specification.md §1): create_sub_agent,
terminate_sub_agent and get_sub_agent_status (finish_task, the fourth, is the
worker's: agentkit.subagent.worker.hooks).

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
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, Field

from agentkit.settings import Settings
from agentkit.subagent import inputs
from agentkit.tools.base import Tool, ToolContext

if TYPE_CHECKING:
    from agentkit.profiles import AgentProfile
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


_ISOLATION_DOC = (
    "Optional: shared (the default: it works in the workspace itself) or isolated (it "
    "works on its own copy; its changes reach the workspace only through merge_sub_agent)."
)


class CreateIsolationParams(CreateSubAgentParams):
    """create_sub_agent's parameters with ``subagent_isolation: available``: the seed's
    plus ``isolation`` (docs/isolation.md)."""

    isolation: Annotated[
        Literal["shared", "isolated"], inputs.or_default(inputs.isolation_mode, "shared")
    ] = Field(default="shared", description=_ISOLATION_DOC)


class CreateWithProfileIsolationParams(CreateWithProfileParams):
    """create_sub_agent's parameters with agent profiles and ``subagent_isolation:
    available``: the seed's plus ``profile`` and ``isolation``."""

    isolation: Annotated[
        Literal["shared", "isolated"], inputs.or_default(inputs.isolation_mode, "shared")
    ] = Field(default="shared", description=_ISOLATION_DOC)


def create_params(with_profiles: bool, isolation: str) -> type[CreateSubAgentParams]:
    """create_sub_agent's parameter class: the seed's, plus ``profile`` when agent
    profiles exist and ``isolation`` when ``subagent_isolation`` is ``available``
    (with ``off`` or ``always`` the schema is exactly the seed's)."""
    if isolation == "available":
        return CreateWithProfileIsolationParams if with_profiles else CreateIsolationParams
    return CreateWithProfileParams if with_profiles else CreateSubAgentParams


class TerminateSubAgentParams(BaseModel):
    """Parameters of terminate_sub_agent (docs/specification.md §1)."""

    agent_id: inputs.AgentId


class GetSubAgentStatusParams(BaseModel):
    """Parameters of get_sub_agent_status (docs/specification.md §1); a bare id means a list of one."""

    agent_ids: inputs.IdList = Field(min_length=1)


def make_main_tools(
    get_manager: Callable[[], SubAgentManager],
    profiles_from: tuple[Path, Settings] | None = None,
    *,
    isolation: str = "off",
) -> list[Tool]:
    """Return the main agent's three sub-agent tools, bound to ``get_manager()``
    (called at each use, so a new conversation gets a new manager).

    ``profiles_from`` (workspace, Settings): when agent profiles exist there,
    create_sub_agent gains the optional ``profile`` parameter (profiles are re-read at
    each call); ``isolation`` (Settings.subagent_isolation) ``available``: it gains
    ``isolation``; with neither, its schema is exactly the seed's."""
    from agentkit.profiles import load_profiles

    with_profiles = profiles_from is not None and bool(load_profiles(*profiles_from)[0])

    def create(p: CreateSubAgentParams, ctx: ToolContext) -> dict[str, Any]:
        return create_sub_agent(get_manager(), p, ctx, profiles_from)

    def terminate(p: TerminateSubAgentParams, ctx: ToolContext) -> dict[str, Any]:
        return get_manager().terminate(p.agent_id)

    def status(p: GetSubAgentStatusParams, ctx: ToolContext) -> dict[str, Any]:
        return get_manager().status(p.agent_ids)

    return [
        Tool(
            "create_sub_agent",
            create_params(with_profiles, isolation),
            create,
            on_invalid_arguments=inputs.refusal_hook("create_sub_agent"),
        ),
        Tool(
            "terminate_sub_agent",
            TerminateSubAgentParams,
            terminate,
            on_invalid_arguments=inputs.refusal_hook("terminate_sub_agent"),
        ),
        Tool(
            "get_sub_agent_status",
            GetSubAgentStatusParams,
            status,
            on_invalid_arguments=inputs.refusal_hook("get_sub_agent_status", agents=[]),
        ),
    ]


def create_sub_agent(
    manager: SubAgentManager,
    p: CreateSubAgentParams,
    ctx: ToolContext,
    profiles_from: tuple[Path, Settings] | None,
) -> dict[str, Any]:
    """Run one create_sub_agent call: the seed's JSON result or refusal. A call
    without ``timeout_seconds`` gets ``Settings.subagent_default_timeout`` (the
    seed's 600 s unless changed), or the chosen profile's timeout; a ``profile``
    that cannot be used is refused, naming the usable ones."""
    given = "timeout_seconds" in p.model_fields_set
    timeout = p.timeout_seconds if given else manager.settings.subagent_default_timeout
    profile: dict[str, Any] | None = None
    name = getattr(p, "profile", None)
    if name and profiles_from is not None:
        chosen = _profile(name, profiles_from)
        if isinstance(chosen, str):
            error = f"profile {name!r} cannot be used: {chosen}"
            return {"success": False, "agent_id": p.agent_id, "error": error}
        profile = chosen.to_dict()
        if not given and chosen.timeout_seconds:
            timeout = chosen.timeout_seconds
    # Not given: the profile's default, else shared (agentkit.subagent.isolated.choose).
    isolation = getattr(p, "isolation", None) if "isolation" in p.model_fields_set else None
    return manager.create(
        agent_id=p.agent_id,
        summary=p.summary,
        task=p.task,
        deliverables_dir=p.deliverables_dir,
        run_in_background=p.run_in_background,
        timeout_seconds=timeout,
        cancel=ctx.cancel,
        profile=profile,
        isolation=isolation,
    )


def _profile(name: str, profiles_from: tuple[Path, Settings]) -> AgentProfile | str:
    """The usable profile called ``name``, else why it cannot be used."""
    from agentkit.profiles import load_profiles

    usable, refused = load_profiles(*profiles_from)
    chosen = usable.get(name)
    if chosen is not None:
        return chosen
    return refused.get(name) or (
        f"there is no agent profile named {name!r}; profiles: " + (", ".join(usable) or "(none)")
    )
