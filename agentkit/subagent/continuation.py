"""continue_sub_agent: an ended sub-agent runs again with its own history (docs/control-plane.md §1).

One job: start a sub-agent that ended (completed, failed, timeout, terminated,
budget_exhausted; of this run of the conversation or an earlier one) once more, in the
same deliverables folder, from its record: the saved messages, then the new task as one
user message (agentkit.subagent.worker.continued). The limits are create_sub_agent's
but the id's (timeout bounds, five running, no overlapping folder:
admission.admit_continued); the run gets its own timeout and budget. Its record keeps
its sub-conversation id and every run's messages, its stats add up and ``runs`` counts
the runs (agentkit.subagent.record.may_replace lets a later run replace the final
record). An isolated sub-agent continues in its own copy unless that was merged or
discarded (then in a fresh one: agentkit.subagent.isolated.continued). The result is exactly create_sub_agent's, blocking or background, and a
background run's end is announced with the seed's templates.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from agentkit import prompts
from agentkit.conventions import subagent_extra
from agentkit.conversation import known_cost
from agentkit.subagent import starts
from agentkit.subagent.admission import admit_continued, resolve_deliverables
from agentkit.subagent.isolated import continued, from_record
from agentkit.subagent.record import read_record
from agentkit.subagent.state import SubAgent, worker_spec

if TYPE_CHECKING:
    from agentkit.subagent.manager import SubAgentManager

__all__ = ["continue_subagent"]


def continue_subagent(
    manager: SubAgentManager,
    agent_id: int,
    task: str,
    *,
    run_in_background: bool = False,
    timeout_seconds: int | None = None,
    cancel: threading.Event | None = None,
) -> dict[str, Any]:
    """Run ended sub-agent ``agent_id`` again on ``task`` (seconds: ``timeout_seconds``,
    default ``subagent_default_timeout``). Returns create_sub_agent's result shape, or
    ``{"success": false, "agent_id", "error"}`` (control off, unknown id, still running,
    a limit, its record gone)."""
    settings = manager.settings
    timeout = timeout_seconds or settings.subagent_default_timeout

    def refuse(key: str, **values: Any) -> dict[str, Any]:
        error = prompts.phrase(settings.language, key, agent_id=agent_id, **values)
        return {"success": False, "agent_id": agent_id, "error": error}

    if not manager.control.enabled:
        return refuse("control_off")
    manager.control.check_session_budget()  # its first wrap-up and warning go out unlocked
    with manager.table.locked():  # the limits, then the reservation, in one step
        why = starts.closed_or_spent(manager)
        if why is not None:
            return {"success": False, "agent_id": agent_id, "error": why}
        before = _before(manager, agent_id)
        if isinstance(before, str):
            return refuse(before, status="running")
        summary, rel, sub_id, profile = before
        resolved = resolve_deliverables(manager.workspace, agent_id, rel)
        if isinstance(resolved, str):
            return refuse("record_gone", dir=rel)
        why = admit_continued(
            timeout,
            resolved,
            settings=settings,
            running=manager.running(),
            agents=manager.table.agents,
            claims=manager.claims,
        )
        if why is not None:
            return {"success": False, "agent_id": agent_id, "error": why}
        record = read_record(resolved[1])
        if not record or record.get("sub_conversation_id") != sub_id:
            return refuse("record_gone", dir=rel)
        what = (agent_id, summary, task)
        agent = _agent(manager, record, what, timeout, resolved, profile, run_in_background)
        earlier = manager.table.get(agent_id)
        previous = earlier.isolation if earlier is not None else from_record(record)
        agent.isolation = continued(settings, previous, profile)  # its copy, or a fresh one
        why = starts.reserve(manager, agent)  # its folder's OS lock too
        if why is not None:
            return {"success": False, "agent_id": agent_id, "error": why}
    if not starts.start_worker(manager, agent, archive=False):  # unlocked, as create's
        return manager._result(agent)
    return manager.launched(agent, cancel)


def _before(manager: SubAgentManager, agent_id: int) -> tuple[str, str, str, Any] | str:
    """``(summary, deliverables_dir, sub_conversation_id, profile)`` of the ended
    sub-agent, or the refusal's phrase key (``unknown_agent``, ``continue_running``).
    The caller holds ``manager.table.locked()``."""
    agent = manager.table.get(agent_id)
    if agent is not None:
        if agent.status == "running":
            return "continue_running"
        agent.announced = True  # the main agent acts on its end: no notification owed
        spec = agent.spec
        return (
            spec.summary,
            spec.deliverables_dir,
            spec.sub_conversation_id,
            spec.extra.get("profile"),
        )
    row = manager.earlier_row(agent_id)
    if row is None:
        return "unknown_agent"
    profile = _profile(manager, row.get("profile"))
    return (
        str(row.get("summary", "")),
        str(row.get("deliverables_dir", "")),
        str(row.get("sub_conversation_id", "")),
        profile,
    )


def _profile(manager: SubAgentManager, name: Any) -> dict[str, Any] | None:
    """The profile named in an earlier run's row, if it is still usable."""
    if not isinstance(name, str):
        return None
    from agentkit.profiles import load_profiles

    found = load_profiles(manager.workspace, manager.settings)[0].get(name)
    return found.to_dict() if found is not None else None


def _agent(
    manager: SubAgentManager,
    record: dict[str, Any],
    what: tuple[int, str, str],
    timeout: int,
    deliverables: Any,
    profile: dict[str, Any] | None,
    background: bool,
) -> SubAgent:
    """The new run's SubAgent (``what``: its id, summary and new task): its spec
    carries the record's history (extra ``continued``), its own budget, and the
    record's sub-conversation id and creation time; its counters start at the record's."""
    agent_id, summary, task = what
    saved_stats = record.get("stats")
    stats: dict[str, Any] = saved_stats if isinstance(saved_stats, dict) else {}
    saved_runs = record.get("runs")
    runs = saved_runs if isinstance(saved_runs, int) else 1
    extra: dict[str, Any] = {
        "continued": {"messages": record.get("messages") or [], "stats": stats, "runs": runs + 1}
    }
    extra.update(
        starts.spec_extra(manager, profile, background)
    )  # profile, trace, MCP, hooks, budget
    extra.update(subagent_extra(manager.workspace, manager.settings, deliverables[1], profile))
    spec = worker_spec(
        manager.settings,
        manager.workspace,
        agent_id=agent_id,
        summary=summary,
        task=task,
        timeout_seconds=timeout,
        deliverables=deliverables,
        extra=extra,
        sub_conversation_id=str(record["sub_conversation_id"]),
        created_at=str(record.get("created_at") or "") or None,
    )
    saved_usage = stats.get("token_usage")
    usage: dict[str, Any] = saved_usage if isinstance(saved_usage, dict) else {}
    cost = stats.get("cost_usd")
    runtime = stats.get("runtime_seconds")
    agent = SubAgent(
        spec=spec,
        background=background,
        started=time.monotonic(),
        runtime_before=runtime if isinstance(runtime, int) else 0,
        runs=runs + 1,
        tokens=int(usage.get("total") or 0),
        cost_usd=known_cost(cost),  # a NaN an older version saved: unknown
        usage_estimated=stats.get("usage_estimated") is True,
    )
    for key in agent.counters:
        if isinstance(stats.get(key), int):
            agent.counters[key] = stats[key]
    return agent
