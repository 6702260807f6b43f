"""What an ended sub-agent's view takes from its final record.

One job: the parent side of a sub-agent's end after its status is decided
(agentkit.subagent.supervisor.Supervisor.finish): the summary that says how it ended
(:func:`end_summary`), the record made final and its word taken (:func:`finalise`: the
record's first final write decides the status, its counters are the ones saved with its
transcript; an isolated agent's copy saved and its changes counted), and the final records no disk took whole written later
(:func:`write_kept_records`, at every save of the conversation).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentkit import prompts
from agentkit.conversation import SEED_COUNTERS
from agentkit.subagent.contract import EndStatus
from agentkit.subagent.finalise import finalise_record, retry_final
from agentkit.subagent.isolated import end_copy
from agentkit.subagent.record import FINAL_STATUSES, Ending, record_path
from agentkit.subagent.state import SubAgent
from agentkit.subagent.table import SubAgentTable

__all__ = ["end_summary", "finalise", "shown", "write_kept_records"]


def shown(workspace: Path, path: Path) -> str:
    """``path`` as messages show it: relative to ``workspace`` when below it."""
    try:
        return path.relative_to(workspace).as_posix()
    except ValueError:
        return str(path)


def end_summary(
    language: str, status: EndStatus, result_summary: str | None, error: str | None
) -> str:
    """The summary an agent ending with ``status`` reports: for ends other than
    completed, a note saying how it ended first (phrases in ``language``)."""
    if status == "completed":
        return result_summary or ""
    # The seed's notification templates say "finished"; the summary they
    # carry says how, so a failure never reads as a success.
    reason = error if status == "failed" and error and error != result_summary else ""
    if status == "failed" and not reason and not result_summary:
        reason = prompts.phrase(language, "crashed_summary", reason="unknown")
    note = prompts.phrase(language, "status_note", status=status, reason=reason).strip()
    return f"{note}\n{result_summary}" if result_summary else note


def finalise(
    table: SubAgentTable,
    agent: SubAgent,
    status: EndStatus,
    ending: Ending,
    worker_record: dict[str, Any] | None,
    workspace: Path,
) -> None:
    """Make ``agent``'s record final (agentkit.subagent.finalise.finalise_record) and
    take from it what it says (its counters; its status when it was first), under
    ``table``'s lock; an isolated agent's copy is saved and its changes counted
    (agentkit.subagent.isolated.end_copy). A record not whole in its folder stays on the agent
    (``agent.record``, for :func:`write_kept_records`)."""
    record, where = finalise_record(
        agent.spec, status, agent.stats(), agent.token_usage, ending, worker_record
    )
    final = record_path(agent.deliverables_path)
    elsewhere = shown(workspace, where) if where is not None and where != final else None
    isolation = end_copy(agent, workspace)  # its copy saved, its changes counted

    def take(agent: SubAgent) -> None:
        _adopt(agent, record)
        if isolation is not None:
            agent.isolation = isolation
        if where != final:
            agent.record = record  # not whole in its folder: kept for write_kept_records
        if elsewhere is not None:
            agent.record_elsewhere = elsewhere

    table.update(agent, take)


def write_kept_records(table: SubAgentTable, agents: list[SubAgent]) -> None:
    """Write whole, in their deliverables folders, the final records of ``agents``
    that no disk took whole when they ended (a full disk: kept on the agent),
    now that there may be room; those written are no longer kept. Called at
    every save of the conversation."""
    for agent in agents:
        record = agent.record
        if record is None:
            continue
        if retry_final(agent.deliverables_path, record, Path(agent.spec.workspace)):
            table.update(agent, _written)


def _adopt(agent: SubAgent, record: dict[str, Any]) -> None:
    """Take the final record's word (under the table's lock): its status, summary and
    error when it is this agent's and ended otherwise (the worker's end was first),
    and the counters and token usage saved with its transcript."""
    if record.get("sub_conversation_id") != agent.spec.sub_conversation_id:
        return
    stored = record.get("status")
    if stored in FINAL_STATUSES and stored != agent.status:
        agent.status = stored
        agent.result_summary = record.get("result_summary")
        agent.error = record.get("error")
        agent.result = record.get("result")
    stats = record.get("stats")
    if isinstance(stats, dict):
        agent.counters.update(
            {k: v for k in SEED_COUNTERS if type(v := stats.get(k)) is int and v >= 0}
        )
        usage = stats.get("token_usage")
        if isinstance(usage, dict):
            agent.token_usage = dict(usage)


def _written(agent: SubAgent) -> None:
    """Its kept final record is now whole in its folder."""
    agent.record = None
    agent.record_elsewhere = None
