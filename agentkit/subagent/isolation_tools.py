"""The main agent's two tools for isolated sub-agents (docs/isolation.md), offered
whenever ``subagent_isolation`` is not ``off``: merge_sub_agent and
discard_sub_agent_changes.

Results are JSON in the seed's style, ``success`` first: a merge that applied (or,
``dry_run``, would apply) is ``success: true`` with ``status``, ``files``,
``base_moved`` and ``dry_run``; one that conflicts is ``success: false`` with
``status: "conflicts"`` and ``conflicts`` (per file: the reason and both sides'
hunks), and nothing written. A refusal (unknown id, a shared sub-agent, one still
running, already discarded or merged, git failing) is ``success: false`` with the
reason in ``error``. Arguments follow the seed tools' rules (agentkit.subagent.inputs),
a bad one getting the tool's seed-shaped refusal. What each does is
agentkit.subagent.merging's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel

from agentkit.isolation.types import IsolationError, MergeReport
from agentkit.subagent import inputs, merging
from agentkit.subagent.merging import IsolationRefused
from agentkit.tools.base import Tool, ToolContext

if TYPE_CHECKING:
    from agentkit.subagent.manager import SubAgentManager

__all__ = ["ISOLATION_TOOLS", "make_isolation_tools", "merge_result"]

ISOLATION_TOOLS = ("merge_sub_agent", "discard_sub_agent_changes")
"""The tools' names, in the order they are offered."""

_REPORT_CHARS = 60_000
"""Characters of a conflict report the model gets; past it, the hunks are shortened."""


class MergeSubAgentParams(BaseModel):
    """Parameters of merge_sub_agent."""

    agent_id: inputs.AgentId
    dry_run: Annotated[bool, inputs.or_default(inputs.flag, False)] = False


class DiscardSubAgentChangesParams(BaseModel):
    """Parameters of discard_sub_agent_changes."""

    agent_id: inputs.AgentId


def make_isolation_tools(get_manager: Callable[[], SubAgentManager]) -> list[Tool]:
    """Return the two tools, bound to ``get_manager()`` (called at each use)."""

    def merge(p: MergeSubAgentParams, ctx: ToolContext) -> dict[str, Any]:
        return merge_sub_agent(get_manager(), p.agent_id, dry_run=p.dry_run)

    def discard(p: DiscardSubAgentChangesParams, ctx: ToolContext) -> dict[str, Any]:
        return discard_sub_agent_changes(get_manager(), p.agent_id)

    def tool(name: str, params: type[BaseModel], func: Any) -> Tool:
        return Tool(name, params, func, on_invalid_arguments=inputs.refusal_hook(name))

    return [
        tool("merge_sub_agent", MergeSubAgentParams, merge),
        tool("discard_sub_agent_changes", DiscardSubAgentChangesParams, discard),
    ]


def merge_sub_agent(
    manager: SubAgentManager, agent_id: int, *, dry_run: bool = False
) -> dict[str, Any]:
    """Run one merge_sub_agent call: :func:`merge_result` of the merge, or the refusal."""
    try:
        report = merging.merge(manager, agent_id, dry_run=dry_run)
    except IsolationRefused as exc:
        return _refusal(agent_id, exc)
    except (IsolationError, OSError) as exc:
        error = manager.phrase("merge_failed", agent_id=agent_id, reason=_first_line(exc))
        return {"success": False, "agent_id": agent_id, "error": error}
    return merge_result(manager, agent_id, report)


def merge_result(manager: SubAgentManager, agent_id: int, report: MergeReport) -> dict[str, Any]:
    """merge_sub_agent's JSON for ``report``: ``success`` (it applied, would apply, or
    there was nothing to apply), ``agent_id``, the report's fields, and a ``message``
    in the conversation's language saying what happened and what to do."""
    data = _capped(report.to_dict())
    count = len(report.conflicts) if report.status == "conflicts" else len(report.files)
    if report.status == "conflicts":
        key = "merge_conflicts"
    elif report.status == "nothing_to_merge":
        key = "merge_nothing"
    else:
        key = "merge_would" if report.dry_run else "merge_done"
    message = manager.phrase(key, agent_id=agent_id, count=count)
    success = report.status != "conflicts"
    return {"success": success, "agent_id": agent_id, **data, "message": message}


def discard_sub_agent_changes(manager: SubAgentManager, agent_id: int) -> dict[str, Any]:
    """Run one discard_sub_agent_changes call: ``{"success": true, "agent_id",
    "status": "discarded", "message"}``, or the refusal."""
    try:
        merging.discard(manager, agent_id)
    except IsolationRefused as exc:
        return _refusal(agent_id, exc)
    except (IsolationError, OSError) as exc:
        error = manager.phrase("discard_failed", agent_id=agent_id, reason=_first_line(exc))
        return {"success": False, "agent_id": agent_id, "error": error}
    message = manager.phrase("discard_done", agent_id=agent_id)
    return {"success": True, "agent_id": agent_id, "status": "discarded", "message": message}


def _refusal(agent_id: int, exc: IsolationRefused) -> dict[str, Any]:
    return {"success": False, "agent_id": agent_id, "reason": exc.reason, "error": str(exc)}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:500]


def _capped(data: dict[str, Any]) -> dict[str, Any]:
    """The report with each conflict's hunks shortened when all of them together pass
    :data:`_REPORT_CHARS` characters (each side keeps an equal share)."""
    conflicts = data.get("conflicts") or []
    sides = ("workspace_change", "sub_agent_change")
    total = sum(len(c.get(side) or "") for c in conflicts for side in sides)
    if total <= _REPORT_CHARS:
        return data
    share = max(200, _REPORT_CHARS // (2 * len(conflicts)))
    for conflict in conflicts:
        for side in sides:
            text = conflict.get(side) or ""
            if len(text) > share:
                conflict[side] = text[:share] + f"\n... ({len(text) - share} more characters)"
    return data
