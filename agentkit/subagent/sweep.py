"""Finishing the sub-agent records a killed process group left behind.

One job: when a conversation is opened again (Agent.load_conversation), every
sub-agent row it still lists as running gets its record swept
(:func:`sweep_record`): a worker that is gone (SIGKILL to the
whole group ended it with the main process) is recorded as terminated with
KILLED_ERROR, its leftover processes are killed, and the row says so, so the
main agent's next run is told (Agent._pending_notes). Also whether a folder's
sub-agent still runs (:func:`folder_in_use`, :func:`worker_alive`), so two
conversations on one workspace never share a deliverables folder; and, for views
that must change nothing (``agentkit show``, the conversation lists), what a row
still saved as running is now (:func:`live_rows`): its record's counters and end,
or :data:`agentkit.conversation.PROCESS_GONE` when its worker is gone; and whether
a conversation's own process still holds it (:func:`conversation_held`). A row
that ended whose record is still saved running (its final write did not fit on a
full disk) gets its record made final too (:func:`repair_ended_rows`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from agentkit.conversation import (
    PROCESS_GONE,
    SEED_COUNTERS,
    conversations_dir,
    known_cost,
    utc_now,
)
from agentkit.subagent.finalise import write_end
from agentkit.subagent.record import FINAL_STATUSES, _stored_head, read_record
from agentkit.subagent.record_folder import clean_temp_files

# Written into a record found "running" at the next start whose worker is gone.
KILLED_ERROR = (
    "the agentkit process ended without stopping this sub-agent (killed); found at the next start"
)
# Written into a record found "running" at the next start whose row says it ended.
UNWRITTEN_ERROR = (
    "its final record could not be written when it ended (was the disk full?); "
    "its end was written from the main conversation at the next start"
)


def worker_alive(record: dict[str, Any]) -> bool:
    """True when the record's worker process still runs: its ``worker_pid`` exists,
    is not a zombie, and (when the record holds ``worker_started``) started at
    that time, so a reused pid does not count."""
    from agentkit.process.tree import process_alive

    pid = record.get("worker_pid")
    return pid != os.getpid() and process_alive(pid, record.get("worker_started"))


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
    record = read_record(deliverables, root)  # its end written elsewhere counts
    if not record or record.get("status") != "running" or worker_alive(record):
        return None
    mark = record.get("process_mark")
    if isinstance(mark, str) and mark:
        from agentkit.process.tree import kill_tree

        kill_tree(None, mark, grace=0.5)
    clean_temp_files(deliverables, root=root)
    record.update(
        status="terminated",
        completed_at=utc_now(),
        result_summary=KILLED_ERROR,
        error=KILLED_ERROR,
    )
    write_end(deliverables, record, root)  # whole, or its end as a journal line
    return record


def repair_ended_rows(workspace: Path, rows: list[Any]) -> list[dict[str, Any]]:
    """Make final the records of the rows that ended (a final status in the
    conversation file) but are still saved ``running`` with their worker gone: the
    parent's final write did not fit (a full disk). The whole record the parent
    wrote elsewhere (agentkit.subagent.record.fallback_record) is moved into place
    when there is one; else the row's status and result_summary are written over
    what the sub-agent saved last (nothing of it is dropped), with
    :data:`UNWRITTEN_ERROR`. Returns the records repaired. Write errors leave them
    for the next start."""
    repaired: list[dict[str, Any]] = []
    for row in rows:
        folder = row.get("deliverables_dir") if isinstance(row, dict) else None
        if row.get("status") not in FINAL_STATUSES or not isinstance(folder, str) or not folder:
            continue
        deliverables = workspace / folder
        head = _stored_head(deliverables)  # a light look first: most records are final
        if head is None or head.get("status") != "running":
            continue
        record = read_record(deliverables, workspace)
        if record is None or record.get("sub_conversation_id") != row.get("sub_conversation_id"):
            continue
        if record.get("status") == "running":
            if worker_alive(record):
                continue
            why = UNWRITTEN_ERROR
            record.update(
                status=row["status"],
                completed_at=utc_now(),
                result_summary=row.get("result_summary") or why,
                error=why,
            )
        if write_end(deliverables, record, workspace):
            repaired.append(record)
    return repaired


def sweep_rows(workspace: Path, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sweep the records of the rows still ``running`` (a conversation's
    ``subagents``; each row names its ``deliverables_dir``, relative to
    ``workspace``). A swept row keeps status running and gets the record's
    ``error`` (the caller's note turns it terminated); a row whose record is final
    takes the record's status and result_summary. Both take the record's runtime and
    counters. Returns the swept rows."""
    swept: list[dict[str, Any]] = []
    for row in rows:
        folder = row.get("deliverables_dir") if isinstance(row, dict) else None
        if row.get("status") != "running" or not isinstance(folder, str) or not folder:
            continue
        deliverables = workspace / folder
        record = sweep_record(deliverables, workspace)
        if record is not None:
            row["error"] = record.get("error")
            _take_stats(row, record)
            swept.append(row)
            continue
        record = read_record(deliverables, workspace)
        same = record is not None and record.get("sub_conversation_id") == row.get(
            "sub_conversation_id"
        )
        if same and record is not None and record.get("status") not in (None, "running"):
            row["status"] = record["status"]
            row["result_summary"] = record.get("result_summary")
            _take_stats(row, record)
    return swept


def _take_stats(row: dict[str, Any], record: dict[str, Any]) -> None:
    """Give ``row`` its record's runtime, counters and usage (journal applied): the
    file's row was saved at the main agent's last turn (runtime 0 and no tokens when
    that was the start), the record at the sub-agent's last save or its end."""
    stats = record.get("stats")
    if not isinstance(stats, dict):
        return
    keys = ("runtime_seconds", *SEED_COUNTERS)
    row.update({k: v for k in keys if type(v := stats.get(k)) is int and v >= 0})
    usage = stats.get("token_usage")
    parts = ("prompt", "completion", "total")
    if isinstance(usage, dict) and all(type(usage.get(k)) is int and usage[k] >= 0 for k in parts):
        row["token_usage"] = {k: usage[k] for k in parts}
        row["tokens"] = usage["total"]
        row["cost_usd"] = known_cost(stats.get("cost_usd"))  # None: no known price
        if stats.get("usage_estimated") is True:
            row["usage_estimated"] = True


def live_rows(
    workspace: Path, rows: list[Any], *, owner_alive: bool = True
) -> list[dict[str, Any]]:
    """Return copies of a conversation file's sub-agent ``rows`` as their records say
    now, reading only (nothing is swept or written).

    A row saved as running takes its record's runtime and counters (the file is saved
    at the main agent's turns; the record at the sub-agent's, journal included), and
    its end when the record is final; when the record is still running and its worker
    is gone, or there is no record and the conversation's own process is gone
    (``owner_alive`` False), its status is :data:`PROCESS_GONE`. Other rows, and rows
    that are not objects, are copied as they are (bad ones left out).
    """
    out: list[dict[str, Any]] = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        row = dict(row)
        out.append(row)
        folder = row.get("deliverables_dir")
        if row.get("status") != "running" or not isinstance(folder, str) or not folder:
            continue
        record = read_record(workspace / folder, workspace)
        if record is None or record.get("sub_conversation_id") != row.get("sub_conversation_id"):
            if not owner_alive:
                row["status"] = PROCESS_GONE
            continue
        _take_stats(row, record)
        if record.get("status") in FINAL_STATUSES:
            row["status"] = record["status"]
            row["result_summary"] = record.get("result_summary")
        elif not worker_alive(record):
            row["status"] = PROCESS_GONE
    return out


def conversation_held(workspace: Path, conversation_id: str) -> bool:
    """Whether a live process has conversation ``conversation_id`` open: its lock file
    ``<id>.lock`` (agentkit.chat.lock; removed at release) names a process that still
    runs, by pid and start time (a holder that was killed leaves the file behind).
    True when the file cannot be read or names nobody yet (its holder is writing it);
    False when there is none. Light: reads one small file, imports no session."""
    if not conversation_id or "/" in conversation_id or conversation_id.startswith("."):
        return False
    try:
        text = (conversations_dir(workspace) / f"{conversation_id}.lock").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        return True
    try:
        data = json.loads(text)
        pid, started = data["pid"], data.get("started")
    except (ValueError, KeyError, TypeError):
        return True  # just taken and not written yet, or read-only: held as far as we know
    from agentkit.process.tree import process_alive

    return pid == os.getpid() or process_alive(pid, started)
