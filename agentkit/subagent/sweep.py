"""Finishing the sub-agent records a killed process group left behind.

One job: when a conversation is opened again (Agent.load_conversation), every
sub-agent row it still lists as running gets its record swept
(:func:`sweep_record`): a worker that is gone (SIGKILL to the
whole group ended it with the main process) is recorded as terminated with
KILLED_ERROR, its leftover processes are killed, and the row says so, so the
main agent's next run is told (Agent._pending_notes). Also whether a folder's
sub-agent still runs (:func:`folder_in_use`, :func:`worker_alive`), so two
conversations on one workspace never share a deliverables folder.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agentkit.conversation import utc_now
from agentkit.subagent.record import clean_temp_files, read_record, write_record

# Written into a record found "running" at the next start whose worker is gone.
KILLED_ERROR = (
    "the agentkit process ended without stopping this sub-agent (killed); found at the next start"
)


def worker_alive(record: dict[str, Any]) -> bool:
    """True when the record's worker process still runs: its ``worker_pid`` exists,
    is not a zombie, and (when the record holds ``worker_started``) started at
    that time, so a reused pid does not count."""
    pid = record.get("worker_pid")
    if not isinstance(pid, int) or pid == os.getpid():
        return False
    import psutil

    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        started = record.get("worker_started")
        if isinstance(started, (int, float)) and abs(process.create_time() - started) > 1.0:
            return False
    except psutil.Error:
        return False
    return True


def folder_in_use(deliverables: Path) -> str | None:
    """Return the sub-conversation id of a sub-agent still running in this folder
    (its record says running and its worker process is alive), else None.

    Guards folders across Agents: two conversations on one workspace must not
    both start ``sub_agent_results/agent_1``.
    """
    record = read_record(deliverables)
    if not record or record.get("status") != "running" or not worker_alive(record):
        return None
    return str(record.get("sub_conversation_id") or "?")


def sweep_record(deliverables: Path, root: Path) -> dict[str, Any] | None:
    """Finish a record left ``running`` by a process group killed at once (nobody
    could rewrite it): when its worker is gone (worker_alive), mark it terminated
    with KILLED_ERROR and completed_at, and kill any process still carrying its
    process mark. Returns the swept record, or None when there was nothing to do
    (no record, a final one, or a live worker). Write errors are ignored
    (``root``: as write_record's)."""
    record = read_record(deliverables)
    if not record or record.get("status") != "running" or worker_alive(record):
        return None
    mark = record.get("process_mark")
    if isinstance(mark, str) and mark:
        from agentkit.proctree import kill_tree

        kill_tree(None, mark, grace=0.5)
    clean_temp_files(deliverables, root=root)
    record.update(
        status="terminated",
        completed_at=utc_now(),
        result_summary=KILLED_ERROR,
        error=KILLED_ERROR,
    )
    try:
        write_record(deliverables, record, root=root)
    except OSError:
        pass
    return record


def sweep_rows(workspace: Path, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sweep the records of the rows still ``running`` (a conversation's
    ``subagents``; each row names its ``deliverables_dir``, relative to
    ``workspace``). A swept row keeps status running and gets the record's
    ``error`` (the caller's note turns it terminated); a row whose record is final
    takes the record's status and result_summary. Returns the swept rows."""
    swept: list[dict[str, Any]] = []
    for row in rows:
        folder = row.get("deliverables_dir") if isinstance(row, dict) else None
        if row.get("status") != "running" or not isinstance(folder, str) or not folder:
            continue
        deliverables = workspace / folder
        record = sweep_record(deliverables, workspace)
        if record is not None:
            row["error"] = record.get("error")
            swept.append(row)
            continue
        record = read_record(deliverables)
        same = record is not None and record.get("sub_conversation_id") == row.get(
            "sub_conversation_id"
        )
        if same and record is not None and record.get("status") not in (None, "running"):
            row["status"] = record["status"]
            row["result_summary"] = record.get("result_summary")
    return swept
