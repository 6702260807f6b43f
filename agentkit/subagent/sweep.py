"""Finishing the sub-agent records a killed process group left behind.

One job: when a conversation is opened again (Agent.load_conversation), every
sub-agent row it still lists as running gets its record swept
(agentkit.subagent.record.sweep_record): a worker that is gone (SIGKILL to the
whole group ended it with the main process) is recorded as terminated with
KILLED_ERROR, its leftover processes are killed, and the row says so, so the
main agent's next run is told (Agent._pending_notes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentkit.subagent.record import read_record, sweep_record


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
