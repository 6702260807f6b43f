"""A sub-agent's record on disk: ``<deliverables_dir>/.subagent/conversations.json`` (seed §6).

One job: the record's one definition (building, writing, reading, archiving) and
the deliverables folder around it. The seed's fields (agent_id, summary,
created_at, completed_at, messages, stats with runtime_seconds, the four seed
counters and token_usage) plus status (running, completed, failed, timeout,
terminated), result_summary, task, sub_conversation_id and error. Written
atomically after every turn by the worker, and finalised by the parent when it
kills a worker.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkit.conversation import utc_now
from agentkit.jsonfile import read_json, write_json_atomic

if TYPE_CHECKING:
    from agentkit.conversation import Stats
    from agentkit.subagent.contract import WorkerSpec
    from agentkit.subagent.state import Status

RECORD_DIR = ".subagent"
RECORD_FILE = "conversations.json"
NO_TOKENS = {"prompt": 0, "completion": 0, "total": 0}


@dataclass(frozen=True)
class Ending:
    """How a record ends: ``completed_at`` (seed §6 time format), the summary and
    the error (None when it completed)."""

    result_summary: str | None
    error: str | None
    completed_at: str = ""


def record_stats(runtime_seconds: int, stats: Stats) -> dict[str, Any]:
    """Return the record's ``stats`` object from a conversation's Stats: the seed's
    (runtime_seconds, the four counters, token_usage) plus turns, tool_calls and
    usage_estimated."""
    return {
        "runtime_seconds": runtime_seconds,
        **stats.seed_counts(),
        "turns": stats.turns,
        "tool_calls": dict(stats.tool_calls),
        "token_usage": stats.token_usage(),
        "usage_estimated": stats.usage_estimated,
    }


def build_record(
    spec: WorkerSpec,
    status: Status,
    *,
    messages: list[dict[str, Any]],
    stats: dict[str, Any],
    worker_pid: int | None = None,
    ending: Ending | None = None,
) -> dict[str, Any]:
    """Return the conversations.json document (seed §6 fields plus status).

    ``worker_pid`` is written when given (folder_in_use reads it); ``ending`` adds
    completed_at (now when empty), result_summary and error, else the record is
    still running (completed_at and result_summary null, no error).
    """
    record: dict[str, Any] = {
        "agent_id": spec.agent_id,
        "summary": spec.summary,
        "created_at": spec.created_at,
        "completed_at": None,
        "status": status,
        "result_summary": None,
        "sub_conversation_id": spec.sub_conversation_id,
        "task": spec.task,
        "deliverables_dir": spec.deliverables_dir,
    }
    if worker_pid is not None:
        record["worker_pid"] = worker_pid
    record["messages"] = messages
    record["stats"] = stats
    if ending is not None:
        record["completed_at"] = ending.completed_at or utc_now()
        record["result_summary"] = ending.result_summary
        record["error"] = ending.error
    return record


def finalise_record(
    spec: WorkerSpec,
    status: Status,
    seed_stats: dict[str, int],
    token_usage: dict[str, int],
    ending: Ending,
) -> None:
    """Make the record say how the agent ended when its worker could not (killed,
    crashed): status, ending and ``seed_stats`` (runtime_seconds and the counters,
    by the parent's clock) over whatever the worker wrote last. Temp files a killed
    worker left are removed. A record already in ``status`` is left alone; write
    errors are ignored (the parent's own row still says how it ended)."""
    deliverables = Path(spec.deliverables_path)
    clean_temp_files(deliverables)
    record = read_record(deliverables)
    if record is not None and record.get("status") == status:
        return
    if record is None:
        record = build_record(spec, status, messages=[], stats={})
    stats = dict(record.get("stats") or {})
    stats.update(seed_stats)
    stats.setdefault("token_usage", token_usage or dict(NO_TOKENS))
    record.update(
        status=status,
        completed_at=ending.completed_at or utc_now(),
        result_summary=ending.result_summary,
        error=ending.error,
        stats=stats,
    )
    try:
        write_record(deliverables, record)
    except OSError:
        pass


def record_path(deliverables: Path) -> Path:
    """Return ``<deliverables>/.subagent/conversations.json``."""
    return deliverables / RECORD_DIR / RECORD_FILE


def record_relpath(deliverables_dir: str) -> str:
    """Return the record's path relative to the workspace, for messages and rows."""
    return f"{deliverables_dir}/{RECORD_DIR}/{RECORD_FILE}"


def write_record(deliverables: Path, record: dict[str, Any]) -> None:
    """Atomically (temp file + rename) write ``record`` as the agent's conversations.json."""
    write_json_atomic(record_path(deliverables), record)


def read_record(deliverables: Path) -> dict[str, Any] | None:
    """Return the record, or None when it is missing or unreadable."""
    try:
        data = read_json(record_path(deliverables))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def archive_record(deliverables: Path) -> Path | None:
    """Move an earlier sub-agent's record out of the way before a new one starts in
    the same folder: ``.subagent/conversations.<sub_conversation_id>.json``.

    Nothing is lost when a later run (or a continued conversation) reuses a
    deliverables folder. Returns the new path, or None when there was no record.
    """
    current = record_path(deliverables)
    if not current.is_file():
        return None
    old = read_record(deliverables) or {}
    name = str(old.get("sub_conversation_id") or f"archived-{int(current.stat().st_mtime)}")
    target = current.with_name(f"conversations.{name}.json")
    os.replace(current, target)
    return target


def folder_in_use(deliverables: Path) -> str | None:
    """Return the sub-conversation id of a sub-agent still running in this folder
    (its record says running and its worker process is alive), else None.

    Guards folders across Agents: two conversations on one workspace must not
    both start ``sub_agent_results/agent_1``.
    """
    record = read_record(deliverables)
    if not record or record.get("status") != "running":
        return None
    pid = record.get("worker_pid")
    if not isinstance(pid, int) or pid == os.getpid():
        return None
    import psutil

    try:
        if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return None
    except psutil.Error:
        return None
    return str(record.get("sub_conversation_id") or "?")


def clean_temp_files(deliverables: Path) -> None:
    """Remove temp files a killed worker may have left beside the record."""
    folder = deliverables / RECORD_DIR
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if name.startswith(f".{RECORD_FILE}.") and name.endswith(".tmp"):
            try:
                os.unlink(folder / name)
            except OSError:
                pass


def list_deliverables(deliverables: Path, limit: int) -> tuple[list[str], int]:
    """Return ``(files, total)``: up to ``limit`` files under ``deliverables`` (relative,
    forward slashes, sorted), skipping the ``.subagent`` record folder; ``total``
    counts them all."""
    files: list[str] = []
    if not deliverables.is_dir():
        return files, 0
    for root, dirs, names in os.walk(deliverables):
        dirs[:] = sorted(d for d in dirs if not (Path(root) == deliverables and d == RECORD_DIR))
        for name in names:
            rel = (Path(root) / name).relative_to(deliverables)
            files.append(rel.as_posix())
    files.sort()
    return files[:limit], len(files)
