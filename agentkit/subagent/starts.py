"""The start of a sub-agent's run, created or continued.

One job: take a run from its request to a watched worker, for
agentkit.subagent.manager (create_sub_agent) and agentkit.subagent.continuation
(continue_sub_agent): what its WorkerSpec.extra carries (profile, trace context, MCP
listing, tool hooks, budget), whether any sub-agent may start now (closing, the
conversation's budget spent), admission and placement (the seed's default folder, or
this conversation's own when another conversation's sub-agent holds it:
agentkit.subagent.placement), the reservation (folder claim and OS lock, id, running
count) and the worker's start (folder prepared, earlier files set aside, an
isolated run's copy of the workspace made, the Supervisor adopting it). Every
function takes the conversation's SubAgentManager.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agentkit import tracing
from agentkit.confined import folder as confined_folder
from agentkit.conventions import subagent_extra
from agentkit.subagent.admission import Request, admit, take_folder
from agentkit.subagent.budget import carve
from agentkit.subagent.isolated import Isolation, make_copy
from agentkit.subagent.placement import folder_choices
from agentkit.subagent.record import Ending
from agentkit.subagent.record_folder import archive_record
from agentkit.subagent.reuse import set_aside_earlier
from agentkit.subagent.state import SubAgent, worker_spec
from agentkit.subagent.sweep import sweep_record

if TYPE_CHECKING:
    from agentkit.subagent.manager import SubAgentManager

log = logging.getLogger("agentkit")

__all__ = ["closed_or_spent", "place", "reserve", "run_budget", "spec_extra", "start_worker"]


def spec_extra(
    manager: SubAgentManager, profile: dict[str, Any] | None, background: bool
) -> dict[str, Any]:
    """What a new run's WorkerSpec.extra carries before admission, created or
    continued alike: the profile, the trace context, the MCP listing, the
    conversation's tool hooks (``worker_extra``) and the run's budget."""
    extra: dict[str, Any] = {"profile": profile} if profile else {}
    extra.update(tracing.worker_context(background))  # {} while not tracing
    if listing := manager.mcp_tools():
        extra["mcp_tools"] = listing
    if manager.worker_extra is not None:
        extra.update(manager.worker_extra())
    if budget := run_budget(manager, profile):
        extra["budget"] = budget
    return extra


def run_budget(manager: SubAgentManager, profile: dict[str, Any] | None) -> dict[str, Any] | None:
    """The budget a new run gets (agentkit.subagent.budget.carve: the profile's
    max_tokens or subagent_max_tokens, never more than the conversation has
    left), or None without limits."""
    own = (profile or {}).get("max_tokens") or manager.settings.subagent_max_tokens
    limits = carve(own, manager.control.budget)
    return limits.to_dict() if limits else None


def closed_or_spent(manager: SubAgentManager) -> str | None:
    """Why no sub-agent may start now (closing, the conversation's budget spent), or
    None. Sends and emits nothing (it runs under ``table.locked()``): callers run
    ``control.check_session_budget()`` first."""
    if manager.table.closed:
        return "the agent is closing; no new sub-agents"
    if manager.control.session_spent():
        return manager.phrase(
            "session_budget_spent",
            **manager.control.budget.shown(manager.settings.language),  # type: ignore[union-attr]
        )
    return None


def place(
    manager: SubAgentManager,
    request: Request,
    *,
    summary: str,
    task: str,
    background: bool,
    extra: dict[str, Any],
    profile: dict[str, Any] | None,
    isolated: bool = False,
) -> SubAgent | str:
    """Admit ``request`` and reserve its agent (the caller holds ``table.locked()``),
    or return the refusal text. Without a deliverables_dir it takes the seed's
    default folder, or this conversation's own when a sub-agent of another
    conversation holds the default (agentkit.subagent.placement). ``isolated``: it
    gets its own copy of the workspace when its worker starts (agentkit.subagent.isolated)."""
    choices = folder_choices(request.deliverables_dir, request.agent_id, manager.folder_key)
    own = choices[-1] if len(choices) > 1 else None
    admitted = closed_or_spent(manager) or admit(
        request,
        workspace=manager.workspace,
        settings=manager.settings,
        used_ids=manager.table.used_ids(),
        running=manager.running(),
        agents=manager.table.agents,
        claims=manager.claims,
        own=own,
    )
    if isinstance(admitted, str):
        return admitted
    rel, path = admitted
    spec = worker_spec(
        manager.settings,
        manager.workspace,
        agent_id=request.agent_id,
        summary=summary,
        task=task,
        timeout_seconds=request.timeout_seconds,
        deliverables=(rel, path),
        extra={**extra, **subagent_extra(manager.workspace, manager.settings, path, profile)},
    )
    agent = SubAgent(spec=spec, background=background, started=time.monotonic())
    agent.isolation = Isolation() if isolated else None
    may_move = own is not None and rel != own  # the default, held by another conversation
    refused = reserve(manager, agent, name_holder=not may_move)
    if refused is not None and may_move:
        named = replace(request, deliverables_dir=own)  # named now: tried once, no further
        return place(
            manager,
            named,
            summary=summary,
            task=task,
            background=background,
            extra=extra,
            profile=profile,
            isolated=isolated,
        )
    return refused or agent


def reserve(manager: SubAgentManager, agent: SubAgent, *, name_holder: bool = True) -> str | None:
    """Claim the agent's folder (its OS lock too, held until its record is final:
    admission.take_folder), take its id, count it as running (under the lock).
    Returns the refusal text when a sub-agent of another process holds the folder
    (nothing then taken; ``name_holder`` False: without waiting for the holder's
    name), else None. The caller holds ``table.locked()``."""
    refused = take_folder(
        manager.workspace,
        agent.spec,
        manager.conversation_id,
        manager.claims,
        manager.language,
        name_holder=name_holder,
    )
    if refused is not None:
        return refused
    manager.claims.claim_folder(agent.spec.agent_id, agent.deliverables_path)
    if agent.isolation is not None:  # its writes go to its own copy: it claims no file
        manager.claims.mark_isolated(agent.spec.agent_id)
    manager.table.add(agent)
    return None


def start_worker(manager: SubAgentManager, agent: SubAgent, *, archive: bool = True) -> bool:
    """Prepare the reserved agent's folder, make an isolated agent's copy of the
    workspace (agentkit.subagent.isolated.make_copy), start its worker and watch it
    (not under the lock). False when it did not start (it then ended as failed) or
    was ended meanwhile (Supervisor.adopt). ``archive`` False keeps the folder's
    record (a continued run extends it)."""
    path, workspace = agent.deliverables_path, manager.workspace
    try:
        # Through no link below the workspace: a command may have swapped it.
        with confined_folder(workspace, path, create=True):
            pass
        sweep_record(path, workspace)  # one a killed process group left "running"
        if archive:  # another conversation's files and record, set aside
            set_aside_earlier(path, workspace, manager.table.sub_conversation_ids())
            archive_record(path, workspace)
        if agent.isolation is not None:
            _listed(manager, agent)  # its number stays taken if the copy is orphaned
            if (why := make_copy(manager, agent)) is not None:
                manager.supervisor.finish(agent, "failed", Ending(None, why))
                return False
            _listed(manager, agent)  # with its copy, before a kill can orphan it
        handle = manager.launcher.start(agent.spec)  # with its copy, when isolated
    except Exception as exc:  # cannot start: the agent fails, the main loop goes on
        why = f"could not start the worker: {exc}"
        manager.supervisor.finish(agent, "failed", Ending(None, why))
        return False
    return manager.supervisor.adopt(agent, handle)


def _listed(manager: SubAgentManager, agent: SubAgent) -> None:
    """Have the conversation file list ``agent`` now (SubAgentManager's ``on_copied``).
    A file that cannot be written does not stop the sub-agent: its later saves report it."""
    if manager.on_copied is not None:
        try:
            manager.on_copied(agent)
        except OSError as exc:
            log.warning("agentkit: the conversation file could not be saved: %s", exc)
