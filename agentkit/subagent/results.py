"""The results a blocking create_sub_agent (or continue_sub_agent) call and
get_sub_agent_status return.

One job: the seed's blocking result shape for an ended sub-agent (docs/specification.md
§1: success, agent_id, status, summary, message, deliverables_dir, deliverables_files,
result_summary, sub_conversation_id, stats), with its summary capped; plus, with the
control plane (docs/control-plane.md), ``result`` (a typed result, output_schema) and
``tokens``/``cost_usd`` in ``stats``, and the early return of a blocking call whose
sub-agent asked a question (it then goes on in the background); and the seed's
get_sub_agent_status rows (:func:`status_result`). An isolated sub-agent's result and
rows add ``changes`` and ``merged`` (docs/isolation.md); a shared one's are the seed's.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkit import prompts
from agentkit.subagent.record import record_relpath
from agentkit.subagent.record_folder import list_deliverables
from agentkit.subagent.state import STATUS_KEYS

if TYPE_CHECKING:
    from agentkit.settings import Settings
    from agentkit.subagent.state import SubAgent

__all__ = [
    "asked_result",
    "blocking_result",
    "capped_summary",
    "isolation_fields",
    "status_result",
]


def capped_summary(agent: SubAgent, settings: Settings) -> str:
    """The agent's result summary cut to ``result_summary_max_chars``, with a note naming
    the record that holds the whole text."""
    text = agent.result_summary or ""
    limit = settings.result_summary_max_chars
    if len(text) <= limit:
        return text
    where = record_relpath(agent.spec.deliverables_dir)
    return text[:limit] + prompts.phrase(
        settings.language, "summary_cut", total=len(text), path=where
    )


def _message(agent: SubAgent, language: str) -> str:
    spec, status = agent.spec, agent.status
    if status == "completed":
        return prompts.phrase(language, "completed", agent_id=spec.agent_id)
    if status == "timeout":
        return prompts.phrase(
            language, "timeout", agent_id=spec.agent_id, timeout_seconds=spec.timeout_seconds
        )
    if status == "terminated":
        return prompts.phrase(language, "terminated", agent_id=spec.agent_id)
    if status == "budget_exhausted":
        return prompts.phrase(language, "budget_ended", agent_id=spec.agent_id)
    return prompts.phrase(language, "failed", agent_id=spec.agent_id, reason=agent.error or status)


def blocking_result(agent: SubAgent, settings: Settings, workspace: Path) -> dict[str, Any]:
    """The blocking result (docs/specification.md §1), also used for failures; a typed
    ``result`` when there is one, tokens and cost in ``stats`` with subagent_control."""
    spec = agent.spec
    files, total = list_deliverables(
        agent.deliverables_path, settings.deliverables_list_max, workspace
    )
    if total > len(files):
        files.append(prompts.phrase(settings.language, "files_cut", more=total - len(files)))
    stats: dict[str, Any] = agent.stats()
    if settings.subagent_control:
        stats.update(tokens=agent.tokens, cost_usd=agent.cost_usd)
    result = {
        "success": agent.status == "completed",
        "agent_id": spec.agent_id,
        "status": agent.status,
        "summary": spec.summary,
        "message": _message(agent, settings.language),
        "deliverables_dir": spec.deliverables_dir,
        "deliverables_files": files,
        "result_summary": capped_summary(agent, settings),
        "sub_conversation_id": spec.sub_conversation_id,
        "stats": stats,
    }
    result.update(isolation_fields(agent))
    if agent.result is not None:
        result["result"] = agent.result
    if agent.unread:
        result["unread_messages"] = list(agent.unread)
    return result


def isolation_fields(agent: SubAgent) -> dict[str, Any]:
    """``changes`` (``{files, insertions, deletions}``) and ``merged`` of an isolated
    agent with a copy (agentkit.subagent.isolated), ``{}`` for a shared one."""
    return agent.isolation.fields() if agent.isolation is not None else {}


def _earlier_row(row: dict[str, Any]) -> dict[str, Any]:
    """An earlier run's status row: STATUS_KEYS, and an isolated agent's ``changes``
    and ``merged``."""
    shown = {key: row.get(key) for key in STATUS_KEYS}
    if isinstance(row.get("isolation"), dict):
        shown.update(changes=row.get("changes"), merged=row.get("merged") is True)
        if row.get("discarded") is True:
            shown["discarded"] = True
    return shown


def asked_result(agent: SubAgent, question: str, language: str) -> dict[str, Any]:
    """The early answer of a blocking call whose sub-agent asked ``question``: the
    background result shape (docs/specification.md §1) with the question; the agent goes
    on in the background (its end is announced) while it waits for answer_sub_agent."""
    spec = agent.spec
    return {
        "success": True,
        "agent_id": spec.agent_id,
        "status": "running",
        "summary": spec.summary,
        "message": prompts.phrase(language, "asked_while_blocking", agent_id=spec.agent_id),
        "question": question,
        "deliverables_dir": spec.deliverables_dir,
        "sub_conversation_id": spec.sub_conversation_id,
        "background": True,
    }


def status_result(
    agent_ids: list[int],
    agents: Mapping[int, SubAgent],
    previous: Mapping[int, dict[str, Any]],
    settings: Settings,
) -> dict[str, Any]:
    """get_sub_agent_status's result (docs/specification.md §1) for ``agent_ids``:
    ``{"success", "agents": [row...]}``, a row per id from this run's ``agents``
    (with subagent_control their view rows: tokens, cost, a question) or an earlier
    run's saved row in ``previous`` (keys as STATUS_KEYS). Unknown ids get a row with
    status ``not_found``; if every id is unknown the result is a refusal (with
    ``error``). An id named twice gets one row (first-seen order). The caller holds
    the sub-agent table's lock (SubAgentTable.status)."""
    rows: list[dict[str, Any]] = []
    for agent_id in dict.fromkeys(agent_ids):
        agent = agents.get(agent_id)
        if agent is None and agent_id in previous:
            rows.append(_earlier_row(previous[agent_id]))
        elif agent is None:
            error = prompts.phrase(settings.language, "unknown_agent", agent_id=agent_id)
            rows.append({"agent_id": agent_id, "status": "not_found", "error": error})
        elif settings.subagent_control:  # tokens, cost and its question too
            rows.append(agent.view_row())
        else:
            rows.append({**agent.status_row(), **isolation_fields(agent)})
    if rows and all(r["status"] == "not_found" for r in rows):
        return {"success": False, "agents": rows, "error": rows[0]["error"]}
    return {"success": True, "agents": rows}
